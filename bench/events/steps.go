package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The ways a client runs a step, as the throughput part measures them.
const (
	// modeSync: POST the step and read the answer (200, the output).
	modeSync = "sync"
	// modeAsync: POST it with Prefer: respond-async (202), then read the
	// task's event stream, open for the whole run, to the step's end.
	modeAsync = "async"
	// modeAsyncGet: as modeAsync, then GET the step for its output: all
	// that the sync answer gives.
	modeAsyncGet = "async+get"
	// modeSyncEvents: as modeSync, the task's event stream open and read
	// to the step's end as in modeAsync: what watching costs, apart from
	// running in the background.
	modeSyncEvents = "sync+events"
)

var stepModes = []string{modeSync, modeAsync, modeAsyncGet, modeSyncEvents}

// stepsRun is one mode's run on a fresh server.
type stepsRun struct {
	mode         string
	round        int
	steps        int64         // steps ended in the measured span
	span         time.Duration // the measured span
	cpu          time.Duration // the server's CPU in it
	benchCPU     time.Duration // the bench's own (the clients')
	failures     int64
	conflicts    int64 // 409s: a step sent while the last one was still running
	firstFailure string
	serverEnd    string
}

func (r stepsRun) perSecond() float64 { return float64(r.steps) / r.span.Seconds() }

func (r stepsRun) cpuPerStep() time.Duration { return perStep(r.cpu, r.steps) }

func (r stepsRun) benchCPUPerStep() time.Duration { return perStep(r.benchCPU, r.steps) }

func perStep(d time.Duration, steps int64) time.Duration {
	if steps == 0 {
		return 0
	}
	return d / time.Duration(steps)
}

// measureSteps runs every mode once a round, the order turning by round,
// each on a fresh server of the echo plugin with a fresh data directory.
func measureSteps(c config) ([]stepsRun, error) {
	var out []stepsRun
	clk := clockTicks()
	for r := range c.rounds {
		for _, mode := range turn(c.modes, r) {
			run, err := runSteps(c, mode, clk)
			if err != nil {
				return out, fmt.Errorf("round %d, %s: %w", r+1, mode, err)
			}
			run.round = r + 1
			out = append(out, run)
			logf("steps round %d, %-9s %7.0f steps/s, server CPU %4.0f µs a step, %d failures, %d conflicts",
				run.round, mode, run.perSecond(), float64(run.cpuPerStep())/1e3, run.failures, run.conflicts)
		}
	}
	return out, nil
}

// stepClient is one client of a throughput run: its task, and its event
// stream in the async modes.
type stepClient struct {
	task   string
	stream *stream
}

func runSteps(c config, mode string, clk float64) (res stepsRun, err error) {
	res.mode = mode
	srv, err := startServer(c.agentrt, c.echo, c.tmp, c.serverFlags)
	if err != nil {
		return res, err
	}
	// The server stops after the clients: the run's figures are taken.
	defer func() { res.serverEnd = srv.stop() }()
	ctx := context.Background()
	a := newAPI(srv.url, c.clients)
	clients := make([]stepClient, c.clients)
	defer func() {
		for _, cl := range clients {
			if cl.stream != nil {
				cl.stream.close()
			}
		}
	}()
	for i := range clients {
		if clients[i].task, err = a.createTask(ctx); err != nil {
			return res, err
		}
		if mode == modeSync {
			continue
		}
		s, err := openStream(ctx, srv.host, srv.eventsPath(clients[i].task))
		if err != nil {
			return res, err
		}
		clients[i].stream = s
		if _, err := s.next(time.Minute); err != nil { // "retry"
			return res, fmt.Errorf("the first frame of a stream: %w", err)
		}
	}

	var stop, measuring atomic.Bool
	var steps, failures, conflicts atomic.Int64
	var failMu sync.Mutex
	fail := func(err error) {
		failures.Add(1)
		failMu.Lock()
		if res.firstFailure == "" {
			res.firstFailure = err.Error()
		}
		failMu.Unlock()
	}
	body := stepBody("hi")
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for !stop.Load() {
				err := oneStep(ctx, a, cl, mode, body, &buf)
				var se *statusError
				switch {
				case errors.As(err, &se) && se.status == http.StatusConflict:
					conflicts.Add(1)
					continue
				case err != nil:
					fail(err)
					time.Sleep(10 * time.Millisecond) // a failing server is not spun on
					continue
				}
				if measuring.Load() {
					steps.Add(1)
				}
			}
		}()
	}
	time.Sleep(c.warmup)
	ticks0, err := readCPUTicks(srv.pid())
	if err != nil {
		stop.Store(true)
		wg.Wait()
		return res, err
	}
	self0, _ := readCPUTicks(os.Getpid())
	t0 := time.Now()
	measuring.Store(true)
	time.Sleep(c.duration)
	measuring.Store(false)
	res.span = time.Since(t0)
	ticks1, err := readCPUTicks(srv.pid())
	self1, _ := readCPUTicks(os.Getpid())
	stop.Store(true)
	wg.Wait()
	if err != nil {
		return res, err
	}
	res.steps, res.failures, res.conflicts = steps.Load(), failures.Load(), conflicts.Load()
	res.cpu = time.Duration(float64(ticks1-ticks0) / clk * float64(time.Second))
	res.benchCPU = time.Duration(float64(self1-self0) / clk * float64(time.Second))
	return res, nil
}

// oneStep runs one echo step of cl's task as mode says, and checks its
// output is its input.
func oneStep(ctx context.Context, a *api, cl stepClient, mode string, body []byte, buf *bytes.Buffer) error {
	if mode == modeSync || mode == modeSyncEvents {
		s, err := a.syncStep(ctx, cl.task, body, buf)
		if err != nil {
			return err
		}
		if err := checkEcho(s); err != nil || mode == modeSync {
			return err
		}
		return waitStepEnd(cl.stream, s.StepID, 30*time.Second)
	}
	s, err := a.asyncStep(ctx, cl.task, body, buf)
	if err != nil {
		return err
	}
	if err := waitStepEnd(cl.stream, s.StepID, 30*time.Second); err != nil {
		return err
	}
	if mode == modeAsyncGet {
		got, err := a.getStep(ctx, cl.task, s.StepID, buf)
		if err != nil {
			return err
		}
		return checkEcho(got)
	}
	return nil
}

func checkEcho(s stepAnswer) error {
	if s.Status != "completed" || s.Output == nil || *s.Output != "hi" {
		out := "null"
		if s.Output != nil {
			out = *s.Output
		}
		return fmt.Errorf("step %s: status %q, output %q, not completed with \"hi\"", s.StepID, s.Status, out)
	}
	return nil
}

// waitStepEnd reads s until the event that ends step, within d: an error
// unless it is step.completed.
func waitStepEnd(s *stream, step string, d time.Duration) error {
	s.conn.SetReadDeadline(time.Now().Add(d))
	defer s.conn.SetReadDeadline(time.Time{})
	for {
		f, err := s.sse.next()
		if err != nil {
			return fmt.Errorf("wait for step %s to end: %w", step, err)
		}
		if !stepEnded(f.Event) {
			continue
		}
		var e event
		if err := json.Unmarshal([]byte(f.Data), &e); err != nil {
			return fmt.Errorf("decode a %s event: %w", f.Event, err)
		}
		if e.StepID != step {
			continue
		}
		if f.Event != "step.completed" {
			return fmt.Errorf("step %s ended with %s: %.300s", step, f.Event, f.Data)
		}
		return nil
	}
}
