package storage

import (
	"context"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

// schemaUpTo returns the embedded migrations numbered up to n.
func schemaUpTo(t *testing.T, n int) fs.FS {
	t.Helper()
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, name := range names {
		var v int
		fmt.Sscanf(strings.TrimPrefix(name, "migrations/"), "%04d_", &v)
		if v >= 1 && v <= n {
			b, err := fs.ReadFile(migrations, name)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = &fstest.MapFile{Data: b}
		}
	}
	if len(out) != n {
		t.Fatalf("found %d of migrations 1..%d", len(out), n)
	}
	return out
}

// snapshot is everything a client can read of a store's tasks.
type snapshot struct {
	Tasks     []protocol.Task
	Steps     map[string][]protocol.Step
	Artifacts map[string][]protocol.Artifact
}

func takeSnapshot(t *testing.T, s *Store) snapshot {
	t.Helper()
	ctx := context.Background()
	all := protocol.Page{Number: 1, Size: 1000}
	tasks, _, err := s.ListTasks(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshot{Tasks: tasks, Steps: map[string][]protocol.Step{}, Artifacts: map[string][]protocol.Artifact{}}
	for _, task := range tasks {
		if snap.Steps[task.TaskID], _, err = s.ListSteps(ctx, task.TaskID, all); err != nil {
			t.Fatal(err)
		}
		if snap.Artifacts[task.TaskID], _, err = s.ListArtifacts(ctx, task.TaskID, all); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

func schemaSQL(t *testing.T, s *Store, table string) string {
	t.Helper()
	var sql string
	if err := s.reader(context.Background()).scanOne(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, []any{table}, &sql); err != nil {
		t.Fatalf("schema of %s: %v", table, err)
	}
	return sql
}

// describeTable lists a table's columns (type, NOT NULL, default, key),
// indexes (unique, partial, columns) and foreign keys.
func describeTable(t *testing.T, s *Store, table string) []string {
	t.Helper()
	var out []string
	rowsOf := func(query string) [][]any {
		rows, err := s.reader(context.Background()).query(query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var all [][]any
		for rows.Next() {
			v := make([]any, len(cols))
			p := make([]any, len(cols))
			for i := range v {
				p[i] = &v[i]
			}
			if err := rows.Scan(p...); err != nil {
				t.Fatal(err)
			}
			all = append(all, v)
		}
		return all
	}
	for _, c := range rowsOf(`PRAGMA table_xinfo(` + table + `)`) {
		out = append(out, fmt.Sprintf("column %v", c))
	}
	for _, ix := range rowsOf(`PRAGMA index_list(` + table + `)`) {
		// seq, name, unique, origin, partial; autoindex names follow the table's.
		name := fmt.Sprint(ix[1])
		out = append(out, fmt.Sprintf("index unique=%v origin=%v partial=%v %v", ix[2], ix[3], ix[4], rowsOf(`PRAGMA index_xinfo(`+name+`)`)))
		if !strings.HasPrefix(name, "sqlite_autoindex_") {
			out = append(out, "index name "+name)
		}
	}
	for _, fk := range rowsOf(`PRAGMA foreign_key_list(` + table + `)`) {
		out = append(out, fmt.Sprintf("foreign key %v", fk))
	}
	return out
}

func TestMigrationToPlainRowidsKeepsEveryRowAndItsOrder(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	old, err := openWith(ctx, dir, schemaUpTo(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		taskID := mustTask(t, old)
		in, name := fmt.Sprintf("input %d", i), fmt.Sprintf("step %d", i)
		planned := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusCreated,
			Input: &in, Name: &name, AdditionalInput: []byte(`{"n":1}`), CreatedAt: time.Now()}
		if err := old.SaveStep(ctx, &planned, nil); err != nil {
			t.Fatal(err)
		}
		out := fmt.Sprintf("output %d", i)
		done := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusCompleted,
			Input: &in, AdditionalInput: []byte("{}"), Output: &out, AdditionalOutput: []byte(`{"ok":true}`),
			IsLast: true, CreatedAt: time.Now()}
		a := mustStage(t, old, taskID, out)
		a.StepID = done.StepID
		a.AgentCreated = true
		if err := old.SaveStep(ctx, &done, []protocol.Artifact{a}); err != nil {
			t.Fatal(err)
		}
		if err := old.AddArtifacts(ctx, taskID, []protocol.Artifact{mustStage(t, old, taskID, "upload")}, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(schemaSQL(t, old, "tasks"), "AUTOINCREMENT") {
		t.Fatal("schema 2 should still use AUTOINCREMENT")
	}
	before := takeSnapshot(t, old)
	old.Close()

	s := mustOpen(t, dir)
	if after := takeSnapshot(t, s); !reflect.DeepEqual(before, after) {
		t.Errorf("the migration changed what clients read:\nbefore %+v\nafter  %+v", before, after)
	}
	fresh, err := openWith(ctx, t.TempDir(), schemaUpTo(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for _, table := range []string{"tasks", "steps", "artifacts"} {
		if sql := schemaSQL(t, s, table); strings.Contains(sql, "AUTOINCREMENT") {
			t.Errorf("%s still uses AUTOINCREMENT: %s", table, sql)
		}
		if got, want := describeTable(t, s, table), describeTable(t, fresh, table); !reflect.DeepEqual(got, want) {
			t.Errorf("%s after the migration:\n%v\nbefore:\n%v", table, got, want)
		}
	}
	// References are still enforced, and new rows come after the old ones.
	bad := protocol.Step{TaskID: uuid.NewString(), StepID: uuid.NewString(), Status: protocol.StatusCreated,
		AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
	if err := s.SaveStep(ctx, &bad, nil); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Errorf("a step of a task that does not exist: %v, want a FOREIGN KEY error", err)
	}
	newest := mustTask(t, s)
	tasks, total, err := s.ListTasks(ctx, protocol.Page{Number: 1, Size: 100})
	if err != nil || total != 6 || tasks[5].TaskID != newest {
		t.Errorf("after the migration, a new task is not listed last: %d tasks, %v", total, err)
	}
}

func TestAMigrationThatBreaksAReferenceIsRefusedAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	good := schemaUpTo(t, 1)
	broken := fstest.MapFS{}
	for name, f := range good.(fstest.MapFS) {
		broken[name] = f
	}
	broken["migrations/0002_orphan.sql"] = &fstest.MapFile{Data: []byte(`
		INSERT INTO steps (id, task_id, status, additional_input, is_last, planned, created_at, updated_at)
		VALUES ('orphan', 'no such task', 'created', '{}', 0, 0, 0, 0);`)}
	if _, err := openWith(ctx, dir, broken); err == nil || !strings.Contains(err.Error(), "refers to a missing row of tasks") {
		t.Fatalf("open with a migration that leaves an orphan: %v", err)
	}
	s, err := openWith(ctx, dir, good)
	if err != nil {
		t.Fatalf("reopen at schema 1: %v", err)
	}
	defer s.Close()
	var version, steps int
	if err := s.reader(ctx).scanOne(`SELECT MAX(version), (SELECT COUNT(*) FROM steps) FROM schema_migrations`, nil, &version, &steps); err != nil {
		t.Fatal(err)
	}
	if version != 1 || steps != 0 {
		t.Errorf("the refused migration left schema version %d and %d steps", version, steps)
	}
}
