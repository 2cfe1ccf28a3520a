package protocol_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// A plugin's failure, whichever way it fails and in whichever handler, is
// a *protocol.PluginFailure that errors.As finds, naming its cause; its
// code is EPLUGIN, or ETIMEOUT for a timeout, as before; a failed step
// records exactly the code and message its client gets, and the failure
// names the step. What is not the plugin's doing is not one.
func TestEveryWayAHandlerFailsIsAPluginFailureWithItsCause(t *testing.T) {
	trap := func(context.Context, *protocol.Call) (int32, error) {
		return 0, protocol.NewPluginFailure(protocol.CauseTrap, "the plugin trapped: wasm error: unreachable")
	}
	timeout := func(context.Context, *protocol.Call) (int32, error) {
		return 0, protocol.NewPluginFailure(protocol.CauseTimeout, "the plugin ran past its time limit of 1s")
	}
	// Runs until the task's time budget is over, and is stopped, as the
	// runtime stops it.
	overBudget := func(ctx context.Context, call *protocol.Call) (int32, error) {
		<-time.After(time.Until(call.Deadline()))
		return timeout(ctx, call)
	}
	// setAnyResult sets result and ends well, as a plugin that pays no
	// heed to set_result's error does: the host refuses the result.
	setAnyResult := func(result string) protocoltest.Handler {
		return func(ctx context.Context, call *protocol.Call) (int32, error) {
			call.SetResult([]byte(result))
			return 0, nil
		}
	}
	createArtifact := func(ctx context.Context, call *protocol.Call) (int32, error) {
		_, err := call.CreateArtifact(ctx, protocol.ArtifactSpec{FileName: "out.md"}, []byte("stored"))
		return 0, err
	}
	for name, tc := range map[string]struct {
		handler protocol.Handler
		fail    protocoltest.Handler
		// limits changes the default limits.
		limits func(*protocol.Limits)
		cause  string
		code   string
		// message is what the failure's message holds.
		message string
	}{
		"a step's trap":                   {handler: protocol.HandlerStep, fail: trap, cause: protocol.CauseTrap, code: protocol.EPLUGIN, message: "step handler failed: the plugin trapped"},
		"a step's timeout":                {handler: protocol.HandlerStep, fail: timeout, cause: protocol.CauseTimeout, code: protocol.ETIMEOUT, message: "ran past its time limit of 1s"},
		"the task's budget":               {handler: protocol.HandlerStep, fail: overBudget, limits: func(l *protocol.Limits) { l.MaxTaskTime = 20 * time.Millisecond }, cause: protocol.CauseTimeout, code: protocol.ETIMEOUT, message: "used up its plugin time budget of 20ms"},
		"a refused result":                {handler: protocol.HandlerStep, fail: setAnyResult(`{"output":"` + strings.Repeat("x", 100) + `"}`), limits: func(l *protocol.Limits) { l.MaxResultBytes = 50 }, cause: protocol.CauseBadResult, code: protocol.EPLUGIN, message: "over the limit of 50 bytes"},
		"a result that is not I-JSON":     {handler: protocol.HandlerStep, fail: setAnyResult(`{"output":"a","output":"b"}`), cause: protocol.CauseBadResult, code: protocol.EPLUGIN, message: "result is not valid JSON"},
		"a result of the wrong shape":     {handler: protocol.HandlerStep, fail: setResult(`[1]`), cause: protocol.CauseBadResult, code: protocol.EPLUGIN, message: "its result is not valid"},
		"additional_output not an object": {handler: protocol.HandlerStep, fail: setResult(`{"additional_output":[1]}`), cause: protocol.CauseBadResult, code: protocol.EPLUGIN, message: "additional_output is not a JSON object"},
		"a step's error":                  {handler: protocol.HandlerStep, fail: setResult(`{"error":"boom"}`), cause: protocol.CauseHandlerError, code: protocol.EPLUGIN, message: "step handler failed: boom"},
		"a step's return code": {handler: protocol.HandlerStep, fail: func(context.Context, *protocol.Call) (int32, error) { return 3, nil },
			cause: protocol.CauseReturnCode, code: protocol.EPLUGIN, message: "it returned code 3"},
		"a task's error":              {handler: protocol.HandlerTask, fail: setResult(`{"error":"cannot plan"}`), cause: protocol.CauseHandlerError, code: protocol.EPLUGIN, message: "task handler failed: cannot plan"},
		"a task's bad planned step":   {handler: protocol.HandlerTask, fail: setResult(`{"steps":[{"name":"a","additional_input":[1]}]}`), cause: protocol.CauseBadResult, code: protocol.EPLUGIN, message: "planned a step with a bad value"},
		"a task's plan over the most": {handler: protocol.HandlerTask, fail: setResult(`{"steps":[{},{},{}]}`), limits: func(l *protocol.Limits) { l.MaxTaskSteps = 2 }, cause: protocol.CauseBadResult, code: protocol.EPLUGIN, message: "it planned more than 2 steps"},
		"an upload's trap":            {handler: protocol.HandlerArtifact, fail: trap, cause: protocol.CauseTrap, code: protocol.EPLUGIN, message: "artifact handler failed: the plugin trapped"},
		"an upload's file replaced":   {handler: protocol.HandlerArtifact, fail: setResult(`{"replace":{"uri":"https://b.example.com/r.pdf"}}`), cause: protocol.CauseBadResult, code: protocol.EPLUGIN, message: "only URI uploads are replaced"},
		"a download written, then left to the host": {handler: protocol.HandlerDownload, fail: func(ctx context.Context, call *protocol.Call) (int32, error) {
			call.DownloadWrite(ctx, []byte("x"))
			return 0, call.SetResult([]byte(`{"default":true}`))
		}, cause: protocol.CauseBadResult, code: protocol.EPLUGIN, message: "then left the download to the host"},
		"a download's timeout": {handler: protocol.HandlerDownload, fail: timeout, cause: protocol.CauseTimeout, code: protocol.ETIMEOUT, message: "download handler failed: the plugin ran past"},
	} {
		t.Run(name, func(t *testing.T) {
			s := protocoltest.NewStore()
			// The step handler, unless it is the one failing, makes an
			// artifact to download.
			handlers := map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: createArtifact, tc.handler: tc.fail}
			limits := protocol.DefaultLimits
			if tc.limits != nil {
				tc.limits(&limits)
			}
			a := newAgent(t, s, protocoltest.NewPlugin(handlers), limits)
			var err error
			var task *protocol.Task
			if tc.handler != protocol.HandlerTask {
				task = mustCreateTask(t, a)
			}
			switch tc.handler {
			case protocol.HandlerTask:
				_, err = a.CreateTask(context.Background(), protocol.TaskRequestBody{})
			case protocol.HandlerStep:
				_, err = a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
			case protocol.HandlerArtifact:
				_, err = upload(a, task.TaskID, "in.pdf", "%PDF")
			case protocol.HandlerDownload:
				st, serr := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
				if serr != nil {
					t.Fatal(serr)
				}
				_, err = a.DownloadArtifact(context.Background(), task.TaskID, st.Artifacts[0].ArtifactID, &downloadBuffer{})
			}
			var f *protocol.PluginFailure
			if !errors.As(err, &f) {
				t.Fatalf("%v (%T): not a plugin failure", err, err)
			}
			if f.Cause != tc.cause || f.Code != tc.code || protocol.ErrorCode(err) != tc.code || !strings.Contains(f.Message, tc.message) {
				t.Errorf("failure of cause %q, code %s (ErrorCode %s), %q; want %q, %s, a message holding %q",
					f.Cause, f.Code, protocol.ErrorCode(err), f.Message, tc.cause, tc.code, tc.message)
			}
			if protocol.ErrorMessage(err) != f.Message || err.Error() != f.Message {
				t.Errorf("the client's message %q, the error's %q; want the failure's %q", protocol.ErrorMessage(err), err.Error(), f.Message)
			}
			if tc.handler != protocol.HandlerStep {
				return
			}
			st, gerr := s.GetStep(context.Background(), task.TaskID, f.StepID)
			if gerr != nil {
				t.Fatalf("the failure names step %q, which is not recorded: %v", f.StepID, gerr)
			}
			var out struct{ Error map[string]string }
			if json.Unmarshal(st.AdditionalOutput, &out) != nil || len(out.Error) != 2 || out.Error["code"] != tc.code || out.Error["message"] != f.Message {
				t.Errorf("the step records %s; want the client's code %s and message %q", st.AdditionalOutput, tc.code, f.Message)
			}
		})
	}
}

// What is not the plugin's doing (the runtime busy, the disk at its
// floor, an error a plugin that is not the runtime makes up with
// EPLUGIN's code) is no plugin failure: nothing is recorded.
func TestWhatIsNotThePluginsDoingIsNoPluginFailure(t *testing.T) {
	for name, fail := range map[string]error{
		"busy":              &protocol.Error{Code: protocol.EUNAVAILABLE, Message: "busy", RetryAfter: 1},
		"internal":          errors.New("the host broke"),
		"an EPLUGIN *Error": protocol.Errorf(protocol.EPLUGIN, "made up"),
	} {
		t.Run(name, func(t *testing.T) {
			s := protocoltest.NewStore()
			a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(context.Context, *protocol.Call) (int32, error) {
				return 0, fail
			}}), protocol.DefaultLimits)
			task := mustCreateTask(t, a)
			_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
			if f, ok := errors.AsType[*protocol.PluginFailure](err); ok || !errors.Is(err, fail) {
				t.Errorf("ExecuteStep: %v (a plugin failure: %v); want %v as it is", err, f, fail)
			}
			if n := len(s.Steps[task.TaskID]); n != 0 {
				t.Errorf("%d steps recorded for a step whose failure was not the plugin's", n)
			}
		})
	}
}

// A tried call's failure is the plugin's failure, with its cause, as an
// agent's is.
func TestATriedFailureIsAPluginFailureWithItsCause(t *testing.T) {
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{"error":"boom"}`)})
	tried, err := protocol.TryHandler(context.Background(), protocoltest.NewStore(), &protocol.Build{Plugin: p, Limits: protocol.DefaultLimits},
		protocol.Try{Handler: protocol.HandlerStep, Task: tryTask()})
	if err != nil {
		t.Fatal(err)
	}
	var f *protocol.PluginFailure
	if !errors.As(error(tried.Err), &f) || f.Cause != protocol.CauseHandlerError || f.Code != protocol.EPLUGIN || f.Message != "step handler failed: boom" {
		t.Errorf("tried failure %+v", tried.Err)
	}
}

// Out of memory is told by the failure's cause, never by its text, which
// a plugin writes in part (wazero names its functions in a trap): a trap
// in a function named "ran out of memory" still gets the cause the Go
// runtime printed.
func TestOutOfMemoryIsToldByTheFailuresCauseNotItsText(t *testing.T) {
	f := failStep(t, func(ctx context.Context, call *protocol.Call) (int32, error) {
		io.WriteString(call.Stderr(), "fatal error: out of memory in a map\n")
		return 0, protocol.NewPluginFailure(protocol.CauseTrap, "the plugin trapped: in ran out of memory: wasm error: unreachable")
	})
	if f.Cause != protocol.CauseTrap || !strings.Contains(f.Message, "fatal error: out of memory in a map (the plugin trapped") {
		t.Errorf("failure of cause %s: %q; want the trap explained by what the runtime printed", f.Cause, f.Message)
	}
}
