package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/httpapi"
	"github.com/agentrt/agentrt/runtime/fleet"
)

// serverMetrics are what GET /metrics serves, in Prometheus' text format, with
// Prometheus' own client library. Every label takes its values from a
// bounded set, never from a client's text: a route is a route pattern
// ("unmatched" for a path that matched none), a method one of HTTP's or
// "other", a status a number, an agent one the server serves ("" for a
// request that reached none: an unknown agent's name is no label), a
// cause one of protocol's Cause constants. Ids never appear.
type serverMetrics struct {
	registry       *prometheus.Registry
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	stepSeconds    *prometheus.HistogramVec
	failures       *prometheus.CounterVec
	artifactBytes  *prometheus.CounterVec
	compiles       *prometheus.CounterVec
	taskWaiters    *prometheus.GaugeVec
	taskBusy       *prometheus.CounterVec
}

// durationBuckets span what a request or a step takes: from half a
// millisecond (reading a task) to tens of seconds (a step at its time
// limit).
var durationBuckets = prometheus.ExponentialBuckets(0.0005, 2.5, 13)

// newMetrics registers agentrt's metrics, and Go's and the process's.
// instances and queued are read at each scrape: the plugin instances
// running, and the calls waiting for one.
func newMetrics(instances, queued func() float64) *serverMetrics {
	m := &serverMetrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrt_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentrt_http_request_duration_seconds",
			Help:    "Time from a request's arrival to its answer, by the agent it reached (\"\" for none).",
			Buckets: durationBuckets,
		}, []string{"agent"}),
		stepSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentrt_step_duration_seconds",
			Help:    "Time a step handler ran, instantiation included, by agent.",
			Buckets: durationBuckets,
		}, []string{"agent"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrt_plugin_failures_total",
			Help: "Handler calls that failed, by agent, handler (task, step, artifact) and cause.",
		}, []string{"agent", "handler", "cause"}),
		artifactBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrt_artifact_bytes_total",
			Help: "Bytes of artifacts uploaded (in) and downloaded (out), by agent.",
		}, []string{"agent", "direction"}),
		compiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrt_plugin_compiles_total",
			Help: "Plugins compiled, by how the compilation cache served them: hit, miss or off.",
		}, []string{"cache"}),
		taskWaiters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentrt_task_waiters",
			Help: "Requests (steps, uploads) waiting now for a task another request holds, by agent.",
		}, []string{"agent"}),
		taskBusy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrt_task_busy_refusals_total",
			Help: "Requests refused (503 with Retry-After) because agentrt_task_waiters_limit requests already waited for their task, by agent.",
		}, []string{"agent"}),
	}
	limit := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "agentrt_task_waiters_limit",
		Help: "The most requests that may wait for one task; beyond, a request is refused with 503 and Retry-After.",
	})
	limit.Set(protocol.MaxTaskWaiters)
	m.registry.MustRegister(m.requests, m.requestSeconds, m.stepSeconds, m.failures, m.artifactBytes, m.compiles,
		m.taskWaiters, m.taskBusy, limit,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentrt_plugin_instances",
			Help: "Plugin instances running now.",
		}, instances),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentrt_plugin_queue_depth",
			Help: "Handler calls waiting for a plugin instance now.",
		}, queued),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Every cause and cache outcome from the start, so that a rate is
	// defined before the first of each.
	for _, c := range []string{"hit", "miss", "off"} {
		m.compiles.WithLabelValues(c)
	}
	return m
}

// handler serves the metrics.
func (m *serverMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// RequestDone implements httpapi.RequestObserver.
func (m *serverMetrics) RequestDone(route, method string, status int, agent string, d time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.requestSeconds.WithLabelValues(agent).Observe(d.Seconds())
}

// ArtifactBytes implements httpapi.RequestObserver.
func (m *serverMetrics) ArtifactBytes(agent string, in, out int64) {
	if in > 0 {
		m.artifactBytes.WithLabelValues(agent, "in").Add(float64(in))
	}
	if out > 0 {
		m.artifactBytes.WithLabelValues(agent, "out").Add(float64(out))
	}
}

// HandlerDone implements protocol.Observer.
func (m *serverMetrics) HandlerDone(agent string, h protocol.Handler, d time.Duration, cause string) {
	if h == protocol.HandlerStep {
		m.stepSeconds.WithLabelValues(agent).Observe(d.Seconds())
	}
	if cause != "" {
		m.failures.WithLabelValues(agent, string(h), cause).Inc()
	}
}

// TaskWaiting implements protocol.TaskWaitObserver.
func (m *serverMetrics) TaskWaiting(agent string, delta int) {
	m.taskWaiters.WithLabelValues(agent).Add(float64(delta))
}

// TaskBusy implements protocol.TaskWaitObserver.
func (m *serverMetrics) TaskBusy(agent string) {
	m.taskBusy.WithLabelValues(agent).Inc()
}

// PluginCompiled implements fleet.Metrics.
func (m *serverMetrics) PluginCompiled(cache string) {
	m.compiles.WithLabelValues(cache).Inc()
}

// backgroundCollector is the steps each agent runs in the background,
// and the bound on them all together, read at each scrape.
type backgroundCollector struct {
	steps func() (byAgent map[string]int, max int)
	now   *prometheus.Desc
	limit *prometheus.Desc
}

func newBackgroundCollector(steps func() (map[string]int, int)) *backgroundCollector {
	return &backgroundCollector{
		steps: steps,
		now: prometheus.NewDesc("agentrt_background_steps",
			"Steps running in the background (Prefer: respond-async) now, by agent; each agent runs at most its limits' max_background_steps.", []string{"agent"}, nil),
		limit: prometheus.NewDesc("agentrt_background_steps_limit",
			"The most steps every agent may run in the background together (--max-background-steps-total); beyond, a request is refused with 503 and Retry-After.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *backgroundCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.now
	ch <- c.limit
}

// Collect implements prometheus.Collector.
func (c *backgroundCollector) Collect(ch chan<- prometheus.Metric) {
	byAgent, max := c.steps()
	for agent, n := range byAgent {
		ch <- prometheus.MustNewConstMetric(c.now, prometheus.GaugeValue, float64(n), agent)
	}
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(max))
}

// eventStreams is the event streams held open now, read at each scrape.
func eventStreams(streams func() int) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentrt_event_streams",
		Help: "Event streams (GET .../tasks/{task_id}/events as Server-Sent Events) held open now, waiting for their tasks' events.",
	}, func() float64 { return float64(streams()) })
}

var (
	_ httpapi.RequestObserver = (*serverMetrics)(nil)
	_ fleet.Metrics           = (*serverMetrics)(nil)
	// The fleet hands its Metrics to each agent as its protocol.Observer.
	_ protocol.TaskWaitObserver = (*serverMetrics)(nil)
)
