package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The soak's targets (issue 35, bench/README.md "A million tasks").
const (
	rssTarget  = 1.2 // RSS after the warm-up, against its first sample then
	p99Target  = 1.5 // p99 of each route, the last window against the first after the warm-up
	listTarget = 1.5 // the task list's pages at the end, against the same at -base-tasks
)

// analysis is what the targets are judged on.
type analysis struct {
	baseline     int // the index of the first sample at or after the warm-up; -1 for none
	rssLast      float64
	rssMax       float64
	rssMaxAt     time.Duration
	first, last  [nRoutes]histogram
	firstFrom    time.Duration // the windows' spans
	firstTo      time.Duration
	lastFrom     time.Duration
	lastTo       time.Duration
	windowsFound bool
}

// analyse finds the memory baseline (the first sample at or after
// warmup) and the latency windows: the samples that cover window after
// the warm-up, and the samples that cover the last window of the run. A
// sample covers the interval that ends at its time; the tolerance of half
// an interval absorbs the ticker's jitter.
func analyse(samples []sample, warmup, window, interval time.Duration) analysis {
	a := analysis{baseline: -1}
	for i, s := range samples {
		if s.at >= warmup && s.status.VmRSS > 0 {
			a.baseline = i
			break
		}
	}
	if a.baseline >= 0 {
		base := float64(samples[a.baseline].status.VmRSS)
		for _, s := range samples[a.baseline:] {
			if r := float64(s.status.VmRSS) / base; r > a.rssMax {
				a.rssMax, a.rssMaxAt = r, s.at
			}
		}
		a.rssLast = float64(samples[len(samples)-1].status.VmRSS) / base
	}
	if len(samples) == 0 {
		return a
	}
	tol := interval / 2
	end := samples[len(samples)-1].at
	a.firstFrom, a.firstTo = time.Duration(math.MaxInt64), 0
	a.lastFrom, a.lastTo = time.Duration(math.MaxInt64), 0
	nFirst, nLast := 0, 0
	for _, s := range samples {
		if s.span <= 0 {
			continue
		}
		if s.at > warmup+tol && s.at <= warmup+window+tol {
			for r := range s.hists {
				a.first[r].add(&s.hists[r])
			}
			a.firstFrom, a.firstTo = min(a.firstFrom, s.at-s.span), max(a.firstTo, s.at)
			nFirst++
		}
		if s.at > end-window+tol {
			for r := range s.hists {
				a.last[r].add(&s.hists[r])
			}
			a.lastFrom, a.lastTo = min(a.lastFrom, s.at-s.span), max(a.lastTo, s.at)
			nLast++
		}
	}
	a.windowsFound = nFirst > 0 && nLast > 0
	return a
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**NOT met**"
}

// summary is summary.md: the targets with their verdicts, then each
// figure beside its plot, then how the run was made.
func (r *runResult) summary() string {
	c := r.cfg
	a := analyse(r.samples, c.warmup, c.window, c.interval)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Soak: agentrt to %s tasks under mixed load\n\n", commas(int64(r.tasks)))
	p("%s, %s of load (asked: %s), %d clients, `%s` serving `%s`, commit %s (binary %s).\n",
		r.started.UTC().Format("2006-01-02 15:04 MST"), round(r.ran), c.duration, c.clients, c.agentrt, filepath.Base(c.plugin), r.commit, r.binary)
	if r.stoppedEarly != "" {
		p("\n**The run ended early: %s.**\n", r.stoppedEarly)
	}
	p("\n## Targets\n\n| target | figure | verdict |\n|---|---|---|\n")
	if a.baseline >= 0 {
		bs := r.samples[a.baseline]
		p("| RSS after the warm-up within %.1f× of its first sample (%s at %s) | max %.2f× (at %s), last %.2f× | %s |\n",
			rssTarget, mibs(bs.status.VmRSS), round(bs.at), a.rssMax, round(a.rssMaxAt), a.rssLast, verdict(a.rssMax <= rssTarget))
	} else {
		p("| RSS after the warm-up within %.1f× of its first sample | no sample after the warm-up of %s | not measured |\n", rssTarget, c.warmup)
	}
	if a.windowsFound {
		worst, worstRoute, all := 0.0, "", true
		for rt := range nRoutes {
			f, l := a.first[rt].quantile(0.99), a.last[rt].quantile(0.99)
			if a.first[rt].n == 0 || a.last[rt].n == 0 {
				continue
			}
			ratio := float64(l) / float64(f)
			if ratio > worst {
				worst, worstRoute = ratio, rt.String()
			}
			all = all && ratio <= p99Target
		}
		p("| p99 of every route within %.1f× (%s–%s against %s–%s) | worst %s %.2f× | %s |\n",
			p99Target, round(a.lastFrom), round(a.lastTo), round(a.firstFrom), round(a.firstTo), worstRoute, worst, verdict(all))
	} else {
		p("| p99 of every route within %.1f× | no window of %s after the warm-up | not measured |\n", p99Target, c.window)
	}
	if !r.endBurst.unmeasured && len(r.baseBurst.first) > 0 && len(r.endBurst.first) > 0 {
		fr := ratio(quantileSorted(r.endBurst.first, 0.5), quantileSorted(r.baseBurst.first, 0.5))
		lr := ratio(quantileSorted(r.endBurst.last, 0.5), quantileSorted(r.baseBurst.last, 0.5))
		p("| task list's first and last page within %.1f× of the same at %s tasks (medians of %d) | first %.2f×, last %.2f× at %s tasks | %s |\n",
			listTarget, commas(int64(r.baseBurst.tasks)), c.burst, fr, lr, commas(int64(r.endBurst.tasks)), verdict(fr <= listTarget && lr <= listTarget))
	} else {
		p("| task list's pages within %.1f× of the same at %s tasks | the server was gone at the end | not measured |\n", listTarget, commas(c.baseTasks))
	}
	nf := r.fails.total()
	p("| 0 failures | %s of %s requests | %s |\n", commas(nf), commas(r.totalRequests()), verdict(nf == 0))
	p("| the store reaches -tasks | %s of %s tasks | %s |\n", commas(int64(r.tasks)), commas(c.tasks), verdict(int64(r.tasks) >= c.tasks))

	if len(r.samples) > 0 {
		r.memorySection(&b, a)
		r.latencySection(&b, a)
		r.throughputSection(&b, a)
		r.dbSection(&b)
	}
	r.burstSection(&b)
	r.failureSection(&b)

	p("\n## How it ran\n\n")
	p("```sh\n%s\n```\n\n", r.command)
	p("- Machine: %d cores, %s; load average %s at the start, %s at the end.\n", r.machine.cores, r.machine.model, r.machine.load, r.loadEnd)
	p("- Disk of the data directory: %s.\n", r.machine.fsync)
	p("- Load: %d clients; creates paced from %s to %s tasks over %s, uploads to %.2f a task created; between them the mix `%s`", c.clients,
		commas(c.baseTasks), commas(c.tasks), c.duration, c.uploadFraction, c.mix)
	if c.rate > 0 {
		p(" at %.0f requests a second", c.rate)
	} else {
		p(" as fast as answers came")
	}
	p("; page_size %d; a sample every %s, warm-up %s, windows of %s.\n", c.pageSize, c.interval, c.warmup, c.window)
	p("- Server: %s; %d warning or error lines in `server.log`.\n", r.serverEnd, r.warnings)
	for _, w := range r.firstWarn {
		p("  - `%s`\n", strings.ReplaceAll(w, "`", "'"))
	}
	if len(r.profiles) > 0 {
		p("- Heap profiles (`go tool pprof -sample_index=inuse_space FILE`): %s.\n", strings.Join(r.profiles, ", "))
	}
	p("- Every figure of every sample: `samples.csv`.\n")
	return b.String()
}

func (r *runResult) memorySection(b *strings.Builder, a analysis) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## Memory\n\n![Server memory over time](rss.svg)\n\n")
	p("| figure | first sample | after the warm-up | last | max |\n|---|---:|---:|---:|---:|\n")
	row := func(name string, get func(s sample) float64, unit func(float64) string) {
		first, last := get(r.samples[0]), get(r.samples[len(r.samples)-1])
		base := "—"
		if a.baseline >= 0 {
			base = unit(get(r.samples[a.baseline]))
		}
		mx := math.NaN()
		for _, s := range r.samples {
			if v := get(s); !math.IsNaN(v) && (math.IsNaN(mx) || v > mx) {
				mx = v
			}
		}
		p("| %s | %s | %s | %s | %s |\n", name, unit(first), base, unit(last), unit(mx))
	}
	mib := func(v float64) string {
		if math.IsNaN(v) {
			return "?"
		}
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	count := func(v float64) string {
		if math.IsNaN(v) {
			return "?"
		}
		return commas(int64(v))
	}
	row("VmRSS", func(s sample) float64 { return float64(s.status.VmRSS) }, mib)
	row("RssAnon", func(s sample) float64 { return float64(s.status.RssAnon) }, mib)
	row("RssFile", func(s sample) float64 { return float64(s.status.RssFile) }, mib)
	row("RssShmem", func(s sample) float64 { return float64(s.status.RssShmem) }, mib)
	row("VmHWM", func(s sample) float64 { return float64(s.status.VmHWM) }, mib)
	row("Go heap in use", func(s sample) float64 { return s.metric("go_memstats_heap_inuse_bytes") }, mib)
	row("Go heap from the OS", func(s sample) float64 { return s.metric("go_memstats_heap_sys_bytes") }, mib)
	row("Go runtime from the OS", func(s sample) float64 { return s.metric("go_memstats_sys_bytes") }, mib)
	row("the cache of tasks (as counted)", func(s sample) float64 { return s.metric("agentrt_task_cache_bytes") }, mib)
	p("\n![Descriptors, threads and goroutines over time](fds.svg)\n\n")
	p("| figure | first sample | after the warm-up | last | max |\n|---|---:|---:|---:|---:|\n")
	row("open fds", func(s sample) float64 { return float64(s.fds) }, count)
	row("threads", func(s sample) float64 { return float64(s.status.Threads) }, count)
	row("goroutines", func(s sample) float64 { return s.metric("go_goroutines") }, count)
}

func (r *runResult) latencySection(b *strings.Builder, a analysis) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## Latency\n\n![p50 and p99 of each route over time](latency.svg)\n\n")
	var all [nRoutes]histogram
	for _, s := range r.samples {
		for rt := range s.hists {
			all[rt].add(&s.hists[rt])
		}
	}
	p("p50 and p99 in ms: the whole run, the %s after the warm-up (%s–%s) and the last %s (%s–%s).\n\n",
		r.cfg.window, round(a.firstFrom), round(a.firstTo), r.cfg.window, round(a.lastFrom), round(a.lastTo))
	p("| route | requests | p50 | p99 | p50 first, last | p99 first | p99 last | last / first | verdict |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for rt := range nRoutes {
		h := &all[rt]
		if h.n == 0 {
			p("| %s | 0 | | | | | | | no requests |\n", rt)
			continue
		}
		f, l := &a.first[rt], &a.last[rt]
		ratioCell, v := "—", "not measured"
		if a.windowsFound && f.n > 0 && l.n > 0 {
			x := ratio(l.quantile(0.99), f.quantile(0.99))
			ratioCell, v = fmt.Sprintf("%.2f×", x), verdict(x <= p99Target)
			if f.n < 100 || l.n < 100 {
				v += " (under 100 requests in a window)"
			}
		}
		p("| %s | %s | %s | %s | %s, %s | %s | %s | %s | %s |\n", rt, commas(int64(h.n)), msStr(h.quantile(0.5)), msStr(h.quantile(0.99)),
			msOf(f, 0.5), msOf(l, 0.5), msOf(f, 0.99), msOf(l, 0.99), ratioCell, v)
	}
}

func (r *runResult) throughputSection(b *strings.Builder, a analysis) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## Throughput\n\n![Requests a second by route, tasks stored and server CPU over time](throughput.svg)\n\n")
	secs := r.ran.Seconds()
	firstSecs, lastSecs := (a.firstTo - a.firstFrom).Seconds(), (a.lastTo - a.lastFrom).Seconds()
	p("| route | requests | req/s, whole run | first window | last window |\n|---|---:|---:|---:|---:|\n")
	var tot, totF, totL float64
	for rt := range nRoutes {
		var n uint64
		for _, s := range r.samples {
			n += s.hists[rt].n
		}
		f, l := float64(a.first[rt].n)/max(firstSecs, 1e-9), float64(a.last[rt].n)/max(lastSecs, 1e-9)
		tot, totF, totL = tot+float64(n), totF+f, totL+l
		p("| %s | %s | %.0f | %.0f | %.0f |\n", rt, commas(int64(n)), float64(n)/secs, f, l)
	}
	p("| all | %s | %.0f | %.0f | %.0f |\n", commas(int64(tot)), tot/secs, totF, totL)
	var cpu float64
	for _, s := range r.samples {
		cpu += s.cpu * s.span.Seconds()
	}
	p("\nThe server used %.2f cores on average (%.0f µs of CPU a request); %s steps executed, %s artifacts uploaded.\n",
		cpu/secs, cpu/max(tot, 1)*1e6, commas(r.steps), commas(int64(r.arts)))
}

func (r *runResult) dbSection(b *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	first, last := r.samples[0], r.samples[len(r.samples)-1]
	var maxDB, maxWAL int64
	for _, s := range r.samples {
		maxDB, maxWAL = max(maxDB, s.db), max(maxWAL, s.wal)
	}
	p("\n## Database\n\n![Database files and what they hold over time](db.svg)\n\n")
	p("| figure | first sample | last | max |\n|---|---:|---:|---:|\n")
	p("| agentrt.db | %s | %s | %s |\n", mibs(uint64(first.db)), mibs(uint64(last.db)), mibs(uint64(maxDB)))
	p("| agentrt.db-wal | %s | %s | %s |\n", mibs(uint64(first.wal)), mibs(uint64(last.wal)), mibs(uint64(maxWAL)))
	p("| agentrt.db-shm | %s | %s | |\n", mibs(uint64(first.shm)), mibs(uint64(last.shm)))
	p("| tasks | %s | %s | |\n", commas(int64(first.tasks)), commas(int64(last.tasks)))
	p("| steps | %s | %s | |\n", commas(first.steps), commas(last.steps))
	p("| artifacts | %s | %s | |\n", commas(int64(first.arts)), commas(int64(last.arts)))
	if last.tasks > 0 {
		p("\nThe database holds %.0f bytes a task with its steps (%.1f steps a task).\n",
			float64(last.db+last.wal)/float64(last.tasks), float64(last.steps)/float64(last.tasks))
	}
}

func (r *runResult) burstSection(b *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## The task list's pages, in quiet bursts\n\n")
	p("%d requests of each page (page_size %d), one at a time, alternating, with nothing else running: before the load and after it.\n\n",
		r.cfg.burst, r.cfg.pageSize)
	p("| page | at %s tasks: p50, p99 | at %s tasks: p50, p99 | p50 end / start | verdict |\n|---|---:|---:|---:|---|\n",
		commas(int64(r.baseBurst.tasks)), commas(int64(r.endBurst.tasks)))
	row := func(name string, base, end []time.Duration, basePage, endPage int) {
		if len(base) == 0 || len(end) == 0 {
			p("| %s | | | | not measured |\n", name)
			return
		}
		x := ratio(quantileSorted(end, 0.5), quantileSorted(base, 0.5))
		p("| %s (%s, then %s) | %s, %s | %s, %s | %.2f× | %s |\n", name, commas(int64(basePage)), commas(int64(endPage)),
			msStr(quantileSorted(base, 0.5)), msStr(quantileSorted(base, 0.99)),
			msStr(quantileSorted(end, 0.5)), msStr(quantileSorted(end, 0.99)), x, verdict(x <= listTarget))
	}
	row("first", r.baseBurst.first, r.endBurst.first, r.baseBurst.firstPage, r.endBurst.firstPage)
	row("last", r.baseBurst.last, r.endBurst.last, r.baseBurst.lastPage, r.endBurst.lastPage)
}

func (r *runResult) failureSection(b *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	r.fails.mu.Lock()
	defer r.fails.mu.Unlock()
	p("\n## Failures\n\n")
	var n int64
	for _, c := range r.fails.byRoute {
		n += c
	}
	if n == 0 {
		p("None: every request, the creates before the load and the bursts included, was answered 200 with what it asked for.\n")
		return
	}
	p("| route | failures |\n|---|---:|\n")
	for rt, c := range r.fails.byRoute {
		if c > 0 {
			p("| %s | %s |\n", route(rt), commas(c))
		}
	}
	p("\nThe first %d:\n\n```\n%s\n```\n", len(r.fails.first), strings.Join(r.fails.first, "\n"))
}

func (r *runResult) totalRequests() int64 {
	var n int64
	for _, s := range r.samples {
		c, _ := s.requests()
		n += c
	}
	n += int64(r.cfg.baseTasks) + int64(2*(len(r.baseBurst.first)+len(r.endBurst.first)))
	return n
}

// writePlots writes rss.svg, fds.svg, latency.svg, throughput.svg and
// db.svg into dir.
func (r *runResult) writePlots(dir string) error {
	ss := r.samples
	unit, div := "seconds", 1.0
	if r.ran >= 10*time.Minute {
		unit, div = "minutes", 60
	}
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = s.at.Seconds() / div
	}
	line := func(name string, get func(s sample) float64) series {
		y := make([]float64, len(ss))
		for i, s := range ss {
			y[i] = get(s)
		}
		return series{name: name, x: xs, y: y}
	}
	mib := func(v uint64) float64 { return float64(v) / (1 << 20) }
	var xRefs []refLine
	if r.cfg.warmup > 0 && r.cfg.warmup < r.ran {
		xRefs = append(xRefs, refLine{at: r.cfg.warmup.Seconds() / div, label: "warm-up ends"})
	}
	xLabel := "time since the load started (" + unit + ")"
	a := analyse(ss, r.cfg.warmup, r.cfg.window, r.cfg.interval)
	var rssRefs []refLine
	if a.baseline >= 0 {
		rssRefs = append(rssRefs, refLine{at: rssTarget * mib(ss[a.baseline].status.VmRSS), label: fmt.Sprintf("%.1f × VmRSS after the warm-up", rssTarget)})
	}
	figs := map[string]figure{
		"rss.svg": {title: "agentrt's memory", xLabel: xLabel, cols: 1, xRefs: xRefs, panels: []panel{{
			title: "resident memory and Go heap", yLabel: "MiB", yRefs: rssRefs, series: []series{
				line("VmRSS", func(s sample) float64 { return mib(s.status.VmRSS) }),
				line("RssAnon", func(s sample) float64 { return mib(s.status.RssAnon) }),
				line("RssFile", func(s sample) float64 { return mib(s.status.RssFile) }),
				line("RssShmem", func(s sample) float64 { return mib(s.status.RssShmem) }),
				line("Go heap in use", func(s sample) float64 { return s.metric("go_memstats_heap_inuse_bytes") / (1 << 20) }),
				line("Go runtime from OS", func(s sample) float64 { return s.metric("go_memstats_sys_bytes") / (1 << 20) }),
				line("task cache", func(s sample) float64 { return s.metric("agentrt_task_cache_bytes") / (1 << 20) }),
			}}}},
		"fds.svg": {title: "agentrt's descriptors, threads and goroutines", xLabel: xLabel, cols: 1, xRefs: xRefs, panels: []panel{{
			title: "open at each sample", yLabel: "count", series: []series{
				line("open fds", func(s sample) float64 { return float64(s.fds) }),
				line("threads", func(s sample) float64 { return float64(s.status.Threads) }),
				line("goroutines", func(s sample) float64 { return s.metric("go_goroutines") }),
			}}}},
		"db.svg": {title: "agentrt's database", xLabel: xLabel, cols: 1, xRefs: xRefs, panels: []panel{
			{title: "file sizes", yLabel: "MiB", series: []series{
				line("agentrt.db", func(s sample) float64 { return mib(uint64(s.db)) }),
				line("agentrt.db-wal", func(s sample) float64 { return mib(uint64(s.wal)) }),
				line("agentrt.db-shm", func(s sample) float64 { return mib(uint64(s.shm)) }),
			}},
			{title: "what it holds", yLabel: "count", series: []series{
				line("tasks", func(s sample) float64 { return float64(s.tasks) }),
				line("steps", func(s sample) float64 { return float64(s.steps) }),
				line("artifacts", func(s sample) float64 { return float64(s.arts) }),
			}},
		}},
	}
	latency := figure{title: "Latency by route: p50 and p99 of each interval", xLabel: xLabel, cols: 2, xRefs: xRefs}
	throughput := figure{title: "Throughput by route, tasks stored, server CPU", xLabel: xLabel, cols: 2, xRefs: xRefs}
	throughput.panels = append(throughput.panels,
		panel{title: "tasks stored", yLabel: "tasks", series: []series{line("tasks", func(s sample) float64 { return float64(s.tasks) })}},
		panel{title: "server CPU", yLabel: "cores", series: []series{line("server CPU", func(s sample) float64 { return s.cpu })}})
	for rt := range nRoutes {
		pct := func(q float64) func(s sample) float64 {
			return func(s sample) float64 {
				if s.routes[rt].count == 0 {
					return math.NaN()
				}
				if q == 0.5 {
					return ms(s.routes[rt].p50)
				}
				return ms(s.routes[rt].p99)
			}
		}
		latency.panels = append(latency.panels, panel{title: rt.String(), yLabel: "ms (log scale)", logY: true, series: []series{
			line("p50", pct(0.5)), line("p99", pct(0.99)),
		}})
		throughput.panels = append(throughput.panels, panel{title: rt.String(), yLabel: "requests/s", series: []series{
			line("req/s", func(s sample) float64 {
				if s.span <= 0 {
					return math.NaN()
				}
				return float64(s.routes[rt].count) / s.span.Seconds()
			}),
		}})
	}
	figs["latency.svg"], figs["throughput.svg"] = latency, throughput
	for name, f := range figs {
		if err := writeSVGFile(filepath.Join(dir, name), f); err != nil {
			return err
		}
	}
	return nil
}

func writeSVGFile(path string, f figure) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeSVG(out, f); err != nil {
		out.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return out.Close()
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}

func msStr(d time.Duration) string {
	switch {
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0f", ms(d))
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f", ms(d))
	default:
		return fmt.Sprintf("%.2f", ms(d))
	}
}

func msOf(h *histogram, q float64) string {
	if h.n == 0 {
		return "—"
	}
	return msStr(h.quantile(q))
}

func mibs(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// round is a duration to the second (or tenth under ten seconds).
func round(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// commas writes n with thousands separated: 1,000,000.
func commas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
