package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentrt/agentrt/protocol"
)

// taskUsage is what a task's step count and plugin time should be.
type taskUsage struct {
	steps int
	time  time.Duration
}

// TestATasksCountAndTimeFollowEveryKindOfStepWrite runs a long random mix
// of the writes that change a task's step count and plugin time (quick
// steps, steps marked running then saved or abandoned, in any order,
// planned steps run or abandoned, artifact handlers' time) and checks
// after each that the task read from the database, from the cache, and
// after a reopen, counts what was written. Steps are abandoned both among
// a task's other steps and as its last; some quick steps bring an
// artifact (a save that drops the task's cached copy) and some a negative
// time, which SaveStep counts as none.
func TestATasksCountAndTimeFollowEveryKindOfStepWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	rnd := rand.New(rand.NewPCG(17, 25))
	want := map[string]*taskUsage{}
	var tasks []string
	running := map[string][]*protocol.Step{}
	newStep := func(taskID string) *protocol.Step {
		return &protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusRunning,
			AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
	}
	used := func() time.Duration { return time.Duration(rnd.IntN(5000)+1) * time.Microsecond }
	save := func(st *protocol.Step, d time.Duration, artifacts ...protocol.Artifact) {
		t.Helper()
		st.Status, st.PluginTime = protocol.StatusCompleted, d
		if err := s.SaveStep(ctx, st, artifacts); err != nil {
			t.Fatal(err)
		}
		want[st.TaskID].time += max(d, 0)
	}
	for i := range 3 {
		taskID := uuid.NewString()
		var planned []protocol.Step
		for range 4 * i {
			name := "planned"
			planned = append(planned, protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Name: &name,
				Status: protocol.StatusCreated, AdditionalInput: []byte("{}"), Planned: true, CreatedAt: time.Now()})
		}
		d := time.Duration(i) * time.Millisecond
		task := &protocol.Task{TaskID: taskID, AdditionalInput: []byte("{}"), CreatedAt: time.Now(),
			PluginTime: d, StepCount: len(planned)}
		if err := s.CreateTask(ctx, task, planned, nil); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, taskID)
		want[taskID] = &taskUsage{steps: len(planned), time: d}
	}
	check := func(s *Store, how string) {
		t.Helper()
		for _, id := range tasks {
			fromDB, err := s.queryTask(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.GetTask(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			w := *want[id]
			for src, task := range map[string]*protocol.Task{"database": fromDB, "cache": got} {
				if task.StepCount != w.steps || task.PluginTime != w.time {
					t.Fatalf("%s, from the %s: task %s counts %d steps and %v, want %d and %v",
						how, src, id, task.StepCount, task.PluginTime, w.steps, w.time)
				}
			}
		}
	}
	for op := range 400 {
		taskID := tasks[rnd.IntN(len(tasks))]
		w := want[taskID]
		var what string
		switch k := rnd.IntN(7); {
		case k == 0: // a quick step, never marked
			switch what = "a quick step"; rnd.IntN(4) {
			case 0:
				what += " with an artifact"
				save(newStep(taskID), used(), mustStage(t, s, taskID, "made"))
			case 1:
				what += " with a negative time"
				save(newStep(taskID), -used())
			default:
				save(newStep(taskID), used())
			}
			w.steps++
		case k == 1: // a step marked running
			what = "a step marked"
			st := newStep(taskID)
			if err := s.StartStep(ctx, st); err != nil {
				t.Fatal(err)
			}
			running[taskID] = append(running[taskID], st)
			w.steps++
		case k <= 3 && len(running[taskID]) > 0: // a running step ends, any of them
			r := running[taskID]
			j := rnd.IntN(len(r))
			st := r[j]
			running[taskID] = append(r[:j], r[j+1:]...)
			if k == 2 {
				what = "a running step saved"
				save(st, used())
			} else {
				what = "a running step abandoned"
				if err := s.AbandonStep(ctx, st); err != nil {
					t.Fatal(err)
				}
				w.steps--
			}
		case k == 4: // a planned step runs, or is abandoned, or is saved unmarked
			st, err := s.NextPlannedStep(ctx, taskID)
			if err != nil {
				t.Fatal(err)
			}
			if st == nil {
				continue
			}
			if !st.Planned {
				t.Fatalf("the next planned step %s is not marked planned", st.StepID)
			}
			switch rnd.IntN(3) {
			case 0:
				what = "a planned step saved"
				save(st, used())
			case 1:
				what = "a planned step marked and saved"
				if err := s.StartStep(ctx, st); err != nil {
					t.Fatal(err)
				}
				save(st, used())
			default:
				what = "a planned step marked and abandoned"
				if err := s.StartStep(ctx, st); err != nil {
					t.Fatal(err)
				}
				if err := s.AbandonStep(ctx, st); err != nil {
					t.Fatal(err)
				}
			}
		default: // an artifact handler's time
			what = "an artifact handler's time"
			d := used()
			if err := s.AddArtifacts(ctx, taskID, nil, protocol.TaskLog{}, d); err != nil {
				t.Fatal(err)
			}
			w.time += d
		}
		check(s, fmt.Sprintf("after write %d, %s", op, what))
	}
	s.Close()
	check(mustOpen(t, dir), "reopened")
}
