package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// Cancelling a running step end to end: the stall plugin
// (testdata/plugins/stall) holds its step in a loop of its own code, in
// an outbound request that is never answered, or in an hour's sleep, and
// a cancel must stop its guest, record the step cancelled, free its
// instance and leave its task usable.

func stallPlugin(t testing.TB) string { return goPlugin(t, "testdata/plugins/stall") }

// cancelBound bounds the wait for a cancelled step to stop: far more than
// stopping takes (3 to 60 ms on a loaded 2-core machine, under -race;
// each case logs its figure under -v), far less than the step's time
// limit, so that a step that ran on to its limit fails the test rather
// than passing as cancelled. It is a bound on a wait, not a speed target.
const cancelBound = 5 * time.Second

// stallClient sends a client's requests for the stall agent under base
// ("" or "/agents/NAME") with header (an API key, or nil).
type stallClient struct {
	ts     *testServer
	base   string
	header http.Header
}

func (c stallClient) task(taskID string) string { return c.base + "/ap/v1/agent/tasks/" + taskID }

func (c stallClient) do(method, path, body string) *response {
	c.ts.t.Helper()
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	return c.ts.doWith(method, path, c.header, ct, []byte(body))
}

// createTask creates a task and returns its id.
func (c stallClient) createTask() string {
	c.ts.t.Helper()
	var task protocol.Task
	c.do("POST", c.base+"/ap/v1/agent/tasks", `{}`).want(c.ts.t, 200).decode(c.ts.t, &task)
	return task.TaskID
}

// stepBody is a step request of input.
func stepBody(input string) string {
	b, _ := json.Marshal(map[string]string{"input": input})
	return string(b)
}

// runningStep is a step of the stall plugin's, blocked.
type runningStep struct {
	taskID, stepID string
	// answer is a synchronous step's own request, answered once the step
	// ends; nil for one run in the background.
	answer *pendingRequest
}

// stall starts a step of input ("loop", "http URL", "sleep") on the task,
// synchronously or in the background, and returns it once its handler
// has logged that it is about to block: the step.log event its guest
// writes just before, read from the task's events.
func (c stallClient) stall(taskID, input string, async bool) runningStep {
	c.ts.t.Helper()
	st := runningStep{taskID: taskID}
	if async {
		req, _ := http.NewRequest("POST", c.ts.URL+c.task(taskID)+"/steps", strings.NewReader(stepBody(input)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", "respond-async")
		for k, v := range c.header {
			req.Header[k] = v
		}
		res := sendWith(c.ts.t, req)
		var step protocol.Step
		res.want(c.ts.t, http.StatusAccepted).decode(c.ts.t, &step)
		st.stepID = step.StepID
	} else {
		st.answer = c.startStep(context.Background(), taskID, input)
	}
	mode, _, _ := strings.Cut(input, " ")
	ev := c.waitEvent(taskID, st.answer, "the guest's "+mode, func(ev protocol.Event) bool {
		return ev.Type == protocol.EventStepLog && strings.Contains(string(ev.Data), "stalling: "+mode)
	})
	if st.stepID != "" && ev.StepID != st.stepID {
		c.ts.t.Fatalf("the guest logged as step %s, want %s", ev.StepID, st.stepID)
	}
	st.stepID = ev.StepID
	return st
}

// startStep sends a synchronous step request on another goroutine, under
// ctx, as another client would.
func (c stallClient) startStep(ctx context.Context, taskID, input string) *pendingRequest {
	p := &pendingRequest{t: c.ts.t, done: make(chan struct{})}
	req, _ := http.NewRequestWithContext(ctx, "POST", c.ts.URL+c.task(taskID)+"/steps", strings.NewReader(stepBody(input)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range c.header {
		req.Header[k] = v
	}
	go func() {
		defer close(p.done)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			p.err = err
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		p.res, p.err = &response{status: res.StatusCode, header: res.Header, body: b}, err
	}()
	return p
}

// sendWith sends req and reads its answer.
func sendWith(t testing.TB, req *http.Request) *response {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}
}

// waitEvent reads the task's events (the JSON page) until one matches,
// and returns it; it fails the test if pending, a request that should
// still wait, is answered first.
func (c stallClient) waitEvent(taskID string, pending *pendingRequest, what string, match func(protocol.Event) bool) protocol.Event {
	c.ts.t.Helper()
	var after int64
	deadline := time.Now().Add(time.Minute)
	for {
		var page protocol.EventPage
		c.do("GET", fmt.Sprintf("%s/events?after=%d", c.task(taskID), after), "").want(c.ts.t, 200).decode(c.ts.t, &page)
		for _, ev := range page.Events {
			if match(ev) {
				return ev
			}
			after = ev.ID
		}
		if pending != nil && pending.answered() {
			res := pending.wait()
			c.ts.t.Fatalf("waiting for %s: the step was answered first: %d %s", what, res.status, res.body)
		}
		if time.Now().After(deadline) {
			c.ts.t.Fatalf("waiting for %s: no such event in a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cancel cancels the step, giving up after cancelBound, and returns the
// answer and how long it took.
func (c stallClient) cancel(taskID, stepID string) (*response, time.Duration) {
	c.ts.t.Helper()
	ctx, stop := context.WithTimeout(context.Background(), cancelBound)
	defer stop()
	req, _ := http.NewRequestWithContext(ctx, "POST", c.ts.URL+c.task(taskID)+"/steps/"+stepID+"/cancel", nil)
	for k, v := range c.header {
		req.Header[k] = v
	}
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.ts.t.Fatalf("cancel of step %s: %v (not answered within %s: the step did not stop)", stepID, err, cancelBound)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.ts.t.Fatal(err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}, time.Since(start)
}

// wantCancelled checks that st reads as a step cancelled: completed with
// no output, its additional_output the error "cancelled".
func wantCancelled(t testing.TB, what string, st protocol.Step, stepID string) {
	t.Helper()
	code, _ := protocol.FailureCode(st.AdditionalOutput)
	if st.StepID != stepID || st.Status != protocol.StatusCompleted || st.Output != nil || code != protocol.ECANCELLED {
		t.Fatalf("%s: %+v (additional_output %s); want step %s completed, its error cancelled", what, st, st.AdditionalOutput, stepID)
	}
}

// wantSyncCancelled checks a synchronous step's own answer to its
// cancel: 409, the code cancelled, naming the step.
func wantSyncCancelled(t testing.TB, res *response, stepID string) {
	t.Helper()
	var body struct {
		Code   string `json:"code"`
		StepID string `json:"step_id"`
	}
	res.want(t, http.StatusConflict).decode(t, &body)
	if body.Code != protocol.ECANCELLED || body.StepID != stepID {
		t.Fatalf("the cancelled step's own request was answered %s; want the code cancelled naming step %s", res.body, stepID)
	}
}

// serveStall serves the stall plugin as the agent "stall" with a call
// limit of a minute, allowed to reach every path of server under
// api.test.
func serveStall(t testing.TB, server *loopbackServer, args ...string) *testServer {
	t.Helper()
	cfg, err := parseRunFlags(append([]string{stallPlugin(t), "--name", "stall", "--data", t.TempDir(), "--call-timeout", "1m",
		"--cache", filepath.Join(buildDir, "cache"),
		"--allow-http", "stall=" + server.at("api.test", "/"), "--allow-private-host", "api.test"}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.egress.resolver = testNames
	return startServer(t, cfg)
}

// silentServer is a server on loopback that never answers: each request
// it takes is told on arrived, with a channel closed once the request's
// context ends (its client closed the connection).
func silentServer(t testing.TB) (server *loopbackServer, arrived <-chan chan struct{}) {
	t.Helper()
	quit := make(chan struct{})
	requests := make(chan chan struct{}, 16)
	server = startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		gone := make(chan struct{})
		requests <- gone
		select {
		case <-r.Context().Done():
			close(gone)
		case <-quit:
		}
	})
	t.Cleanup(func() { close(quit) }) // before the server's Close, which waits for its handlers
	return server, requests
}

func TestCancelStopsAGuestLoopingSleepingOrWaitingOnTheNetwork(t *testing.T) {
	for _, mode := range []string{"loop", "http", "sleep"} {
		for _, async := range []bool{false, true} {
			name := mode + map[bool]string{false: "/sync", true: "/async"}[async]
			t.Run(name, func(t *testing.T) {
				// A server each: a step that did not stop fails its own
				// case, not the next one's count of instances.
				server, arrived := silentServer(t)
				ts := serveStall(t, server)
				c := stallClient{ts: ts}
				input := mode
				if mode == "http" {
					input = "http " + server.at("api.test", "/never")
				}
				taskID := c.createTask()
				st := c.stall(taskID, input, async)
				var gone chan struct{}
				if mode == "http" {
					select {
					case gone = <-arrived:
					case <-time.After(time.Minute):
						t.Fatal("the guest's request never reached the server")
					}
				}
				if n := ts.scrapeMetrics().get("agentrt_plugin_instances"); n != 1 {
					t.Fatalf("%v plugin instances run while the step is blocked, want 1", n)
				}

				res, took := c.cancel(taskID, st.stepID)
				var cancelled protocol.Step
				res.want(t, 200).decode(t, &cancelled)
				wantCancelled(t, "the cancel's answer", cancelled, st.stepID)
				t.Logf("%s: the cancel was answered, the step stopped and recorded, in %s", name, took.Round(100*time.Microsecond))
				if gone != nil {
					start := time.Now()
					select {
					case <-gone:
						t.Logf("%s: the server saw its request's connection closed %s after the cancel's answer", name, time.Since(start).Round(100*time.Microsecond))
					case <-time.After(cancelBound):
						t.Fatalf("the outbound request was still open %s after the step was cancelled", cancelBound)
					}
				}
				if st.answer != nil {
					wantSyncCancelled(t, st.answer.wait(), st.stepID)
				}
				// The guest is gone: no instance runs, on the gauge read
				// after the cancel was answered.
				if n := ts.scrapeMetrics().get("agentrt_plugin_instances"); n != 0 {
					t.Errorf("%v plugin instances run after the cancel was answered, want 0", n)
				}
				var got protocol.Step
				c.do("GET", c.task(taskID)+"/steps/"+st.stepID, "").want(t, 200).decode(t, &got)
				wantCancelled(t, "GET of the cancelled step", got, st.stepID)
				c.waitEvent(taskID, nil, "step.cancelled", func(ev protocol.Event) bool {
					return ev.Type == protocol.EventStepCancelled && ev.StepID == st.stepID
				})

				// The task stays usable: its next step runs.
				var next protocol.Step
				c.do("POST", c.task(taskID)+"/steps", stepBody("next")).want(t, 200).decode(t, &next)
				if next.Output == nil || *next.Output != "ok" || next.StepID == st.stepID {
					t.Fatalf("the step after the cancelled one: %+v", next)
				}
			})
		}
	}
}

// as is ts with its helpers reporting to t, a subtest.
func (ts *testServer) as(t testing.TB) *testServer {
	sub := *ts
	sub.t = t
	return &sub
}

func TestCancelAnswersTheStepAgainAndRefusesAnEndedUnknownOrForbiddenStep(t *testing.T) {
	dir := t.TempDir()
	code := pluginBytes(t, stallPlugin(t))
	for _, name := range []string{"stall", "other"} {
		putFile(t, filepath.Join(dir, name+".wasm"), code)
	}
	ts := serveDir(t, dir, func(c *runConfig) { c.defaultAgent = "stall"; c.callTimeout = time.Minute })
	mine, theirs := bearer(ts.createKey("mine", "stall")), bearer(ts.createKey("theirs", "other"))
	for _, base := range []string{"", "/agents/stall"} {
		for _, async := range []bool{false, true} {
			name := "root"
			if base != "" {
				name = "agents"
			}
			name += map[bool]string{false: "/sync", true: "/async"}[async]
			t.Run(name, func(t *testing.T) {
				ts := ts.as(t)
				c := stallClient{ts: ts, base: base, header: mine}
				taskID := c.createTask()
				st := c.stall(taskID, "loop", async)

				// Another agent's key may not cancel it, nor learn
				// whether it exists; the step runs on.
				other := stallClient{ts: ts, base: base, header: theirs}
				other.do("POST", c.task(taskID)+"/steps/"+st.stepID+"/cancel", "").wantError(t, http.StatusForbidden, "")
				var running protocol.Step
				c.do("GET", c.task(taskID)+"/steps/"+st.stepID, "").want(t, 200).decode(t, &running)
				if running.Status != protocol.StatusRunning {
					t.Fatalf("after a forbidden cancel the step reads %s, want it running", running.Status)
				}

				first, _ := c.cancel(taskID, st.stepID)
				var a, b protocol.Step
				first.want(t, 200).decode(t, &a)
				wantCancelled(t, "the first cancel", a, st.stepID)
				if st.answer != nil {
					wantSyncCancelled(t, st.answer.wait(), st.stepID)
				}
				second, _ := c.cancel(taskID, st.stepID)
				second.want(t, 200).decode(t, &b)
				wantCancelled(t, "the second cancel", b, st.stepID)
				if string(a.AdditionalOutput) != string(b.AdditionalOutput) || !a.CreatedAt.Equal(b.CreatedAt) {
					t.Errorf("a second cancel answers %s, the first %s: want the same step", second.body, first.body)
				}

				var done protocol.Step
				c.do("POST", c.task(taskID)+"/steps", stepBody("next")).want(t, 200).decode(t, &done)
				res, _ := c.cancel(taskID, done.StepID)
				res.wantError(t, http.StatusConflict, "has ended")
				res, _ = c.cancel(taskID, "0190d8a6-0000-7000-8000-000000000000")
				res.wantError(t, http.StatusNotFound, "")
			})
		}
	}
}

func TestCancelOnDisconnectStopsASyncStepWhoseClientWentOnlyWhenTheOperatorAsks(t *testing.T) {
	for _, cancelOn := range []bool{true, false} {
		t.Run(map[bool]string{true: "with", false: "without"}[cancelOn], func(t *testing.T) {
			// The call limit is short, so that a step left to run ends
			// soon: as a timeout, which a cancel must not be read as.
			args := []string{stallPlugin(t), "--data", t.TempDir(), "--cache", filepath.Join(buildDir, "cache"), "--call-timeout", "3s"}
			if cancelOn {
				args = append(args, "--cancel-on-disconnect")
			}
			cfg, err := parseRunFlags(args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			ts := startServer(t, cfg)
			c := stallClient{ts: ts}
			taskID := c.createTask()
			ctx, hangUp := context.WithCancel(context.Background())
			defer hangUp()
			answer := c.startStep(ctx, taskID, "loop")
			running := c.waitEvent(taskID, answer, "the guest's loop", func(ev protocol.Event) bool {
				return ev.Type == protocol.EventStepLog && strings.Contains(string(ev.Data), "stalling: loop")
			})
			start := time.Now()
			hangUp()
			<-answer.done
			end := c.waitEvent(taskID, nil, "the step's end", func(ev protocol.Event) bool {
				return ev.StepID == running.StepID && (ev.Type == protocol.EventStepCancelled || ev.Type == protocol.EventStepFailed)
			})
			t.Logf("the step ended (%s) %s after its client went", end.Type, time.Since(start).Round(100*time.Microsecond))
			var st protocol.Step
			c.do("GET", c.task(taskID)+"/steps/"+running.StepID, "").want(t, 200).decode(t, &st)
			code, _ := protocol.FailureCode(st.AdditionalOutput)
			switch {
			case cancelOn && (code != protocol.ECANCELLED || end.Type != protocol.EventStepCancelled):
				t.Fatalf("with --cancel-on-disconnect, the step whose client went reads %s (event %s); want it cancelled", st.AdditionalOutput, end.Type)
			case !cancelOn && (code != protocol.ETIMEOUT || end.Type != protocol.EventStepFailed):
				t.Fatalf("without --cancel-on-disconnect, the step whose client went reads %s (event %s); want it run to its time limit", st.AdditionalOutput, end.Type)
			}
			if n := ts.scrapeMetrics().get("agentrt_plugin_instances"); n != 0 {
				t.Errorf("%v plugin instances run after the step ended, want 0", n)
			}
			var next protocol.Step
			c.do("POST", c.task(taskID)+"/steps", stepBody("next")).want(t, 200).decode(t, &next)
			if next.Output == nil || *next.Output != "ok" {
				t.Fatalf("the step after: %+v", next)
			}
		})
	}
}
