package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// routeSample is one route's figures over one sample interval.
type routeSample struct {
	count, fails int64
	p50, p99     time.Duration // 0 when count is 0
}

// sample is everything read at the end of one interval.
type sample struct {
	at, span time.Duration // the interval's end since the load started, and its length
	status   procStatus
	fds      int
	cpu      float64 // server cores used over the interval
	metrics  map[string]float64
	db, wal  int64
	shm      int64
	tasks    int
	arts     int
	steps    int64
	load1    float64
	routes   [nRoutes]routeSample
	hists    [nRoutes]histogram
	problems []string // what could not be read
}

func (s *sample) requests() (n, fails int64) {
	for _, r := range s.routes {
		n += r.count
		fails += r.fails
	}
	return n, fails
}

// sampler reads the server's figures and the load's, interval by interval.
type sampler struct {
	srv      *server
	load     *load
	dataDir  string
	client   *http.Client
	clkTck   float64
	lastCPU  uint64
	lastAt   time.Duration
	haveLast bool
}

// take reads a sample at elapsed time at.
func (sm *sampler) take(at time.Duration) sample {
	s := sample{at: at, span: at - sm.lastAt}
	sm.lastAt = at
	pid := sm.srv.pid()
	var err error
	if s.status, err = readStatus(pid); err != nil {
		s.problems = append(s.problems, err.Error())
	}
	if s.fds, err = countFDs(pid); err != nil {
		s.problems = append(s.problems, err.Error())
	}
	if ticks, err := readCPUTicks(pid); err != nil {
		s.problems = append(s.problems, err.Error())
	} else {
		if sm.haveLast && s.span > 0 {
			s.cpu = float64(ticks-sm.lastCPU) / sm.clkTck / s.span.Seconds()
		}
		sm.lastCPU, sm.haveLast = ticks, true
	}
	s.metrics = sm.readMetrics(&s)
	s.db, s.wal, s.shm = dbSizes(sm.dataDir)
	s.tasks, s.arts = sm.load.ids.counts()
	s.steps = sm.load.steps.Load()
	if f := strings.Fields(loadAverage()); len(f) > 0 {
		s.load1, _ = strconv.ParseFloat(f[0], 64)
	}
	hs, fails := sm.load.rec.swap()
	for r := range hs {
		s.hists[r] = hs[r]
		s.routes[r] = routeSample{count: int64(hs[r].n), fails: fails[r], p50: hs[r].quantile(0.5), p99: hs[r].quantile(0.99)}
	}
	return s
}

func (sm *sampler) readMetrics(s *sample) map[string]float64 {
	res, err := sm.client.Get(sm.srv.root + "/metrics")
	if err != nil {
		s.problems = append(s.problems, "GET /metrics: "+err.Error())
		return nil
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		io.Copy(io.Discard, res.Body)
		s.problems = append(s.problems, "GET /metrics: "+res.Status)
		return nil
	}
	m, err := parseMetrics(res.Body, goMetrics)
	if err != nil {
		s.problems = append(s.problems, err.Error())
	}
	return m
}

// metric is a Go figure of the sample, NaN if it could not be read.
func (s *sample) metric(name string) float64 {
	if v, ok := s.metrics[name]; ok {
		return v
	}
	return math.NaN()
}

// csvWriter writes samples.csv a row at a time, flushed, so that a run
// cut short leaves its figures so far.
type csvWriter struct {
	f *os.File
	w *bufio.Writer
}

func newCSV(path string) (*csvWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	c := &csvWriter{f: f, w: bufio.NewWriter(f)}
	cols := []string{"elapsed_s", "interval_s", "tasks", "steps", "artifacts",
		"vm_rss_bytes", "rss_anon_bytes", "rss_file_bytes", "rss_shmem_bytes", "vm_hwm_bytes",
		"fds", "threads", "server_cpu_cores"}
	cols = append(cols, goMetrics...)
	cols = append(cols, "db_bytes", "wal_bytes", "shm_bytes", "load1", "requests", "req_per_s", "failures")
	for r := range nRoutes {
		p := r.column()
		cols = append(cols, p+"_count", p+"_req_per_s", p+"_p50_ms", p+"_p99_ms", p+"_failures")
	}
	fmt.Fprintln(c.w, strings.Join(cols, ","))
	return c, c.w.Flush()
}

func (c *csvWriter) write(s sample) error {
	num := func(v float64, prec int) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', prec, 64)
	}
	secs := s.span.Seconds()
	rate := func(n int64) string {
		if secs <= 0 {
			return ""
		}
		return num(float64(n)/secs, 1)
	}
	n, fails := s.requests()
	row := []string{num(s.at.Seconds(), 1), num(secs, 1), strconv.Itoa(s.tasks), strconv.FormatInt(s.steps, 10), strconv.Itoa(s.arts),
		u64(s.status.VmRSS), u64(s.status.RssAnon), u64(s.status.RssFile), u64(s.status.RssShmem), u64(s.status.VmHWM),
		strconv.Itoa(s.fds), u64(s.status.Threads), num(s.cpu, 2)}
	for _, m := range goMetrics {
		row = append(row, num(s.metric(m), 0))
	}
	row = append(row, strconv.FormatInt(s.db, 10), strconv.FormatInt(s.wal, 10), strconv.FormatInt(s.shm, 10),
		num(s.load1, 2), strconv.FormatInt(n, 10), rate(n), strconv.FormatInt(fails, 10))
	for _, r := range s.routes {
		p50, p99 := "", ""
		if r.count > 0 {
			p50, p99 = num(ms(r.p50), 3), num(ms(r.p99), 3)
		}
		row = append(row, strconv.FormatInt(r.count, 10), rate(r.count), p50, p99, strconv.FormatInt(r.fails, 10))
	}
	fmt.Fprintln(c.w, strings.Join(row, ","))
	return c.w.Flush()
}

func (c *csvWriter) close() error {
	if err := c.w.Flush(); err != nil {
		c.f.Close()
		return err
	}
	return c.f.Close()
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
