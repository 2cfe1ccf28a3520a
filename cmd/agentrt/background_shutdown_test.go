package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// sendAsyncStep executes a step of the task in the background (Prefer:
// respond-async) on the server at base, from any goroutine.
func sendAsyncStep(base, prefix, taskID, body string) (*response, error) {
	req, err := http.NewRequest("POST", base+prefix+"/ap/v1/agent/tasks/"+taskID+"/steps", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "respond-async")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}, nil
}

// acceptedAsyncStep executes a step in the background and wants it accepted:
// 202, running.
func acceptedAsyncStep(t testing.TB, base, prefix, taskID, body string) protocol.Step {
	t.Helper()
	res, err := sendAsyncStep(base, prefix, taskID, body)
	if err != nil {
		t.Fatal(err)
	}
	var st protocol.Step
	res.want(t, http.StatusAccepted).decode(t, &st)
	if st.Status != protocol.StatusRunning {
		t.Fatalf("a step accepted in the background reads %s, want running", st.Status)
	}
	return st
}

// eventLogOf is the task's event log, read as a JSON page.
func eventLogOf(t testing.TB, base, prefix, taskID string) []protocol.Event {
	t.Helper()
	var page protocol.EventPage
	doRequest(t, base, "GET", prefix+"/ap/v1/agent/tasks/"+taskID+"/events?limit=1000", "", nil).want(t, 200).decode(t, &page)
	return page.Events
}

// wantEndedInterrupted wants the step recorded as failed with the code
// interrupted, its message holding why, and the task's events to end
// with a step.failed event of it saying the same.
func wantEndedInterrupted(t *testing.T, base, taskID, stepID, why string) {
	t.Helper()
	var st protocol.Step
	doRequest(t, base, "GET", "/ap/v1/agent/tasks/"+taskID+"/steps/"+stepID, "", nil).want(t, 200).decode(t, &st)
	code, msg := stepError(t, st)
	if st.Status != protocol.StatusCompleted || code != protocol.EINTERRUPTED || !strings.Contains(msg, why) || st.Output != nil {
		t.Errorf("the step reads %s, %s %q, output %v; want completed, %s, a message saying %q", st.Status, code, msg, st.Output, protocol.EINTERRUPTED, why)
	}
	evs := eventLogOf(t, base, "", taskID)
	if len(evs) == 0 {
		t.Fatal("the task has no events")
	}
	last := evs[len(evs)-1]
	var data struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(last.Data, &data)
	if last.Type != protocol.EventStepFailed || last.StepID != stepID || data.Error.Code != protocol.EINTERRUPTED || data.Error.Message != msg {
		t.Errorf("the task's last event is %s of step %q: %s; want %s of %s with code %s and the step's message", last.Type, last.StepID, last.Data, protocol.EventStepFailed, stepID, protocol.EINTERRUPTED)
	}
}

// A process killed while a step runs in the background leaves it marked
// running on disk; the next start records it interrupted, with a
// step.failed event, and the task takes its next step.
func TestKill9DuringABackgroundStepThenRestart(t *testing.T) {
	data := t.TempDir()
	plugin := goPlugin(t, "testdata/plugins/faulty")
	p := startProcess(t, plugin, data)
	var task protocol.Task
	p.do("POST", "/ap/v1/agent/tasks", "application/json", `{}`).want(t, 200).decode(t, &task)
	st := acceptedAsyncStep(t, p.url, "", task.TaskID, `{"input":"sleep:120000"}`)

	p.kill()

	p = startProcess(t, plugin, data)
	wantEndedInterrupted(t, p.url, task.TaskID, st.StepID, "killed or crashed")
	var next protocol.Step
	p.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{"input":"again"}`).want(t, 200).decode(t, &next)
	if deref(next.Output) != "again" {
		t.Errorf("the next step answered %+v", next)
	}
}

// SIGTERM gives a background step the shutdown timeout, as a request in
// progress gets, then stops it: it is recorded interrupted saying why,
// with its event, and the process exits after the timeout and its grace,
// not when the step would have ended. An event stream open meanwhile
// does not hold the shutdown: it ends.
func TestSIGTERMStopsABackgroundStepPastTheShutdownTimeoutAndRecordsWhy(t *testing.T) {
	data := t.TempDir()
	plugin := goPlugin(t, "testdata/plugins/faulty")
	p := startProcess(t, plugin, data, "--shutdown-timeout", "1s")
	var task protocol.Task
	p.do("POST", "/ap/v1/agent/tasks", "application/json", `{}`).want(t, 200).decode(t, &task)
	st := acceptedAsyncStep(t, p.url, "", task.TaskID, `{"input":"sleep:120000"}`) // two minutes: the whole test's wait for the exit is one

	stream := watchEvents(t, p.url, task.TaskID)
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.waitExit()
	select {
	case <-stream:
	case <-time.After(10 * time.Second):
		t.Errorf("the event stream was still open 10s after the process exited")
	}
	if log := p.log(); !strings.Contains(log, "background steps still running at the shutdown timeout") {
		t.Errorf("the log does not say it stopped the background step:\n%s", log)
	}

	p = startProcess(t, plugin, data)
	wantEndedInterrupted(t, p.url, task.TaskID, st.StepID, "the server shut down, and the step did not finish within the 1s it was given")
	p.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{"input":"again"}`).want(t, 200)
}

// SIGTERM lets a background step that ends within the shutdown timeout
// end, and records it as it ended.
func TestSIGTERMLetsABackgroundStepFinish(t *testing.T) {
	data := t.TempDir()
	plugin := goPlugin(t, "testdata/plugins/faulty")
	p := startProcess(t, plugin, data, "--shutdown-timeout", "2m")
	var task protocol.Task
	p.do("POST", "/ap/v1/agent/tasks", "application/json", `{}`).want(t, 200).decode(t, &task)
	st := acceptedAsyncStep(t, p.url, "", task.TaskID, `{"input":"sleep:1500"}`)

	p.cmd.Process.Signal(syscall.SIGTERM)
	p.waitExit()

	p = startProcess(t, plugin, data)
	var got protocol.Step
	p.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID, "", "").want(t, 200).decode(t, &got)
	if got.Status != protocol.StatusCompleted || deref(got.Output) != "slept 1500 ms" {
		t.Errorf("after SIGTERM and a restart the step reads %s %q %s, want completed \"slept 1500 ms\"", got.Status, deref(got.Output), got.AdditionalOutput)
	}
	evs := eventLogOf(t, p.url, "", task.TaskID)
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != protocol.EventStepCompleted {
		t.Errorf("the task's events %v do not end with %s", types, protocol.EventStepCompleted)
	}
}

// watchEvents opens the task's event stream and reads it; the channel is
// closed when the stream ends.
func watchEvents(t *testing.T, base, taskID string) <-chan struct{} {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/ap/v1/agent/tasks/"+taskID+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Fatalf("the event stream answered %d", res.StatusCode)
	}
	// Its replay read, the stream is open and parked.
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "event: "+protocol.EventStepRunning) {
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer res.Body.Close()
		io.Copy(io.Discard, res.Body)
	}()
	t.Cleanup(func() { res.Body.Close() })
	return ended
}
