package storage

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

// mustTaskWithBytes records a task with a step, an artifact (bytes on
// disk) and a workspace file, and returns its id.
func mustTaskWithBytes(t *testing.T, s *Store) string {
	t.Helper()
	ctx := context.Background()
	taskID := mustTask(t, s)
	art := mustStage(t, s, taskID, "artifact bytes")
	step := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusCompleted,
		AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
	if err := s.SaveStep(ctx, &step, []protocol.Artifact{art}); err != nil {
		t.Fatal(err)
	}
	ws := s.Workspace(taskID, protocol.WorkspaceQuota{Bytes: 1 << 20, Entries: 100})
	if err := ws.Write(ctx, "notes/a.txt", []byte("workspace bytes")); err != nil {
		t.Fatal(err)
	}
	return taskID
}

// taskSeq is the seq of a task row.
func taskSeq(t *testing.T, s *Store, taskID string) int64 {
	t.Helper()
	var seq int64
	if err := s.reader(context.Background()).scanOne(`SELECT seq FROM tasks WHERE id = ?`, []any{taskID}, &seq); err != nil {
		t.Fatalf("seq of %s: %v", taskID, err)
	}
	return seq
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

func TestDeletingATaskRemovesItsRowsAndItsBytesAndNothingElse(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, "")
	kept := mustTaskWithBytes(t, s)
	gone := mustTaskWithBytes(t, s)
	if !exists(s.taskDir(gone)) || !exists(s.workspaceDir(gone)) {
		t.Fatal("the task's bytes are not where the test looks for them")
	}

	if err := s.DeleteTask(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTask(ctx, gone); protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("GetTask after delete: %v, want ENOTFOUND", err)
	}
	for _, table := range []string{"steps", "artifacts", "task_logs", "task_deletions"} {
		if rows := queryRows(t, s, `SELECT * FROM `+table+` WHERE task_id = '`+gone+`'`); len(rows) != 0 {
			t.Errorf("%s keeps %d rows of the deleted task", table, len(rows))
		}
	}
	if exists(s.taskDir(gone)) || exists(s.workspaceDir(gone)) {
		t.Errorf("the deleted task's bytes are still on disk")
	}
	if err := s.DeleteTask(ctx, gone); protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("deleting it again: %v, want ENOTFOUND", err)
	}

	task, err := s.GetTask(ctx, kept)
	if err != nil || len(task.Artifacts) != 1 || readArtifact(t, s, task.Artifacts[0]) != "artifact bytes" {
		t.Fatalf("the other task after the delete: %+v, %v", task, err)
	}
	if b, err := s.ReadFile(kept, "notes/a.txt", 100); err != nil || string(b) != "workspace bytes" {
		t.Errorf("the other task's workspace: %q, %v", b, err)
	}
}

func TestADeletedTaskIsDeletedOnlyThroughItsOwnAgent(t *testing.T) {
	ctx := context.Background()
	root := mustOpen(t, "")
	echo := root.Agent("echo")
	taskID := mustTask(t, echo)
	title := "kept"
	for _, s := range []*Store{root.Agent("other"), root} {
		if err := s.DeleteTask(ctx, taskID); protocol.ErrorCode(err) != protocol.ENOTFOUND {
			t.Errorf("DeleteTask through agent %q: %v, want ENOTFOUND", s.agent, err)
		}
		if err := s.UpdateTask(ctx, taskID, protocol.TaskPatch{Title: protocol.PatchField{Set: true, Value: &title}}); protocol.ErrorCode(err) != protocol.ENOTFOUND {
			t.Errorf("UpdateTask through agent %q: %v, want ENOTFOUND", s.agent, err)
		}
	}
	if task, err := echo.GetTask(ctx, taskID); err != nil || task.Title != nil {
		t.Errorf("the task after other agents tried: %+v, %v", task, err)
	}
}

// A task's seq is never given twice: deleting the newest task and
// creating another must not hand the new one the old seq (a client paging
// "after seq N" would skip it).
func TestASeqIsNeverGivenTwiceAfterADelete(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	first := mustTask(t, s)
	newest := mustTask(t, s)
	deletedSeq := taskSeq(t, s, newest)
	if err := s.DeleteTask(ctx, newest); err != nil {
		t.Fatal(err)
	}
	next := mustTask(t, s)
	if seq := taskSeq(t, s, next); seq <= deletedSeq {
		t.Errorf("the task created after deleting seq %d got seq %d", deletedSeq, seq)
	}
	// The floor survives a restart, and deleting every task.
	for _, id := range []string{first, next} {
		if err := s.DeleteTask(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = mustOpen(t, dir)
	after := mustTask(t, s)
	if seq := taskSeq(t, s, after); seq <= deletedSeq+1 {
		t.Errorf("after deleting every task and a restart a new task got seq %d, want more than %d", seq, deletedSeq+1)
	}
	tasks, total, err := s.ListTasks(ctx, protocol.Page{Number: 1, Size: 10})
	if err != nil || total != 1 || len(tasks) != 1 || tasks[0].TaskID != after {
		t.Errorf("ListTasks: %d tasks (total %d), %v", len(tasks), total, err)
	}
}

// A process that dies after a deletion's commit, before the bytes are
// removed, leaves the deletion recorded: the next start removes them.
func TestADeletionCutShortIsFinishedAtTheNextStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	taskID := mustTaskWithBytes(t, s)
	if err := s.deleteTaskRows(ctx, taskID); err != nil { // the commit, and then the process dies
		t.Fatal(err)
	}
	artifacts, workspace := s.taskDir(taskID), s.workspaceDir(taskID)
	if !exists(artifacts) || !exists(workspace) {
		t.Fatal("the bytes went with the rows: the test cannot show the next start removing them")
	}
	s.Close()

	s = mustOpen(t, dir)
	if exists(artifacts) || exists(workspace) {
		t.Errorf("the next start left the deleted task's bytes on disk")
	}
	eventually(t, "the finished deletion forgotten", func() bool {
		return len(queryRows(t, s, `SELECT * FROM task_deletions`)) == 0
	})
}

// eventually polls cond until it holds, failing after a minute: how a
// test waits for what it cannot be told of.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTaskMetadataIsStoredExactlyAndPatchedFieldByField(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	title, desc, version := "Prime Ticker 🏷️", "Execute prime model...\n\twith\ttabs ", " v0.3 "
	id := uuid.NewString()
	err := s.CreateTask(ctx, &protocol.Task{TaskID: id, AdditionalInput: []byte("{}"), CreatedAt: time.Now(),
		Title: &title, Description: &desc, Version: &version}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTask(ctx, id)
	if err != nil || got.Title == nil || *got.Title != title || *got.Description != desc || *got.Version != version {
		t.Fatalf("GetTask: %+v, %v", got, err)
	}

	newTitle := "renamed"
	if err := s.UpdateTask(ctx, id, protocol.TaskPatch{
		Title:   protocol.PatchField{Set: true, Value: &newTitle},
		Version: protocol.PatchField{Set: true}, // removed
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, dir)
	got, err = s.GetTask(ctx, id)
	switch {
	case err != nil:
		t.Fatal(err)
	case got.Title == nil || *got.Title != newTitle:
		t.Errorf("title %v, want %q", got.Title, newTitle)
	case got.Description == nil || *got.Description != desc:
		t.Errorf("description %v, want it unchanged", got.Description)
	case got.Version != nil:
		t.Errorf("version %q, want it removed", *got.Version)
	}
	if err := s.UpdateTask(ctx, uuid.NewString(), protocol.TaskPatch{Title: protocol.PatchField{Set: true}}); protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("UpdateTask of no task: %v, want ENOTFOUND", err)
	}
}

// A step marked running whose process dies is marked failed, with the
// code "interrupted", when the store next opens; its task stays usable.
func TestAStepLeftRunningIsMarkedInterruptedAtTheNextStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	taskID := mustTask(t, s)
	running := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusRunning,
		Input: ptr("long work"), AdditionalInput: []byte("{}"), CreatedAt: time.Now(), Build: &protocol.StepBuild{Agent: "a", SHA256: "b"}}
	if err := s.StartStep(ctx, &running); err != nil {
		t.Fatal(err)
	}
	// The mark is there for every reader at once, though not synced.
	st, err := s.GetStep(ctx, taskID, running.StepID)
	if err != nil || st.Status != protocol.StatusRunning {
		t.Fatalf("the step while it runs: %+v, %v", st, err)
	}
	if task, _ := s.GetTask(ctx, taskID); task.StepCount != 1 {
		t.Errorf("the task counts %d steps while one runs, want 1", task.StepCount)
	}
	s.Close() // as a killed process: no SaveStep

	s = mustOpen(t, dir)
	st, err = s.GetStep(ctx, taskID, running.StepID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != protocol.StatusCompleted || st.Output != nil || !strings.Contains(string(st.AdditionalOutput), `"code":"interrupted"`) {
		t.Errorf("the interrupted step reads back as %s %v %s", st.Status, st.Output, st.AdditionalOutput)
	}
	if st.Input == nil || *st.Input != "long work" || st.Build == nil || st.Build.SHA256 != "b" {
		t.Errorf("the interrupted step lost its input or build: %+v", st)
	}
	// The task stays usable: another step runs and is recorded.
	next := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusRunning, AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
	if err := s.StartStep(ctx, &next); err != nil {
		t.Fatal(err)
	}
	next.Status = protocol.StatusCompleted
	if err := s.SaveStep(ctx, &next, nil); err != nil {
		t.Fatal(err)
	}
	steps, total, err := s.ListSteps(ctx, taskID, protocol.Page{Number: 1, Size: 10})
	if err != nil || total != 2 || steps[1].Status != protocol.StatusCompleted {
		t.Errorf("the task's steps after recovery: %+v (total %d), %v", steps, total, err)
	}
	if task, _ := s.GetTask(ctx, taskID); task.StepCount != 2 {
		t.Errorf("the task counts %d steps, want 2", task.StepCount)
	}
}

func TestAnAbandonedStepIsGoneOrPlannedAgain(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, "")
	taskID := uuid.NewString()
	name := "planned"
	planned := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Name: &name, Status: protocol.StatusCreated,
		AdditionalInput: []byte("{}"), Planned: true, CreatedAt: time.Now()}
	err := s.CreateTask(ctx, &protocol.Task{TaskID: taskID, AdditionalInput: []byte("{}"), CreatedAt: time.Now()}, []protocol.Step{planned}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fresh := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusRunning, AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
	for _, st := range []*protocol.Step{&planned, &fresh} {
		st.Status = protocol.StatusRunning
		if err := s.StartStep(ctx, st); err != nil {
			t.Fatal(err)
		}
		if err := s.AbandonStep(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	steps, total, err := s.ListSteps(ctx, taskID, protocol.Page{Number: 1, Size: 10})
	if err != nil || total != 1 || steps[0].StepID != planned.StepID || steps[0].Status != protocol.StatusCreated || steps[0].Build != nil {
		t.Errorf("after abandoning both: %+v (total %d), %v", steps, total, err)
	}
	if next, err := s.NextPlannedStep(ctx, taskID); err != nil || next == nil || next.StepID != planned.StepID {
		t.Errorf("the planned step is not planned again: %+v, %v", next, err)
	}
	if task, _ := s.GetTask(ctx, taskID); task.StepCount != 1 {
		t.Errorf("the task counts %d steps, want 1", task.StepCount)
	}
}

func TestStepSummariesCountOutcomesAndListWhatIsPlanned(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, "")
	taskID := uuid.NewString()
	var planned []protocol.Step
	for _, name := range []string{"🛠️ Setup ", "🦾 Fetch model", "⚙️ Run model"} {
		planned = append(planned, protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Name: ptr(name), Status: protocol.StatusCreated,
			AdditionalInput: []byte("{}"), Planned: true, CreatedAt: time.Now()})
	}
	if err := s.CreateTask(ctx, &protocol.Task{TaskID: taskID, AdditionalInput: []byte("{}"), CreatedAt: time.Now()}, planned, nil); err != nil {
		t.Fatal(err)
	}
	ok, failed := planned[0], planned[1]
	ok.Status = protocol.StatusCompleted
	failed.Status = protocol.StatusCompleted
	failed.AdditionalOutput = protocol.FailureOutput(protocol.Errorf(protocol.EPLUGIN, "boom"))
	for _, st := range []*protocol.Step{&ok, &failed} {
		if err := s.SaveStep(ctx, st, nil); err != nil {
			t.Fatal(err)
		}
	}
	other := mustTask(t, s)
	sums, err := s.StepSummaries(ctx, []string{taskID, other, uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	got := sums[taskID]
	if len(got.Planned) != 1 || got.Planned[0] != "⚙️ Run model" || got.Completed != 1 || got.Failed != 1 || got.Running != 0 {
		t.Errorf("summary %+v", got)
	}
	if sum, ok := sums[other]; !ok || len(sum.Planned) != 0 || sum.Completed != 0 {
		t.Errorf("a task without steps: %+v, %v", sum, ok)
	}
	if len(sums) != 2 {
		t.Errorf("%d summaries, want 2 (none for a task that does not exist)", len(sums))
	}
}

func ptr[T any](v T) *T { return &v }
