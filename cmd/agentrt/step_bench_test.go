package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkExecuteStep serves execute-step as "agentrt run" does, for the
// echo plugin in each language, but calls the server's handler in
// process: everything from the router to the saved step is in; the
// network, the connection's deadlines and the extra P agentrt runs with
// are left out, and httptest's making of each request and recorder (its
// parsing of the request included) are counted with the step. 16 requests are in flight per P, over
// 100 tasks, as bench/run.sh's step scenario sends them, with the garbage
// collector's target agentrt serves with. Beside the wall time, which is
// mostly the disk's sync, it reports the process's CPU time a step
// (cpu-ns/op) and, with -benchmem, the allocations a step: figures to
// compare between builds.
//
//	go test ./cmd/agentrt -run '^$' -bench ExecuteStep -benchmem -benchtime 20000x -count 5
func BenchmarkExecuteStep(b *testing.B) {
	for _, lang := range []string{"rust", "tinygo", "go"} {
		b.Run(lang, func(b *testing.B) { benchmarkExecuteStep(b, examplePlugin(b, "echo-"+lang)) })
	}
}

func benchmarkExecuteStep(b *testing.B, plugin string) {
	cfg := testConfig(b, plugin)
	srv, err := open(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	do := func(method, path, body string) (*httptest.ResponseRecorder, error) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return rec, nil
	}
	// Enough tasks that none has more steps waiting than a task may.
	tasks := make([]string, max(100, 4*goruntime.GOMAXPROCS(0)))
	for i := range tasks {
		rec, err := do("POST", "/ap/v1/agent/tasks", `{"input":"hi"}`)
		if err != nil {
			b.Fatal(err)
		}
		var task struct {
			TaskID string `json:"task_id"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &task); err != nil {
			b.Fatal(err)
		}
		tasks[i] = "/ap/v1/agent/tasks/" + task.TaskID + "/steps"
	}
	defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))
	var n atomic.Int64
	var failed atomic.Pointer[error]
	b.SetParallelism(16)
	cpu := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := do("POST", tasks[n.Add(1)%int64(len(tasks))], `{"input":"hi"}`); err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
		}
	})
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
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
