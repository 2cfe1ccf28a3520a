package storage

import (
	"context"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

// One agent's view of the store finds none of another agent's tasks, by
// any route: every read of a task, its steps, artifacts and logs is
// ENOTFOUND, as for a task that does not exist.
func TestAnAgentSeesOnlyItsOwnTasks(t *testing.T) {
	ctx := context.Background()
	root := mustOpen(t, "")
	echo, other := root.Agent("echo"), root.Agent("other")
	taskID := mustTask(t, echo)
	step := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusCompleted,
		AdditionalInput: []byte("{}"), CreatedAt: time.Now(), Build: &protocol.StepBuild{Agent: "echo", SHA256: "abc"}}
	art := mustStage(t, echo, taskID, "bytes")
	if err := echo.SaveStep(ctx, &step, []protocol.Artifact{art}); err != nil {
		t.Fatal(err)
	}
	page := protocol.Page{Number: 1, Size: 10}

	if _, err := echo.GetTask(ctx, taskID); err != nil {
		t.Fatalf("the agent's own task: %v", err)
	}
	for name, read := range map[string]func(s *Store) error{
		"GetTask":       func(s *Store) error { _, err := s.GetTask(ctx, taskID); return err },
		"TaskLogs":      func(s *Store) error { _, err := s.TaskLogs(ctx, taskID); return err },
		"GetStep":       func(s *Store) error { _, err := s.GetStep(ctx, taskID, step.StepID); return err },
		"ListSteps":     func(s *Store) error { _, _, err := s.ListSteps(ctx, taskID, page); return err },
		"StepLogs":      func(s *Store) error { _, err := s.StepLogs(ctx, taskID, step.StepID); return err },
		"GetArtifact":   func(s *Store) error { _, err := s.GetArtifact(ctx, taskID, art.ArtifactID); return err },
		"ListArtifacts": func(s *Store) error { _, _, err := s.ListArtifacts(ctx, taskID, page); return err },
		"AddArtifacts":  func(s *Store) error { return s.AddArtifacts(ctx, taskID, nil, protocol.TaskLog{}, time.Millisecond) },
	} {
		if err := read(echo); err != nil {
			t.Errorf("%s through its own agent: %v", name, err)
		}
		for _, s := range []*Store{other, root} {
			if err := read(s); protocol.ErrorCode(err) != protocol.ENOTFOUND {
				t.Errorf("%s through agent %q: %v, want ENOTFOUND", name, s.agent, err)
			}
		}
	}
	for _, s := range []*Store{other, root} {
		tasks, total, err := s.ListTasks(ctx, page)
		if err != nil || total != 0 || len(tasks) != 0 {
			t.Errorf("ListTasks through agent %q: %d tasks (total %d) %v, want none", s.agent, len(tasks), total, err)
		}
	}
	if tasks, total, err := echo.ListTasks(ctx, page); err != nil || total != 1 || len(tasks) != 1 {
		t.Errorf("ListTasks through its own agent: %d tasks (total %d) %v", len(tasks), total, err)
	}
	if n, err := echo.CountTasks(ctx); err != nil || n != 1 {
		t.Errorf("CountTasks: %d %v, want 1", n, err)
	}
	if names, err := root.AgentNames(ctx); err != nil || len(names) != 1 || names[0] != "echo" {
		t.Errorf("AgentNames: %v %v, want [echo]", names, err)
	}
}

// A step keeps the agent and the build that ran it; a planned step not
// yet run has none.
func TestAStepKeepsTheBuildThatRanIt(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, "").Agent("echo")
	taskID := uuid.NewString()
	planned := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusCreated,
		AdditionalInput: []byte("{}"), Planned: true, CreatedAt: time.Now()}
	if err := s.CreateTask(ctx, &protocol.Task{TaskID: taskID, AdditionalInput: []byte("{}"), CreatedAt: time.Now()},
		[]protocol.Step{planned}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetStep(ctx, taskID, planned.StepID)
	if err != nil || got.Build != nil {
		t.Fatalf("a planned step: build %+v %v, want none", got.Build, err)
	}
	planned.Status = protocol.StatusCompleted
	planned.Build = &protocol.StepBuild{Agent: "echo", SHA256: "0123abcd"}
	if err := s.SaveStep(ctx, &planned, nil); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetStep(ctx, taskID, planned.StepID)
	if err != nil || got.Build == nil || *got.Build != *planned.Build {
		t.Fatalf("the planned step once run: build %+v %v, want %+v", got.Build, err, planned.Build)
	}
	steps, _, err := s.ListSteps(ctx, taskID, protocol.Page{Number: 1, Size: 10})
	if err != nil || len(steps) != 1 || steps[0].Build == nil || steps[0].Build.SHA256 != "0123abcd" {
		t.Errorf("listed: %+v %v", steps, err)
	}
}

// The tasks of a data directory from before agents had names are the
// unnamed agent's, until an agent adopts them.
func TestAnAgentAdoptsTheUnnamedAgentsTasks(t *testing.T) {
	ctx := context.Background()
	root := mustOpen(t, "")
	old := mustTask(t, root)
	mustTask(t, root.Agent("other"))
	echo := root.Agent("echo")
	if n, err := echo.AdoptTasks(ctx, ""); err != nil || n != 1 {
		t.Fatalf("adopted %d %v, want 1", n, err)
	}
	if _, err := echo.GetTask(ctx, old); err != nil {
		t.Errorf("the adopted task: %v", err)
	}
	if _, err := root.GetTask(ctx, old); protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("the adopted task through the unnamed agent: %v, want ENOTFOUND", err)
	}
	if n, _ := root.Agent("other").CountTasks(ctx); n != 1 {
		t.Errorf("another agent's tasks: %d, want 1 (not adopted)", n)
	}
}
