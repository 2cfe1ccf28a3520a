package protocol_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// The Agent's own rules, pinned against protocoltest.Store and
// protocoltest.Plugin: no SQLite, no wasm. What only the whole binary
// shows is tested end to end in cmd/agentrt.

func str(s string) *string { return &s }

// setResult is a handler that sets result and returns 0.
func setResult(result string) protocoltest.Handler {
	return func(ctx context.Context, call *protocol.Call) (int32, error) {
		return 0, call.SetResult([]byte(result))
	}
}

func newAgent(t *testing.T, s *protocoltest.Store, p *protocoltest.Plugin, limits protocol.Limits) *protocol.Agent {
	t.Helper()
	return protocol.NewAgent(s, &protocol.Build{Plugin: p, ID: "build-1", Limits: limits}, protocol.AgentConfig{Name: "test"})
}

func mustCreateTask(t *testing.T, a *protocol.Agent) *protocol.Task {
	t.Helper()
	task, err := a.CreateTask(context.Background(), protocol.TaskRequestBody{Input: str("go")})
	if err != nil {
		t.Fatalf("create task: %v", err)
	}
	return task
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if protocol.ErrorCode(err) != code {
		t.Fatalf("%s: %v (code %q), want code %q", what, err, protocol.ErrorCode(err), code)
	}
}

func TestAFailedStepIsRecordedWithItsCauseAndTheTaskStaysUsable(t *testing.T) {
	trap := func(ctx context.Context, call *protocol.Call) (int32, error) {
		return 0, protocol.NewPluginFailure(protocol.CauseTrap, "wasm error: unreachable")
	}
	for name, tc := range map[string]struct {
		handler protocoltest.Handler
		code    string
		cause   string
	}{
		"error result":   {setResult(`{"error":"boom"}`), protocol.EPLUGIN, "step handler failed: boom"},
		"non-zero code":  {func(context.Context, *protocol.Call) (int32, error) { return 3, nil }, protocol.EPLUGIN, "it returned code 3"},
		"trap":           {trap, protocol.EPLUGIN, "wasm error: unreachable"},
		"bad result":     {setResult(`[1]`), protocol.EPLUGIN, "its result is not valid"},
		"bad output obj": {setResult(`{"additional_output":[1]}`), protocol.EPLUGIN, "additional_output is not a JSON object"},
		"timeout": {func(context.Context, *protocol.Call) (int32, error) {
			return 0, protocol.NewPluginFailure(protocol.CauseTimeout, "the call ran out of time")
		}, protocol.ETIMEOUT, "ran out of time"},
	} {
		t.Run(name, func(t *testing.T) {
			s := protocoltest.NewStore()
			failing := true
			p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
				if !failing {
					return 0, call.SetResult([]byte(`{"output":"fine"}`))
				}
				// What a failing call created is not kept.
				if _, err := call.CreateArtifact(ctx, protocol.ArtifactSpec{FileName: "half.txt"}, []byte("half")); err != nil {
					t.Errorf("create artifact: %v", err)
				}
				return tc.handler(ctx, call)
			}})
			a := newAgent(t, s, p, protocol.DefaultLimits)
			task := mustCreateTask(t, a)

			_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{Input: str("x")})
			wantCode(t, "a failing step", err, tc.code)
			var e *protocol.Error
			if !errors.As(err, &e) || e.StepID == "" || !strings.Contains(e.Message, tc.cause) {
				t.Fatalf("the failure %+v does not name its step and cause %q", e, tc.cause)
			}
			st, err := s.GetStep(context.Background(), task.TaskID, e.StepID)
			if err != nil {
				t.Fatalf("the failed step was not recorded: %v", err)
			}
			var out struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(st.AdditionalOutput, &out); err != nil || out.Error.Code != tc.code || out.Error.Message != e.Message {
				t.Errorf("recorded additional_output %s (%v), want the error %s: %s", st.AdditionalOutput, err, tc.code, e.Message)
			}
			if st.Output != nil || st.IsLast || len(st.Artifacts) != 0 || st.Status != protocol.StatusCompleted {
				t.Errorf("the failed step is recorded as %+v", st)
			}
			if got, _ := s.GetTask(context.Background(), task.TaskID); len(got.Artifacts) != 0 || len(s.Staged) != 0 || s.Discarded != 1 {
				t.Errorf("the failing call's artifact: %d recorded, %d still staged, %d discarded; want 0, 0, 1",
					len(got.Artifacts), len(s.Staged), s.Discarded)
			}

			failing = false
			if st, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil || *st.Output != "fine" {
				t.Errorf("the next step after a failure: %v", err)
			}
		})
	}
}

func TestAStepThatCouldNotRunIsNotRecorded(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(context.Context, *protocol.Call) (int32, error) {
		return 0, &protocol.Error{Code: protocol.EUNAVAILABLE, Message: "busy", RetryAfter: 1}
	}})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	wantCode(t, "a step the runtime was too busy to run", err, protocol.EUNAVAILABLE)
	if n := len(s.Steps[task.TaskID]); n != 0 {
		t.Errorf("%d steps recorded for a step that never ran", n)
	}
}

func TestNoHandlerRunsWhileTheDiskIsAtItsFloor(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{}`)})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	s.DiskFull = true
	_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	wantCode(t, "a step at the disk's floor", err, protocol.EINSUFFICIENT)
	// Its run could not have been recorded, nor its time counted against
	// the task's budget: it must not have happened.
	if runs, _ := p.Stats(); runs != 0 {
		t.Errorf("the step handler ran %d times while nothing could be recorded", runs)
	}
}

func TestAStepRunsToTheEndWhenItsClientGoesAway(t *testing.T) {
	s := protocoltest.NewStore()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pluginCtxErr error
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(pctx context.Context, call *protocol.Call) (int32, error) {
		cancel() // the client goes away while the handler runs
		pluginCtxErr = pctx.Err()
		return 0, call.SetResult([]byte(`{"output":"done"}`))
	}})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	st, err := a.ExecuteStep(ctx, task.TaskID, protocol.StepRequestBody{})
	if err != nil {
		t.Fatalf("a step whose client went away: %v", err)
	}
	if pluginCtxErr != nil {
		t.Errorf("the handler's context ended when its client went away: %v", pluginCtxErr)
	}
	if _, err := s.GetStep(context.Background(), task.TaskID, st.StepID); err != nil {
		t.Errorf("the step was not recorded: %v", err)
	}
}

func TestAnUploadIsCommittedWhenItsClientGoesAwayDuringTheArtifactHandler(t *testing.T) {
	s := protocoltest.NewStore()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerArtifact: func(pctx context.Context, call *protocol.Call) (int32, error) {
		cancel()
		if pctx.Err() != nil {
			return 0, protocol.NewPluginFailure(protocol.CauseTimeout, "stopped: %v", pctx.Err())
		}
		return 0, nil
	}})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	up, err := a.NewUpload(context.Background(), task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Discard()
	up.Write([]byte("bytes"))
	if _, err := up.Commit(ctx, "a.txt", ""); err != nil {
		t.Fatalf("an upload whose client went away during its handler: %v", err)
	}
	if len(s.Placed) != 1 || !s.Placed[0].Committed {
		t.Errorf("the upload's placement was not committed")
	}
}

func TestATaskWhoseClientGoesAwayIsNotCreated(t *testing.T) {
	s := protocoltest.NewStore()
	ctx, cancel := context.WithCancel(context.Background())
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerTask: func(pctx context.Context, call *protocol.Call) (int32, error) {
		if err := call.WorkspaceWrite(pctx, "notes.txt", []byte("n")); err != nil {
			t.Errorf("workspace write: %v", err)
		}
		cancel()
		return 0, protocol.NewPluginFailure(protocol.CauseTimeout, "stopped: %v", pctx.Err())
	}})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	_, err := a.CreateTask(ctx, protocol.TaskRequestBody{})
	wantCode(t, "a task whose client went away", err, protocol.EABORTED)
	if len(s.Tasks) != 0 || len(s.Removed) != 1 || len(s.Files) != 0 {
		t.Errorf("after a cancelled task handler: %d tasks, %d workspaces removed, %d left; want 0, 1, 0", len(s.Tasks), len(s.Removed), len(s.Files))
	}
}

func TestStepsOfOneTaskRunOneAtATimeAndOfDifferentTasksAtOnce(t *testing.T) {
	s := protocoltest.NewStore()
	entered := make(chan string, 4)
	release := make(chan struct{})
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		entered <- string(call.Input())
		<-release
		return 0, call.SetResult([]byte(`{}`))
	}})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	waiting := make(chan string, 4)
	protocol.OnLockWait(a, func(taskID string) { waiting <- taskID })
	t1, t2 := mustCreateTask(t, a), mustCreateTask(t, a)

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	step := func(taskID string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.ExecuteStep(context.Background(), taskID, protocol.StepRequestBody{})
			errs <- err
		}()
	}
	step(t1.TaskID)
	<-entered // the first step of t1 runs
	step(t2.TaskID)
	<-entered // a step of another task runs beside it
	step(t1.TaskID)
	// The second step of t1 must wait for the first: it either says so,
	// or (with no lock) enters the handler.
	select {
	case id := <-waiting:
		if id != t1.TaskID {
			t.Errorf("a step of %s waited, want one of %s", id, t1.TaskID)
		}
	case <-entered:
		t.Errorf("a second step of one task ran while the first was running")
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("step: %v", err)
		}
	}
	if _, overlap := p.Stats(); overlap {
		t.Errorf("two steps of one task ran at once")
	}
}

func TestAPlannedStepRunsBeforeANewOne(t *testing.T) {
	s := protocoltest.NewStore()
	var inputs []string
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{
		protocol.HandlerTask: setResult(`{"steps":[{"name":"first","input":"planned input"}]}`),
		protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
			var in struct {
				Step struct {
					Name    *string `json:"name"`
					Input   *string `json:"input"`
					Planned bool    `json:"planned"`
				} `json:"step"`
			}
			json.Unmarshal(call.Input(), &in)
			inputs = append(inputs, *in.Step.Input)
			return 0, call.SetResult([]byte(`{}`))
		},
	})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	for range 2 {
		if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{Input: str("asked")}); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(inputs, ",") != "planned input,asked" {
		t.Errorf("steps ran with inputs %q, want the planned one first", inputs)
	}
}

// A step of a task with no planned step left runs without a look for one:
// the task says it has none.
func TestAStepLooksForAPlannedStepOnlyWhenTheTaskHasOne(t *testing.T) {
	for _, tc := range []struct {
		plan  string
		looks int
	}{{`{}`, 0}, {`{"steps":[{"name":"first"},{"name":"second"}]}`, 2}} {
		s := protocoltest.NewStore()
		p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{
			protocol.HandlerTask: setResult(tc.plan),
			protocol.HandlerStep: setResult(`{}`),
		})
		a := newAgent(t, s, p, protocol.DefaultLimits)
		task := mustCreateTask(t, a)
		for range 4 {
			if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
				t.Fatal(err)
			}
		}
		if s.PlannedLooks != tc.looks {
			t.Errorf("a task planned %s: %d looks for a planned step in 4 steps, want %d", tc.plan, s.PlannedLooks, tc.looks)
		}
	}
}

func TestAPlanOverTheTaskStepLimitCreatesNoTask(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerTask: setResult(`{"steps":[{},{},{}]}`)})
	limits := protocol.DefaultLimits
	limits.MaxTaskSteps = 2
	a := newAgent(t, s, p, limits)
	_, err := a.CreateTask(context.Background(), protocol.TaskRequestBody{})
	wantCode(t, "a plan of 3 steps under a task limit of 2", err, protocol.EPLUGIN)
	if len(s.Tasks) != 0 {
		t.Errorf("a task was created")
	}
}

func TestATaskHoldsAtMostItsStepLimit(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{}`)})
	limits := protocol.DefaultLimits
	limits.MaxTaskSteps = 2
	a := newAgent(t, s, p, limits)
	task := mustCreateTask(t, a)
	for range 2 {
		if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	wantCode(t, "a third step under a limit of 2", err, protocol.ELIMIT)
}

func TestATaskThatUsedUpItsPluginTimeRunsNoMoreHandlers(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{}`), protocol.HandlerArtifact: setResult(`{}`)})
	p.Elapsed = time.Second
	limits := protocol.DefaultLimits
	limits.MaxTaskTime = 2 * time.Second
	a := newAgent(t, s, p, limits)
	task := mustCreateTask(t, a)
	for range 2 {
		if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	wantCode(t, "a step after the budget was used", err, protocol.ELIMIT)
	up, err := a.NewUpload(context.Background(), task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Discard()
	_, err = up.Commit(context.Background(), "a.txt", "")
	wantCode(t, "an upload's handler after the budget was used", err, protocol.ELIMIT)
	if runs, _ := p.Stats(); runs != 2 {
		t.Errorf("%d handler runs, want 2", runs)
	}
}

// upload uploads data as name to task.
func upload(a *protocol.Agent, taskID, name, data string) (*protocol.Artifact, error) {
	up, err := a.NewUpload(context.Background(), taskID)
	if err != nil {
		return nil, err
	}
	defer up.Discard()
	if _, err := up.Write([]byte(data)); err != nil {
		return nil, err
	}
	return up.Commit(context.Background(), name, "")
}

func TestAnUploadThatIsNotKeptLeavesNothingAtEachStage(t *testing.T) {
	for name, tc := range map[string]struct {
		handler    protocoltest.Handler // nil: no artifact handler
		failRecord bool
		quota      protocol.WorkspaceQuota
		code       string
		placed     bool
	}{
		"rejected by the handler": {handler: setResult(`{"reject":"not today"}`), code: protocol.EREJECTED, placed: true},
		"handler fails":           {handler: setResult(`{"error":"boom"}`), code: protocol.EPLUGIN, placed: true},
		"handler traps": {handler: func(context.Context, *protocol.Call) (int32, error) {
			return 0, protocol.NewPluginFailure(protocol.CauseTrap, "trap")
		}, code: protocol.EPLUGIN, placed: true},
		"recording fails":              {handler: setResult(`{}`), failRecord: true, code: protocol.EINSUFFICIENT, placed: true},
		"recording fails, no handler":  {failRecord: true, code: protocol.EINSUFFICIENT, placed: true},
		"over the workspace quota":     {quota: protocol.WorkspaceQuota{Bytes: 3, Entries: 10}, code: protocol.ETOOLARGE},
		"over the workspace's entries": {quota: protocol.WorkspaceQuota{Bytes: 100, Entries: 1}, code: protocol.ETOOLARGE},
	} {
		t.Run(name, func(t *testing.T) {
			s := protocoltest.NewStore()
			handlers := map[protocol.Handler]protocoltest.Handler{}
			if tc.handler != nil {
				handlers[protocol.HandlerArtifact] = func(ctx context.Context, call *protocol.Call) (int32, error) {
					// The handler's own artifact goes with the upload.
					if _, err := call.CreateArtifact(ctx, protocol.ArtifactSpec{FileName: "derived.txt"}, []byte("d")); err != nil {
						t.Errorf("create artifact: %v", err)
					}
					return tc.handler(ctx, call)
				}
			}
			limits := protocol.DefaultLimits
			if tc.quota != (protocol.WorkspaceQuota{}) {
				limits.MaxWorkspaceBytes, limits.MaxWorkspaceFiles = tc.quota.Bytes, tc.quota.Entries
			}
			a := newAgent(t, s, protocoltest.NewPlugin(handlers), limits)
			task := mustCreateTask(t, a)
			ws := s.Workspace(task.TaskID, protocol.WorkspaceQuota{Bytes: 100, Entries: 100})
			ws.Write(context.Background(), "a.txt", []byte("old")) // the upload replaces it
			ws.Write(context.Background(), "b.txt", []byte("b"))
			if tc.failRecord {
				s.FailRecord = protocol.Errorf(protocol.EINSUFFICIENT, "the disk is full")
			}

			_, err := upload(a, task.TaskID, "a.txt", "new bytes")
			wantCode(t, "the upload", err, tc.code)
			got, _ := s.GetTask(context.Background(), task.TaskID)
			if len(got.Artifacts) != 0 || len(s.Staged) != 0 {
				t.Errorf("%d artifacts recorded, %d still staged; want none", len(got.Artifacts), len(s.Staged))
			}
			if b := s.Files[task.TaskID]["a.txt"]; string(b) != "old" {
				t.Errorf("the file the upload replaced holds %q, want it back as %q", b, "old")
			}
			if tc.placed != (len(s.Placed) == 1) || (tc.placed && (!s.Placed[0].Rolled || s.Placed[0].Committed)) {
				t.Errorf("placed %d (want placed: %v), and not rolled back", len(s.Placed), tc.placed)
			}
		})
	}
}

func TestAnAcceptedUploadIsRecordedWithWhatItsHandlerMade(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerArtifact: func(ctx context.Context, call *protocol.Call) (int32, error) {
		var in struct {
			Artifact struct {
				WorkspacePath string `json:"workspace_path"`
			} `json:"artifact"`
		}
		json.Unmarshal(call.Input(), &in)
		call.Log(protocol.LevelInfo, []byte("saw "+in.Artifact.WorkspacePath))
		_, err := call.CreateArtifact(ctx, protocol.ArtifactSpec{FileName: "copy.txt", WorkspacePath: in.Artifact.WorkspacePath}, nil)
		return 0, err
	}})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	art, err := upload(a, task.TaskID, "in.txt", "hello")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetTask(context.Background(), task.TaskID)
	if len(got.Artifacts) != 2 || got.Artifacts[0].ArtifactID != art.ArtifactID || got.Artifacts[1].FileName != "copy.txt" ||
		string(s.Recorded[got.Artifacts[1].ArtifactID]) != "hello" {
		t.Errorf("recorded %+v", got.Artifacts)
	}
	if !s.Placed[0].Committed || s.Placed[0].Rolled {
		t.Errorf("the placement was not committed")
	}
	if len(got.Logs) != 1 || got.Logs[0].Message != "saw in.txt" {
		t.Errorf("the handler's log was not added to the task's: %+v", got.Logs)
	}
}

func TestATaskHoldsAtMostItsArtifactQuotas(t *testing.T) {
	s := protocoltest.NewStore()
	var createErrs []error
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		createErrs = createErrs[:0]
		for _, name := range []string{"1", "2", "3"} {
			_, err := call.CreateArtifact(ctx, protocol.ArtifactSpec{FileName: name}, []byte("12345"))
			createErrs = append(createErrs, err)
		}
		return 0, nil
	}})
	limits := protocol.DefaultLimits
	limits.MaxTaskArtifacts = 3
	limits.MaxTaskArtifactBytes = 12
	a := newAgent(t, s, p, limits)
	task := mustCreateTask(t, a)
	if _, err := upload(a, task.TaskID, "u.txt", "1"); err != nil {
		t.Fatal(err)
	}
	// 1 byte held: two artifacts of 5 fit the quota of 12, a third does not.
	if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Fatal(err)
	}
	if createErrs[0] != nil || createErrs[1] != nil || protocol.ErrorCode(createErrs[2]) != protocol.ETOOLARGE {
		t.Errorf("creating 3 artifacts of 5 bytes beside 1 byte under a quota of 12: %v", createErrs)
	}
	// 3 artifacts held: the count quota refuses a fourth, before any bytes.
	_, err := a.NewUpload(context.Background(), task.TaskID)
	wantCode(t, "an upload to a task holding all the artifacts it may", err, protocol.ETOOLARGE)
	if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Fatal(err)
	}
	if protocol.ErrorCode(createErrs[0]) != protocol.ETOOLARGE {
		t.Errorf("a fourth artifact created by a step: %v", createErrs[0])
	}
}

func TestAnUploadIsHeldToWhatIsLeftOfTheArtifactBytesQuota(t *testing.T) {
	s := protocoltest.NewStore()
	limits := protocol.DefaultLimits
	limits.MaxTaskArtifactBytes = 10
	a := newAgent(t, s, protocoltest.NewPlugin(nil), limits)
	task := mustCreateTask(t, a)
	if _, err := upload(a, task.TaskID, "a", "123456"); err != nil {
		t.Fatal(err)
	}
	_, err := upload(a, task.TaskID, "b", "12345")
	wantCode(t, "5 bytes beside 6 under a quota of 10", err, protocol.ETOOLARGE)
	if !strings.Contains(protocol.ErrorMessage(err), "quota") {
		t.Errorf("the refusal does not name the quota: %v", err)
	}
}

func TestEveryCallSeesTheTasksWorkspaceQuota(t *testing.T) {
	s := protocoltest.NewStore()
	var writeErr error
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		writeErr = call.WorkspaceWrite(ctx, "big.txt", make([]byte, 11))
		return 0, nil
	}})
	limits := protocol.DefaultLimits
	limits.MaxWorkspaceBytes, limits.MaxWorkspaceFiles = 10, 7
	a := newAgent(t, s, p, limits)
	task := mustCreateTask(t, a)
	if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Fatal(err)
	}
	if protocol.ErrorCode(writeErr) != protocol.ETOOLARGE {
		t.Errorf("writing 11 bytes under a quota of 10: %v", writeErr)
	}
	for _, q := range s.Quotas {
		if q != (protocol.WorkspaceQuota{Bytes: 10, Entries: 7}) {
			t.Errorf("a workspace opened with quota %+v, want the limits' 10 bytes and 7 entries", q)
		}
	}
}

func TestATaskHandlerFailureCreatesNothing(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerTask: func(ctx context.Context, call *protocol.Call) (int32, error) {
		call.WorkspaceWrite(ctx, "w.txt", []byte("w"))
		call.CreateArtifact(ctx, protocol.ArtifactSpec{FileName: "a.txt"}, []byte("a"))
		return 0, call.SetResult([]byte(`{"error":"no"}`))
	}})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	_, err := a.CreateTask(context.Background(), protocol.TaskRequestBody{})
	wantCode(t, "a failing task handler", err, protocol.EPLUGIN)
	if len(s.Tasks) != 0 || len(s.Staged) != 0 || len(s.Files) != 0 {
		t.Errorf("a failed task handler left %d tasks, %d staged artifacts, %d workspaces", len(s.Tasks), len(s.Staged), len(s.Files))
	}
}

func TestTheTaskLogKeepsItsLimitAndSaysWhenItCutsLines(t *testing.T) {
	s := protocoltest.NewStore()
	line := strings.Repeat("x", 100)
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerTask: func(ctx context.Context, call *protocol.Call) (int32, error) {
		for range 10 {
			call.Log(protocol.LevelInfo, []byte(line))
		}
		return 0, nil
	}})
	limits := protocol.DefaultLimits
	limits.MaxTaskLogBytes = 3 * int64(protocol.LogRecordSize([]byte(line)))
	a := newAgent(t, s, p, limits)
	task := mustCreateTask(t, a)
	logs, _ := s.TaskLogs(context.Background(), task.TaskID)
	if len(logs) != 4 || !strings.Contains(logs[3].Message, "log limit") {
		t.Errorf("a task log of 3 lines' room holds %d records, the last %q", len(logs), logs[len(logs)-1].Message)
	}
}

// FuzzStepResult hands the Agent any result a step handler may set, with
// any return code: it never panics, a failure reaches the client cut to a
// bounded size, and a recorded step serves as valid UTF-8 JSON.
func FuzzStepResult(f *testing.F) {
	for _, s := range []string{`{}`, `{"output":"hi","additional_output":{"a":1},"name":"n","is_last":true}`,
		`{"error":"` + strings.Repeat("é", 5000) + `"}`, `{"additional_output":[]}`, `[]`, "{\"output\":\"\xff\"}", `{"output":"\ud800"}`} {
		f.Add([]byte(s), int32(0))
	}
	f.Fuzz(func(t *testing.T, result []byte, code int32) {
		s := protocoltest.NewStore()
		p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
			call.SetResult(result)
			return code, nil
		}})
		a := newAgent(t, s, p, protocol.DefaultLimits)
		task := mustCreateTask(t, a)
		st, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
		if err != nil {
			var e *protocol.Error
			if !errors.As(err, &e) || e.Code != protocol.EPLUGIN || len(e.Message) > protocol.MaxPluginText+100 || !utf8.ValidString(e.Message) {
				t.Fatalf("a failing result reached the client as %T %.200v", err, err)
			}
			if st, err = s.GetStep(context.Background(), task.TaskID, e.StepID); err != nil {
				t.Fatalf("the failed step was not recorded: %v", err)
			}
		}
		b, err := json.Marshal(st)
		if err != nil || !utf8.Valid(b) || !json.Valid(b) {
			t.Fatalf("the recorded step does not serve as JSON: %v %q", err, b)
		}
	})
}
