package storage

import (
	"context"
	"database/sql"
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

// openAtSchema opens a store in dir with the embedded migrations up to n
// only.
func openAtSchema(t *testing.T, dir string, n int) *Store {
	t.Helper()
	s, err := openWith(context.Background(), dir, Config{}, schemaUpTo(t, n))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func schemaSQL(t *testing.T, s *Store, table string) string {
	t.Helper()
	var sql string
	if err := s.reader(context.Background()).scanOne(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, []any{table}, &sql); err != nil {
		t.Fatalf("schema of %s: %v", table, err)
	}
	return sql
}

// queryRows runs query on the read pool and returns its rows.
func queryRows(t *testing.T, s *Store, query string) [][]any {
	t.Helper()
	rows, err := s.read.Query(query)
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

// describeTable lists a table's columns (type, NOT NULL, default, key),
// indexes (unique, partial, columns) and foreign keys.
func describeTable(t *testing.T, s *Store, table string) []string {
	t.Helper()
	var out []string
	rowsOf := func(query string) [][]any { return queryRows(t, s, query) }
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

// oldWrite runs statements on a store opened at an old schema, in one
// transaction: rows are written with that schema's own SQL, not with
// today's code.
func oldWrite(t *testing.T, s *Store, stmts ...string) {
	t.Helper()
	err := s.inTx(context.Background(), anyTasks, 1, func(w db) error {
		for _, q := range stmts {
			if _, err := w.w.conn.ExecContext(w.ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dump lists a table's rows, in seq order, with the given columns.
func dump(t *testing.T, s *Store, table, columns string) []string {
	t.Helper()
	var out []string
	for _, row := range queryRows(t, s, `SELECT `+columns+` FROM `+table+` ORDER BY seq`) {
		out = append(out, fmt.Sprint(row...))
	}
	return out
}

// schema2Rows writes, with schema 2's SQL, tasks with logs and plugin time,
// planned and completed steps, and artifacts of steps and of uploads.
func schema2Rows(t *testing.T, s *Store) (taskIDs []string) {
	t.Helper()
	var stmts []string
	for i := range 5 {
		task, planned, done := uuid.NewString(), uuid.NewString(), uuid.NewString()
		taskIDs = append(taskIDs, task)
		logs := "NULL"
		if i%2 == 0 {
			logs = fmt.Sprintf(`'[{"time":"2026-01-0%dT00:00:00Z","level":"info","message":"task %d"}]'`, i+1, i)
		}
		stmts = append(stmts,
			fmt.Sprintf(`INSERT INTO tasks (id, input, additional_input, logs, created_at, plugin_ms) VALUES ('%s', 'input %d', '{"n":%d}', %s, %d, %d)`,
				task, i, i, logs, 1700000000000+i, 7*i),
			fmt.Sprintf(`INSERT INTO steps (id, task_id, name, status, input, additional_input, is_last, planned, created_at, updated_at)
				VALUES ('%s', '%s', 'step %d', 'created', 'in', '{"n":1}', 0, 1, 1, 1)`, planned, task, i),
			fmt.Sprintf(`INSERT INTO steps (id, task_id, status, input, additional_input, output, additional_output, is_last, planned, logs, created_at, updated_at)
				VALUES ('%s', '%s', 'completed', 'in', '{}', 'output %d', '{"ok":true}', 1, 0, '[{"time":"2026-01-01T00:00:00Z","level":"warn","message":"m"}]', 2, 2)`, done, task, i),
			fmt.Sprintf(`INSERT INTO artifacts (id, task_id, step_id, agent_created, file_name, relative_path, size, created_at)
				VALUES ('%s', '%s', '%s', 1, 'out.txt', '', 3, 3)`, uuid.NewString(), task, done),
			fmt.Sprintf(`INSERT INTO artifacts (id, task_id, agent_created, file_name, relative_path, size, created_at)
				VALUES ('%s', '%s', 0, 'up.txt', 'd', 4, 4)`, uuid.NewString(), task),
		)
	}
	oldWrite(t, s, stmts...)
	return taskIDs
}

// Columns every schema has, to compare rows across migrations.
const (
	taskColumnsV1     = `id, input, additional_input, created_at`
	stepColumnsV1     = `id, task_id, name, status, input, additional_input, output, additional_output, is_last, planned, logs, created_at, updated_at`
	artifactColumnsV1 = `id, task_id, step_id, agent_created, file_name, relative_path, size, created_at`
)

func TestMigrationToPlainRowidsKeepsEveryRowAndItsOrder(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	old := openAtSchema(t, dir, 2)
	schema2Rows(t, old)
	if !strings.Contains(schemaSQL(t, old, "tasks"), "AUTOINCREMENT") {
		t.Fatal("schema 2 should still use AUTOINCREMENT")
	}
	before := map[string][]string{
		"tasks":     dump(t, old, "tasks", taskColumnsV1+", logs, plugin_ms"),
		"steps":     dump(t, old, "steps", stepColumnsV1),
		"artifacts": dump(t, old, "artifacts", artifactColumnsV1),
	}
	old.Close()

	s := openAtSchema(t, dir, 3)
	defer s.Close()
	after := map[string][]string{
		"tasks":     dump(t, s, "tasks", taskColumnsV1+", logs, plugin_ms"),
		"steps":     dump(t, s, "steps", stepColumnsV1),
		"artifacts": dump(t, s, "artifacts", artifactColumnsV1),
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the migration changed rows or their order:\nbefore %v\nafter  %v", before, after)
	}
	fresh := openAtSchema(t, t.TempDir(), 2)
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
	oldWriteErr := s.inTx(ctx, anyTasks, 1, func(w db) error {
		_, err := w.w.conn.ExecContext(ctx, `INSERT INTO steps (id, task_id, status, additional_input, is_last, planned, created_at, updated_at)
			VALUES ('x', 'no such task', 'created', '{}', 0, 0, 0, 0)`)
		return err
	})
	if oldWriteErr == nil || !strings.Contains(oldWriteErr.Error(), "FOREIGN KEY") {
		t.Errorf("a step of a task that does not exist: %v, want a FOREIGN KEY error", oldWriteErr)
	}
	oldWrite(t, s, `INSERT INTO tasks (id, additional_input, created_at) VALUES ('newest', '{}', 9)`)
	if ids := dump(t, s, "tasks", "id"); len(ids) != 6 || ids[5] != "newest" {
		t.Errorf("after the migration, a new task is not listed last: %v", ids)
	}
}

func TestMigrationToTaskLogRowsKeepsLogsTimeAndCounts(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	old := openAtSchema(t, dir, 3)
	ids := schema2Rows(t, old)
	var logs []sql.NullString
	for _, id := range ids {
		var l sql.NullString
		if err := old.reader(ctx).scanOne(`SELECT logs FROM tasks WHERE id = ?`, []any{id}, &l); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	before := map[string][]string{
		"tasks":     dump(t, old, "tasks", taskColumnsV1),
		"steps":     dump(t, old, "steps", stepColumnsV1),
		"artifacts": dump(t, old, "artifacts", artifactColumnsV1),
	}
	old.Close()

	s := mustOpen(t, dir)
	after := map[string][]string{
		"tasks":     dump(t, s, "tasks", taskColumnsV1),
		"steps":     dump(t, s, "steps", stepColumnsV1),
		"artifacts": dump(t, s, "artifacts", artifactColumnsV1),
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the migration changed rows or their order:\nbefore %v\nafter  %v", before, after)
	}
	for i, id := range ids {
		task, err := s.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := time.Duration(7*i) * time.Millisecond; task.PluginTime != want {
			t.Errorf("task %d: plugin time %v, want %v", i, task.PluginTime, want)
		}
		if task.StepCount != 2 {
			t.Errorf("task %d: step count %d, want 2", i, task.StepCount)
		}
		got, err := s.TaskLogs(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := decodeLogs(logs[i])
		if !reflect.DeepEqual(got, want) {
			t.Errorf("task %d: logs %+v, want %+v", i, got, want)
		}
		if want := int64(len(logs[i].String)); task.LogBytes != want {
			t.Errorf("task %d: log bytes %d, want %d", i, task.LogBytes, want)
		}
	}
	// Logs appended after the migration follow the migrated ones.
	more := []protocol.LogRecord{{Time: time.Unix(1, 0).UTC(), Level: "info", Message: "later"}}
	if err := s.AddArtifacts(ctx, ids[0], nil, protocol.TaskLog{Records: more, Bytes: protocol.LogSize(more)}, 0); err != nil {
		t.Fatal(err)
	}
	got, _ := s.TaskLogs(ctx, ids[0])
	if len(got) != 2 || got[1].Message != "later" {
		t.Errorf("logs after an append: %+v", got)
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
	if _, err := openWith(ctx, dir, Config{}, broken); err == nil || !strings.Contains(err.Error(), "refers to a missing row of tasks") {
		t.Fatalf("open with a migration that leaves an orphan: %v", err)
	}
	s, err := openWith(ctx, dir, Config{}, good)
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

// A migrated task counts the steps saved after the migration on top of
// its own: read from the cache, and read again from the database by a
// store that has cached nothing.
func TestMigratedTasksAddNewStepsToTheirCountAndTime(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	old := openAtSchema(t, dir, 3)
	ids := schema2Rows(t, old)
	old.Close()

	check := func(s *Store, how string, wantSteps int, wantTime time.Duration) {
		t.Helper()
		task, err := s.GetTask(ctx, ids[3])
		if err != nil {
			t.Fatal(err)
		}
		if task.StepCount != wantSteps || task.PluginTime != wantTime {
			t.Errorf("%s: %d steps and %v of plugin time, want %d and %v", how, task.StepCount, task.PluginTime, wantSteps, wantTime)
		}
	}
	s, err := Open(ctx, dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	check(s, "migrated", 2, 21*time.Millisecond)
	for _, used := range []time.Duration{3 * time.Millisecond, 400 * time.Microsecond} {
		st := protocol.Step{TaskID: ids[3], StepID: uuid.NewString(), Status: protocol.StatusCompleted,
			AdditionalInput: []byte("{}"), CreatedAt: time.Now(), PluginTime: used}
		if err := s.SaveStep(ctx, &st, nil); err != nil {
			t.Fatal(err)
		}
	}
	check(s, "two steps later, cached", 4, 24400*time.Microsecond)
	s.Close()
	check(mustOpen(t, dir), "two steps later, read again", 4, 24400*time.Microsecond)
}
