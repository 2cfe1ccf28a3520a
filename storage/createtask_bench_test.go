package storage

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkTaskInsertsAlone is SQLite's part of a create-task: the task's
// row, inserted as the writer inserts it (insertTasks), 16 to a
// transaction as the writer batches them under bench/run.sh's load, its
// share of the commit and the sync included, and nothing else: no
// goroutine hands a write over or waits for it. Beside bench/savestep's
// BenchmarkCreateTask (the whole store) it says what the writer adds to
// SQLite (bench/README.md, "Create-task's cost"):
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
	writes := make([]*writeReq, perTx)
	cpu := cpuTime(b)
	b.ResetTimer()
	for done := 0; done < b.N; done += perTx {
		for i := range writes {
			writes[i] = &writeReq{task: &taskRow{id: uuid.Must(uuid.NewV7()).String(), agent: s.agent, input: &in,
				additionalInput: `{"n":1}`, createdAt: millis(time.Now())}}
		}
		err := s.inTx(ctx, noTasks, perTx, func(w db) error { return insertTasks(w, writes) })
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
