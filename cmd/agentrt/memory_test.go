package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrt/agentrt/storage"
)

// The memory bounds an operator sets are the ones the server holds to,
// and /metrics shows them beside what is held: the cache of tasks and
// its bound, SQLite's caches' bound, Go's soft limit, and the resident
// memory split as the kernel counts it.
func TestTheMemoryBoundsSetAreHeldAndShown(t *testing.T) {
	plugin := examplePlugin(t, "echo-rust")
	for _, c := range []struct {
		name                      string
		flags                     []string
		taskLimit, dbAbout, goLim float64
	}{
		{"defaults", nil, storage.DefaultTaskCacheBytes, storage.DefaultDBCacheBytes, 0},
		{"set", []string{"--task-cache", "0", "--db-cache", "64MiB", "--go-memory-limit", "300MiB"}, 0, 64 << 20, 300 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startProcess(t, plugin, t.TempDir(), c.flags...)
			var task struct {
				TaskID string `json:"task_id"`
			}
			p.do("POST", "/ap/v1/agent/tasks", "application/json", `{"input":"hello"}`).want(t, 200).decode(t, &task)
			for range 2 {
				p.do("GET", "/ap/v1/agent/tasks/"+task.TaskID, "", "").want(t, 200)
			}
			m := parseScrape(t, string(p.do("GET", "/metrics", "", "").want(t, 200).body))
			if got := m.get("agentrt_task_cache_limit_bytes"); got != c.taskLimit {
				t.Errorf("the cache of tasks' bound: %v, want %v", got, c.taskLimit)
			}
			held := m.get("agentrt_task_cache_bytes")
			if c.taskLimit == 0 && held != 0 || c.taskLimit > 0 && (held <= 0 || held > c.taskLimit) {
				t.Errorf("the cache of tasks holds %v bytes after a task was read, with a bound of %v", held, c.taskLimit)
			}
			// Each connection's share is rounded down to a KiB.
			if got := m.get("agentrt_db_cache_limit_bytes"); got > c.dbAbout || got < c.dbAbout-float64(storage.Connections()<<10) {
				t.Errorf("SQLite's caches' bound: %v, want about %v", got, c.dbAbout)
			}
			if c.goLim > 0 {
				if got := m.get("go_gc_gomemlimit_bytes"); got != c.goLim {
					t.Errorf("Go's soft memory limit: %v, want %v", got, c.goLim)
				}
			}
			if m.get("agentrt_resident_memory_bytes", "kind=anon") <= 0 || m.get("agentrt_resident_memory_bytes", "kind=file") <= 0 {
				t.Errorf("the resident memory is not split into anonymous and file-backed: anon %v, file %v",
					m.get("agentrt_resident_memory_bytes", "kind=anon"), m.get("agentrt_resident_memory_bytes", "kind=file"))
			}
		})
	}
}

// residentByKind reads the kernel's split of resident memory, in bytes.
func TestResidentByKindReadsTheKernelsSplit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status")
	os.WriteFile(path, []byte("Name:\tagentrt\nVmRSS:\t   70000 kB\nRssAnon:\t   50000 kB\nRssFile:\t   19000 kB\nRssShmem:\t    1000 kB\n"), 0o600)
	got, err := residentByKind(path)
	if err != nil {
		t.Fatal(err)
	}
	if got["anon"] != 50000<<10 || got["file"] != 19000<<10 || got["shmem"] != 1000<<10 {
		t.Errorf("got %v", got)
	}
}
