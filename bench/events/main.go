// Command events measures what agentrt's long-running steps and their
// events cost, against a real agentrt on this machine, in one run:
//
//   - idle: -subscribers event streams (10,000) held open on one task,
//     each read to its first event: the server's resident memory split as
//     the kernel counts it (RssAnon, RssFile), before, then and after
//     -hold (in which every stream is written a heartbeat), its open
//     descriptors, and the memory a stream costs;
//   - fan-out: the time from a plugin's progress call to each of 1 and of
//     1,000 subscribers reading the event (p50, p99): the plugin
//     (bench/events/plugin) reports -reports times, -pause apart, its
//     own wall clock in nanoseconds in each message, and each subscriber
//     takes the time it reads the event less that;
//   - steps: echo steps a second and the server's CPU a step, -clients
//     clients each on a task of its own, in -modes: sync (POST, the
//     answer), async (POST with Prefer: respond-async, 202, then the
//     task's event stream, open for the whole run, read to the step's
//     step.completed), async+get (that, then GET of the step: all a
//     synchronous answer gives) and sync+events (sync, the stream read to
//     the step's end as async reads it: what watching costs, apart from
//     running in the background); each mode on a fresh server once a
//     round, the order turning by round.
//
// It prints a report in Markdown that judges the targets
// (bench/README.md, "Long-running steps and their events", has the
// figures):
//
//	make build/agentrt build/plugins/echo-rust.wasm build/plugins/bench-progress-go.wasm
//	go run ./bench/events                                 # about 3.5 minutes
//	go run ./bench/events -parts idle -subscribers 15000  # one part
//	go run ./bench/events -- --log-level debug            # flags for agentrt run
//
// Every server is its own process ("agentrt run PLUGIN", a free loopback
// port, a fresh data directory under -tmp, removed at the end); the
// bench holds the streams itself, each a connection of its own with its
// request written by hand, so the bench needs -subscribers open files
// (ulimit -n) and so does the server. The bench and the server share the
// machine's cores: the latencies include the bench's own scheduling.
package main

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	agentrt, echo, progressPlugin, tmp, out string
	serverFlags                             []string
	parts                                   []string
	subscribers, openConcurrency            int
	hold                                    time.Duration
	fanouts                                 []int
	reports, fanoutRounds                   int
	pause                                   time.Duration
	clients, rounds                         int
	modes                                   []string
	warmup, duration                        time.Duration
}

func main() {
	var c config
	var parts, fanouts, modes string
	flag.StringVar(&c.agentrt, "agentrt", "build/agentrt", "the agentrt binary")
	flag.StringVar(&c.echo, "echo", "build/plugins/echo-rust.wasm", "the echo plugin the idle and steps parts serve")
	flag.StringVar(&c.progressPlugin, "progress-plugin", "build/plugins/bench-progress-go.wasm", "the plugin the fan-out part serves (bench/events/plugin)")
	flag.StringVar(&c.tmp, "tmp", os.TempDir(), "where the servers' data directories go: a real disk, not tmpfs (agentrt fsyncs)")
	flag.StringVar(&c.out, "out", "", "also write the report to this file")
	flag.StringVar(&parts, "parts", "idle,fanout,steps", "the parts to run, comma-separated")
	flag.IntVar(&c.subscribers, "subscribers", 10_000, "idle: event streams held on one task")
	flag.IntVar(&c.openConcurrency, "open-concurrency", 64, "event streams being opened at once")
	flag.DurationVar(&c.hold, "hold", 20*time.Second, "idle: how long the streams are held once open (agentrt's heartbeat is 15 s of silence)")
	flag.StringVar(&fanouts, "fanouts", "1,1000", "fan-out: the numbers of subscribers, comma-separated")
	flag.IntVar(&c.reports, "reports", 100, "fan-out: progress reports a step makes")
	flag.DurationVar(&c.pause, "pause", 20*time.Millisecond, "fan-out: the pause between reports")
	flag.IntVar(&c.fanoutRounds, "fanout-rounds", 3, "fan-out: rounds, each of every number of subscribers")
	flag.IntVar(&c.clients, "clients", 32, "steps: clients, each with a task of its own")
	flag.StringVar(&modes, "modes", strings.Join(stepModes, ","), "steps: the modes, comma-separated: "+strings.Join(stepModes, ", "))
	flag.IntVar(&c.rounds, "rounds", 3, "steps: rounds, each of every mode on a fresh server")
	flag.DurationVar(&c.warmup, "warmup", 3*time.Second, "steps: load before the measured span")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "steps: the measured span")
	flag.Func("server-flag", "a flag for agentrt run (repeatable; so are the arguments after --)", func(s string) error {
		c.serverFlags = append(c.serverFlags, s)
		return nil
	})
	flag.Parse()
	c.serverFlags = append(c.serverFlags, flag.Args()...)
	c.parts = strings.Split(parts, ",")
	c.modes = strings.Split(modes, ",")
	for _, f := range strings.Split(fanouts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "events: -fanouts: %q is not a number of subscribers\n", f)
			os.Exit(2)
		}
		c.fanouts = append(c.fanouts, n)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "events:", err)
		os.Exit(1)
	}
}

func (c config) check() error {
	for _, p := range c.parts {
		if p != "idle" && p != "fanout" && p != "steps" {
			return fmt.Errorf("-parts: %q is not idle, fanout or steps", p)
		}
	}
	for _, m := range c.modes {
		if !slices.Contains(stepModes, m) {
			return fmt.Errorf("-modes: %q is not one of %s", m, strings.Join(stepModes, ", "))
		}
	}
	if slices.Contains(c.parts, "steps") && !slices.Contains(c.modes, modeSync) {
		return errors.New("-modes must have sync: the others are measured against it")
	}
	switch {
	case c.subscribers < 1 || c.openConcurrency < 1:
		return errors.New("-subscribers and -open-concurrency must be at least 1")
	case c.reports < 1 || c.fanoutRounds < 1 || c.pause < 0:
		return errors.New("-reports and -fanout-rounds must be at least 1, -pause at least 0")
	case c.clients < 1 || c.rounds < 1 || c.duration <= 0 || c.warmup < 0:
		return errors.New("-clients and -rounds must be at least 1, -duration above 0, -warmup at least 0")
	}
	return nil
}

func run(c config) error {
	if err := c.check(); err != nil {
		return err
	}
	rep := &report{started: time.Now(), command: commandLine(), commit: gitCommit(), binary: binaryID(c.agentrt),
		cores: runtime.NumCPU(), model: cpuModel(), loadStart: loadAverage(), cfg: c}
	var err error
	if slices.Contains(c.parts, "idle") {
		if rep.idle, err = measureIdle(c); err != nil {
			return fmt.Errorf("idle streams: %w", err)
		}
	}
	if slices.Contains(c.parts, "fanout") {
		if rep.fanout, rep.fanoutEnd, err = measureFanout(c); err != nil {
			return fmt.Errorf("fan-out: %w", err)
		}
	}
	if slices.Contains(c.parts, "steps") {
		if rep.steps, err = measureSteps(c); err != nil {
			return fmt.Errorf("steps: %w", err)
		}
	}
	rep.loadEnd = loadAverage()
	text := rep.markdown()
	fmt.Print(text)
	if c.out != "" {
		return os.WriteFile(c.out, []byte(text), 0o644)
	}
	return nil
}

func commandLine() string {
	var b strings.Builder
	b.WriteString("go run ./bench/events")
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

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "events: "+format+"\n", args...) }
