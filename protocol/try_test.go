package protocol_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

func tryTask() *protocol.Task {
	return &protocol.Task{TaskID: "01900000-0000-7000-8000-000000000001", Input: str("the task"), AdditionalInput: []byte("{}")}
}

func TestATriedStepRecordsNothingAndKeepsItsArtifactsStaged(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		call.WorkspaceWrite(ctx, "notes.txt", []byte("n"))
		call.CreateArtifact(ctx, protocol.ArtifactSpec{FileName: "a.txt"}, []byte("a"))
		return 0, call.SetResult([]byte(`{"output":"done","is_last":true}`))
	}})
	tried, err := protocol.TryHandler(context.Background(), s, &protocol.Build{Plugin: p, Limits: protocol.DefaultLimits},
		protocol.Try{Handler: protocol.HandlerStep, Task: tryTask(), Request: protocol.StepRequestBody{Input: str("go")}, StepName: "first"})
	if err != nil || tried.Err != nil {
		t.Fatalf("try: %v, %v", err, tried.Err)
	}
	st := tried.Step
	if *st.Output != "done" || !st.IsLast || *st.Name != "first" || !st.Planned || len(st.Artifacts) != 1 || st.Status != protocol.StatusCompleted {
		t.Errorf("step = %+v", st)
	}
	if len(s.Tasks) != 0 || len(s.Staged) != 1 || string(s.Files[tryTask().TaskID]["notes.txt"]) != "n" {
		t.Errorf("a try recorded %d tasks, staged %d artifacts, workspace %v", len(s.Tasks), len(s.Staged), s.Files)
	}
	tried.Discard()
	if len(s.Staged) != 0 {
		t.Errorf("Discard left %d staged artifacts", len(s.Staged))
	}
}

func TestATriedFailureIsTheClientsErrorOnTheStepWithoutArtifacts(t *testing.T) {
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		call.CreateArtifact(ctx, protocol.ArtifactSpec{FileName: "a.txt"}, []byte("a"))
		call.SetResult([]byte(`{"error":"panicked at 'x'"}`))
		return trapped(ctx, call)
	}})
	tried, err := protocol.TryHandler(context.Background(), s, &protocol.Build{Plugin: p, Limits: protocol.DefaultLimits},
		protocol.Try{Handler: protocol.HandlerStep, Task: tryTask()})
	if err != nil {
		t.Fatal(err)
	}
	if tried.Err == nil || tried.Err.Message != "step handler failed: panicked at 'x' (the plugin trapped: wasm error: unreachable)" {
		t.Errorf("failure = %+v", tried.Err)
	}
	if !strings.Contains(string(tried.Step.AdditionalOutput), "panicked at 'x'") || len(tried.Artifacts) != 0 || len(s.Staged) != 0 {
		t.Errorf("step %s, artifacts %+v, %d staged", tried.Step.AdditionalOutput, tried.Artifacts, len(s.Staged))
	}
}

func TestATriedUploadIsTakenBackWhenRejected(t *testing.T) {
	for result, kept := range map[string]bool{`{"reject":"no"}`: false, `{}`: true} {
		s := protocoltest.NewStore()
		p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{}`), protocol.HandlerArtifact: setResult(result)})
		tried, err := protocol.TryHandler(context.Background(), s, &protocol.Build{Plugin: p, Limits: protocol.DefaultLimits},
			protocol.Try{Handler: protocol.HandlerArtifact, Task: tryTask(), Upload: &protocol.TryUpload{FileName: "x.txt", RelativePath: "in", Data: strings.NewReader("data")}})
		if err != nil || tried.Err != nil {
			t.Fatalf("%s: %v %v", result, err, tried.Err)
		}
		_, placed := s.Files[tryTask().TaskID]["in/x.txt"]
		if placed != kept || (tried.Rejected != "") == kept {
			t.Errorf("%s: the upload is in the workspace: %v, rejected %q", result, placed, tried.Rejected)
		}
	}
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{}`)})
	if _, err := protocol.TryHandler(context.Background(), protocoltest.NewStore(), &protocol.Build{Plugin: p, Limits: protocol.DefaultLimits},
		protocol.Try{Handler: protocol.HandlerTask, Task: tryTask()}); err == nil {
		t.Error("trying a handler the plugin lacks ran")
	}
}
