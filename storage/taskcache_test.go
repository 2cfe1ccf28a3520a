package storage

import (
	"context"
	"fmt"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

// wantTaskAsStored fails t unless GetTask, asked twice (the first may
// fill the cache, the second reads it), answers what the database holds.
func wantTaskAsStored(t *testing.T, s *Store, taskID, after string) {
	t.Helper()
	ctx := context.Background()
	want, wantErr := s.queryTask(ctx, taskID)
	for range 2 {
		got, err := s.GetTask(ctx, taskID)
		if protocol.ErrorCode(err) != protocol.ErrorCode(wantErr) || (err == nil) != (wantErr == nil) {
			t.Fatalf("after %s GetTask = %v, the database says %v", after, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("after %s GetTask = %+v, the database holds %+v", after, got, want)
		}
	}
}

// Every write that changes a task, each followed by reads: what GetTask
// answers from the cache is what the database holds.
func TestACachedTaskIsWhatTheDatabaseHoldsAfterEveryKindOfWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	taskID := uuid.NewString()
	name := "planned"
	planned := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Name: &name, Status: protocol.StatusCreated,
		AdditionalInput: []byte("{}"), Planned: true, CreatedAt: time.Now()}
	must(t, s.CreateTask(ctx, &protocol.Task{TaskID: taskID, Input: ptr("go"), AdditionalInput: []byte(`{"n":1}`), CreatedAt: time.Now()},
		[]protocol.Step{planned}, nil))
	wantTaskAsStored(t, s, taskID, "CreateTask")

	newStep := func() *protocol.Step {
		return &protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusRunning, AdditionalInput: []byte("{}"),
			CreatedAt: time.Now(), PluginTime: 3 * time.Millisecond}
	}
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{"a new step saved unmarked", func() error { st := newStep(); st.Status = protocol.StatusCompleted; return s.SaveStep(ctx, st, nil) }},
		{"a new step marked, then saved", func() error {
			st := newStep()
			if err := s.StartStep(ctx, st); err != nil {
				return err
			}
			wantTaskAsStored(t, s, taskID, "StartStep")
			st.Status = protocol.StatusCompleted
			return s.SaveStep(ctx, st, nil)
		}},
		{"a step marked, then abandoned", func() error {
			st := newStep()
			if err := s.StartStep(ctx, st); err != nil {
				return err
			}
			wantTaskAsStored(t, s, taskID, "StartStep")
			return s.AbandonStep(ctx, st)
		}},
		{"a step saved with an artifact", func() error {
			st := newStep()
			st.Status = protocol.StatusCompleted
			a := mustStage(t, s, taskID, "made by a step")
			a.StepID, a.AgentCreated = st.StepID, true
			return s.SaveStep(ctx, st, []protocol.Artifact{a})
		}},
		{"a step that took no time", func() error {
			st := newStep()
			st.Status, st.PluginTime = protocol.StatusCompleted, 0
			return s.SaveStep(ctx, st, nil)
		}},
		{"the planned step marked, then saved", func() error {
			planned.Status = protocol.StatusRunning
			if err := s.StartStep(ctx, &planned); err != nil {
				return err
			}
			wantTaskAsStored(t, s, taskID, "StartStep of the planned step")
			planned.Status = protocol.StatusCompleted
			return s.SaveStep(ctx, &planned, nil)
		}},
		{"an upload", func() error {
			return s.AddArtifacts(ctx, taskID, []protocol.Artifact{mustStage(t, s, taskID, "uploaded")},
				protocol.TaskLog{Records: []protocol.LogRecord{{Level: "info", Message: "handled"}}, Bytes: 40}, time.Millisecond)
		}},
		{"a patch", func() error {
			return s.UpdateTask(ctx, taskID, protocol.TaskPatch{Title: protocol.PatchField{Set: true, Value: ptr("renamed")}})
		}},
		{"an artifact's sha256 filled in", func() error {
			must(t, s.inTx(ctx, anyTasks, 1, func(w db) error {
				_, err := w.exec(`UPDATE artifacts SET sha256 = NULL WHERE task_id = ?`, taskID)
				return err
			}))
			wantTaskAsStored(t, s, taskID, "a sha256 cleared")
			task, err := s.GetTask(ctx, taskID)
			if err != nil {
				return err
			}
			f, err := s.OpenArtifact(ctx, &task.Artifacts[0])
			if err != nil {
				return err
			}
			return f.Close()
		}},
		{"a step left running at a restart", func() error {
			if err := s.StartStep(ctx, newStep()); err != nil {
				return err
			}
			wantTaskAsStored(t, s, taskID, "StartStep")
			s.Close()
			s = mustOpen(t, dir)
			return nil
		}},
		{"the task deleted", func() error { return s.DeleteTask(ctx, taskID) }},
	} {
		wantTaskAsStored(t, s, taskID, "the reads before "+w.name)
		if err := w.write(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		wantTaskAsStored(t, s, taskID, w.name)
	}
}

// Steps saved on tasks while others read them: once the writes are
// answered, every task read is what the database holds, though readers
// filled the cache while the writer changed it.
func TestTasksReadWhileStepsAreSavedEndAsStored(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, "")
	tasks := make([]string, 4)
	for i := range tasks {
		tasks[i] = mustTask(t, s)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := r; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.GetTask(ctx, tasks[i%len(tasks)]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for _, id := range tasks {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for range 50 {
				st := &protocol.Step{TaskID: id, StepID: uuid.NewString(), Status: protocol.StatusCompleted,
					AdditionalInput: []byte("{}"), CreatedAt: time.Now(), PluginTime: time.Microsecond}
				if err := s.SaveStep(ctx, st, nil); err != nil {
					t.Error(err)
					return
				}
				if task, err := s.GetTask(ctx, id); err != nil || task.PluginTime != time.Duration(task.StepCount)*time.Microsecond {
					t.Errorf("a task read after its step was saved: %+v, %v", task, err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	for _, id := range tasks {
		wantTaskAsStored(t, s, id, "the steps")
		if task, _ := s.GetTask(ctx, id); task.StepCount != 50 {
			t.Errorf("task %s counts %d steps, want 50", id, task.StepCount)
		}
	}
}

// What a query read must not go into the cache if a write changed the
// task since the query began, or is changing it: it may be older than
// the write, and the write's update would then be applied twice.
func TestACacheKeepsNoTaskReadAcrossAWrite(t *testing.T) {
	c := newTaskCache(DefaultTaskCacheBytes)
	task := &protocol.Task{TaskID: "t", StepCount: 1, AdditionalInput: []byte("{}"), Artifacts: []protocol.Artifact{}}
	step := taskEffect{task: "t", update: func(t *protocol.Task) { t.StepCount++ }}

	_, gen := c.get("a", "t")
	c.begin([]taskEffect{step})
	c.end([]taskEffect{step}, []error{nil})
	c.put("a", task, gen) // read before the write: stale
	if got, _ := c.get("a", "t"); got != nil {
		t.Errorf("a task read before a write was kept: %+v", got)
	}

	c.begin([]taskEffect{step})
	_, gen = c.get("a", "t")
	c.put("a", task, gen) // read while the write is committed: either
	if got, _ := c.get("a", "t"); got != nil {
		t.Errorf("a task read while a write to it was committed was kept: %+v", got)
	}
	c.end([]taskEffect{step}, []error{nil})

	// A write that changes no task keeps no read out.
	_, gen = c.get("a", "t")
	c.begin([]taskEffect{noTasks})
	c.end([]taskEffect{noTasks}, []error{nil})
	c.put("a", task, gen)
	if got, _ := c.get("a", "t"); got == nil {
		t.Error("a task read across a write that changes no task was not kept")
	}
	c.begin([]taskEffect{changesTask("t")})
	c.end([]taskEffect{changesTask("t")}, []error{nil})

	c.begin([]taskEffect{anyTasks})
	_, gen = c.get("a", "t")
	c.put("a", task, gen)
	if got, _ := c.get("a", "t"); got != nil {
		t.Errorf("a task read while a write to any task was committed was kept: %+v", got)
	}
	c.end([]taskEffect{anyTasks}, []error{nil})

	_, gen = c.get("a", "t")
	c.put("a", task, gen)
	c.begin([]taskEffect{step})
	c.end([]taskEffect{step}, []error{nil})
	if got, _ := c.get("a", "t"); got == nil || got.StepCount != 2 {
		t.Errorf("a cached task after a step's save: %+v, want it counting 2 steps", got)
	}
	c.begin([]taskEffect{step})
	c.end([]taskEffect{step}, []error{fmt.Errorf("the disk is full")})
	if got, _ := c.get("a", "t"); got != nil {
		t.Errorf("a write that failed left its task cached: %+v", got)
	}
	task.Artifacts = []protocol.Artifact{{ArtifactID: "x", FileName: "a.txt"}}
	task.Input = ptr("go")
	_, gen = c.get("a", "t")
	c.put("a", task, gen)
	if got, _ := c.get("b", "t"); got != nil {
		t.Errorf("agent b read agent a's task from the cache: %+v", got)
	}
	// What a caller does to its copy, and a reader to what it put, is its
	// own.
	got, _ := c.get("a", "t")
	got.StepCount = 99
	got.Artifacts[0].FileName = "changed.txt"
	got.AdditionalInput = append(got.AdditionalInput[:0], '[')
	*got.Input = "changed"
	task.Artifacts[0].FileName = "changed by the reader.txt"
	*task.Input = "changed by the reader"
	if again, _ := c.get("a", "t"); again.StepCount != 1 || again.Artifacts[0].FileName != "a.txt" || string(again.AdditionalInput) != "{}" || *again.Input != "go" {
		t.Errorf("a change to a copy reached the cache: %+v", again)
	}
}

// A task too large to cache is read each time, and the cache holds at
// most its limit however many tasks are read.
func TestTheTaskCacheIsBounded(t *testing.T) {
	const limit = 1 << 20
	c := newTaskCache(limit)
	big := strings.Repeat("x", maxCachedTaskBytes)
	_, gen := c.get("a", "big")
	c.put("a", &protocol.Task{TaskID: "big", Input: &big}, gen)
	if got, _ := c.get("a", "big"); got != nil {
		t.Error("a task over maxCachedTaskBytes was cached")
	}
	input := strings.Repeat("y", maxCachedTaskBytes/2)
	n := 4 * limit / len(input)
	for i := range n {
		id := fmt.Sprint(i)
		_, gen := c.get("a", id)
		c.put("a", &protocol.Task{TaskID: id, Input: &input}, gen)
		if c.bytes > limit {
			t.Fatalf("after %d tasks the cache holds %d bytes, over its %d", i+1, c.bytes, limit)
		}
	}
	if len(c.tasks) == 0 || len(c.tasks) >= n {
		t.Errorf("the cache holds %d of %d tasks", len(c.tasks), n)
	}
}

// What the cache counts is what its tasks take of the heap, within a
// quarter: the limit an operator sets (--task-cache) is the memory the
// cache holds, not a fraction of it.
func TestTheTaskCacheHoldsWhatItCounts(t *testing.T) {
	const limit = 8 << 20
	c := newTaskCache(limit)
	in := "hello"
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	n := 0
	for c.bytes+taskOverhead*2 < limit {
		id := uuid.Must(uuid.NewV7()).String()
		_, gen := c.get("a", id)
		c.put("a", &protocol.Task{TaskID: id, Input: &in, AdditionalInput: []byte(`{"n":1}`), CreatedAt: time.Now()}, gen)
		n++
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if ratio := float64(held) / float64(c.bytes); ratio < 0.75 || ratio > 1.25 {
		t.Errorf("%d cached tasks took %d bytes of heap, counted as %d: %.2f times what is counted", n, held, c.bytes, ratio)
	}
	goruntime.KeepAlive(c)
}

// A cache with no room (--task-cache 0) keeps nothing: every read
// queries the database.
func TestATaskCacheOfNoBytesKeepsNothing(t *testing.T) {
	c := newTaskCache(0)
	in := "go"
	_, gen := c.get("a", "t")
	c.put("a", &protocol.Task{TaskID: "t", Input: &in}, gen)
	if got, _ := c.get("a", "t"); got != nil || len(c.tasks) != 0 {
		t.Errorf("a cache of no bytes kept a task: %+v", got)
	}
}
