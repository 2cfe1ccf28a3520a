package storage

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentrt/agentrt/protocol"
)

// Each connection's page cache is its share of Config.DBCacheBytes: the
// writer's and every reader's, so that SQLite holds at most about what
// the operator set (--db-cache), whatever the number of connections.
func TestEachConnectionsPageCacheIsItsShareOfTheBound(t *testing.T) {
	for _, c := range []struct {
		name  string
		bytes int64
		want  int64 // KiB a connection
	}{
		{"the default", 0, DefaultDBCacheBytes / int64(Connections()) >> 10},
		{"64 MiB", 64 << 20, (64 << 20) / int64(Connections()) >> 10},
		{"less than a connection's least", 1 << 10, minDBCacheBytes >> 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := Open(ctx, t.TempDir(), Config{DBCacheBytes: c.bytes})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var writer int64
			if err := s.inTx(ctx, noTasks, 1, func(w db) error {
				return w.scanOne("PRAGMA cache_size", nil, &writer)
			}); err != nil {
				t.Fatal(err)
			}
			// Hold every reader at once, so that each is asked.
			readers := make([]int64, readConnections())
			conns := make([]interface{ Close() error }, 0, len(readers))
			for i := range readers {
				conn, err := s.read.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, conn)
				if err := conn.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&readers[i]); err != nil {
					t.Fatal(err)
				}
			}
			for _, conn := range conns {
				conn.Close()
			}
			for i, got := range append([]int64{writer}, readers...) {
				if got != -c.want {
					t.Errorf("connection %d's cache_size is %d, want -%d (KiB)", i, got, c.want)
				}
			}
		})
	}
}

// A negative cache size is refused, not read as none or as the default.
func TestANegativeCacheSizeIsRefused(t *testing.T) {
	for _, cfg := range []Config{{TaskCacheBytes: -2}, {DBCacheBytes: -1}} {
		s, err := Open(context.Background(), t.TempDir(), cfg)
		if err == nil {
			s.Close()
			t.Errorf("%+v: opened", cfg)
		} else if !strings.Contains(err.Error(), "negative cache size") {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// Caches reports the bounds the store was opened with, and what its
// cache of tasks holds as reads fill it.
func TestCachesReportsTheBoundsAndWhatTheTaskCacheHolds(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Config{TaskCacheBytes: 1 << 20, DBCacheBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	perConn := (int64(32<<20) / int64(Connections())) >> 10 << 10
	if c := s.Caches(); c.Tasks != 0 || c.TasksLimit != 1<<20 || c.DBLimit != perConn*int64(Connections()) {
		t.Errorf("caches of a new store: %+v, want none held, tasks' limit 1 MiB, the database's %d", c, perConn*int64(Connections()))
	}
	in := "hello"
	task := &protocol.Task{TaskID: uuid.Must(uuid.NewV7()).String(), Input: &in, AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
	if err := s.CreateTask(ctx, task, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTask(ctx, task.TaskID); err != nil {
		t.Fatal(err)
	}
	if c := s.Caches(); c.Tasks <= 0 || c.Tasks > c.TasksLimit {
		t.Errorf("after a read, the cache of tasks holds %d bytes, want more than none and at most %d", c.Tasks, c.TasksLimit)
	}
}
