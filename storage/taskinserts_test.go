package storage

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentrt/agentrt/protocol"
)

// createTogether asks for the creation of tasks, each on a goroutine of
// its own, while the writer is held, so that they are committed in one
// transaction; planned gives each its planned steps. It returns what each
// CreateTask returned.
func createTogether(t *testing.T, tasks []*protocol.Task, stores []*Store, planned func(i int) []protocol.Step) []error {
	t.Helper()
	release, _ := holdWriter(t, stores[0], nil)
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, task := range tasks {
		wg.Go(func() { errs[i] = stores[i].CreateTask(context.Background(), task, planned(i), nil) })
	}
	waitQueuedWrites(t, stores[0], len(tasks))
	release()
	wg.Wait()
	return errs
}

func newTask() *protocol.Task {
	return &protocol.Task{TaskID: uuid.NewString(), AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
}

// bySeq returns the agent's task ids and positions in seq order.
func bySeq(t *testing.T, s *Store) (ids []string, positions []int) {
	t.Helper()
	rows, err := s.reader(context.Background()).query(`SELECT id, position FROM tasks WHERE agent = ? ORDER BY seq`, s.agent)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var p int
		if err := rows.Scan(&id, &p); err != nil {
			t.Fatal(err)
		}
		ids, positions = append(ids, id), append(positions, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids, positions
}

// checkList checks that the agent has want tasks, numbered 1 to want in
// seq order, and that its pages list them in that order.
func checkList(t *testing.T, s *Store, want int) []string {
	t.Helper()
	ids, positions := bySeq(t, s)
	if len(ids) != want {
		t.Fatalf("agent %q has %d tasks, want %d", s.agent, len(ids), want)
	}
	for i, p := range positions {
		if p != i+1 {
			t.Fatalf("agent %q: positions in seq order %v, want 1 to %d", s.agent, positions, want)
		}
	}
	for _, size := range []int{1, 7, 64, 200} {
		if got := listAll(t, s, size, want); !slices.Equal(got, ids) {
			t.Fatalf("agent %q, pages of %d: %v, want %v", s.agent, size, got, ids)
		}
	}
	return ids
}

// Tasks of two agents created in one transaction, more than one
// statement's rows and around a task with planned steps (whose steps are
// written between the rows before and after it), each take the next seq
// and their agent's next position, and keep every column they were given.
func TestTasksCreatedTogetherTakeEachTheNextSeqAndTheirAgentsNextPosition(t *testing.T) {
	root := mustOpen(t, "")
	a, b := root.Agent("a"), root.Agent("b")
	mustTask(t, a)                 // positions continue from what is stored
	const n = 2*maxInsertRows + 32 // a multiple of 4
	tasks := make([]*protocol.Task, n)
	stores := make([]*Store, n)
	for i := range tasks {
		tasks[i], stores[i] = newTask(), a
		if i%4 == 0 {
			stores[i] = b
		}
	}
	title, in := "a title", "an input"
	rich := tasks[n/2]
	rich.Title, rich.Input, rich.PluginTime = &title, &in, 1500*time.Microsecond
	plannedFor := func(i int) []protocol.Step {
		if i != n/2 {
			return nil
		}
		return []protocol.Step{{TaskID: rich.TaskID, StepID: uuid.NewString(), Status: protocol.StatusCreated,
			AdditionalInput: []byte("{}"), CreatedAt: time.Now()}}
	}
	for i, err := range createTogether(t, tasks, stores, plannedFor) {
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
	}
	checkList(t, a, 1+n-n/4)
	checkList(t, b, n/4)
	got, err := stores[n/2].queryTask(context.Background(), rich.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Title == nil || *got.Title != title || got.Input == nil || *got.Input != in || got.PluginTime != rich.PluginTime ||
		got.StepCount != 1 || !got.PlannedLeft || got.Description != nil {
		t.Errorf("the task with planned steps as stored: %+v", got)
	}
	mustTask(t, b)
	checkList(t, b, n/4+1)
}

// A transaction that fails, after the rows of the tasks before the failing
// write were inserted, gives back the seqs and positions they took: the
// writes run again, each alone, and take the positions that follow the
// stored tasks, with no gap that no deletion left.
func TestATransactionThatFailsLeavesNoPositionItGaveBehind(t *testing.T) {
	s := mustOpen(t, "").Agent("a")
	mustTask(t, s)
	const n = 20
	tasks := make([]*protocol.Task, n)
	stores := make([]*Store, n)
	for i := range tasks {
		tasks[i], stores[i] = newTask(), s
	}
	failing := func(i int) []protocol.Step {
		if i != n/2 {
			return nil
		}
		// Two planned steps with one id: the second insert fails after
		// the rows of the tasks before it were written.
		dup := uuid.NewString()
		step := protocol.Step{TaskID: tasks[i].TaskID, StepID: dup, Status: protocol.StatusCreated,
			AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
		return []protocol.Step{step, step}
	}
	errs := createTogether(t, tasks, stores, failing)
	for i, err := range errs {
		if (err != nil) != (i == n/2) {
			t.Fatalf("task %d: %v", i, err)
		}
	}
	checkList(t, s, n)
	mustTask(t, s)
	checkList(t, s, n+1)
}

// Writes other than a task's creation may insert, delete or number tasks:
// a task created after them takes the seq and position they left.
func TestATaskCreatedAfterOtherWritesTakesTheSeqAndPositionTheyLeft(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, "").Agent("a")
	for range 3 {
		mustTask(t, s)
	}
	// A row inserted without a seq or a position takes the next of each.
	err := s.inTx(ctx, anyTasks, 1, func(w db) error {
		_, err := w.exec(`INSERT INTO tasks (id, agent, additional_input, created_at) VALUES (?, 'a', '{}', 0)`, uuid.NewString())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	mustTask(t, s)
	checkList(t, s, 5)
	// The newest task deleted: the next takes a seq it never held.
	ids := checkList(t, s, 5)
	newest := ids[len(ids)-1]
	var deletedSeq int
	if err := s.reader(ctx).scanOne(`SELECT seq FROM tasks WHERE id = ?`, []any{newest}, &deletedSeq); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTask(ctx, newest); err != nil {
		t.Fatal(err)
	}
	id := mustTask(t, s)
	var seq int
	if err := s.reader(ctx).scanOne(`SELECT seq FROM tasks WHERE id = ?`, []any{id}, &seq); err != nil {
		t.Fatal(err)
	}
	if seq <= deletedSeq {
		t.Errorf("the task created after the newest was deleted has seq %d, the deleted one's was %d", seq, deletedSeq)
	}
	if got := listAll(t, s, 2, 5); !slices.Equal(got, append(ids[:4:4], id)) {
		t.Errorf("after the newest was deleted and one created: %v", got)
	}
	if n, _ := s.CountTasks(ctx); n != 5 {
		t.Errorf("CountTasks %d, want 5", n)
	}
}
