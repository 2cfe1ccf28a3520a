package protocol_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// stepAnswering is a step handler whose output is output.
func stepAnswering(output string) protocoltest.Handler {
	return setResult(`{"output":"` + output + `"}`)
}

func TestEveryStepRecordsTheAgentAndTheBuildThatRanIt(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: stepAnswering("one")})
	a := protocol.NewAgent(s, &protocol.Build{Plugin: p, ID: "sha-1", Limits: protocol.DefaultLimits}, protocol.AgentConfig{Name: "echo"})
	task := mustCreateTask(t, a)
	st, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Build == nil || *st.Build != (protocol.StepBuild{Agent: "echo", SHA256: "sha-1"}) {
		t.Fatalf("the step's build: %+v, want echo and sha-1", st.Build)
	}
	got, err := a.GetStep(context.Background(), task.TaskID, st.StepID)
	if err != nil || got.Build == nil || got.Build.SHA256 != "sha-1" {
		t.Errorf("the stored step's build: %+v %v", got, err)
	}

	// A failed step records the build that failed too.
	p2 := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		return 0, protocol.NewPluginFailure(protocol.CauseTrap, "trap")
	}})
	a.Serve(&protocol.Build{Plugin: p2, ID: "sha-2", Limits: protocol.DefaultLimits})
	_, err = a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	failedID := stepIDOf(t, err)
	failed, err := a.GetStep(context.Background(), task.TaskID, failedID)
	if err != nil || failed.Build == nil || failed.Build.SHA256 != "sha-2" {
		t.Errorf("the failed step's build: %+v %v, want sha-2", failed, err)
	}
}

// stepIDOf is the id of the step a plugin failure was recorded on.
func stepIDOf(t *testing.T, err error) string {
	t.Helper()
	e, ok := errors.AsType[*protocol.PluginFailure](err)
	if !ok || e.StepID == "" {
		t.Fatalf("want a plugin failure recorded on a step, got %v", err)
	}
	return e.StepID
}

// A new build serves new operations at once, while those in progress end
// on the build they began with; the old build is reported drained only
// after them.
func TestAReplacedBuildFinishesWhatItBeganAndServesNothingNew(t *testing.T) {
	s := protocoltest.NewStore()
	entered, release := make(chan struct{}), make(chan struct{})
	old := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		close(entered)
		<-release
		return 0, call.SetResult([]byte(`{"output":"old"}`))
	}})
	a := protocol.NewAgent(s, &protocol.Build{Plugin: old, ID: "old", Limits: protocol.DefaultLimits}, protocol.AgentConfig{Name: "a"})
	t1, t2 := mustCreateTask(t, a), mustCreateTask(t, a)

	type result struct {
		st  *protocol.Step
		err error
	}
	inFlight := make(chan result, 1)
	go func() {
		st, err := a.ExecuteStep(context.Background(), t1.TaskID, protocol.StepRequestBody{})
		inFlight <- result{st, err}
	}()
	<-entered

	next := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: stepAnswering("new")})
	drained := a.Serve(&protocol.Build{Plugin: next, ID: "new", Limits: protocol.DefaultLimits})
	select {
	case <-drained:
		t.Fatal("the old build was reported drained while a step still ran on it")
	default:
	}
	st, err := a.ExecuteStep(context.Background(), t2.TaskID, protocol.StepRequestBody{})
	if err != nil || *st.Output != "new" || st.Build.SHA256 != "new" {
		t.Fatalf("a step begun after the replacement: %+v %v, want the new build", st, err)
	}

	close(release)
	r := <-inFlight
	if r.err != nil || *r.st.Output != "old" || r.st.Build.SHA256 != "old" {
		t.Fatalf("the step begun before the replacement: %+v %v, want it to end on the old build", r.st, r.err)
	}
	<-drained // closed once the old build's last step ended
	if a.Serving().ID != "new" {
		t.Errorf("serving %q, want new", a.Serving().ID)
	}
}

// An upload holds the build it began with until it is committed.
func TestAnUploadInProgressHoldsItsBuild(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: stepAnswering("x")})
	a := protocol.NewAgent(s, &protocol.Build{Plugin: p, ID: "old", Limits: protocol.DefaultLimits}, protocol.AgentConfig{Name: "a"})
	task := mustCreateTask(t, a)
	up, err := a.NewUpload(context.Background(), task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	drained := a.Serve(&protocol.Build{Plugin: p, ID: "new", Limits: protocol.DefaultLimits})
	select {
	case <-drained:
		t.Fatal("the old build was reported drained while an upload held it")
	default:
	}
	if _, err := up.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := up.Commit(context.Background(), "a.txt", ""); err != nil {
		t.Fatal(err)
	}
	up.Discard() // after Commit, nothing; and the build is not released twice
	<-drained

	// A discarded upload releases its build too.
	up, err = a.NewUpload(context.Background(), task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	drained = a.Serve(&protocol.Build{Plugin: p, ID: "newer", Limits: protocol.DefaultLimits})
	up.Discard()
	<-drained
}

// An agent whose plugin was removed keeps its tasks readable and refuses
// new work with ECONFLICT.
func TestAnAgentWithoutABuildRefusesWorkAndServesReads(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: stepAnswering("x")})
	a := protocol.NewAgent(s, &protocol.Build{Plugin: p, ID: "b", Limits: protocol.DefaultLimits}, protocol.AgentConfig{Name: "gone"})
	task := mustCreateTask(t, a)
	st, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	<-a.Serve(nil)

	ctx := context.Background()
	if _, err := a.ExecuteStep(ctx, task.TaskID, protocol.StepRequestBody{}); protocol.ErrorCode(err) != protocol.ECONFLICT ||
		!bytes.Contains([]byte(err.Error()), []byte(`"gone"`)) {
		t.Errorf("execute step: %v, want ECONFLICT naming the agent", err)
	}
	if _, err := a.CreateTask(ctx, protocol.TaskRequestBody{}); protocol.ErrorCode(err) != protocol.ECONFLICT {
		t.Errorf("create task: %v, want ECONFLICT", err)
	}
	if _, err := a.NewUpload(ctx, task.TaskID); protocol.ErrorCode(err) != protocol.ECONFLICT {
		t.Errorf("upload: %v, want ECONFLICT", err)
	}
	if _, err := a.GetTask(ctx, task.TaskID); err != nil {
		t.Errorf("get task: %v", err)
	}
	if _, err := a.GetStep(ctx, task.TaskID, st.StepID); err != nil {
		t.Errorf("get step: %v", err)
	}
	if list, err := a.ListSteps(ctx, task.TaskID, protocol.Page{Number: 1, Size: 10}); err != nil || len(list.Steps) != 1 {
		t.Errorf("list steps: %+v %v", list, err)
	}
	if a.Serving() != nil {
		t.Errorf("serving %+v, want none", a.Serving())
	}
}
