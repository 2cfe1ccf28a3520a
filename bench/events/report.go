package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The targets the report judges (bench/README.md).
const (
	targetStreamBytes = 20 << 10              // an idle stream's resident memory in the server
	targetFanoutP99   = 50 * time.Millisecond // at 1,000 subscribers
	targetFanoutAt    = 1000
	targetAsyncRatio  = 0.90 // background steps a second / synchronous ones
)

type report struct {
	cfg                config
	started            time.Time
	command, commit    string
	binary, model      string
	cores              int
	loadStart, loadEnd string
	idle               *idleResult
	fanout             []fanoutRound
	fanoutEnd          string
	steps              []stepsRun
}

func (r *report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Long-running steps and their events, %s\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"))
	p("%d cores (%s), load average %s at the start and %s at the end; agentrt %s, binary %s.\n\n",
		r.cores, r.model, r.loadStart, r.loadEnd, r.commit, r.binary)
	p("```sh\n%s\n```\n\n", r.command)
	p("| target | figure | verdict |\n|---|---|---|\n")
	if i := r.idle; i != nil {
		per := perStream(i.held.VmRSS, i.before.VmRSS, i.opened)
		ok := i.opened == i.n && i.heartbeats == i.n && per < targetStreamBytes
		p("| %s idle event streams held, under 20 KiB of server RSS each | %s held, %s with a heartbeat; %.1f KiB each | %s |\n",
			count(i.n), count(i.opened), count(i.heartbeats), per/1024, verdict(ok))
	}
	if len(r.fanout) > 0 {
		for _, n := range r.cfg.fanouts {
			if n != targetFanoutAt {
				continue
			}
			l := summarize(pooled(r.fanout, n))
			p("| progress to 1,000 subscribers, p99 under 50 ms | p99 %s (p50 %s) | %s |\n", ms(l.p99), ms(l.p50), verdict(l.n > 0 && l.p99 < targetFanoutP99))
		}
	}
	if len(r.steps) > 0 {
		med, lo, hi := medianRange(stepRatios(r.steps, modeAsync, modeSync, stepsRun.perSecond))
		p("| background steps a second / synchronous, within 10%% | %.2f× (%.2f–%.2f) | %s |\n", med, lo, hi, verdict(med >= targetAsyncRatio))
	}
	p("\n")
	if r.idle != nil {
		r.idleSection(&b)
	}
	if len(r.fanout) > 0 {
		r.fanoutSection(&b)
	}
	if len(r.steps) > 0 {
		r.stepsSection(&b)
	}
	return b.String()
}

func (r *report) idleSection(b *strings.Builder) {
	i := r.idle
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Idle event streams\n\n")
	p("%s streams on one task (its log: one event), %d opened at a time; %s read their first event in %.1f s",
		count(i.opened), r.cfg.openConcurrency, count(i.opened), i.openTook.Seconds())
	if i.failed > 0 {
		p("; %d failed (first: %s)", i.failed, strings.Join(i.failures, "; "))
	}
	p(". After a hold of %s, %s of them had a heartbeat waiting and were open. The server's:\n\n", i.hold, count(i.heartbeats))
	p("| | before | each at its first event | after the hold | a stream, after the hold |\n|---|---:|---:|---:|---:|\n")
	row := func(name string, before, open, held uint64) {
		p("| %s | %.1f MiB | %.1f MiB | %.1f MiB | %.2f KiB |\n", name, mib(before), mib(open), mib(held), perStream(held, before, i.opened)/1024)
	}
	row("VmRSS", i.before.VmRSS, i.open.VmRSS, i.held.VmRSS)
	row("RssAnon", i.before.RssAnon, i.open.RssAnon, i.held.RssAnon)
	row("RssFile", i.before.RssFile, i.open.RssFile, i.held.RssFile)
	row("RssShmem", i.before.RssShmem, i.open.RssShmem, i.held.RssShmem)
	p("| threads | %d | %d | %d | |\n", i.before.Threads, i.open.Threads, i.held.Threads)
	p("| goroutines | %d | %d | %d | |\n", i.goBefore, i.goOpen, i.goHeld)
	p("| open descriptors | %d | %d | %d | %.2f |\n", i.fdsBefore, i.fdsOpen, i.fdsHeld, float64(i.fdsHeld-i.fdsBefore)/float64(max(i.opened, 1)))
	row("kernel TCP memory, both ends (not in RSS)", i.tcpBefore, i.tcpOpen, i.tcpHeld)
	p("\nAt its first event a stream cost %.2f KiB of VmRSS (%.2f KiB anonymous). Open files: the server's limit %s, the bench's %s.",
		perStream(i.open.VmRSS, i.before.VmRSS, i.opened)/1024, perStream(i.open.RssAnon, i.before.RssAnon, i.opened)/1024, i.serverFiles, i.benchFiles)
	if i.serverEnd != "" {
		p(" The server %s.", i.serverEnd)
	}
	p("\n\n")
}

func (r *report) fanoutSection(b *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Fan-out of progress\n\n")
	p("A step in the background reports progress %d times, %s apart; each subscriber takes the time it reads each event less the guest's clock in its message. %d rounds on one server, a fresh task each time:\n\n",
		r.cfg.reports, r.cfg.pause, r.cfg.fanoutRounds)
	p("| round | subscribers | p50 | p99 | max | events read / sent × subscribers | server CPU an event read, the step's own included |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range r.fanout {
		p("| %d | %s | %s | %s | %s | %s / %s | %.1f µs |\n", f.round, count(f.subscribers), ms(f.lat.p50), ms(f.lat.p99), ms(f.lat.max),
			count(f.received), count(f.expected), float64(f.cpuPerEvt)/1e3)
	}
	p("\nAll rounds together:\n\n| subscribers | events read | p50 | p99 | max | failures |\n|---:|---:|---:|---:|---:|---|\n")
	for _, n := range r.cfg.fanouts {
		l := summarize(pooled(r.fanout, n))
		fails := ""
		for _, f := range r.fanout {
			if f.subscribers == n && f.failures > 0 {
				fails += fmt.Sprintf("round %d: %d (%s) ", f.round, f.failures, f.firstFailure)
			}
		}
		if fails == "" {
			fails = "0"
		}
		p("| %s | %s | %s | %s | %s | %s |\n", count(n), count(l.n), ms(l.p50), ms(l.p99), ms(l.max), fails)
	}
	if r.fanoutEnd != "" {
		p("\nThe server %s.\n", r.fanoutEnd)
	}
	p("\n")
}

func (r *report) stepsSection(b *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Steps in the background against synchronous ones\n\n")
	p("Echo steps (%s), %d clients each on a task of its own, %s of warm-up then %s measured, each mode on a fresh server once a round, the order turning:\n\n",
		r.cfg.echo, r.cfg.clients, r.cfg.warmup, r.cfg.duration)
	p("| round | mode | steps/s | server CPU a step | the bench's CPU a step | failures | 409s |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, s := range r.steps {
		p("| %d | %s | %s | %.0f µs | %.0f µs | %d | %d |\n", s.round, s.mode, count(int(math.Round(s.perSecond()))),
			float64(s.cpuPerStep())/1e3, float64(s.benchCPUPerStep())/1e3, s.failures, s.conflicts)
		if s.firstFailure != "" {
			p("| | | first failure: %s | | | | |\n", strings.ReplaceAll(s.firstFailure, "|", "\\|"))
		}
	}
	p("\nMedian of the per-round ratios (range):\n\n| ratio | steps/s | server CPU a step |\n|---|---:|---:|\n")
	cpu := func(s stepsRun) float64 { return float64(s.cpuPerStep()) }
	for _, m := range r.cfg.modes {
		if m == modeSync {
			continue
		}
		a, alo, ahi := medianRange(stepRatios(r.steps, m, modeSync, stepsRun.perSecond))
		c, clo, chi := medianRange(stepRatios(r.steps, m, modeSync, cpu))
		p("| %s / sync | %.2f× (%.2f–%.2f) | %.2f× (%.2f–%.2f) |\n", m, a, alo, ahi, c, clo, chi)
	}
	p("\n")
}

// stepRatios is, for each round with both modes, f of mode a over f of
// mode b.
func stepRatios(runs []stepsRun, a, b string, f func(stepsRun) float64) []float64 {
	var out []float64
	for _, x := range runs {
		if x.mode != a {
			continue
		}
		for _, y := range runs {
			if y.mode == b && y.round == x.round && f(y) > 0 {
				out = append(out, f(x)/f(y))
			}
		}
	}
	return out
}

// pooled is every latency of the rounds with n subscribers, sorted.
func pooled(rounds []fanoutRound, n int) []time.Duration {
	var all []time.Duration
	for _, f := range rounds {
		if f.subscribers == n {
			all = append(all, f.samples...)
		}
	}
	slices.Sort(all)
	return all
}

// perStream is the growth from before to after, in bytes, over n streams.
func perStream(after, before uint64, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return (float64(after) - float64(before)) / float64(n)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// count writes n with commas between thousands: 10,000.
func count(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}
