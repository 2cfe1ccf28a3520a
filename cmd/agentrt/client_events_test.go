package main

// "agentrt client step --async", "cancel" and "events" against a live
// agentrt (and, where a server must answer otherwise, small fakes).

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol/client"
)

// lineWaiter is a command's stdout that a test waits on, line by line.
type lineWaiter struct {
	mu   sync.Mutex
	text strings.Builder
	more chan struct{} // closed and replaced at each write
}

func newLineWaiter() *lineWaiter { return &lineWaiter{more: make(chan struct{})} }

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text.Write(p)
	close(w.more)
	w.more = make(chan struct{})
	return len(p), nil
}

// waitFor waits until a line printed holds each of parts, failing the
// test if the command ends first (done closed).
func (w *lineWaiter) waitFor(t *testing.T, done <-chan struct{}, parts ...string) {
	t.Helper()
	for {
		w.mu.Lock()
		more := w.more
		for _, line := range strings.Split(w.text.String(), "\n") {
			if containsAll(line, parts...) {
				w.mu.Unlock()
				return
			}
		}
		text := w.text.String()
		w.mu.Unlock()
		select {
		case <-more:
		case <-done:
			t.Fatalf("the command ended before printing a line with %q:\n%s", parts, text)
		case <-time.After(time.Minute): // a guard: a test that fails ends
			t.Fatalf("no line with %q after a minute:\n%s", parts, text)
		}
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// A step run in the background is printed running with its Location;
// "events --follow" prints it running, then cancelled by "cancel", then
// the task's deletion, which ends it.
func TestClientStepAsyncFollowedAndCancelled(t *testing.T) {
	ts := serve(t, watPlugin(t, "hostile"))
	url := "--url=" + ts.URL
	task := ts.createTask(`{}`).TaskID

	out := agentrtClient(t, url, "step", "--async", task, "!l") // a step that loops until it is stopped
	first, _, _ := strings.Cut(out, "\n")
	stepID := first[strings.LastIndex(first, " ")+1:]
	t.Cleanup(func() { // a test that fails leaves no step looping
		ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps/"+stepID+"/cancel", "", "")
	})
	if !strings.HasPrefix(first, "step  running  ") ||
		!strings.Contains(out, "\nlocation  "+ts.URL+"/ap/v1/agent/tasks/"+task+"/steps/"+stepID+"\n") {
		t.Fatalf("step --async printed:\n%s", out)
	}
	// A second, while it runs: refused, naming it.
	_, errOut, err := clientCall{}.run(t, url, "step", "--async", task, "--json")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), stepID) {
		t.Fatalf("a second step --async: %v (exit %d)\n%s", err, exitCode(err), errOut)
	}

	lines := newLineWaiter()
	done := make(chan struct{})
	var followErr error
	go func() {
		defer close(done)
		_, _, followErr = clientCall{stdout: lines}.run(t, url, "events", task, "--follow")
	}()
	lines.waitFor(t, done, "step.running", "step "+stepID)

	for range 2 { // a cancel done twice is done once
		out = agentrtClient(t, url, "cancel", task, stepID)
		if !strings.Contains(out, stepID) || !strings.Contains(out, `additional_output  {"error":{"code":"cancelled"`) {
			t.Fatalf("cancel printed:\n%s", out)
		}
	}
	lines.waitFor(t, done, "step.cancelled", "step "+stepID, `"code":"cancelled"`)
	ts.do("DELETE", "/ap/v1/agent/tasks/"+task, "", "").want(t, 204)
	<-done
	if followErr != nil {
		t.Fatalf("events --follow: %v", followErr)
	}
	printed := strings.Split(strings.TrimSpace(lines.text.String()), "\n")
	if last := printed[len(printed)-1]; !strings.Contains(last, "  task.deleted") {
		t.Errorf("last line %q, want the task's deletion", last)
	}
	wantIDsOnce(t, printed)

	// A step that ended cannot be cancelled: 409, exit 1.
	ts2 := ts.createTask(`{}`).TaskID
	ended := ts.step(ts2, `{"input":"x"}`).StepID
	_, _, err = clientCall{}.run(t, url, "cancel", ts2, ended)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "has ended") {
		t.Errorf("cancel of a step ended: %v (exit %d), want 409 saying it has ended", err, exitCode(err))
	}
}

// wantIDsOnce fails unless the event lines printed start with the ids
// 1, 2, ... each once, in order.
func wantIDsOnce(t *testing.T, lines []string) {
	t.Helper()
	for i, line := range lines {
		id, _, _ := strings.Cut(line, "  ")
		if id != strconv.Itoa(i+1) {
			t.Fatalf("line %d: %q, want id %d:\n%s", i+1, line, i+1, strings.Join(lines, "\n"))
		}
	}
}

func TestClientStepAsyncJSONHasTheStepAndItsLocation(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`).TaskID
	var v struct {
		Step     client.Step `json:"step"`
		Location string      `json:"location"`
	}
	clientJSON(t, &v, "--url", ts.URL, "step", "--async", task, "hello")
	if v.Step.StepID == "" || v.Location != ts.URL+"/ap/v1/agent/tasks/"+task+"/steps/"+v.Step.StepID ||
		(v.Step.Status != client.StatusRunning && v.Step.Status != client.StatusCompleted) {
		t.Fatalf("step --async --json: %+v", v)
	}
}

// Without --follow, events prints the task's events after --after to
// the newest, one line each, or as one JSON page.
func TestClientEventsPrintsTheLogToItsEnd(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	url := "--url=" + ts.URL
	task := ts.createTask(`{}`).TaskID
	var steps []string
	for i := range 3 {
		steps = append(steps, ts.step(task, fmt.Sprintf(`{"input":"step %d"}`, i)).StepID)
	}
	var page client.EventPage
	clientJSON(t, &page, url, "events", task)
	if len(page.Events) == 0 || page.Last != page.Events[len(page.Events)-1].ID {
		t.Fatalf("events --json: %+v, want the log to its newest", page)
	}
	out := agentrtClient(t, url, "events", task)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	wantIDsOnce(t, lines)
	if len(lines) != len(page.Events) {
		t.Errorf("%d lines, want one per event (%d):\n%s", len(lines), len(page.Events), out)
	}
	for _, id := range steps {
		if !strings.Contains(out, "step.completed    step "+id+"  {") {
			t.Errorf("no step.completed line for step %s:\n%s", id, out)
		}
	}
	out = agentrtClient(t, url, "events", task, "--after", strconv.FormatInt(page.Last-1, 10))
	if got := strings.Split(strings.TrimSpace(out), "\n"); len(got) != 1 || !strings.HasPrefix(got[0], strconv.FormatInt(page.Last, 10)+"  ") {
		t.Errorf("events --after %d printed:\n%s", page.Last-1, out)
	}
	_, _, err := clientCall{}.run(t, url, "events", "no-such-task")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "404") {
		t.Errorf("events of no task: %v (exit %d), want 404", err, exitCode(err))
	}
}

// A server that serves a few events a page is read page after page, each
// event printed once; a trimmed log says so first.
func TestClientEventsFollowsThePagesOfAServer(t *testing.T) {
	var mu sync.Mutex
	var afters []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		afters = append(afters, r.URL.Query().Get("after"))
		mu.Unlock()
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		page := client.EventPage{Events: []client.Event{}, Last: 7}
		if after < 2 {
			page.Trimmed, page.TrimmedThrough = 2, 2
			after = 2
		}
		for id := after + 1; id <= min(after+2, 7); id++ {
			page.Events = append(page.Events, client.Event{ID: int64(id), Type: "step.progress", TaskID: "t1", Data: json.RawMessage(`{"message":"m"}`)})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(page)
	}))
	defer srv.Close()
	out := agentrtClient(t, "--url", srv.URL, "events", "t1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || lines[0] != "-  trimmed: 2 events (progress and logs, up to id 2) are no longer held" {
		t.Fatalf("printed:\n%s", out)
	}
	for i, line := range lines[1:] {
		if !strings.HasPrefix(line, strconv.Itoa(i+3)+"  ") || !strings.Contains(line, `step.progress     {"message":"m"}`) {
			t.Errorf("line %q, want event %d", line, i+3)
		}
	}
	if fmt.Sprint(afters) != "[ 4 6]" {
		t.Errorf("asked for the events after %q, want from the start, then after each page's last", afters)
	}
}

// A server that does not run steps in the background answers the step
// ended: printed, and said on stderr.
func TestClientStepAsyncOfAServerWithoutItSaysItRanAtOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"task_id":"t1","step_id":"s1","name":null,"status":"completed","input":null,"output":"ok","artifacts":[],"is_last":false}`)
	}))
	defer srv.Close()
	out, errOut, err := clientCall{}.run(t, "--url", srv.URL, "step", "--async", "t1")
	if err != nil || !strings.HasPrefix(out, "step  completed  s1") || strings.Contains(out, "location") ||
		!strings.Contains(errOut, "the server ran the step at once") {
		t.Errorf("step --async: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

func TestClientEventsAndCancelCommandLineMistakes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "t1", "--after", "-1"}, "bad --after"},
		{[]string{"events"}, "usage: agentrt client events TASK_ID [flags]"},
		{[]string{"cancel", "t1"}, "usage: agentrt client cancel TASK_ID STEP_ID [flags]"},
		{[]string{"events", "t1", "--after", "x"}, "invalid value"},
	} {
		_, _, err := clientCall{}.run(t, append([]string{"--url", "http://127.0.0.1:1"}, tc.args...)...)
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) || exitCode(err) != 2 {
			t.Errorf("agentrt client %s: %v (exit %d), want a usage error saying %q", strings.Join(tc.args, " "), err, exitCode(err), tc.want)
		}
	}
	_, errOut, _ := clientCall{}.run(t, "events", "--help")
	if !strings.Contains(errOut, "Usage: agentrt client events TASK_ID [flags]") || !strings.Contains(errOut, "-follow") {
		t.Errorf("events --help:\n%s", errOut)
	}
}
