package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// CreateTask records a new task with the steps its task handler planned and
// the artifacts it created (their bytes staged with StageArtifact), in one
// transaction.
func (s *Store) CreateTask(ctx context.Context, t *protocol.Task, planned []protocol.Step, artifacts []protocol.Artifact) error {
	logs, err := encodeLogs(t.Logs)
	if err != nil {
		return err
	}
	err = s.inTx(ctx, func(w db) error {
		_, err := w.exec(
			`INSERT INTO tasks (id, input, additional_input, logs, created_at, plugin_ms) VALUES (?, ?, ?, ?, ?, ?)`,
			t.TaskID, t.Input, string(t.AdditionalInput), logs, millis(t.CreatedAt), t.PluginTime.Milliseconds())
		if err != nil {
			return err
		}
		for i := range planned {
			if err := insertStep(w, &planned[i]); err != nil {
				return err
			}
		}
		return insertArtifacts(w, artifacts)
	})
	if err != nil {
		return fmt.Errorf("create task: %w", err)
	}
	s.promoteAll(artifacts)
	return nil
}

// GetTask returns a task with its artifacts, or protocol.ENOTFOUND.
func (s *Store) GetTask(ctx context.Context, taskID string) (*protocol.Task, error) {
	rows, err := s.reader(ctx).query(`
		SELECT t.id, t.input, t.additional_input, t.created_at, t.plugin_ms, `+artifactColumns("a")+`
		FROM tasks t LEFT JOIN artifacts a ON a.task_id = t.id
		WHERE t.id = ?
		ORDER BY a.seq`, taskID)
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

// ListTasks returns a page of tasks in creation order, with their
// artifacts, and the total number of tasks.
func (s *Store) ListTasks(ctx context.Context, p protocol.Page) ([]protocol.Task, int, error) {
	tasks := []protocol.Task{}
	var total int
	err := s.readTx(ctx, func(r db) error {
		if err := r.scanOne(`SELECT COUNT(*) FROM tasks`, nil, &total); err != nil {
			return err
		}
		if p.Offset() >= total {
			return nil
		}
		rows, err := r.query(`
			WITH page AS (SELECT * FROM tasks ORDER BY seq LIMIT ? OFFSET ?)
			SELECT t.id, t.input, t.additional_input, t.created_at, t.plugin_ms, `+artifactColumns("a")+`
			FROM page t LEFT JOIN artifacts a ON a.task_id = t.id
			ORDER BY t.seq, a.seq`, p.Size, p.Offset())
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

// TaskLogs returns what the task handler logged when the task was created.
func (s *Store) TaskLogs(ctx context.Context, taskID string) ([]protocol.LogRecord, error) {
	return s.readLogs(ctx, protocol.Errorf(protocol.ENOTFOUND, "task %q not found", taskID),
		`SELECT logs FROM tasks WHERE id = ?`, taskID)
}

// scanTasks reads rows of a task joined with its artifacts (one row per
// artifact, or one row with NULL artifact columns), grouping consecutive
// rows of the same task.
func scanTasks(rows *sql.Rows) ([]protocol.Task, error) {
	defer rows.Close()
	tasks := []protocol.Task{}
	for rows.Next() {
		var (
			t       protocol.Task
			input   sql.NullString
			addl    string
			created int64
			used    int64
			a       artifactRow
		)
		if err := rows.Scan(append([]any{&t.TaskID, &input, &addl, &created, &used}, a.dest()...)...); err != nil {
			return nil, err
		}
		if n := len(tasks); n == 0 || tasks[n-1].TaskID != t.TaskID {
			t.Input = nullString(input)
			t.AdditionalInput = json.RawMessage(addl)
			t.CreatedAt = time.UnixMilli(created)
			t.PluginTime = time.Duration(used) * time.Millisecond
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
	b, err := json.Marshal(logs)
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
