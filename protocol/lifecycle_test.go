package protocol_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// blockingStep is a step handler that says when it starts and runs until
// its call is stopped, failing as runtime reports a stopped call.
func blockingStep(started chan<- struct{}) protocoltest.Handler {
	return func(ctx context.Context, call *protocol.Call) (int32, error) {
		started <- struct{}{}
		<-ctx.Done()
		return 0, protocol.NewPluginFailure(protocol.CauseCancelled, "the plugin call was cancelled")
	}
}

// runningStep starts a step that runs until it is stopped, and returns
// once its handler runs: the store, the agent, the task, and where the
// step's error comes.
func runningStep(t *testing.T) (*protocoltest.Store, *protocol.Agent, *protocol.Task, <-chan error) {
	s := protocoltest.NewStore()
	started := make(chan struct{}, 1)
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: blockingStep(started)}), protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	stepErr := make(chan error, 1)
	go func() {
		_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{Input: str("long")})
		stepErr <- err
	}()
	<-started
	return s, a, task, stepErr
}

func TestDeletingATaskStopsItsStepAndLeavesNothing(t *testing.T) {
	s, a, task, stepErr := runningStep(t)
	if err := a.DeleteTask(context.Background(), task.TaskID); err != nil {
		t.Fatalf("delete a task whose step runs: %v", err)
	}
	err := <-stepErr
	wantCode(t, "the step of a task deleted while it ran", err, protocol.ENOTFOUND)
	if !strings.Contains(err.Error(), "deleted") {
		t.Errorf("the step's client is told %q; want it to say the task was deleted", err)
	}
	if _, err := a.GetTask(context.Background(), task.TaskID); protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("GetTask after delete: %v, want ENOTFOUND", err)
	}
	if len(s.Deleted) != 1 || len(s.Steps[task.TaskID]) != 0 {
		t.Errorf("deleted %v, steps left %d", s.Deleted, len(s.Steps[task.TaskID]))
	}
	// Nothing starts on a deleted task.
	_, err = a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	wantCode(t, "a step on a deleted task", err, protocol.ENOTFOUND)
	wantCode(t, "deleting it again", a.DeleteTask(context.Background(), task.TaskID), protocol.ENOTFOUND)
}

// A deletion is not refused because requests wait for its task: it is
// what will turn them away.
func TestADeletionIsNotRefusedByTheRequestsWaitingForItsTask(t *testing.T) {
	s := protocoltest.NewStore()
	started := make(chan struct{}, 1)
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: blockingStep(started)})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	waiting := make(chan struct{}, 2*protocol.MaxTaskWaiters)
	protocol.OnLockWait(a, func(string) { waiting <- struct{}{} })
	var wg sync.WaitGroup
	errs := make(chan error, protocol.MaxTaskWaiters+1)
	for range protocol.MaxTaskWaiters + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
			errs <- err
		}()
	}
	<-started
	for range protocol.MaxTaskWaiters {
		<-waiting
	}
	if err := a.DeleteTask(context.Background(), task.TaskID); err != nil {
		t.Fatalf("delete a task %d requests wait for: %v", protocol.MaxTaskWaiters, err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if protocol.ErrorCode(err) != protocol.ENOTFOUND {
			t.Errorf("a step of the deleted task: %v, want ENOTFOUND", err)
		}
	}
	if runs, _ := p.Stats(); runs != 1 {
		t.Errorf("%d step handlers ran; want only the one the deletion stopped", runs)
	}
}

func TestAnInterruptedStepIsRecordedWithWhy(t *testing.T) {
	s, a, task, stepErr := runningStep(t)
	a.Interrupt("the server shut down before the step finished")
	err := <-stepErr
	wantCode(t, "an interrupted step", err, protocol.EINTERRUPTED)
	var e *protocol.Error
	if !errors.As(err, &e) || e.StepID == "" || !strings.Contains(e.Message, "shut down") {
		t.Fatalf("the interrupted step's error %#v names no step or no reason", err)
	}
	st, err := s.GetStep(context.Background(), task.TaskID, e.StepID)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(st.AdditionalOutput, &out)
	if st.Status != protocol.StatusCompleted || out.Error.Code != protocol.EINTERRUPTED || !strings.Contains(out.Error.Message, "shut down") {
		t.Errorf("the interrupted step is recorded as %s %s", st.Status, st.AdditionalOutput)
	}
	// Once interrupted, the agent runs nothing more: its server is going.
	_, err = a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	wantCode(t, "a step after the interrupt", err, protocol.EINTERRUPTED)
}

// markingAgent is an agent whose new steps are marked running after
// delay (AgentConfig.RunningMarkDelay), with step handler step and
// others as given.
func markingAgent(s *protocoltest.Store, step protocoltest.Handler, delay time.Duration, others ...map[protocol.Handler]protocoltest.Handler) *protocol.Agent {
	handlers := map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: step}
	for _, o := range others {
		maps.Copy(handlers, o)
	}
	return protocol.NewAgent(s, &protocol.Build{Plugin: protocoltest.NewPlugin(handlers), ID: "build-1", Limits: protocol.DefaultLimits},
		protocol.AgentConfig{Name: "test", RunningMarkDelay: delay})
}

// wantOneCompletedStep fails t unless the task holds one step, completed,
// counted once.
func wantOneCompletedStep(t *testing.T, s *protocoltest.Store, task *protocol.Task) {
	t.Helper()
	if n := len(s.Steps[task.TaskID]); n != 1 || s.Tasks[task.TaskID].StepCount != 1 {
		t.Fatalf("%d steps stored, %d counted; want 1", n, s.Tasks[task.TaskID].StepCount)
	}
	if st := s.Steps[task.TaskID][0]; st.Status != protocol.StatusCompleted {
		t.Errorf("after it ran the step is %q", st.Status)
	}
}

// A step that ends before the mark's delay, having done nothing that
// outlasts it, is written once: by its save.
func TestAQuickStepWithNoLastingEffectIsWrittenOnlyByItsSave(t *testing.T) {
	s := protocoltest.NewStore()
	var seen protocol.StepStatus
	a := markingAgent(s, func(ctx context.Context, call *protocol.Call) (int32, error) {
		seen = s.LastStepStatus()
		return 0, call.SetResult([]byte(`{"output":"ok"}`))
	}, time.Hour)
	task := mustCreateTask(t, a)
	if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Fatal(err)
	}
	if seen != "" || s.Starts != 0 {
		t.Errorf("while its handler ran the step was stored as %q (%d marks); want it unwritten", seen, s.Starts)
	}
	wantOneCompletedStep(t, s, task)
}

// A step still running after the mark's delay is marked running, so that
// a process that dies while it runs leaves it to be marked failed.
func TestAStepIsMarkedRunningOnceItHasRunTheMarksDelay(t *testing.T) {
	s := protocoltest.NewStore()
	a := markingAgent(s, func(ctx context.Context, call *protocol.Call) (int32, error) {
		giveUp := time.After(time.Minute)
		for s.LastStepStatus() != protocol.StatusRunning {
			select {
			case <-giveUp:
				return 0, errors.New("the step was not marked running within a minute")
			case <-time.After(time.Millisecond):
			}
		}
		return 0, call.SetResult([]byte(`{"output":"ok"}`))
	}, time.Millisecond)
	task := mustCreateTask(t, a)
	if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Fatal(err)
	}
	if s.Starts != 1 {
		t.Errorf("%d running marks written, want 1", s.Starts)
	}
	wantOneCompletedStep(t, s, task)
}

// Whatever outlasts the call (a workspace write or removal, an outbound
// request, announced by BeforeEffect) is done only once the step is
// marked running, however soon the handler does it.
func TestAStepIsMarkedRunningBeforeWhatOutlastsItsCall(t *testing.T) {
	for name, effect := range map[string]func(ctx context.Context, s *protocoltest.Store, c *protocol.Call) error{
		"workspace write": func(ctx context.Context, s *protocoltest.Store, c *protocol.Call) error {
			return c.WorkspaceWrite(ctx, "a.txt", []byte("x"))
		},
		"workspace delete": func(ctx context.Context, s *protocoltest.Store, c *protocol.Call) error {
			return c.WorkspaceDelete(ctx, "a.txt")
		},
		"outbound request": func(ctx context.Context, s *protocoltest.Store, c *protocol.Call) error { return c.BeforeEffect(ctx) },
		"artifact fetch": func(ctx context.Context, s *protocoltest.Store, c *protocol.Call) error {
			id, err := c.CreateArtifact(ctx, protocol.ArtifactSpec{URI: "https://example.com/a.txt"}, nil)
			if err != nil {
				return err
			}
			_, err = c.FetchArtifact(ctx, id, "a.txt", func(context.Context, string) ([]byte, error) {
				if st := s.LastStepStatus(); st != protocol.StatusRunning {
					return nil, fmt.Errorf("fetched while the step was stored as %q", st)
				}
				return []byte("x"), nil
			})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := protocoltest.NewStore()
			var before, after protocol.StepStatus
			a := markingAgent(s, func(ctx context.Context, call *protocol.Call) (int32, error) {
				before = s.LastStepStatus()
				if err := effect(ctx, s, call); err != nil && protocol.ErrorCode(err) != protocol.ENOTFOUND {
					return 0, err
				}
				after = s.LastStepStatus()
				return 0, call.SetResult([]byte(`{"output":"ok"}`))
			}, time.Hour)
			task := mustCreateTask(t, a)
			if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
				t.Fatal(err)
			}
			if before != "" || after != protocol.StatusRunning || s.Starts != 1 {
				t.Errorf("the step was stored as %q before the %s and %q after (%d marks); want unwritten, then running, once", before, name, after, s.Starts)
			}
			wantOneCompletedStep(t, s, task)
		})
	}
}

// An effect whose mark cannot be written is refused: nothing outlasts a
// step the store does not know runs. The next effect tries the mark
// again.
func TestAnEffectWhoseRunningMarkFailsIsRefusedAndTheNextTriesAgain(t *testing.T) {
	s := protocoltest.NewStore()
	s.FailStart = protocol.Errorf(protocol.EINSUFFICIENT, "the disk is full")
	var refused, second error
	var files int
	a := markingAgent(s, func(ctx context.Context, call *protocol.Call) (int32, error) {
		refused = call.WorkspaceWrite(ctx, "a.txt", []byte("x"))
		s.Mu.Lock()
		for _, f := range s.Files {
			files += len(f)
		}
		s.FailStart = nil // the disk has room again
		s.Mu.Unlock()
		second = call.WorkspaceWrite(ctx, "b.txt", []byte("y"))
		return 0, call.SetResult([]byte(`{"output":"ok"}`))
	}, time.Hour)
	task := mustCreateTask(t, a)
	if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a workspace write whose step could not be marked running", refused, protocol.EINSUFFICIENT)
	if files != 0 {
		t.Errorf("the refused write left %d files in the workspace", files)
	}
	if second != nil || s.Starts != 1 || len(s.Files[task.TaskID]) != 1 {
		t.Errorf("the next write, once the mark could be written: %v, %d marks, %d files; want it done after one mark", second, s.Starts, len(s.Files[task.TaskID]))
	}
	wantOneCompletedStep(t, s, task)
}

// A planned step is marked running, its claim on the planned row, before
// its handler runs, whatever the delay.
func TestAPlannedStepIsMarkedRunningBeforeItsHandlerRuns(t *testing.T) {
	s := protocoltest.NewStore()
	var seen protocol.StepStatus
	a := markingAgent(s, func(ctx context.Context, call *protocol.Call) (int32, error) {
		seen = s.LastStepStatus()
		return 0, call.SetResult([]byte(`{"output":"ok"}`))
	}, time.Hour, map[protocol.Handler]protocoltest.Handler{protocol.HandlerTask: setResult(`{"steps":[{"name":"planned"}]}`)})
	task := mustCreateTask(t, a)
	if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Fatal(err)
	}
	if seen != protocol.StatusRunning || s.Starts != 1 {
		t.Errorf("while its handler ran the planned step was stored as %q (%d marks), want running", seen, s.Starts)
	}
	wantOneCompletedStep(t, s, task)
}

func TestStepsAClientPlansRunFirstThenThoseOfTheTaskHandler(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{
		protocol.HandlerTask: setResult(`{"steps":[{"name":"from the handler"}]}`),
		protocol.HandlerStep: setResult(`{"output":"ok"}`),
	})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	var body protocol.TaskRequestBody
	if err := json.Unmarshal([]byte(`{"title":"Prime Ticker","steps":["🛠️ Setup ",{"name":"🦾 Fetch model","input":"x","additional_input":{"k":1}}]}`), &body); err != nil {
		t.Fatal(err)
	}
	task, err := a.CreateTask(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	if task.Title == nil || *task.Title != "Prime Ticker" {
		t.Errorf("title %v", task.Title)
	}
	var names []string
	for range 3 {
		st, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, *st.Name)
		if *st.Name == "🦾 Fetch model" && (st.Input == nil || *st.Input != "x" || string(st.AdditionalInput) != `{"k":1}`) {
			t.Errorf("the planned step's input: %v %s", st.Input, st.AdditionalInput)
		}
	}
	if strings.Join(names, "|") != "🛠️ Setup |🦾 Fetch model|from the handler" {
		t.Errorf("steps ran in the order %q", names)
	}
}

func TestTaskMetadataAndPlannedStepsAreCheckedBeforeAnythingRuns(t *testing.T) {
	for name, body := range map[string]string{
		"title with a newline":         `{"title":"a\nb"}`,
		"title over its limit":         `{"title":"` + strings.Repeat("x", protocol.MaxTitleBytes+1) + `"}`,
		"version with a NUL":           `{"version":"1\u0000"}`,
		"description over limit":       `{"description":"` + strings.Repeat("x", protocol.MaxDescriptionBytes+1) + `"}`,
		"a step without a name":        `{"steps":[""]}`,
		"a step name with a tab":       `{"steps":["a\tb"]}`,
		"a step's input not an object": `{"steps":[{"name":"a","additional_input":[1]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := protocoltest.NewStore()
			p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerTask: setResult(`{}`), protocol.HandlerStep: setResult(`{}`)})
			a := newAgent(t, s, p, protocol.DefaultLimits)
			var req protocol.TaskRequestBody
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			_, err := a.CreateTask(context.Background(), req)
			wantCode(t, name, err, protocol.EUNPROCESSABLE)
			if runs, _ := p.Stats(); runs != 0 || len(s.Tasks) != 0 {
				t.Errorf("%d handler runs, %d tasks for a refused body", runs, len(s.Tasks))
			}
		})
	}
	// A description may hold line breaks and tabs.
	s := protocoltest.NewStore()
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{}`)}), protocol.DefaultLimits)
	if _, err := a.CreateTask(context.Background(), protocol.TaskRequestBody{Description: str("line 1\nline 2\tx")}); err != nil {
		t.Errorf("a description of two lines: %v", err)
	}
}

func TestAPatchChangesOnlyTheMetadataItNames(t *testing.T) {
	s := protocoltest.NewStore()
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{}`)}), protocol.DefaultLimits)
	task, err := a.CreateTask(context.Background(), protocol.TaskRequestBody{Input: str("in"), Title: str("t"), Description: str("d"), Version: str("1")})
	if err != nil {
		t.Fatal(err)
	}
	var patch protocol.TaskPatch
	if err := json.Unmarshal([]byte(`{"title":"t2","version":null}`), &patch); err != nil {
		t.Fatal(err)
	}
	got, err := a.UpdateTask(context.Background(), task.TaskID, patch)
	if err != nil {
		t.Fatal(err)
	}
	if *got.Title != "t2" || *got.Description != "d" || got.Version != nil || *got.Input != "in" {
		t.Errorf("after the patch: title %v description %v version %v input %v", got.Title, got.Description, got.Version, got.Input)
	}
	for body, want := range map[string]string{
		`{"input":"changed"}`: `field "input" cannot be changed`,
		`{"title":3}`:         `field "title" must be a string or null`,
	} {
		err := json.Unmarshal([]byte(body), &patch)
		if protocol.ErrorCode(err) != protocol.EUNPROCESSABLE || !strings.Contains(err.Error(), want) {
			t.Errorf("patch %s: %v, want %q", body, err, want)
		}
	}
	_, err = a.UpdateTask(context.Background(), "0190d8a6-0000-7000-8000-000000000000", patch)
	wantCode(t, "a patch of no task", err, protocol.ENOTFOUND)
}

// observed records what an Observer is told.
type observed struct {
	mu    sync.Mutex
	calls []string
}

func (o *observed) HandlerDone(agent string, h protocol.Handler, d time.Duration, cause string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, agent+" "+string(h)+" "+cause)
}

func TestTheObserverIsToldOfEveryHandlerCallAndWhyItFailed(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		var in struct {
			Step struct{ Input string } `json:"step"`
		}
		json.Unmarshal(call.Input(), &in)
		switch in.Step.Input {
		case "trap":
			return 0, protocol.NewPluginFailure(protocol.CauseTrap, "trapped")
		case "error":
			return 0, call.SetResult([]byte(`{"error":"no"}`))
		case "busy":
			return 0, &protocol.Error{Code: protocol.EUNAVAILABLE, Message: "busy"}
		}
		return 0, call.SetResult([]byte(`{}`))
	}})
	o := &observed{}
	a := protocol.NewAgent(s, &protocol.Build{Plugin: p, ID: "b", Limits: protocol.DefaultLimits}, protocol.AgentConfig{Name: "obs", Observer: o})
	task := mustCreateTask(t, a)
	for _, in := range []string{"ok", "trap", "error", "busy"} {
		a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{Input: str(in)})
	}
	want := "obs step |obs step trap|obs step handler_error" // busy ran nothing
	if got := strings.Join(o.calls, "|"); got != want {
		t.Errorf("the observer was told %q, want %q", got, want)
	}
}
