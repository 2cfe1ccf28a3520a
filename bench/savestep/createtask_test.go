package savestep

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/storage"
)

// BenchmarkCreateTask is the store's part of a create-task: a task
// inserted and committed through the writer goroutine, 16 in flight per
// P, as bench/run.sh's create scenario sends them. cpu-ns/op is the
// figure to compare between builds:
//
//	go test ./bench/savestep -run '^$' -bench CreateTask -benchtime 100000x -count 5
func BenchmarkCreateTask(b *testing.B) {
	ctx := context.Background()
	s, err := storage.Open(ctx, b.TempDir(), storage.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	in := "hello"
	b.SetParallelism(16)
	cpu := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			task := &protocol.Task{TaskID: uuid.Must(uuid.NewV7()).String(), Input: &in,
				AdditionalInput: []byte(`{"n":1}`), CreatedAt: time.Now()}
			if err := s.CreateTask(ctx, task, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
}
