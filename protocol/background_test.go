package protocol_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// gatedStep is a step handler that reports progress, says it started,
// then waits for release (or its call's end) before it sets its result.
func gatedStep(started chan<- string, release <-chan struct{}) protocoltest.Handler {
	return func(ctx context.Context, call *protocol.Call) (int32, error) {
		if err := call.Progress(ctx, []byte("thinking"), []byte("part")); err != nil {
			return 0, err
		}
		started <- "started"
		select {
		case <-release:
		case <-ctx.Done():
			return 0, protocol.NewPluginFailure(protocol.CauseCancelled, "the plugin call was cancelled")
		}
		return 0, call.SetResult([]byte(`{"output":"done","is_last":true}`))
	}
}

// nextEvents waits for the watcher's events until one of type typ has
// come, and returns every one it got.
func nextEvents(t *testing.T, w *protocol.Watcher, typ string) []protocol.Event {
	t.Helper()
	var got []protocol.Event
	deadline := time.After(10 * time.Second)
	for {
		changed := w.Changed()
		page, err := w.Next(context.Background(), 100)
		if err != nil {
			t.Fatalf("watching: %v", err)
		}
		got = append(got, page.Events...)
		for _, e := range page.Events {
			if e.Type == typ {
				return got
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s event came; got %v", typ, types(got))
		}
	}
}

func types(evs []protocol.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// checkIDs fails unless the events' ids go up by one from first.
func checkIDs(t *testing.T, evs []protocol.Event, first int64) {
	t.Helper()
	for i, e := range evs {
		if e.ID != first+int64(i) {
			t.Fatalf("event %d has id %d, want %d (ids %v)", i, e.ID, first+int64(i), ids(evs))
		}
	}
}

func ids(evs []protocol.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func TestAnAsyncStepIsAnsweredRunningAndItsEndIsReadAndWatched(t *testing.T) {
	s := protocoltest.NewStore()
	started, release := make(chan string, 1), make(chan struct{})
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: gatedStep(started, release)}), protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	w, err := a.Watch(context.Background(), task.TaskID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	step, err := a.ExecuteStepAsync(context.Background(), task.TaskID, protocol.StepRequestBody{Input: str("slow")})
	if err != nil {
		t.Fatalf("async step: %v", err)
	}
	if step.Status != protocol.StatusRunning || step.StepID == "" {
		t.Fatalf("the answer is %+v; want the step, running", step)
	}
	<-started
	got, err := a.GetStep(context.Background(), task.TaskID, step.StepID)
	if err != nil || got.Status != protocol.StatusRunning {
		t.Fatalf("GET while it runs: %+v, %v; want it running", got, err)
	}
	evs := nextEvents(t, w, protocol.EventStepProgress)
	checkIDs(t, evs, 1)
	if want := []string{"step.created", "step.running", "step.progress"}; strings.Join(types(evs), " ") != strings.Join(want, " ") {
		t.Fatalf("events while it runs: %v, want %v", types(evs), want)
	}
	var progress struct{ Message, Output string }
	if json.Unmarshal(evs[2].Data, &progress); progress.Message != "thinking" || progress.Output != "part" || evs[2].StepID != step.StepID {
		t.Errorf("the progress event is %s for step %s", evs[2].Data, evs[2].StepID)
	}
	close(release)
	end := nextEvents(t, w, protocol.EventStepCompleted)
	checkIDs(t, end, 4)
	got, err = a.GetStep(context.Background(), task.TaskID, step.StepID)
	if err != nil || got.Status != protocol.StatusCompleted || got.Output == nil || *got.Output != "done" || !got.IsLast {
		t.Fatalf("GET once it ended: %+v, %v; want it completed with its output", got, err)
	}
	if err := a.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := a.BackgroundSteps(); n != 0 {
		t.Errorf("%d background steps counted after the last ended", n)
	}
}

func TestAStepWhileOneRunsInTheBackgroundIsRefusedNamingIt(t *testing.T) {
	s := protocoltest.NewStore()
	started, release := make(chan string, 1), make(chan struct{})
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: gatedStep(started, release)}), protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	step, err := a.ExecuteStepAsync(context.Background(), task.TaskID, protocol.StepRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	for name, run := range map[string]func() (*protocol.Step, error){
		"async": func() (*protocol.Step, error) {
			return a.ExecuteStepAsync(context.Background(), task.TaskID, protocol.StepRequestBody{})
		},
		"sync": func() (*protocol.Step, error) {
			return a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
		},
	} {
		_, err := run()
		wantCode(t, name+" step while one runs in the background", err, protocol.ECONFLICT)
		if e := err.(*protocol.Error); e.StepID != step.StepID || !strings.Contains(e.Message, "in the background") {
			t.Errorf("%s: refused with %+v; want it to name the step running", name, e)
		}
	}
	close(release)
	a.Wait(context.Background())
	// Once it ended, the task takes the next step.
	if _, err := a.ExecuteStepAsync(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Fatalf("the next step after the background one ended: %v", err)
	}
	<-started
	a.Interrupt("test over")
	a.Wait(context.Background())
}

func TestCancelStopsARunningStepRecordsItCancelledAndIsIdempotent(t *testing.T) {
	for _, async := range []bool{true, false} {
		name := map[bool]string{true: "async", false: "sync"}[async]
		t.Run(name, func(t *testing.T) {
			s := protocoltest.NewStore()
			started, release := make(chan string, 1), make(chan struct{})
			a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: gatedStep(started, release)}), protocol.DefaultLimits)
			task := mustCreateTask(t, a)
			w, _ := a.Watch(context.Background(), task.TaskID, 0)
			defer w.Close()
			syncErr := make(chan error, 1)
			var stepID string
			if async {
				st, err := a.ExecuteStepAsync(context.Background(), task.TaskID, protocol.StepRequestBody{})
				if err != nil {
					t.Fatal(err)
				}
				stepID = st.StepID
				<-started
			} else {
				go func() {
					_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
					syncErr <- err
				}()
				<-started
				stepID = nextEvents(t, w, protocol.EventStepRunning)[0].StepID
			}
			st, err := a.CancelStep(context.Background(), task.TaskID, stepID)
			if err != nil {
				t.Fatalf("cancel: %v", err)
			}
			if code, _ := protocol.FailureCode(st.AdditionalOutput); code != protocol.ECANCELLED || st.Status != protocol.StatusCompleted || st.Output != nil {
				t.Fatalf("the cancelled step reads %+v (additional_output %s)", st, st.AdditionalOutput)
			}
			if evs := nextEvents(t, w, protocol.EventStepCancelled); evs[len(evs)-1].StepID != stepID {
				t.Errorf("the step.cancelled event names %s", evs[len(evs)-1].StepID)
			}
			if !async {
				err := <-syncErr
				wantCode(t, "the sync step's own answer", err, protocol.ECANCELLED)
				if e := err.(*protocol.Error); e.StepID != stepID {
					t.Errorf("the sync answer names step %q, want %q", e.StepID, stepID)
				}
			}
			again, err := a.CancelStep(context.Background(), task.TaskID, stepID)
			if err != nil || again.StepID != stepID {
				t.Fatalf("cancelling twice: %+v, %v; want the step again", again, err)
			}
			// The task stays usable: the next step runs to its end.
			close(release)
			next, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
			<-started
			if err != nil || next.Output == nil || *next.Output != "done" {
				t.Fatalf("the step after a cancelled one: %+v, %v", next, err)
			}
			_, err = a.CancelStep(context.Background(), task.TaskID, next.StepID)
			wantCode(t, "cancelling a step that ended", err, protocol.ECONFLICT)
			_, err = a.CancelStep(context.Background(), task.TaskID, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
			wantCode(t, "cancelling no step", err, protocol.ENOTFOUND)
		})
	}
}

func TestBackgroundStepsAreBoundedPerAgentAndPerServer(t *testing.T) {
	started := make(chan string, 4)
	release := make(chan struct{})
	plugin := func() *protocoltest.Plugin {
		return protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: gatedStep(started, release)})
	}
	limits := protocol.DefaultLimits
	limits.MaxBackgroundSteps = 1
	slots := protocol.NewBackgroundSlots(2)
	agent := func(name string) *protocol.Agent {
		return protocol.NewAgent(protocoltest.NewStore(), &protocol.Build{Plugin: plugin(), ID: "b", Limits: limits},
			protocol.AgentConfig{Name: name, Background: slots})
	}
	a, b, c := agent("a"), agent("b"), agent("c")
	run := func(ag *protocol.Agent) error {
		task := mustCreateTask(t, ag)
		_, err := ag.ExecuteStepAsync(context.Background(), task.TaskID, protocol.StepRequestBody{})
		return err
	}
	if err := run(a); err != nil {
		t.Fatal(err)
	}
	<-started
	err := run(a)
	wantCode(t, "a second background step of an agent bounded to 1", err, protocol.EUNAVAILABLE)
	if e := err.(*protocol.Error); e.RetryAfter <= 0 {
		t.Errorf("refused without Retry-After: %+v", e)
	}
	if err := run(b); err != nil {
		t.Fatalf("another agent's first: %v", err)
	}
	<-started
	err = run(c)
	wantCode(t, "a third past the server's bound of 2", err, protocol.EUNAVAILABLE)
	if !strings.Contains(err.Error(), "the server runs 2") {
		t.Errorf("refused with %q; want it to name the server's bound", err)
	}
	close(release)
	for _, ag := range []*protocol.Agent{a, b, c} {
		ag.Wait(context.Background())
	}
	if slots.InUse() != 0 {
		t.Errorf("%d slots held after every step ended", slots.InUse())
	}
	if err := run(c); err != nil {
		t.Fatalf("a step once the others ended: %v", err)
	}
	c.Wait(context.Background())
}

func TestAnInterruptedBackgroundStepIsRecordedInterrupted(t *testing.T) {
	s := protocoltest.NewStore()
	started, release := make(chan string, 1), make(chan struct{})
	defer close(release)
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: gatedStep(started, release)}), protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	step, err := a.ExecuteStepAsync(context.Background(), task.TaskID, protocol.StepRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	a.Interrupt("the server shut down")
	if err := a.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := a.GetStep(context.Background(), task.TaskID, step.StepID)
	if code, _ := protocol.FailureCode(got.AdditionalOutput); code != protocol.EINTERRUPTED {
		t.Fatalf("the step reads %s, want it interrupted", got.AdditionalOutput)
	}
	page, _ := a.Events(context.Background(), task.TaskID, 0, 100)
	if last := page.Events[len(page.Events)-1]; last.Type != protocol.EventStepFailed || !strings.Contains(string(last.Data), "interrupted") {
		t.Errorf("the last event is %s %s; want step.failed, interrupted", last.Type, last.Data)
	}
}

func TestCancelOnDisconnectIsTheOperatorsChoice(t *testing.T) {
	for _, cancelOn := range []bool{false, true} {
		s := protocoltest.NewStore()
		started, release := make(chan string, 1), make(chan struct{})
		a := protocol.NewAgent(s, &protocol.Build{Plugin: protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: gatedStep(started, release)}), ID: "b", Limits: protocol.DefaultLimits},
			protocol.AgentConfig{Name: "t", CancelOnDisconnect: cancelOn})
		task := mustCreateTask(t, a)
		ctx, hangUp := context.WithCancel(context.Background())
		done := make(chan *protocol.Step, 1)
		go func() {
			a.ExecuteStep(ctx, task.TaskID, protocol.StepRequestBody{})
			list, _ := a.ListSteps(context.Background(), task.TaskID, protocol.Page{Number: 1, Size: 10})
			done <- &list.Steps[0]
		}()
		<-started
		hangUp()
		if !cancelOn {
			close(release) // it runs on to its end
		}
		st := <-done
		code, _ := protocol.FailureCode(st.AdditionalOutput)
		switch {
		case cancelOn && code != protocol.ECANCELLED:
			t.Errorf("with --cancel-on-disconnect, a step whose client went reads %s; want it cancelled", st.AdditionalOutput)
		case !cancelOn && (st.Output == nil || *st.Output != "done"):
			t.Errorf("without it, the step reads %+v; want it run to its end", st)
		}
		if cancelOn {
			close(release)
		}
	}
}

func TestProgressIsTheStepHandlersAndCountsAgainstTheLogLimit(t *testing.T) {
	s := protocoltest.NewStore()
	var stepErrs []error
	limits := protocol.DefaultLimits
	limits.MaxLogBytes = 200
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{
		protocol.HandlerTask: func(ctx context.Context, call *protocol.Call) (int32, error) {
			if err := call.Progress(ctx, []byte("x"), nil); protocol.ErrorCode(err) != protocol.EMETHOD {
				t.Errorf("progress from the task handler: %v, want EMETHOD", err)
			}
			return 0, call.SetResult([]byte(`{}`))
		},
		protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
			for range 4 {
				stepErrs = append(stepErrs, call.Progress(ctx, []byte(strings.Repeat("m", 30)), []byte("\xff")))
			}
			return 0, call.SetResult([]byte(`{"output":"ok"}`))
		},
	})
	a := newAgent(t, s, p, limits)
	task := mustCreateTask(t, a)
	if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Fatal(err)
	}
	// Each report takes 64 + 30 + 3 (U+FFFD) = 97 bytes of the 200.
	if stepErrs[0] != nil || stepErrs[1] != nil || protocol.ErrorCode(stepErrs[2]) != protocol.ETOOLARGE {
		t.Fatalf("reports answered %v; want two kept, then ETOOLARGE", stepErrs)
	}
	page, _ := a.Events(context.Background(), task.TaskID, 0, 100)
	var progress []string
	for _, e := range page.Events {
		if e.Type == protocol.EventStepProgress {
			progress = append(progress, string(e.Data))
		}
	}
	if len(progress) != 2 || !strings.Contains(progress[0], `"output":"\ufffd"`) && !strings.Contains(progress[0], `"output":"�"`) {
		t.Errorf("progress events %q; want two, invalid UTF-8 kept as U+FFFD", progress)
	}
}

// The 202 is on disk: the step is marked running, durably, before the
// answer, whatever its handler does.
func TestAnAsyncStepIsRecordedRunningBeforeItIsAnswered(t *testing.T) {
	s := protocoltest.NewStore()
	release := make(chan struct{})
	quiet := func(ctx context.Context, call *protocol.Call) (int32, error) {
		<-release
		return 0, call.SetResult([]byte(`{"output":"ok"}`))
	}
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: quiet}), protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	w, _ := a.Watch(context.Background(), task.TaskID, 0)
	defer w.Close()
	w.Next(context.Background(), 10) // caught up: what comes next, the feed brings
	step, err := a.ExecuteStepAsync(context.Background(), task.TaskID, protocol.StepRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	// Watchers hear it runs while it runs, though its handler says nothing.
	if evs := nextEvents(t, w, protocol.EventStepRunning); len(evs) != 2 || evs[0].Type != protocol.EventStepCreated {
		t.Errorf("events while it runs: %v", types(evs))
	}
	s.Mu.Lock()
	steps := s.Steps[task.TaskID]
	s.Mu.Unlock()
	if len(steps) != 1 || steps[0].StepID != step.StepID || steps[0].Status != protocol.StatusRunning || !steps[0].Background {
		t.Errorf("when answered, the store holds %+v; want the step marked running as a background step (synced)", steps)
	}
	close(release)
	a.Wait(context.Background())
}

// Events recorded after a watch began but before its feed was told of
// any (as if they landed between the two) are the watch's first: it
// reads the store first, whatever the feed has seen.
func TestAWatchMissesNoEventRecordedAsItBegan(t *testing.T) {
	s := protocoltest.NewStore()
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{}`)}), protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	if _, err := a.UpdateTask(context.Background(), task.TaskID, protocol.TaskPatch{Title: protocol.PatchField{Set: true, Value: str("one")}}); err != nil {
		t.Fatal(err)
	}
	w, err := a.Watch(context.Background(), task.TaskID, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Recorded in the store, the feed not told.
	if err := s.AppendEvents(context.Background(), task.TaskID, []protocol.Event{{Type: protocol.EventStepProgress}}); err != nil {
		t.Fatal(err)
	}
	page, err := w.Next(context.Background(), 10)
	if err != nil || len(page.Events) != 1 || page.Events[0].ID != 2 {
		t.Fatalf("the watch's first events: %+v, %v; want event 2", page, err)
	}
}

// A client that sends the next step as soon as it sees the last one end
// is not refused: the task is free before its watchers hear of the end.
func TestTheNextStepIsTakenAsSoonAsTheLastIsSeenToEnd(t *testing.T) {
	s := protocoltest.NewStore()
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{"output":"ok"}`)}), protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	w, err := a.Watch(context.Background(), task.TaskID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 200 {
		if _, err := a.ExecuteStepAsync(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
			t.Fatalf("step %d, sent as soon as the one before was seen to end: %v", i, err)
		}
		nextEvents(t, w, protocol.EventStepCompleted)
	}
	a.Wait(context.Background())
}
