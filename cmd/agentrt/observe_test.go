package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/httpapi"
	"github.com/agentrt/agentrt/storage"
)

// scrape is one reading of /metrics: each sample by its name and labels.
type scrape []sample

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrapeMetrics reads /metrics, in Prometheus' text format.
func (ts *testServer) scrapeMetrics() scrape {
	ts.t.Helper()
	res := ts.do("GET", "/metrics", "", "").want(ts.t, 200)
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		ts.t.Fatalf("/metrics is %s, not Prometheus' text format", ct)
	}
	return parseScrape(ts.t, string(res.body))
}

// parseScrape reads a /metrics answer, in Prometheus' text format.
func parseScrape(t testing.TB, body string) scrape {
	t.Helper()
	var out scrape
	for _, line := range strings.Split(body, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[p[1]] = p[2]
		}
		out = append(out, s)
	}
	return out
}

// get sums the samples of name whose labels include want ("k=v" pairs).
func (s scrape) get(name string, want ...string) float64 {
	var sum float64
	for _, smp := range s {
		if smp.name != name {
			continue
		}
		match := true
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if smp.labels[k] != v {
				match = false
			}
		}
		if match {
			sum += smp.value
		}
	}
	return sum
}

// has reports whether any sample of the scrape holds text in a label.
func (s scrape) has(text string) bool {
	for _, smp := range s {
		for _, v := range smp.labels {
			if strings.Contains(v, text) {
				return true
			}
		}
	}
	return false
}

func TestMetricsMoveAsRequestsFlow(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/faulty"))
	agent := ts.cfg.name
	before := ts.scrapeMetrics()
	if before.get("agentrt_plugin_compiles_total") < 1 {
		t.Errorf("no compile counted for the plugin loaded")
	}

	task := ts.createTask(`{}`)
	ts.step(task.TaskID, `{"input":"hello"}`)
	ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{"input":"error"}`).want(t, 502)
	ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{"input":"exit"}`).want(t, 502)
	upload := strings.Repeat("u", 3000)
	var art protocol.Artifact
	ts.upload(task.TaskID, part{name: "file", fileName: "u.txt", value: upload}).want(t, 200).decode(t, &art)
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts/"+art.ArtifactID, "", "").want(t, 200)
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts/"+art.ArtifactID, "", "").want(t, 200)
	// What a client makes up never becomes a label.
	made := "made-up-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ts.do("GET", "/agents/"+made+"/ap/v1/agent/tasks", "", "").want(t, 404)
	ts.do("GET", "/"+made, "", "").want(t, 404)
	ts.do("GET", "/ap/v1/agent/tasks/"+made, "", "").want(t, 404)
	ts.do(made, "/ap/v1/agent/tasks", "", "").want(t, 405)

	after := ts.scrapeMetrics()
	delta := func(name string, labels ...string) float64 {
		return after.get(name, labels...) - before.get(name, labels...)
	}
	for _, c := range []struct {
		what string
		got  float64
		want float64
	}{
		{"create-task requests answered 200", delta("agentrt_http_requests_total", "route=/ap/v1/agent/tasks", "method=POST", "status=200"), 1},
		{"execute-step requests answered 502", delta("agentrt_http_requests_total", "route=/ap/v1/agent/tasks/:task_id/steps", "method=POST", "status=502"), 2},
		{"requests to no route", delta("agentrt_http_requests_total", "route=unmatched", "status=404"), 1},
		{"requests to an unknown agent", delta("agentrt_http_requests_total", "route=/agents/:agent/ap/v1/agent/tasks", "status=404"), 1},
		{"requests with an unknown method", delta("agentrt_http_requests_total", "method=other", "status=405"), 1},
		{"requests timed, of the agent", delta("agentrt_http_request_duration_seconds_count", "agent="+agent), 8},
		{"steps timed", delta("agentrt_step_duration_seconds_count", "agent="+agent), 3},
		{"failures: an error result", delta("agentrt_plugin_failures_total", "agent="+agent, "handler=step", "cause=handler_error"), 1},
		{"failures: an exit", delta("agentrt_plugin_failures_total", "agent="+agent, "handler=step", "cause=exit"), 1},
		{"artifact bytes in", delta("agentrt_artifact_bytes_total", "agent="+agent, "direction=in"), 3000},
		{"artifact bytes out", delta("agentrt_artifact_bytes_total", "agent="+agent, "direction=out"), 6000},
	} {
		if c.got != c.want {
			t.Errorf("%s: moved by %v, want %v", c.what, c.got, c.want)
		}
	}
	if after.has(made) || after.has(task.TaskID) || after.has(art.ArtifactID) {
		t.Errorf("a client's text or an id became a label")
	}
	for _, name := range []string{"agentrt_plugin_instances", "agentrt_plugin_queue_depth", "go_goroutines", "process_resident_memory_bytes"} {
		found := false
		for _, s := range after {
			found = found || s.name == name
		}
		if !found {
			t.Errorf("no %s", name)
		}
	}
}

// The instances and queue gauges read the instances running and the calls
// waiting at the moment of the scrape.
func TestMetricsShowInstancesRunningAndCallsQueued(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/faulty"), func(c *runConfig) {
		c.maxInstances, c.callTimeout = 1, time.Minute
	})
	a, b := ts.createTask(`{}`), ts.createTask(`{}`)
	running := ts.start("POST", "/ap/v1/agent/tasks/"+a.TaskID+"/steps", "application/json", `{"input":"sleep:60000"}`)
	ts.waitLimiter("one step running", 1, 0, running)
	queued := ts.start("POST", "/ap/v1/agent/tasks/"+b.TaskID+"/steps", "application/json", `{"input":"x"}`)
	ts.waitLimiter("one running, one queued", 1, 1, running, queued)
	m := ts.scrapeMetrics()
	if m.get("agentrt_plugin_instances") != 1 || m.get("agentrt_plugin_queue_depth") != 1 {
		t.Errorf("instances %v, queue %v; want 1 and 1", m.get("agentrt_plugin_instances"), m.get("agentrt_plugin_queue_depth"))
	}
	ts.do("DELETE", "/ap/v1/agent/tasks/"+a.TaskID, "", "").want(t, 204) // stops the long step
	running.wait()
	queued.wait().want(t, 200)
}

func TestEveryAnswerCarriesARequestIDAndSoDoesEveryLogLineOfIt(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/faulty"), func(c *runConfig) { c.accessLog = true })
	task := ts.createTask(`{}`)
	// The client's id, when fit, is the request's.
	res := ts.doWith("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", http.Header{"X-Request-Id": {"client-id.42"}}, "application/json", []byte(`{"input":"error"}`))
	res.want(t, 502)
	if got := res.header.Get("X-Request-Id"); got != "client-id.42" {
		t.Errorf("X-Request-Id %q, want the client's", got)
	}
	var lines []string
	for _, l := range strings.Split(ts.log.String(), "\n") {
		if strings.Contains(l, "client-id.42") {
			lines = append(lines, l)
		}
	}
	joined := strings.Join(lines, "\n")
	if !strings.Contains(joined, "step handler failed") || !strings.Contains(joined, `msg=request`) {
		t.Errorf("the request's log lines do not all carry its id; with it:\n%s\nall:\n%s", joined, ts.log.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, "request_id=client-id.42") {
			t.Errorf("a line names the id outside request_id: %s", l)
		}
	}
	// Otherwise the server makes one, different for every request, for
	// every answer: errors, health checks and unknown routes included.
	seen := map[string]bool{}
	for _, tc := range []struct {
		path, id string
	}{
		{"/ap/v1/agent/tasks", ""},
		{"/ap/v1/agent/tasks", ""},
		{"/healthz", ""},
		{"/nowhere", ""},
		{"/ap/v1/agent/tasks", strings.Repeat("x", 200)}, // too long: replaced
		{"/ap/v1/agent/tasks", "has space"},              // not fit to log: replaced
		{"/ap/v1/agent/tasks", "evil\"quote"},
	} {
		res := ts.doWith("GET", tc.path, http.Header{"X-Request-Id": {tc.id}}, "", nil)
		id := res.header.Get("X-Request-Id")
		if id == "" || id == tc.id || seen[id] {
			t.Errorf("GET %s with id %q: answered id %q", tc.path, tc.id, id)
		}
		seen[id] = true
	}
}

// Log lines are JSON with -log-format json, each of a request with its
// id.
func TestJSONLogsCarryTheRequestID(t *testing.T) {
	var buf syncBuffer
	log := newLogger(&buf, "json", slog.LevelDebug)
	cfg := testConfig(t, examplePlugin(t, "echo-go"))
	cfg.accessLog = true
	srv, err := open(t.Context(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	req := httptest.NewRequest("GET", "/ap/v1/agent/tasks", nil)
	req.Header.Set("X-Request-Id", "json-1")
	srv.handler.ServeHTTP(httptest.NewRecorder(), req)
	var found bool
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(buf.String())), []byte("\n")) {
		var v map[string]any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("a log line is not JSON: %s", line)
		}
		if v["msg"] == "request" && v["request_id"] == "json-1" && v["status"] == 200.0 {
			found = true
		}
	}
	if !found {
		t.Errorf("no JSON access log line with the request's id:\n%s", buf.String())
	}
}

func TestCORSIsOffByDefaultAndAnswersTheOriginsItIsGiven(t *testing.T) {
	off := serve(t, examplePlugin(t, "echo-go"))
	res := off.doWith("GET", "/ap/v1/agent/tasks", http.Header{"Origin": {"https://app.example"}}, "", nil).want(t, 200)
	if v := res.header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("CORS is on by default: %q", v)
	}
	res = off.doWith("OPTIONS", "/ap/v1/agent/tasks", http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"POST"}}, "", nil)
	if res.status == 204 || res.header.Get("Access-Control-Allow-Origin") != "" || res.header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("a preflight with CORS off: %d %v", res.status, res.header)
	}

	ts := serve(t, examplePlugin(t, "echo-go"), func(c *runConfig) {
		c.cors.Origins = []string{"https://app.example"}
		c.cors.Methods = []string{"GET", "POST"}
		c.requireAuth = true // a preflight carries no key, and needs none
	})
	pre := ts.doWith("OPTIONS", "/ap/v1/agent/tasks", http.Header{"Origin": {"https://app.example"},
		"Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"authorization, content-type"}}, "", nil)
	pre.want(t, 204)
	h := pre.header
	if h.Get("Access-Control-Allow-Origin") != "https://app.example" || h.Get("Access-Control-Allow-Methods") != "GET, POST" ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") || h.Get("Access-Control-Max-Age") != "600" {
		t.Errorf("preflight headers: %v", h)
	}
	key := ts.createKey("browser")
	res = ts.doWith("GET", "/ap/v1/agent/tasks", http.Header{"Origin": {"https://app.example"}, "Authorization": {"Bearer " + key}}, "", nil).want(t, 200)
	if res.header.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(res.header.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
		t.Errorf("a request from an allowed origin: %v", res.header)
	}
	// Another origin gets no CORS header, and its preflight is refused.
	res = ts.doWith("GET", "/ap/v1/agent/tasks", http.Header{"Origin": {"https://evil.example"}, "Authorization": {"Bearer " + key}}, "", nil).want(t, 200)
	if v := res.header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("another origin is allowed: %q", v)
	}
	ts.doWith("OPTIONS", "/ap/v1/agent/tasks", http.Header{"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"GET"}}, "", nil).wantError(t, 403, "origin")
}

func TestHealthChecks(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	ts.do("GET", "/healthz", "", "").want(t, 200)
	if r := ts.do("GET", "/readyz", "", "").want(t, 200); !strings.Contains(string(r.body), `"ready"`) {
		t.Errorf("/readyz: %s", r.body)
	}
	ts.srv.api.Drain() // as on SIGTERM
	ts.do("GET", "/readyz", "", "").want(t, 503)
	ts.do("GET", "/healthz", "", "").want(t, 200)
	// A store that no longer answers is not ready.
	store, err := storage.Open(t.Context(), t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.NewServer(ts.srv.fleet, httpapi.ServerConfig{Ready: store.Ping})
	ready := func() int {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code
	}
	if code := ready(); code != 200 {
		t.Errorf("/readyz with the store open: %d", code)
	}
	store.Close()
	if code := ready(); code != 503 {
		t.Errorf("/readyz with the store closed: %d", code)
	}
}
