package storage

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentrt/agentrt/protocol"
)

// BenchmarkTaskInsertsAlone is SQLite's part of a create-task: the task's
// INSERT, 32 to a transaction as the writer batches them under
// bench/run.sh's load, its share of the commit and the sync included, and
// nothing else: no goroutine hands a write over or waits for it. Beside
// bench/savestep's BenchmarkCreateTask (the whole store) it says what the
// writer adds to SQLite (bench/README.md, "Create-task's cost"):
//
//	go test ./storage -run '^$' -bench TaskInsertsAlone -benchtime 100000x -count 5
func BenchmarkTaskInsertsAlone(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir(), Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const perTx = 16
	in := "hello"
	tasks := make([]protocol.Task, perTx)
	cpu := cpuTime(b)
	b.ResetTimer()
	for done := 0; done < b.N; done += perTx {
		for i := range tasks {
			tasks[i] = protocol.Task{TaskID: uuid.Must(uuid.NewV7()).String(), Input: &in,
				AdditionalInput: []byte(`{"n":1}`), CreatedAt: time.Now()}
		}
		err := s.inTx(ctx, noTasks, perTx, func(w db) error {
			for i := range tasks {
				t := &tasks[i]
				if _, err := w.exec(insertTask, t.TaskID, s.agent, t.Input, string(t.AdditionalInput), millis(t.CreatedAt),
					int64(t.PluginTime), 0, 0, s.agent, t.Title, t.Description, t.Version); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
