package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/client"
)

// A storm on one task: 3 × MaxTaskWaiters clients post steps to one task
// at once through package client. While the first step is held, the
// bound is what /metrics shows: MaxTaskWaiters requests waiting, the
// rest refused (503 with Retry-After). Once it is let go, every client's
// step is done, after retries: none lost, each run once, one at a time,
// in order.
//
// Each step is the caller plugin's request to a gate server of the
// test's; the gate holds the first until the test lets it go, and
// numbers them all.
func TestAStormOnOneTaskIsServedInFullByClientsThatRetry(t *testing.T) {
	const clients = 3 * protocol.MaxTaskWaiters
	var (
		seq, inFlight, mostInFlight atomic.Int64
		held                        = make(chan struct{})
		release                     = make(chan struct{})
	)
	gate := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := mostInFlight.Load(); n > m && !mostInFlight.CompareAndSwap(m, n); m = mostInFlight.Load() {
		}
		number := seq.Add(1)
		if number == 1 {
			close(held)
			<-release
		}
		fmt.Fprint(w, number)
	})
	letGo := sync.OnceFunc(func() { close(release) })
	t.Cleanup(letGo) // before the gate closes, should the test end early
	ts := serveCaller(t, "--allow-http", "caller="+gate.at("api.test", "/gate"), "--allow-private-host", "api.test",
		"--call-timeout", "2m")

	c, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	task, err := c.CreateTask(ctx, client.TaskRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := json.Marshal(map[string]any{"url": gate.at("api.test", "/gate"), "timeout_ms": 120_000})
	input := string(cmd)

	type result struct {
		step *client.Step
		err  error
	}
	results := make(chan result, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			s, err := c.ExecuteStep(ctx, task.TaskID, client.StepRequestBody{Input: &input})
			results <- result{s, err}
		})
	}

	// The first step holds the task; wait until MaxTaskWaiters wait for
	// it and every other client was refused at least once.
	select {
	case <-held:
	case r := <-results:
		letGo()
		t.Fatalf("a step ended before the first reached the gate: %+v, %v", r.step, r.err)
	}
	refusedOnce := float64(clients - 1 - protocol.MaxTaskWaiters)
	var m scrape
	eventually(t, time.Minute, "the storm to pile up", func() bool {
		m = ts.scrapeMetrics()
		return m.get("agentrt_task_waiters", "agent=caller") == protocol.MaxTaskWaiters &&
			m.get("agentrt_task_busy_refusals_total", "agent=caller") >= refusedOnce
	})
	if got := m.get("agentrt_task_waiters_limit"); got != protocol.MaxTaskWaiters {
		t.Errorf("agentrt_task_waiters_limit = %v, want %d", got, protocol.MaxTaskWaiters)
	}
	letGo()
	wg.Wait()
	close(results)

	var numbers []int
	ids := map[string]bool{}
	for r := range results {
		if r.err != nil {
			t.Errorf("a client's step failed: %v", r.err)
			continue
		}
		n := stepNumber(t, r.step)
		numbers = append(numbers, n)
		if ids[r.step.StepID] {
			t.Errorf("step %s was answered to two clients", r.step.StepID)
		}
		ids[r.step.StepID] = true
	}
	slices.Sort(numbers)
	want := make([]int, clients)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(numbers, want) {
		t.Errorf("the clients' steps ran as gate requests %v, want each of 1 to %d once", numbers, clients)
	}
	if n := mostInFlight.Load(); n != 1 {
		t.Errorf("%d steps of the task ran at once, want 1", n)
	}

	// The task holds exactly the clients' steps, in the order they ran.
	steps, err := c.AllSteps(ctx, task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	for i := range steps {
		if steps[i].Status != client.StatusCompleted {
			t.Errorf("step %s is %s", steps[i].StepID, steps[i].Status)
		}
		order = append(order, stepNumber(t, &steps[i]))
	}
	if !slices.Equal(order, want) {
		t.Errorf("the task lists its steps as gate requests %v, want 1 to %d in order", order, clients)
	}

	m = ts.scrapeMetrics()
	if got := m.get("agentrt_task_busy_refusals_total", "agent=caller"); got < refusedOnce {
		t.Errorf("agentrt_task_busy_refusals_total = %v, want at least %v", got, refusedOnce)
	}
	if got := m.get("agentrt_task_waiters", "agent=caller"); got != 0 {
		t.Errorf("agentrt_task_waiters = %v once every step is done, want 0", got)
	}
}

// stepNumber is the gate's number for the request a step of the caller
// plugin made.
func stepNumber(t *testing.T, s *client.Step) int {
	t.Helper()
	var o callOutcome
	if s.Output == nil || json.Unmarshal([]byte(*s.Output), &o) != nil || o.Status != 200 {
		t.Fatalf("step %s output %v, not the gate's answer", s.StepID, s.Output)
	}
	n, err := strconv.Atoi(o.Body)
	if err != nil {
		t.Fatalf("step %s: the gate answered %q", s.StepID, o.Body)
	}
	return n
}
