package protocol_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

func trapped(ctx context.Context, call *protocol.Call) (int32, error) {
	return 0, protocol.NewPluginFailure(protocol.CauseTrap, "the plugin trapped: wasm error: unreachable")
}

// failStep runs one step with handler and returns its failure, checking
// that the step records the same message.
func failStep(t *testing.T, handler protocoltest.Handler) *protocol.PluginFailure {
	t.Helper()
	s := protocoltest.NewStore()
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: handler}), protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	var e *protocol.PluginFailure
	if !errors.As(err, &e) {
		t.Fatalf("step did not fail: %v", err)
	}
	st, err := s.GetStep(context.Background(), task.TaskID, e.StepID)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Error struct{ Message string } }
	if json.Unmarshal(st.AdditionalOutput, &out) != nil || out.Error.Message != e.Message {
		t.Errorf("the step records %s, the client got %q", st.AdditionalOutput, e.Message)
	}
	return e
}

func TestATrapTakesItsCauseFromWhatThePluginLeftBeforeIt(t *testing.T) {
	tests := []struct {
		name    string
		handler protocoltest.Handler
		want    string
		cause   string
	}{
		{"the error of a result set before the trap (Rust's panic hook)", func(ctx context.Context, call *protocol.Call) (int32, error) {
			call.SetResult([]byte(`{"error":"panicked at 'boom', src/lib.rs:3:5"}`))
			return trapped(ctx, call)
		}, "step handler failed: panicked at 'boom', src/lib.rs:3:5 (the plugin trapped: wasm error: unreachable)", protocol.CauseTrap},
		{"a panic the runtime printed (TinyGo)", func(ctx context.Context, call *protocol.Call) (int32, error) {
			io.WriteString(call.Stdout(), "working\npanic: runtime error: index out of range")
			return trapped(ctx, call)
		}, "step handler failed: panic: runtime error: index out of range (the plugin trapped: wasm error: unreachable)", protocol.CauseTrap},
		{"a fatal error the runtime printed (Go)", func(ctx context.Context, call *protocol.Call) (int32, error) {
			io.WriteString(call.Stderr(), "fatal error: all goroutines are asleep - deadlock!\n\ngoroutine 1 [chan receive]:\n")
			return 0, protocol.NewPluginFailure(protocol.CauseExit, "the plugin exited with code 2")
		}, "fatal error: all goroutines are asleep - deadlock! (the plugin exited with code 2)", protocol.CauseExit},
		{"a result without an error adds nothing", func(ctx context.Context, call *protocol.Call) (int32, error) {
			call.SetResult([]byte(`{"output":"half done"}`))
			return trapped(ctx, call)
		}, "step handler failed: the plugin trapped: wasm error: unreachable", protocol.CauseTrap},
		{"Go out of memory while growing its stack", func(ctx context.Context, call *protocol.Call) (int32, error) {
			io.WriteString(call.Stderr(), "runtime: out of memory: cannot allocate 33554432-byte block\nfatal error: out of memory\n\nruntime stack:\nruntime.throw({0x34e5d, 0xd})\nruntime.newstack()\n")
			return 0, protocol.NewPluginFailure(protocol.CauseOutOfMemory, "the plugin trapped: wasm error: unreachable (it ran out of memory: it asked for 67.5 MiB, over its limit of 64 MiB)")
		}, "(it ran out of memory: it asked for 67.5 MiB, over its limit of 64 MiB); it was growing its stack: most likely a stack overflow", protocol.CauseOutOfMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := failStep(t, tt.handler)
			if !strings.Contains(e.Message, tt.want) || strings.HasSuffix(tt.want, "unreachable") && e.Message != tt.want {
				t.Errorf("failure %q, want it to contain %q", e.Message, tt.want)
			}
			// The cause metrics count it by is the stop's, kept.
			if e.Cause != tt.cause {
				t.Errorf("cause %q, want %q", e.Cause, tt.cause)
			}
		})
	}
}

func TestATimeoutIsNotExplainedByAResultSetBeforeIt(t *testing.T) {
	e := failStep(t, func(ctx context.Context, call *protocol.Call) (int32, error) {
		call.SetResult([]byte(`{"error":"not this"}`))
		io.WriteString(call.Stdout(), "panic: nor this\n")
		return 0, protocol.NewPluginFailure(protocol.CauseTimeout, "the plugin ran past its time limit of 1s")
	})
	if e.Code != protocol.ETIMEOUT || strings.Contains(e.Message, "this") {
		t.Errorf("timeout = %s %q", e.Code, e.Message)
	}
}

func TestAFailedTaskHandlersLogGoesToTheServerLogNamingNoTask(t *testing.T) {
	var out bytes.Buffer
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerTask: func(ctx context.Context, call *protocol.Call) (int32, error) {
		for i := range 30 {
			call.Log(protocol.LevelInfo, []byte("line "+strings.Repeat("x", i)))
		}
		io.WriteString(call.Stderr(), "the last words")
		return 0, call.SetResult([]byte(`{"error":"cannot plan"}`))
	}})
	a := protocol.NewAgent(s, &protocol.Build{Plugin: p, ID: "b", Limits: protocol.DefaultLimits}, protocol.AgentConfig{Name: "a", Log: slog.New(slog.NewTextHandler(&out, nil))})
	_, err := a.CreateTask(context.Background(), protocol.TaskRequestBody{})
	wantCode(t, "a failing task handler", err, protocol.EPLUGIN)
	log := out.String()
	if strings.Contains(log, "task_id") {
		t.Errorf("the server log names a task that was not created:\n%s", log)
	}
	if !strings.Contains(log, "cannot plan") || !strings.Contains(log, "the last words") || strings.Count(log, "failed task handler's log") != 20 {
		t.Errorf("the server log does not keep the handler's last 20 lines:\n%s", log)
	}
}

func TestARefusedUploadsHandlerLogIsKeptInTheTaskLog(t *testing.T) {
	for name, result := range map[string]string{"rejected": `{"reject":"only text"}`, "failed": `{"error":"cannot read it"}`} {
		t.Run(name, func(t *testing.T) {
			s := protocoltest.NewStore()
			p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{
				protocol.HandlerStep: setResult(`{}`),
				protocol.HandlerArtifact: func(ctx context.Context, call *protocol.Call) (int32, error) {
					call.Log(protocol.LevelWarn, []byte("looked at it: a picture"))
					io.WriteString(call.Stdout(), "and said so")
					return 0, call.SetResult([]byte(result))
				},
			})
			a := newAgent(t, s, p, protocol.DefaultLimits)
			task := mustCreateTask(t, a)
			if _, err := upload(a, task.TaskID, "photo.png", "png"); err == nil {
				t.Fatal("the upload was kept")
			}
			logs, _ := s.TaskLogs(context.Background(), task.TaskID)
			if len(logs) != 2 || logs[0].Message != "looked at it: a picture" || logs[1].Message != "and said so" {
				t.Errorf("task log = %+v, want the artifact handler's lines", logs)
			}
		})
	}
}
