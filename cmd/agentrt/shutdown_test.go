package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// pendingStep is a step executed on another goroutine, as its client
// would, while the test stops the process under it.
type pendingStep struct {
	done chan struct{}
	res  *response
	err  error
}

func (p *process) startStep(taskID, body string) *pendingStep {
	ps := &pendingStep{done: make(chan struct{})}
	go func() {
		defer close(ps.done)
		ps.res, ps.err = sendRequest(p.url, "POST", "/ap/v1/agent/tasks/"+taskID+"/steps", "application/json", strings.NewReader(body))
	}()
	return ps
}

// waitRunning waits until the task has a step marked running, as any
// client sees it, and returns it.
func (p *process) waitRunning(taskID string) protocol.Step {
	p.t.Helper()
	var running protocol.Step
	eventually(p.t, time.Minute, "a step of the task marked running", func() bool {
		var list protocol.StepList
		p.do("GET", "/ap/v1/agent/tasks/"+taskID+"/steps", "", "").want(p.t, 200).decode(p.t, &list)
		for _, s := range list.Steps {
			if s.Status == protocol.StatusRunning {
				running = s
				return true
			}
		}
		return false
	})
	return running
}

// waitExit waits for the process to exit by itself and wants status 0.
func (p *process) waitExit() {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		p.t.Fatalf("agentrt did not exit:\n%s", p.log())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		p.t.Fatalf("agentrt exited with %d:\n%s", code, p.log())
	}
}

// refusesConnections reports whether the process's port takes no new
// connection.
func (p *process) refusesConnections() bool {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(p.url, "http://"), time.Second)
	if err == nil {
		conn.Close()
		return false
	}
	return true
}

// stepError reads a step's recorded failure.
func stepError(t *testing.T, st protocol.Step) (code, message string) {
	t.Helper()
	var out struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(st.AdditionalOutput, &out); err != nil {
		t.Fatalf("the step's additional_output %s: %v", st.AdditionalOutput, err)
	}
	return out.Error.Code, out.Error.Message
}

func TestSIGTERMLetsARunningStepFinish(t *testing.T) {
	data := t.TempDir()
	plugin := goPlugin(t, "testdata/plugins/faulty")
	p := startProcess(t, plugin, data, "--call-timeout", "2m", "--shutdown-timeout", "2m")
	task := protocol.Task{}
	p.do("POST", "/ap/v1/agent/tasks", "application/json", `{}`).want(t, 200).decode(t, &task)
	step := p.startStep(task.TaskID, `{"input":"sleep:1500"}`)
	running := p.waitRunning(task.TaskID)

	p.cmd.Process.Signal(syscall.SIGTERM)
	eventually(t, time.Minute, "the port refusing new connections", p.refusesConnections)
	<-step.done
	if step.err != nil {
		t.Fatalf("the step's client lost its answer: %v\n%s", step.err, p.log())
	}
	var st protocol.Step
	step.res.want(t, 200).decode(t, &st)
	if st.StepID != running.StepID || deref(st.Output) != "slept 1500 ms" {
		t.Errorf("the step answered %+v", st)
	}
	p.waitExit()
	if !strings.Contains(p.log(), "shutting down") {
		t.Errorf("the log does not say it shut down:\n%s", p.log())
	}

	p = startProcess(t, plugin, data)
	p.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID, "", "").want(t, 200).decode(t, &st)
	if st.Status != protocol.StatusCompleted || deref(st.Output) != "slept 1500 ms" {
		t.Errorf("after the restart the step reads %+v", st)
	}
}

func TestSIGTERMStopsAStepPastTheShutdownTimeoutAndRecordsWhy(t *testing.T) {
	data := t.TempDir()
	plugin := goPlugin(t, "testdata/plugins/faulty")
	p := startProcess(t, plugin, data, "--call-timeout", "2m", "--shutdown-timeout", "1s")
	task := protocol.Task{}
	p.do("POST", "/ap/v1/agent/tasks", "application/json", `{}`).want(t, 200).decode(t, &task)
	step := p.startStep(task.TaskID, `{"input":"sleep:120000"}`)
	running := p.waitRunning(task.TaskID)

	p.cmd.Process.Signal(syscall.SIGTERM)
	<-step.done
	if step.err != nil {
		t.Fatalf("the stopped step's client got no answer: %v\n%s", step.err, p.log())
	}
	msg := step.res.wantError(t, 503, "shut down")
	if body := step.res.json(t); body["code"] != protocol.EINTERRUPTED || body["step_id"] != running.StepID {
		t.Errorf("the stopped step answered %s", step.res.body)
	}
	p.waitExit()

	p = startProcess(t, plugin, data)
	var st protocol.Step
	p.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+running.StepID, "", "").want(t, 200).decode(t, &st)
	code, why := stepError(t, st)
	if st.Status != protocol.StatusCompleted || code != protocol.EINTERRUPTED || why != msg || !strings.Contains(why, "1s") {
		t.Errorf("after the restart the step reads %s %s %q; answered %q", st.Status, code, why, msg)
	}
	// The task stays usable.
	p.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{"input":"again"}`).want(t, 200)
}

func TestKill9DuringAStepThenRestart(t *testing.T) {
	data := t.TempDir()
	plugin := goPlugin(t, "testdata/plugins/faulty")
	p := startProcess(t, plugin, data, "--call-timeout", "2m")
	// A step the client executes, and a step the client planned: each
	// running when the process dies.
	var fresh, planned protocol.Task
	p.do("POST", "/ap/v1/agent/tasks", "application/json", `{}`).want(t, 200).decode(t, &fresh)
	p.do("POST", "/ap/v1/agent/tasks", "application/json", `{"steps":[{"name":"long","input":"sleep:120000"},"after"]}`).want(t, 200).decode(t, &planned)
	p.startStep(fresh.TaskID, `{"input":"sleep:120000"}`)
	p.startStep(planned.TaskID, `{}`)
	runningFresh := p.waitRunning(fresh.TaskID)
	runningPlanned := p.waitRunning(planned.TaskID)

	p.kill()

	p = startProcess(t, plugin, data)
	if !strings.Contains(p.log(), "interrupted") {
		t.Errorf("the start does not say it marked steps interrupted:\n%s", p.log())
	}
	for _, tc := range []struct {
		task protocol.Task
		step protocol.Step
	}{{fresh, runningFresh}, {planned, runningPlanned}} {
		var st protocol.Step
		p.do("GET", "/ap/v1/agent/tasks/"+tc.task.TaskID+"/steps/"+tc.step.StepID, "", "").want(t, 200).decode(t, &st)
		code, why := stepError(t, st)
		if st.Status != protocol.StatusCompleted || code != protocol.EINTERRUPTED || !strings.Contains(why, "interrupted") || st.Output != nil {
			t.Errorf("after kill -9 and a restart the step reads %s %s %q", st.Status, code, why)
		}
	}
	// Each task stays usable: the next step runs (for the planned task,
	// the step planned after the interrupted one).
	var next protocol.Step
	p.do("POST", "/ap/v1/agent/tasks/"+fresh.TaskID+"/steps", "application/json", `{"input":"again"}`).want(t, 200).decode(t, &next)
	if deref(next.Output) != "again" {
		t.Errorf("the next step answered %+v", next)
	}
	p.do("POST", "/ap/v1/agent/tasks/"+planned.TaskID+"/steps", "application/json", `{}`).want(t, 200).decode(t, &next)
	if deref(next.Name) != "after" {
		t.Errorf("the next step of the planned task is %q, want \"after\"", deref(next.Name))
	}
}

// agentrt keys changes the keys of a directory a server runs on, and the
// server sees each change at its next request.
func TestKeysCommandBesideARunningServer(t *testing.T) {
	data := t.TempDir()
	p := startProcess(t, examplePlugin(t, "echo-go"), data, "--access-log")
	p.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200)
	keys := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(agentrtBinary(t), append(append([]string{"keys"}, args...), "--data", data)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("agentrt keys %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	first, second := keys("create", "first"), keys("create", "second")
	p.do("GET", "/ap/v1/agent/tasks", "", "").wantError(t, 401, "API key")
	for _, k := range []string{first, second} {
		doWithKey(t, p.url, k).want(t, 200)
	}
	keys("revoke", "first")
	doWithKey(t, p.url, first).want(t, 401)
	doWithKey(t, p.url, second).want(t, 200)
	if list := keys("list"); !strings.Contains(list, "second") || strings.Contains(list, "first") || strings.Contains(list, second) {
		t.Errorf("keys list:\n%s", list)
	}
	if strings.Contains(p.log(), second[len(second)-20:]) {
		t.Errorf("the server's log holds a key")
	}
}

// doWithKey lists the tasks of the server at base with key.
func doWithKey(t *testing.T, base, key string) *response {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/ap/v1/agent/tasks", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &response{status: res.StatusCode, header: res.Header, body: b}
}
