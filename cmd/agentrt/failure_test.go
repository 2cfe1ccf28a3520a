package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// failedStep checks a plugin failure response and the step it was recorded
// on, and returns that step.
func failedStep(t *testing.T, ts *testServer, taskID string, res *response, status int, cause string) protocol.Step {
	t.Helper()
	res.wantError(t, status, cause)
	stepID, _ := res.json(t)["step_id"].(string)
	if stepID == "" {
		t.Fatalf("failure response names no step: %s", res.body)
	}
	var st protocol.Step
	ts.do("GET", "/ap/v1/agent/tasks/"+taskID+"/steps/"+stepID, "", "").want(t, 200).decode(t, &st)
	var out struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(st.AdditionalOutput, &out); err != nil || !strings.Contains(out.Error.Message, cause) {
		t.Errorf("the failed step records additional_output %s, want an error containing %q", st.AdditionalOutput, cause)
	}
	if st.Status != protocol.StatusCompleted || st.IsLast || len(st.Artifacts) != 0 {
		t.Errorf("failed step = %+v", st)
	}
	return st
}

func TestPluginFailuresAreClearRecordedAndLeaveTheTaskUsable(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/faulty"), func(c *runConfig) { c.callTimeout = time.Second })
	for _, tc := range []struct {
		input, cause string
		status       int
	}{
		{"error", "step handler failed: the agent gave up", 502},
		{"panic", "panic: something impossible happened", 502},
		{"exit", "exited with code 3", 502},
		{"loop", "ran past its time limit of 1s", 504},
		{"artifact-then-error", "failed after creating an artifact", 502},
		{"bad-output", "additional_output is not a JSON object", 502},
	} {
		t.Run(tc.input, func(t *testing.T) {
			task := ts.createTask(`{}`)
			res := ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{"input":"`+tc.input+`"}`)
			failedStep(t, ts, task.TaskID, res, tc.status, tc.cause)
			// The task stays usable.
			next := ts.step(task.TaskID, `{"input":"fine again"}`)
			if next.Output == nil || *next.Output != "fine again" {
				t.Errorf("next step = %+v", next)
			}
			var got protocol.Task
			ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID, "", "").want(t, 200).decode(t, &got)
			if len(got.Artifacts) != 0 {
				t.Errorf("a failed step left artifacts: %+v", got.Artifacts)
			}
		})
	}
	assertNoStrayFiles(t, ts.cfg.dataDir)
}

func TestExitedPluginsStderrIsInTheStepLog(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/faulty"))
	task := ts.createTask(`{}`)
	st := failedStep(t, ts, task.TaskID, ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "", `{"input":"exit"}`), 502, "exited with code 3")
	var logs struct{ Logs []protocol.LogRecord }
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID+"/logs", "", "").want(t, 200).decode(t, &logs)
	if len(logs.Logs) != 1 || logs.Logs[0].Level != "stderr" || logs.Logs[0].Message != "exiting with code 3" {
		t.Errorf("logs = %+v, want the plugin's stderr line", logs.Logs)
	}
}

func TestStepLogKeepsLevelsStdoutAndStderrInOrder(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/faulty"))
	task := ts.createTask(`{}`)
	st := ts.step(task.TaskID, `{"input":"log"}`)
	var logs struct{ Logs []protocol.LogRecord }
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID+"/logs", "", "").want(t, 200).decode(t, &logs)
	var got []string
	for _, l := range logs.Logs {
		got = append(got, l.Level+":"+l.Message)
		if l.Time.IsZero() {
			t.Errorf("log record %+v has no time", l)
		}
	}
	want := []string{"debug:a debug line", "info:an info line", "warn:a warning", "stdout:to stdout", "stderr:to stderr"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("logs = %q, want %q", got, want)
	}
}

func TestLogOverItsLimitIsTruncatedNotFatal(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/faulty"), func(c *runConfig) { c.limits.MaxLogBytes = 4096 })
	task := ts.createTask(`{}`)
	st := ts.step(task.TaskID, `{"input":"big-log"}`)
	if st.Output == nil || *st.Output != "logged a lot" {
		t.Fatalf("step = %+v", st)
	}
	res := ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID+"/logs", "", "").want(t, 200)
	if len(res.body) > 8192 || !bytes.Contains(res.body, []byte("log limit of 4096 bytes reached")) {
		t.Errorf("log of %d bytes: %.300s", len(res.body), res.body)
	}
}

func TestAStuckTaskDoesNotBlockOthers(t *testing.T) {
	// The stuck step runs until the plugin is closed: no timeout ends it
	// before the other task is served, however slow the machine.
	ts := serve(t, goPlugin(t, "testdata/plugins/faulty"), func(c *runConfig) { c.callTimeout = 10 * time.Minute })
	stuck := ts.createTask(`{}`)
	stuckStep := ts.start("POST", "/ap/v1/agent/tasks/"+stuck.TaskID+"/steps", "", `{"input":"loop"}`)
	ts.waitLimiter("the stuck step to run", 1, 0, stuckStep)
	// While the stuck step runs, another task is served in full.
	other := ts.createTask(`{}`)
	for range 5 {
		ts.step(other.TaskID, `{"input":"served"}`)
	}
	if stuckStep.answered() {
		res := stuckStep.wait()
		t.Fatalf("the stuck step ended before the other task was served: %d %s", res.status, res.body)
	}
	if err := ts.srv.plugin.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	stuckStep.wait().wantError(t, 503, "shutting down")
}
