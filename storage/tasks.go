package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/protocol"
)

// CreateTask records a new task with the steps its task handler planned,
// the artifacts it created (their bytes staged with StageArtifact) and its
// log, in one transaction.
func (s *Store) CreateTask(ctx context.Context, t *protocol.Task, planned []protocol.Step, artifacts []protocol.Artifact) error {
	logs, err := encodeLogs(t.Logs)
	if err != nil {
		return err
	}
	logBytes := t.LogBytes
	if logBytes == 0 {
		logBytes = protocol.LogSize(t.Logs)
	}
	row := &taskRow{id: t.TaskID, agent: s.agent, input: t.Input, additionalInput: string(t.AdditionalInput),
		createdAt: millis(t.CreatedAt), pluginNS: int64(t.PluginTime), logBytes: logBytes, stepCount: len(planned),
		title: t.Title, description: t.Description, version: t.Version}
	var fn func(db) error
	if logs != nil || len(planned) > 0 || len(artifacts) > 0 || len(t.Events) > 0 {
		// The task's row is in before fn runs (writeReq.task).
		fn = func(w db) error {
			if logs != nil {
				if _, err := w.exec(`INSERT INTO task_logs (task_id, records, bytes) VALUES (?, ?, ?)`, t.TaskID, logs, logBytes); err != nil {
					return err
				}
			}
			for i := range planned {
				if err := insertStep(w, &planned[i], nil, time.Now(), nil, nil); err != nil {
					return err
				}
			}
			if err := insertArtifacts(w, artifacts); err != nil {
				return err
			}
			return s.recordEvents(w, t.TaskID, t.Events)
		}
	}
	err = s.write1(&writeReq{task: row, fn: fn, effect: changesTask(t.TaskID), rows: 2 + len(planned) + len(artifacts) + len(t.Events), done: make(chan error, 1)})
	if err != nil {
		return fmt.Errorf("create task: %w", err)
	}
	s.promoteAll(artifacts)
	return nil
}

// taskRow is a new task's row, but for its seq and position, which the
// writer gives it as it inserts it (insertTasks).
type taskRow struct {
	id, agent                   string
	input                       *string
	additionalInput             string
	createdAt, pluginNS         int64
	logBytes                    int64
	stepCount                   int
	title, description, version *string
}

// insertTasks inserts the task rows of writes (writeReq.task), in their
// order, with as few statements as their number's binary digits: a
// task's INSERT cost the writer as much as a tenth of its commit, most of
// it the statement's own run, not the row. Each task takes the seq after
// the highest a task holds or a deleted task held (seq_floors), so that
// a seq is never given twice, and its agent's next position; the agents'
// counts are kept by migration 0009's trigger, row by row.
//
// The highest seq and the agents' next positions are read in the
// transaction, then kept by the writer (writer.taskSeq, nextPosition)
// while only tasks are created: only the writer writes, so no row comes
// between the read and the insert.
func insertTasks(d db, writes []*writeReq) error {
	w := d.w
	rows := w.taskRows[:0]
	for _, req := range writes {
		if req.task != nil {
			rows = append(rows, req.task)
		}
	}
	w.taskRows = rows
	defer clear(rows) // the rows hold what the clients sent
	if len(rows) == 0 {
		return nil
	}
	if w.taskSeq == 0 {
		if err := d.scanOne(lastTaskSeq, nil, &w.taskSeq); err != nil {
			return err
		}
	}
	args := w.taskArgs[:0]
	defer func() { clear(args); w.taskArgs = args[:0] }()
	for done := 0; done < len(rows); {
		n := insertChunk(len(rows) - done)
		args = args[:0]
		for _, r := range rows[done : done+n] {
			position, ok := w.nextPosition[r.agent]
			if !ok {
				position = 1
				err := d.scanOne(`SELECT next FROM agent_tasks WHERE agent = ?`, []any{r.agent}, &position)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					return err
				}
			}
			w.taskSeq++
			w.nextPosition[r.agent] = position + 1
			args = append(args, w.taskSeq, r.id, r.agent, r.input, r.additionalInput, r.createdAt, r.pluginNS, r.logBytes,
				r.stepCount, position, r.title, r.description, r.version)
		}
		if _, err := d.exec(insertTasksSQL[bits.Len(uint(n))-1], args...); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// lastTaskSeq is the highest seq a task holds or a deleted task held.
const lastTaskSeq = `SELECT max(coalesce((SELECT max(seq) FROM tasks), 0), coalesce((SELECT seq FROM seq_floors WHERE name = 'tasks'), 0))`

// insertTasksSQL[k] inserts 1<<k task rows in one statement. A batch of n
// rows is inserted by the statements of n's binary digits, at most
// maxInsertRows at a time, so that the writer's connection keeps a few
// statements prepared, not one per number of rows.
var insertTasksSQL = func() []string {
	var qs []string
	for n := 1; n <= maxInsertRows; n *= 2 {
		row := `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
		qs = append(qs, `INSERT INTO tasks (seq, id, agent, input, additional_input, created_at, plugin_ns, log_bytes, step_count, position, title, description, version) VALUES `+
			strings.Repeat(row+", ", n-1)+row)
	}
	return qs
}()

// maxInsertRows is the most task rows one statement inserts: 13 values a
// row, well below SQLite's 32,766 variables.
const maxInsertRows = 64

// insertChunk is how many of n rows left to insert the next statement
// takes: the highest binary digit of n, at most maxInsertRows.
func insertChunk(n int) int {
	return min(1<<(bits.Len(uint(n))-1), maxInsertRows)
}

// GetTask returns a task with its artifacts, or protocol.ENOTFOUND; from
// the cache of tasks when it holds the task (taskCache).
func (s *Store) GetTask(ctx context.Context, taskID string) (*protocol.Task, error) {
	cached, gen := s.cache.get(s.agent, taskID)
	if cached != nil {
		return cached, nil
	}
	t, err := s.queryTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	s.cache.put(s.agent, t, gen)
	return t, nil
}

// queryTask reads a task with its artifacts from the database.
func (s *Store) queryTask(ctx context.Context, taskID string) (*protocol.Task, error) {
	rows, err := s.reader(ctx).query(`
		SELECT `+taskColumns+`, `+artifactColumns("a")+`
		FROM tasks t LEFT JOIN artifacts a ON a.task_id = t.id
		WHERE t.id = ? AND t.agent = ?
		ORDER BY a.seq`, taskID, s.agent)
	if err != nil {
		return nil, fmt.Errorf("get task: %w", err)
	}
	tasks, err := scanTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("get task: %w", err)
	}
	if len(tasks) == 0 {
		return nil, protocol.Errorf(protocol.ENOTFOUND, "task %q not found", taskID)
	}
	return &tasks[0], nil
}

// ListTasks returns a page of the agent's tasks in creation order, with
// their artifacts, and the agent's number of tasks.
//
// What it costs does not grow with the page's number or the agent's
// tasks: the count is kept (agent_tasks, by the triggers of migration
// 0007), the page's first task is found by its position in the agent's
// list, and the page read from there through an index. Only tasks deleted
// before the page add to it: a look at each gap they left.
func (s *Store) ListTasks(ctx context.Context, p protocol.Page) ([]protocol.Task, int, error) {
	tasks := []protocol.Task{}
	var total int
	err := s.readTx(ctx, func(r db) error {
		var next int
		err := r.scanOne(`SELECT count, next FROM agent_tasks WHERE agent = ?`, []any{s.agent}, &total, &next)
		if err == sql.ErrNoRows || err == nil && p.Offset() >= total {
			return nil
		} else if err != nil {
			return err
		}
		first := p.Offset() + 1
		if next-1 != total { // tasks were deleted: their positions are gaps
			if first, err = positionOf(r, s.agent, p.Offset()); err != nil {
				return err
			}
		}
		rows, err := r.query(`
			WITH page AS (SELECT * FROM tasks WHERE agent = ? AND position >= ? ORDER BY position LIMIT ?)
			SELECT `+taskColumns+`, `+artifactColumns("a")+`
			FROM page t LEFT JOIN artifacts a ON a.task_id = t.id
			ORDER BY t.position, a.seq`, s.agent, first, p.Size)
		if err != nil {
			return err
		}
		tasks, err = scanTasks(rows)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list tasks: %w", err)
	}
	return tasks, total, nil
}

// positionOf is the position of the agent's task that is offset tasks
// from the first (0-based), when deleted tasks left gaps: the least
// position p with p = offset + 1 + the gaps at or before p.
func positionOf(r db, agent string, offset int) (int, error) {
	p := offset + 1
	for {
		var gaps int
		if err := r.scanOne(`SELECT COUNT(*) FROM task_gaps WHERE agent = ? AND position <= ?`, []any{agent, p}, &gaps); err != nil {
			return 0, err
		}
		if offset+1+gaps == p {
			return p, nil
		}
		p = offset + 1 + gaps
	}
}

// CountTasks returns how many tasks the agent has.
func (s *Store) CountTasks(ctx context.Context) (int, error) {
	var n int
	err := s.reader(ctx).scanOne(`SELECT count FROM agent_tasks WHERE agent = ?`, []any{s.agent}, &n)
	if err != nil && err != sql.ErrNoRows {
		return 0, fmt.Errorf("count tasks: %w", err)
	}
	return n, nil
}

// AgentNames returns the names of the agents that have tasks, in name
// order.
func (s *Store) AgentNames(ctx context.Context) ([]string, error) {
	names := []string{}
	rows, err := s.reader(ctx).query(`SELECT agent FROM agent_tasks WHERE count > 0 ORDER BY agent`)
	if err != nil {
		return nil, fmt.Errorf("agent names: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("agent names: %w", err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("agent names: %w", err)
	}
	return names, nil
}

// AdoptTasks makes the tasks of the agent named from this agent's, and
// returns how many there were: a data directory served one unnamed agent
// before agents had names, and the agent that serves it now takes them.
// The agent's tasks are numbered again in creation order, its count and
// the other agent's made right. When from has no tasks, as at every start
// but the first after agents had names, it writes nothing: a start on a
// full disk is not refused for a write of nothing.
func (s *Store) AdoptTasks(ctx context.Context, from string) (int, error) {
	var one int
	switch err := s.reader(ctx).scanOne(`SELECT 1 FROM tasks WHERE agent = ? LIMIT 1`, []any{from}, &one); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("adopt tasks: %w", err)
	}
	var n int64
	err := s.inTx(ctx, anyTasks, 1, func(w db) error {
		res, err := w.exec(`UPDATE tasks SET agent = ?, position = NULL WHERE agent = ?`, s.agent, from)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		for _, q := range []string{
			`UPDATE tasks SET position = NULL WHERE agent = ?1`,
			`UPDATE tasks SET position = ranked.n
				FROM (SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM tasks WHERE agent = ?1) AS ranked
				WHERE tasks.seq = ranked.seq`,
			`DELETE FROM task_gaps WHERE agent IN (?1, ?2)`,
			`DELETE FROM agent_tasks WHERE agent IN (?1, ?2)`,
			`INSERT INTO agent_tasks (agent, count, next) SELECT ?1, COUNT(*), COUNT(*) + 1 FROM tasks WHERE agent = ?1`,
		} {
			if _, err := w.exec(q, s.agent, from); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("adopt tasks: %w", err)
	}
	return int(n), nil
}

// taskColumns are a task's columns, from the table aliased t, as
// scanTasks reads them.
const taskColumns = `t.id, t.input, t.additional_input, t.created_at, t.plugin_ns, t.log_bytes, t.step_count,
	t.title, t.description, t.version, EXISTS (SELECT 1 FROM steps WHERE task_id = t.id AND status = 'created')`

// TaskLogs returns the task's log: what its task handler and artifact
// handlers logged, in order; protocol.ENOTFOUND when there is no such task.
func (s *Store) TaskLogs(ctx context.Context, taskID string) ([]protocol.LogRecord, error) {
	logs := []protocol.LogRecord{}
	err := s.readTx(ctx, func(r db) error {
		if err := taskExists(r, taskID, s.agent); err != nil {
			return err
		}
		rows, err := r.query(`SELECT records FROM task_logs WHERE task_id = ? ORDER BY seq`, taskID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var records sql.NullString
			if err := rows.Scan(&records); err != nil {
				return err
			}
			some, err := decodeLogs(records)
			if err != nil {
				return err
			}
			logs = append(logs, some...)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("task logs: %w", err)
	}
	return logs, nil
}

// appendTaskLog adds one handler call's log records, encoded (encodeLogs),
// to a task's log, counting bytes against its limit.
func appendTaskLog(w db, taskID string, records any, bytes int64) error {
	if records == nil {
		return nil
	}
	if _, err := w.exec(`INSERT INTO task_logs (task_id, records, bytes) VALUES (?, ?, ?)`, taskID, records, bytes); err != nil {
		return err
	}
	_, err := w.exec(`UPDATE tasks SET log_bytes = log_bytes + ? WHERE id = ?`, bytes, taskID)
	return err
}

// scanTasks reads rows of a task joined with its artifacts (one row per
// artifact, or one row with NULL artifact columns), grouping consecutive
// rows of the same task.
func scanTasks(rows *sql.Rows) ([]protocol.Task, error) {
	defer rows.Close()
	tasks := []protocol.Task{}
	for rows.Next() {
		var (
			t                       protocol.Task
			input                   sql.NullString
			addl                    string
			created                 int64
			used                    int64
			title, description, ver sql.NullString
			a                       artifactRow
		)
		dest := []any{&t.TaskID, &input, &addl, &created, &used, &t.LogBytes, &t.StepCount, &title, &description, &ver, &t.PlannedLeft}
		if err := rows.Scan(append(dest, a.dest()...)...); err != nil {
			return nil, err
		}
		if n := len(tasks); n == 0 || tasks[n-1].TaskID != t.TaskID {
			t.Input = nullString(input)
			t.Title, t.Description, t.Version = nullString(title), nullString(description), nullString(ver)
			t.AdditionalInput = rawJSON(addl)
			t.CreatedAt = time.UnixMilli(created)
			t.PluginTime = time.Duration(used)
			t.Artifacts = []protocol.Artifact{}
			tasks = append(tasks, t)
		}
		if a.id.Valid {
			last := &tasks[len(tasks)-1]
			last.Artifacts = append(last.Artifacts, a.artifact(last.TaskID))
		}
	}
	return tasks, rows.Err()
}

// rawJSON is a stored JSON value as it is served. Values stored before
// agentrt checked their text may hold bytes that are not UTF-8, always
// inside strings (JSON is ASCII outside them), and \u escapes that are
// lone surrogates: both are served as U+FFFD, so that every answer is JSON
// a strict parser accepts. What is stored now is checked before it is
// (protocol's checkJSON), and passes through as it is.
func rawJSON(s string) json.RawMessage {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.Contains(s, `\u`) {
		s = loneSurrogatesReplaced(s)
	}
	return json.RawMessage(s)
}

// loneSurrogatesReplaced replaces each \u escape in the JSON text s that is
// half of a surrogate pair without its other half with \ufffd.
func loneSurrogatesReplaced(s string) string {
	surrogate := func(i int) (high, low bool) {
		if i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
			return false, false
		}
		r, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
		if err != nil {
			return false, false
		}
		return r >= 0xd800 && r < 0xdc00, r >= 0xdc00 && r < 0xe000
	}
	var b strings.Builder
	last := 0 // s[:last] is in b
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			continue
		}
		if s[i+1] != 'u' {
			i++ // an escaped character: not the start of an escape
			continue
		}
		high, low := surrogate(i)
		if high {
			if _, nextLow := surrogate(i + 6); nextLow {
				i += 11 // a pair
				continue
			}
		}
		if high || low {
			b.WriteString(s[last:i])
			b.WriteString(`\ufffd`)
			last = i + 6
		}
		i += 5
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func nullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func encodeLogs(logs []protocol.LogRecord) (any, error) {
	if len(logs) == 0 {
		return nil, nil
	}
	// Without HTML escaping, a record takes what protocol.LogRecordSize
	// counts for it: '<' would take 6 bytes.
	b, err := protocol.MarshalJSON(logs)
	if err != nil {
		return nil, fmt.Errorf("encode logs: %w", err)
	}
	return string(b), nil
}

// readLogs reads a logs column, or returns notFound when there is no row.
func (s *Store) readLogs(ctx context.Context, notFound error, query string, args ...any) ([]protocol.LogRecord, error) {
	var logs sql.NullString
	err := s.reader(ctx).scanOne(query, args, &logs)
	if err == sql.ErrNoRows {
		return nil, notFound
	} else if err != nil {
		return nil, fmt.Errorf("read logs: %w", err)
	}
	return decodeLogs(logs)
}

func decodeLogs(s sql.NullString) ([]protocol.LogRecord, error) {
	logs := []protocol.LogRecord{}
	if !s.Valid {
		return logs, nil
	}
	if err := json.Unmarshal([]byte(s.String), &logs); err != nil {
		return nil, fmt.Errorf("decode logs: %w", err)
	}
	return logs, nil
}
