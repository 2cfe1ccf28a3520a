package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// Each way a handler can fail names its cause, in the client's error and
// on the step, in every language: a panic (with, for Go, where it
// happened and the stack in the step's log), a runtime error, running out
// of memory (not a timeout) and a stack overflow.
func TestFailuresNameTheirCauseInEveryLanguage(t *testing.T) {
	causes := map[string]map[string]string{
		"go": {
			"panic":    "panic: something impossible happened (at main.init.",
			"index":    "panic: runtime error: index out of range [5] with length 0 (at main.init.",
			"oom":      "ran out of memory: it asked for",
			"overflow": "most likely a stack overflow",
		},
		"tinygo": {
			"panic":    "panic: something impossible happened (the plugin trapped",
			"index":    "panic: runtime error: index out of range (the plugin trapped",
			"oom":      "ran out of memory: it asked for",
			"overflow": "most likely a stack overflow",
		},
		"rust": {
			"panic":    "panicked at 'something impossible happened', src/lib.rs:",
			"index":    "panicked at 'index out of bounds: the len is 0 but the index is 5'",
			"oom":      "ran out of memory: it asked for",
			"overflow": "most likely a stack overflow",
		},
	}
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			ts := serve(t, faultyPlugin(t, lang), func(c *runConfig) {
				c.callTimeout = 30 * time.Second
				c.memoryLimit = 16 << 20
			})
			for input, cause := range causes[lang] {
				t.Run(input, func(t *testing.T) {
					task := ts.createTask(`{}`)
					res := ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{"input":"`+input+`"}`)
					st := failedStep(t, ts, task.TaskID, res, 502, cause)
					if lang == "go" && input == "panic" {
						var logs struct{ Logs []protocol.LogRecord }
						ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID+"/logs", "", "").want(t, 200).decode(t, &logs)
						if len(logs.Logs) == 0 || logs.Logs[0].Level != "error" || !strings.Contains(logs.Logs[0].Message, "goroutine ") {
							t.Errorf("the step's log %+v does not hold the panic's stack", logs.Logs)
						}
					}
					// The task stays usable.
					if next := ts.step(task.TaskID, `{"input":"fine again"}`); next.Output == nil || *next.Output != "fine again" {
						t.Errorf("next step = %+v", next)
					}
				})
			}
		})
	}
}

// A Go or TinyGo plugin that registers its handlers in main (which never
// runs) is refused at load, saying where to register them.
func TestAHandlerRegisteredInMainIsRefusedWithAHint(t *testing.T) {
	for _, lang := range []string{"go", "tinygo"} {
		t.Run(lang, func(t *testing.T) {
			plugin := goPlugin(t, "testdata/plugins/mainreg")
			if lang == "tinygo" {
				plugin = tinygoPlugin(t, "testdata/plugins/mainreg")
			}
			srv, err := open(context.Background(), testConfig(t, plugin), slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				srv.Close()
				t.Fatal("a plugin with its handler registered in main was served")
			}
			if !strings.Contains(err.Error(), "call agent.HandleStep in an init function, not in main") {
				t.Errorf("err = %v, want a hint to register in init", err)
			}
		})
	}
}

// A failed task handler leaves no task, and its log goes to the server's
// log, which names no task id that would answer 404.
func TestAFailedTaskHandlersLogIsInTheServerLog(t *testing.T) {
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			ts := serve(t, faultyPlugin(t, lang))
			res := ts.do("POST", "/ap/v1/agent/tasks", "application/json", `{"input":"fail-task"}`)
			res.wantError(t, 502, "task handler failed: the plan failed")
			log := ts.log.String()
			var failure string
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, "task handler failed") {
					failure = line
				}
			}
			if failure == "" || strings.Contains(failure, "task_id") {
				t.Errorf("server log line %q: want the failure, naming no task", failure)
			}
			for _, want := range []string{`message="planning \"fail-task\""`, `message="cannot plan this"`} {
				if !strings.Contains(log, want) {
					t.Errorf("the server log lacks the handler's line %s:\n%s", want, log)
				}
			}
			var list protocol.TaskList
			ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200).decode(t, &list)
			if len(list.Tasks) != 0 {
				t.Errorf("a failed task handler left tasks: %+v", list.Tasks)
			}
		})
	}
}

// An upload the artifact handler rejects or fails is not kept, but what
// the handler logged is, in the task's log.
func TestARefusedUploadsHandlerLogIsInTheTaskLog(t *testing.T) {
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			ts := serve(t, faultyPlugin(t, lang))
			for file, status := range map[string]int{"x.bad": 422, "x.fail": 502} {
				task := ts.createTask(`{}`)
				ts.upload(task.TaskID, part{name: "file", fileName: file, value: "data"}).want(t, status)
				var logs struct{ Logs []protocol.LogRecord }
				ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/logs", "", "").want(t, 200).decode(t, &logs)
				b, _ := json.Marshal(logs.Logs)
				if !strings.Contains(string(b), `"message":"checking `+file+`"`) {
					t.Errorf("%s: the task log %s lacks the handler's line", file, b)
				}
				var got protocol.Task
				ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID, "", "").want(t, 200).decode(t, &got)
				if len(got.Artifacts) != 0 {
					t.Errorf("%s: a refused upload was kept: %+v", file, got.Artifacts)
				}
			}
		})
	}
}
