// Command soak grows an agentrt store to a million tasks, with their steps
// and artifacts, under a mixed load for an hour, and samples the server
// as it goes: its resident memory split as the kernel counts it, the Go
// heap, open descriptors and threads, the database's files, and the
// latency (p50, p99), throughput and failures of every route. It writes
// samples.csv, a plot of each figure over time and summary.md, which
// evaluates the soak's targets (bench/README.md, "A million tasks").
//
//	go run ./bench/soak                                              # an hour, 1,000,000 tasks
//	go run ./bench/soak -duration 2m -tasks 20000 -warmup 30s -out /tmp/soak   # a quick check
//	go run ./bench/soak -server-flag=--max-instances=4 -- --log-level debug      # flags for agentrt
//
// The server runs as its own process ("agentrt run PLUGIN", a fresh data
// directory under -tmp, a free loopback port, the profiler on another).
// First -base-tasks tasks are created and the first and last page of the
// task list timed in a quiet burst; then -clients clients run for
// -duration: each creates a task whenever one is due by a pace that
// reaches -tasks at the end, uploads a small file (256 bytes to 4 KiB)
// to a recent task whenever one is due by a pace of -upload-fraction
// uploads a task, and otherwise makes a request of -mix (execute a step
// on a recent or an old task, get a task, the first or last page of the
// task list, list a task's steps, list a task's artifacts, download one
// and check it byte for byte),
// as fast as answers come, or at -rate requests a second in all. Every
// -interval the server is sampled; at the end the load stops, the task
// list is timed in the same quiet burst, and the server is stopped with
// SIGTERM. Any answer but 200, and any transport error, is a failure.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type config struct {
	agentrt, plugin, data, tmp, addr, out string
	keep, pprof                           bool
	serverFlags                           []string
	clients                               int
	duration, warmup, interval, window    time.Duration
	tasks, baseTasks                      int64
	rate, uploadFraction                  float64
	mix                                   string
	pageSize, burst                       int
}

func main() {
	var c config
	flag.StringVar(&c.agentrt, "agentrt", "build/agentrt", "the agentrt binary")
	flag.StringVar(&c.plugin, "plugin", "build/plugins/echo-rust.wasm", "the plugin agentrt serves")
	flag.StringVar(&c.data, "data", "", "the server's data directory, absent or empty (default: a fresh one under -tmp, removed at the end)")
	flag.StringVar(&c.tmp, "tmp", os.TempDir(), "where the data directory goes: a real disk, not tmpfs (agentrt fsyncs)")
	flag.BoolVar(&c.keep, "keep", false, "keep the data directory made under -tmp")
	flag.StringVar(&c.addr, "addr", "127.0.0.1:0", "the server's --addr (port 0: a free one)")
	flag.Func("server-flag", "a flag for agentrt run, e.g. -server-flag=--max-instances=4 (repeatable; so are the arguments after --)", func(s string) error {
		c.serverFlags = append(c.serverFlags, s)
		return nil
	})
	flag.BoolVar(&c.pprof, "pprof", true, "serve the server's profiler on another free port and save its heap profile after the warm-up and at the end")
	flag.IntVar(&c.clients, "clients", 8, "clients, each making one request at a time")
	flag.DurationVar(&c.duration, "duration", time.Hour, "how long the load runs")
	flag.Int64Var(&c.tasks, "tasks", 1_000_000, "tasks stored at the end: creates are paced to reach it")
	flag.Int64Var(&c.baseTasks, "base-tasks", 1000, "tasks created before the load, at which the task list is first timed")
	flag.DurationVar(&c.warmup, "warmup", 5*time.Minute, "warm-up: the first sample at or after it is the memory baseline")
	flag.DurationVar(&c.interval, "interval", 10*time.Second, "time between samples")
	flag.DurationVar(&c.window, "window", time.Minute, "the spans compared for p99: this long after the warm-up, and at the end")
	flag.Float64Var(&c.rate, "rate", 0, "requests a second of the mix, all clients together (0: as fast as answers come)")
	flag.Float64Var(&c.uploadFraction, "upload-fraction", 0.2, "artifacts uploaded for each task created during the load: uploads are paced to it")
	flag.StringVar(&c.mix, "mix", defaultMix, "weights of the requests between the paced creates and uploads, route=weight,...")
	flag.IntVar(&c.pageSize, "page-size", 10, "page_size of the task list's pages")
	flag.IntVar(&c.burst, "burst", 200, "requests of each page (first, last) in a quiet burst")
	flag.StringVar(&c.out, "out", "", "directory for samples.csv, the plots and summary.md (default bench/soak/results-DATE-TIME)")
	flag.Parse()
	c.serverFlags = append(c.serverFlags, flag.Args()...)
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func (c config) check() (mix, error) {
	m, err := parseMix(c.mix)
	switch {
	case err != nil:
		return mix{}, err
	case c.clients < 1:
		return mix{}, errors.New("-clients must be at least 1")
	case c.duration <= 0 || c.interval <= 0 || c.window <= 0 || c.warmup < 0:
		return mix{}, errors.New("-duration, -interval and -window must be above 0, -warmup at least 0")
	case c.baseTasks < 1 || c.tasks < c.baseTasks:
		return mix{}, fmt.Errorf("-base-tasks (%d) must be at least 1 and at most -tasks (%d)", c.baseTasks, c.tasks)
	case c.pageSize < 1 || c.pageSize > 100:
		return mix{}, errors.New("-page-size must be 1 to 100 (the server's largest page)")
	case c.burst < 1:
		return mix{}, errors.New("-burst must be at least 1")
	case c.rate < 0 || c.uploadFraction < 0:
		return mix{}, errors.New("-rate and -upload-fraction must be at least 0")
	}
	return m, nil
}

// run is the soak: its figures, as it goes, in run's report.
type runResult struct {
	cfg          config
	command      string
	commit       string
	binary       string
	started      time.Time
	machine      machine
	loadEnd      string
	samples      []sample
	baseBurst    burst
	endBurst     burst
	fails        *failures
	serverEnd    string
	warnings     int
	firstWarn    []string
	profiles     []string
	tasks, arts  int
	steps        int64
	ran          time.Duration
	stoppedEarly string
}

type machine struct {
	cores       int
	model, load string
	fsync       string
}

// burst is a quiet burst's figures for the first and last page of tasks.
type burst struct {
	tasks      int
	first      []time.Duration // sorted
	last       []time.Duration
	firstPage  int
	lastPage   int
	unmeasured bool
}

func run(c config) error {
	m, err := c.check()
	if err != nil {
		return err
	}
	res := &runResult{cfg: c, started: time.Now(), command: commandLine(), commit: gitCommit(), binary: binaryID(c.agentrt), fails: &failures{}}
	res.machine = machine{cores: runtime.NumCPU(), model: cpuModel(), load: loadAverage()}
	if c.out == "" {
		c.out = filepath.Join("bench", "soak", "results-"+res.started.Format("2006-01-02-1504"))
		res.cfg.out = c.out
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	data, removeData, err := dataDir(c)
	if err != nil {
		return err
	}
	defer removeData()
	res.machine.fsync = fsyncSpeed(data)

	args := []string{"run", c.plugin, "--addr", c.addr, "--data", data}
	if c.pprof {
		args = append(args, "--debug-addr", "127.0.0.1:0")
	}
	args = append(args, c.serverFlags...)
	srv, err := startServer(c.agentrt, args, filepath.Join(c.out, "server.log"))
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.stop(time.Minute)
		}
	}()
	logf("agentrt pid %d at %s, data %s, results %s", srv.pid(), srv.url, data, c.out)

	client := &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			MaxIdleConns:        4 * c.clients,
			MaxIdleConnsPerHost: 4 * c.clients,
			IdleConnTimeout:     2 * time.Minute,
			DisableCompression:  true,
		},
	}
	l := &load{base: srv.url, client: client, ids: &ids{}, rec: &recorder{}, fails: res.fails, mix: m, pageSize: c.pageSize}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	// The store at -base-tasks, and the task list's pages timed there.
	start := time.Now()
	var created atomic.Int64
	seedPace := newPacer(c.baseTasks, 0)
	var wg sync.WaitGroup
	for range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for seedPace.take(0) {
				l.createTask("seed", created.Add(1), &buf)
			}
		}()
	}
	wg.Wait()
	n, _ := l.ids.counts()
	logf("created %d tasks in %.1f s; timing the task list's pages (%d requests each)", n, time.Since(start).Seconds(), c.burst)
	res.baseBurst = listBurst(l, "burst at the start", c.burst)
	l.rec.swap() // the seed and the burst are not the load's figures

	// The load.
	sm := &sampler{srv: srv, load: l, dataDir: data, client: client, clkTck: clockTicks()}
	csv, err := newCSV(filepath.Join(c.out, "samples.csv"))
	if err != nil {
		return err
	}
	defer csv.close()
	t0 := time.Now()
	sm.take(0) // the CPU counter's start; the load's recorder is empty
	creates := newPacer(c.tasks-int64(n), c.duration)
	created.Store(int64(n))
	uploads := newPacer(int64(c.uploadFraction*float64(c.tasks-int64(n))+0.5), c.duration)
	var mixPace *pacer
	if c.rate > 0 {
		mixPace = newPacer(int64(c.rate*c.duration.Seconds()), c.duration)
	}
	for i := range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.runClient(ctx, i, t0, creates, uploads, mixPace, &created)
		}()
	}
	logf("load started: %d clients for %s, creates paced to %d tasks", c.clients, c.duration, c.tasks)
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	end := time.NewTimer(c.duration)
	defer end.Stop()
	warmProfile := !c.pprof
	keep := func(s sample) error {
		res.samples = append(res.samples, s)
		if err := csv.write(s); err != nil {
			return fmt.Errorf("write samples.csv: %w", err)
		}
		reqs, fails := s.requests()
		logf("%6.0f s  tasks %d  rss %.1f MiB (anon %.1f, file %.1f)  heap %.1f MiB  fds %d  %.0f req/s  failures %d%s",
			s.at.Seconds(), s.tasks, mibf(s.status.VmRSS), mibf(s.status.RssAnon), mibf(s.status.RssFile),
			s.metric("go_memstats_heap_inuse_bytes")/(1<<20), s.fds, float64(reqs)/max(s.span.Seconds(), 1e-9), fails, problems(s))
		return nil
	}
loop:
	for {
		select {
		case <-tick.C:
			if err := keep(sm.take(time.Since(t0))); err != nil {
				return err
			}
			if !warmProfile && time.Since(t0) >= c.warmup {
				warmProfile = true
				res.profile(srv, client, c.out, "heap-warmup.pb.gz")
			}
		case <-end.C:
			break loop
		case sig := <-sigs:
			res.stoppedEarly = "stopped by " + sig.String()
			break loop
		case <-srv.done:
			res.stoppedEarly = "the server exited"
			break loop
		}
	}
	l.stop.Store(true)
	wg.Wait()
	if at := time.Since(t0); len(res.samples) == 0 || at-res.samples[len(res.samples)-1].at >= time.Second {
		if err := keep(sm.take(at)); err != nil {
			return err
		}
	}
	res.ran = time.Since(t0)
	res.tasks, res.arts = l.ids.counts()
	res.steps = l.steps.Load()

	if !srv.exited() {
		if c.pprof {
			res.profile(srv, client, c.out, "heap-end.pb.gz")
		}
		logf("load stopped; timing the task list's pages at %d tasks", res.tasks)
		res.endBurst = listBurst(l, "burst at the end", c.burst)
	} else {
		res.endBurst.unmeasured = true
	}
	res.serverEnd = srv.stop(time.Minute)
	stopped = true
	srv.mu.Lock()
	res.warnings, res.firstWarn = srv.warnings, srv.first
	srv.mu.Unlock()
	res.loadEnd = loadAverage()

	if err := res.writePlots(c.out); err != nil {
		return err
	}
	summary := res.summary()
	if err := os.WriteFile(filepath.Join(c.out, "summary.md"), []byte(summary), 0o644); err != nil {
		return err
	}
	fmt.Print(summary)
	logf("wrote %s", c.out)
	return nil
}

func (r *runResult) profile(srv *server, client *http.Client, dir, name string) {
	if err := srv.saveProfile(client, filepath.Join(dir, name)); err != nil {
		logf("%v", err)
		return
	}
	r.profiles = append(r.profiles, name)
}

// listBurst times the first and the last page of the task list, one
// request at a time, alternating, after a few unmeasured of each.
func listBurst(l *load, phase string, n int) burst {
	var buf bytes.Buffer
	tasks, _ := l.ids.counts()
	b := burst{tasks: tasks, firstPage: 1, lastPage: max(1, (tasks+l.pageSize-1)/l.pageSize)}
	for range min(20, n) {
		l.listPage(phase, listFirst, &buf)
		l.listPage(phase, listLast, &buf)
	}
	for range n {
		b.first = append(b.first, l.listPage(phase, listFirst, &buf))
		b.last = append(b.last, l.listPage(phase, listLast, &buf))
	}
	quantiles(b.first)
	quantiles(b.last)
	return b
}

// dataDir is the server's data directory: -data, which must be absent or
// empty (the soak knows only the tasks it creates), or a fresh one under
// -tmp, removed by the function returned unless -keep.
func dataDir(c config) (string, func(), error) {
	if c.data != "" {
		entries, err := os.ReadDir(c.data)
		if err == nil && len(entries) > 0 {
			return "", nil, fmt.Errorf("-data %s is not empty: the soak needs a store of its own tasks only", c.data)
		}
		return c.data, func() {}, nil
	}
	dir, err := os.MkdirTemp(c.tmp, "agentrt-soak-")
	if err != nil {
		return "", nil, err
	}
	if c.keep {
		return dir, func() { logf("kept the data directory %s", dir) }, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// fsyncSpeed times 200 appends of 4 KiB, each fsynced, in dir: the floor
// under every commit of the store (bench/fsyncprobe does the same).
func fsyncSpeed(dir string) string {
	f, err := os.CreateTemp(dir, "fsyncprobe-*")
	if err != nil {
		return "? (" + err.Error() + ")"
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	var lat []time.Duration
	start := time.Now()
	for range 200 {
		t := time.Now()
		if _, err := f.Write(buf); err != nil {
			return "? (" + err.Error() + ")"
		}
		if err := f.Sync(); err != nil {
			return "? (" + err.Error() + ")"
		}
		lat = append(lat, time.Since(t))
	}
	total := time.Since(start)
	p50, p99 := quantiles(lat)
	return fmt.Sprintf("%.0f appends of 4 KiB + fsync a second (p50 %.0f µs, p99 %.0f µs)",
		200/total.Seconds(), float64(p50)/1e3, float64(p99)/1e3)
}

// clockTicks is the kernel's clock ticks a second, in which /proc/PID/stat
// counts CPU time (getconf CLK_TCK; 100 on every Linux this runs on).
func clockTicks() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
}

func commandLine() string {
	var b strings.Builder
	b.WriteString("go run ./bench/soak")
	for _, a := range os.Args[1:] {
		b.WriteByte(' ')
		if strings.ContainsAny(a, " \t'\"$\\*?;&|<>()") {
			b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
		} else {
			b.WriteString(a)
		}
	}
	return b.String()
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// binaryID names the agentrt binary served: the start of its sha256, and
// when it was built.
func binaryID(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "?"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "?"
	}
	fi, err := f.Stat()
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("sha256 %x…, built %s", h.Sum(nil)[:6], fi.ModTime().UTC().Format("2006-01-02 15:04 MST"))
}

func problems(s sample) string {
	if len(s.problems) == 0 {
		return ""
	}
	return "  (" + strings.Join(s.problems, "; ") + ")"
}

func mibf(n uint64) float64 { return float64(n) / (1 << 20) }

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "soak: "+format+"\n", args...) }
