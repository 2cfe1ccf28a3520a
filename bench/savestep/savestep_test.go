// Package savestep benchmarks the store's part of an execute-step: saving
// a quick step (one never marked running, no artifacts) through the
// writer goroutine, with 16 saves in flight per P over 100 tasks: 32 on
// a 2-core machine, as bench/run.sh's step scenario sends them (-cpu N
// gives 16×N). Every save waits for the commit that makes it durable, so
// its wall time is mostly the disk's sync; the process's CPU time per
// save is reported beside it (cpu-ns/op: the store's, and the
// benchmark's own making of each step), and is the figure to compare
// between builds:
//
//	go test ./bench/savestep -run '^$' -bench . -benchtime 80000x -count 5
//
// Results are in bench/README.md.
package savestep

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/storage"
)

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkSaveStep(b *testing.B) { saveSteps(b, false) }

// BenchmarkSaveStepWithEvents saves each step with the events an
// execute-step records with it (step.created and step.completed): what
// the task's event log costs a quick step.
func BenchmarkSaveStepWithEvents(b *testing.B) { saveSteps(b, true) }

func saveSteps(b *testing.B, events bool) {
	ctx := context.Background()
	s, err := storage.Open(ctx, b.TempDir(), storage.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tasks := make([]string, 100)
	for i := range tasks {
		tasks[i] = uuid.Must(uuid.NewV7()).String()
		task := &protocol.Task{TaskID: tasks[i], AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
		if err := s.CreateTask(ctx, task, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	in := "hi"
	var n atomic.Int64
	b.SetParallelism(16)
	cpu := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			st := protocol.Step{TaskID: tasks[n.Add(1)%int64(len(tasks))], StepID: uuid.Must(uuid.NewV7()).String(),
				Status: protocol.StatusCompleted, Input: &in, Output: &in, AdditionalInput: []byte("{}"),
				CreatedAt: time.Now(), PluginTime: 30 * time.Microsecond}
			if events {
				st.Events = []protocol.Event{protocol.StepEvent(protocol.EventStepCompleted, &st, nil)}
			}
			if err := s.SaveStep(ctx, &st, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
}
