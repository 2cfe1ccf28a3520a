package storage

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// listAll reads every page of size the agent's task list has, checking
// each page's total, and returns the ids in order.
func listAll(t *testing.T, s *Store, size, wantTotal int) []string {
	t.Helper()
	var ids []string
	for page := 1; ; page++ {
		tasks, total, err := s.ListTasks(context.Background(), protocol.Page{Number: page, Size: size})
		if err != nil {
			t.Fatal(err)
		}
		if total != wantTotal {
			t.Fatalf("page %d: total_items %d, want %d", page, total, wantTotal)
		}
		for _, task := range tasks {
			ids = append(ids, task.TaskID)
		}
		if len(tasks) < size {
			// A page past the end is empty.
			if more, _, _ := s.ListTasks(context.Background(), protocol.Page{Number: page + 1, Size: size}); len(more) != 0 {
				t.Fatalf("page %d after a short page %d holds %d tasks", page+1, page, len(more))
			}
			return ids
		}
	}
}

// deleteTask deletes a task's row as a delete of a task would, in its own
// transaction: whatever deletes tasks, the triggers keep the agent's
// count and its tasks' positions right.
func deleteTask(t *testing.T, s *Store, id string) {
	t.Helper()
	err := s.inTx(context.Background(), anyTasks, 1, func(w db) error {
		_, err := w.exec(`DELETE FROM tasks WHERE id = ?`, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Pages and total_items stay right as tasks are created and deleted,
// across agents: every page of every size holds the tasks left, in
// creation order, and total_items counts them, with no COUNT(*).
func TestTaskListsStayRightAsTasksAreCreatedAndDeleted(t *testing.T) {
	root := mustOpen(t, "")
	a, b := root.Agent("a"), root.Agent("b")
	var wantA, wantB []string
	for i := range 40 {
		wantA = append(wantA, mustTask(t, a))
		if i%3 == 0 {
			wantB = append(wantB, mustTask(t, b))
		}
	}
	check := func(what string) {
		t.Helper()
		for _, size := range []int{1, 3, 7, 10, 100} {
			if got := listAll(t, a, size, len(wantA)); !slices.Equal(got, wantA) {
				t.Fatalf("%s, pages of %d: %v, want %v", what, size, got, wantA)
			}
		}
		if got := listAll(t, b, 4, len(wantB)); !slices.Equal(got, wantB) {
			t.Fatalf("%s, the other agent: %v, want %v", what, got, wantB)
		}
		if n, _ := a.CountTasks(context.Background()); n != len(wantA) {
			t.Fatalf("%s: CountTasks %d, want %d", what, n, len(wantA))
		}
	}
	check("created")
	// Delete the first, some in the middle, runs, and the last.
	for _, i := range []int{39, 20, 21, 22, 5, 0, 30} {
		deleteTask(t, a, wantA[i])
	}
	keep := wantA[:0:0]
	for i, id := range wantA {
		if !slices.Contains([]int{39, 20, 21, 22, 5, 0, 30}, i) {
			keep = append(keep, id)
		}
	}
	wantA = keep
	check("after deletes")
	for range 5 {
		wantA = append(wantA, mustTask(t, a))
	}
	check("created after deletes")
	// A row inserted without its position gets the agent's next.
	raw := "0c7b3f5e-2a1d-4e6f-8b9a-7c6d5e4f3a2b"
	err := a.inTx(context.Background(), anyTasks, 1, func(w db) error {
		_, err := w.exec(`INSERT INTO tasks (id, agent, additional_input, created_at) VALUES (?, 'a', '{}', 0)`, raw)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantA = append(wantA, raw)
	check("inserted without a position")
	for _, id := range wantA {
		deleteTask(t, a, id)
	}
	wantA = nil
	check("all deleted")
	names, _ := root.AgentNames(context.Background())
	if !slices.Equal(names, []string{"b"}) {
		t.Errorf("agents with tasks: %v, want [b]", names)
	}
}

// A delete that fails leaves the count as it was: the count is kept in the
// transaction that deletes.
func TestTheTaskCountIsKeptInTheDeletesTransaction(t *testing.T) {
	s := mustOpen(t, "").Agent("a")
	id := mustTask(t, s)
	mustTask(t, s)
	err := s.inTx(context.Background(), anyTasks, 1, func(w db) error {
		if _, err := w.exec(`DELETE FROM tasks WHERE id = ?`, id); err != nil {
			return err
		}
		return fmt.Errorf("the delete's transaction fails")
	})
	if err == nil {
		t.Fatal("the failing transaction committed")
	}
	if got := listAll(t, s, 10, 2); len(got) != 2 {
		t.Errorf("after a failed delete: %v", got)
	}
}

// Adopting the unnamed agent's tasks numbers the agent's list again in
// creation order, the adopted (older) tasks first.
func TestAdoptedTasksAreListedInCreationOrder(t *testing.T) {
	root := mustOpen(t, "")
	echo := root.Agent("echo")
	var want []string
	for i := range 6 {
		if i%2 == 0 {
			want = append(want, mustTask(t, root))
		} else {
			want = append(want, mustTask(t, echo))
		}
	}
	deleteTask(t, echo, want[3])
	want = slices.Delete(want, 3, 4)
	if n, err := echo.AdoptTasks(context.Background(), ""); err != nil || n != 3 {
		t.Fatalf("adopted %d, %v", n, err)
	}
	if got := listAll(t, echo, 2, 5); !slices.Equal(got, want) {
		t.Errorf("after adoption: %v, want %v", got, want)
	}
	if got := listAll(t, root, 2, 0); len(got) != 0 {
		t.Errorf("the unnamed agent still lists %v", got)
	}
	want = append(want, mustTask(t, echo))
	if got := listAll(t, echo, 4, 6); !slices.Equal(got, want) {
		t.Errorf("a task created after adoption: %v, want %v", got, want)
	}
}

// The migration numbers every agent's tasks in creation order and counts
// them.
func TestMigrationToTaskPositionsNumbersAndCountsEachAgentsTasks(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	old, err := openWith(ctx, dir, Config{}, schemaUpTo(t, 6))
	if err != nil {
		t.Fatal(err)
	}
	var wantA, wantB []string
	for i := range 9 {
		id, agent := fmt.Sprintf("00000000-0000-0000-0000-%012d", i), "a"
		if i%3 == 0 {
			agent = "b"
			wantB = append(wantB, id)
		} else {
			wantA = append(wantA, id)
		}
		oldWrite(t, old, fmt.Sprintf(`INSERT INTO tasks (id, agent, additional_input, created_at) VALUES ('%s', '%s', '{}', %d)`, id, agent, i))
	}
	old.Close()
	s := mustOpen(t, dir)
	if got := listAll(t, s.Agent("a"), 4, 6); !slices.Equal(got, wantA) {
		t.Errorf("agent a after the migration: %v, want %v", got, wantA)
	}
	if got := listAll(t, s.Agent("b"), 2, 3); !slices.Equal(got, wantB) {
		t.Errorf("agent b after the migration: %v, want %v", got, wantB)
	}
	id := mustTask(t, s.Agent("a"))
	if got := listAll(t, s.Agent("a"), 10, 7); got[6] != id {
		t.Errorf("a task created after the migration is not last: %v", got)
	}
}

// GetTask says whether the task has planned steps left; SaveStep completes
// a planned step's row, inserts a new step's, and refuses a planned step
// whose row is not the task's.
func TestGetTaskSaysWhetherPlannedStepsAreLeftAndSaveStepCompletesThem(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, "")
	task := &protocol.Task{TaskID: "6bb1801a-fd80-45e8-899a-4dd723cc602e", AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
	planned := protocol.Step{TaskID: task.TaskID, StepID: "28ca533e-3904-4401-8a07-c49adf8891c2", Status: protocol.StatusCreated,
		AdditionalInput: []byte("{}"), Planned: true, CreatedAt: time.Now()}
	if err := s.CreateTask(ctx, task, []protocol.Step{planned}, nil); err != nil {
		t.Fatal(err)
	}
	left := func() bool {
		got, err := s.GetTask(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		return got.PlannedLeft
	}
	if !left() {
		t.Error("a task with a planned step says it has none left")
	}
	ghost := planned
	ghost.StepID, ghost.Status = "3b1f0c59-8c1e-4f57-9d3a-5d2b0a7f4e11", protocol.StatusCompleted
	if err := s.SaveStep(ctx, &ghost, nil); protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("saving a planned step the task does not hold: %v, want ENOTFOUND", err)
	}
	planned.Status = protocol.StatusCompleted
	if err := s.SaveStep(ctx, &planned, nil); err != nil {
		t.Fatal(err)
	}
	if left() {
		t.Error("a task whose planned step ran says it has one left")
	}
	fresh := protocol.Step{TaskID: task.TaskID, StepID: "9c2d7e1a-0b4f-4c3e-8a6d-1f2e3d4c5b6a", Status: protocol.StatusCompleted,
		AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
	if err := s.SaveStep(ctx, &fresh, nil); err != nil {
		t.Fatal(err)
	}
	steps, total, err := s.ListSteps(ctx, task.TaskID, protocol.Page{Number: 1, Size: 10})
	if err != nil || total != 2 || steps[0].StepID != planned.StepID || steps[1].StepID != fresh.StepID || steps[0].Status != protocol.StatusCompleted {
		t.Errorf("steps %+v (%d), %v", steps, total, err)
	}
	if got, _ := s.GetTask(ctx, task.TaskID); got.StepCount != 2 {
		t.Errorf("step count %d, want 2", got.StepCount)
	}
}
