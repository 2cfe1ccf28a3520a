package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

const stepColumns = `s.id, s.task_id, s.name, s.status, s.input, s.additional_input,
	s.output, s.additional_output, s.is_last, s.planned, s.created_at, s.agent, s.build`

// SaveStep records an executed step, with the artifacts it created
// (their bytes staged with StageArtifact), and adds its plugin time to its
// task's, in one transaction. It completes the step's row where there is
// one (a planned step's, or the one StartStep wrote), and inserts it
// where there is none; a planned step must have its row.
func (s *Store) SaveStep(ctx context.Context, st *protocol.Step, artifacts []protocol.Artifact) error {
	logs, err := encodeLogs(st.Logs) // here, not in the writer goroutine
	if err != nil {
		return err
	}
	// A step saved adds to its task's count (if StartStep did not) and
	// plugin time, which a cached copy follows; its artifacts and a
	// planned step's end are read again.
	added := 0
	e := changesTask(st.TaskID)
	if !st.Planned && len(artifacts) == 0 {
		e.update = func(t *protocol.Task) {
			t.StepCount += added
			t.PluginTime += max(st.PluginTime, 0)
		}
	}
	rows, end := endEvent(st)
	n := len(rows)
	if end != nil {
		n++
	}
	err = s.inTx(ctx, e, 2+len(artifacts)+len(rows), func(w db) error {
		added = 0
		// A new step never marked has no row yet (most quick steps): the
		// writer is spared a look for one.
		insert := !st.Planned && !st.Marked
		if insert {
			added = 1
		}
		// The task's counts first: they give the events their ids.
		last, err := countTask(w, st.TaskID, st.PluginTime, added, n)
		if err != nil {
			return err
		}
		if err := s.insertEvents(w, st.TaskID, rows, last-int64(n)+1); err != nil {
			return err
		}
		var endID, endType any // NULL without an end event
		updated := time.Now()
		if end != nil {
			end.ID, end.TaskID = last, st.TaskID
			endID, endType = last, end.Type
			updated = end.CreatedAt // what its end event reads when replayed
		}
		if !insert {
			res, err := w.exec(`
				UPDATE steps SET name = ?, status = ?, input = ?, additional_input = ?, output = ?,
					additional_output = ?, is_last = ?, logs = ?, updated_at = ?, agent = ?, build = ?,
					end_event = ?, end_type = ?
				WHERE id = ? AND task_id = ?`,
				st.Name, st.Status, st.Input, string(st.AdditionalInput), st.Output,
				nullJSON(st.AdditionalOutput), boolInt(st.IsLast), logs, millis(updated),
				buildAgent(st.Build), buildID(st.Build), endID, endType, st.StepID, st.TaskID)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 0 && st.Planned {
				return protocol.Errorf(protocol.ENOTFOUND, "planned step %q of task %q not found", st.StepID, st.TaskID)
			}
			if n == 0 { // marked, but its mark was never written
				if _, err := countTask(w, st.TaskID, 0, 1, 0); err != nil {
					return err
				}
				insert, added = true, 1
			}
		}
		if insert {
			if err := insertStep(w, st, logs, updated, endID, endType); err != nil {
				return err
			}
		}
		return insertArtifacts(w, artifacts)
	})
	if err != nil {
		return fmt.Errorf("save step: %w", err)
	}
	s.promoteAll(artifacts)
	return nil
}

// insertStep inserts a step whose logs are already encoded (encodeLogs),
// updated at updated, with the id and type of its end event (NULL for a
// step not ended). Its
// task's step count is the caller's to keep (countTask).
func insertStep(w db, st *protocol.Step, logs any, updated time.Time, endID, endType any) error {
	_, err := w.exec(`
		INSERT INTO steps (id, task_id, name, status, input, additional_input, output,
			additional_output, is_last, planned, logs, created_at, updated_at, agent, build, end_event, end_type)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		st.StepID, st.TaskID, st.Name, st.Status, st.Input, string(st.AdditionalInput), st.Output,
		nullJSON(st.AdditionalOutput), boolInt(st.IsLast), boolInt(st.Planned), logs, millis(st.CreatedAt), millis(updated),
		buildAgent(st.Build), buildID(st.Build), endID, endType)
	return err
}

// endEvent splits the events saved with st into those recorded as rows
// and its end (nil if none is the last), recorded in its own row
// (end_event, end_type).
func endEvent(st *protocol.Step) (rows []protocol.Event, end *protocol.Event) {
	if n := len(st.Events); n > 0 {
		last := &st.Events[n-1]
		switch last.Type {
		case protocol.EventStepCompleted, protocol.EventStepFailed, protocol.EventStepCancelled:
			if last.StepID == st.StepID {
				return st.Events[:n-1], last
			}
		}
	}
	return st.Events, nil
}

// NextPlannedStep returns the task's oldest step still in status "created",
// or nil when there is none.
func (s *Store) NextPlannedStep(ctx context.Context, taskID string) (*protocol.Step, error) {
	rows, err := s.reader(ctx).query(`
		SELECT `+stepColumns+`, `+artifactColumns("a")+`
		FROM steps s LEFT JOIN artifacts a ON a.step_id = s.id
		WHERE s.id = (SELECT id FROM steps WHERE task_id = ? AND status = 'created' ORDER BY seq LIMIT 1)
		ORDER BY a.seq`, taskID)
	if err != nil {
		return nil, fmt.Errorf("next planned step: %w", err)
	}
	steps, err := scanSteps(rows)
	if err != nil {
		return nil, fmt.Errorf("next planned step: %w", err)
	}
	if len(steps) == 0 {
		return nil, nil
	}
	return &steps[0], nil
}

// GetStep returns a step of a task with its artifacts, or protocol.ENOTFOUND
// when the task has no such step.
func (s *Store) GetStep(ctx context.Context, taskID, stepID string) (*protocol.Step, error) {
	left := s.leftRunning() // before the query: see leftRunning
	rows, err := s.reader(ctx).query(`
		SELECT `+stepColumns+`, `+artifactColumns("a")+`
		FROM steps s LEFT JOIN artifacts a ON a.step_id = s.id
		WHERE s.id = ? AND s.task_id = ? AND EXISTS (SELECT 1 FROM tasks WHERE id = s.task_id AND agent = ?)
		ORDER BY a.seq`, stepID, taskID, s.agent)
	if err != nil {
		return nil, fmt.Errorf("get step: %w", err)
	}
	steps, err := scanSteps(rows)
	if err != nil {
		return nil, fmt.Errorf("get step: %w", err)
	}
	if len(steps) == 0 {
		return nil, protocol.Errorf(protocol.ENOTFOUND, "step %q not found in task %q", stepID, taskID)
	}
	left.readAll(steps)
	return &steps[0], nil
}

// ListSteps returns a page of a task's steps in creation order, with their
// artifacts, and the task's number of steps; protocol.ENOTFOUND when there
// is no such task.
func (s *Store) ListSteps(ctx context.Context, taskID string, p protocol.Page) ([]protocol.Step, int, error) {
	steps := []protocol.Step{}
	var total int
	left := s.leftRunning() // before the query: see leftRunning
	err := s.readTx(ctx, func(r db) error {
		if err := taskExists(r, taskID, s.agent); err != nil {
			return err
		}
		if err := r.scanOne(`SELECT COUNT(*) FROM steps WHERE task_id = ?`, []any{taskID}, &total); err != nil {
			return err
		}
		if p.Offset() >= total {
			return nil
		}
		rows, err := r.query(`
			WITH page AS (SELECT * FROM steps WHERE task_id = ? ORDER BY seq LIMIT ? OFFSET ?)
			SELECT `+stepColumns+`, `+artifactColumns("a")+`
			FROM page s LEFT JOIN artifacts a ON a.step_id = s.id
			ORDER BY s.seq, a.seq`, taskID, p.Size, p.Offset())
		if err != nil {
			return err
		}
		steps, err = scanSteps(rows)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list steps: %w", err)
	}
	left.readAll(steps)
	return steps, total, nil
}

// StepLogs returns what the plugin logged while running a step.
func (s *Store) StepLogs(ctx context.Context, taskID, stepID string) ([]protocol.LogRecord, error) {
	return s.readLogs(ctx, protocol.Errorf(protocol.ENOTFOUND, "step %q not found in task %q", stepID, taskID),
		`SELECT logs FROM steps s WHERE id = ? AND task_id = ? AND EXISTS (SELECT 1 FROM tasks WHERE id = s.task_id AND agent = ?)`,
		stepID, taskID, s.agent)
}

// addTaskUsage adds to the time a task's handler calls have used, to the
// nanosecond (a call of 0.3 ms counts 0.3 ms), and to its step count.
func addTaskUsage(w db, taskID string, d time.Duration, steps int) error {
	if d <= 0 && steps == 0 {
		return nil
	}
	_, err := w.exec(`UPDATE tasks SET plugin_ns = plugin_ns + ?, step_count = step_count + ? WHERE id = ?`,
		int64(max(d, 0)), steps, taskID)
	return err
}

// taskExists is ENOTFOUND unless the agent has the task.
func taskExists(r db, taskID, agent string) error {
	var one int
	err := r.scanOne(`SELECT 1 FROM tasks WHERE id = ? AND agent = ?`, []any{taskID, agent}, &one)
	if err == sql.ErrNoRows {
		return protocol.Errorf(protocol.ENOTFOUND, "task %q not found", taskID)
	} else if err != nil {
		return fmt.Errorf("find task: %w", err)
	}
	return nil
}

// scanSteps reads rows of a step joined with its artifacts, grouping
// consecutive rows of the same step.
func scanSteps(rows *sql.Rows) ([]protocol.Step, error) {
	defer rows.Close()
	steps := []protocol.Step{}
	for rows.Next() {
		var (
			st                  protocol.Step
			name, input, output sql.NullString
			addlIn              string
			addlOut             sql.NullString
			isLast, planned     bool
			created             int64
			agent, build        sql.NullString
			a                   artifactRow
		)
		dest := []any{&st.StepID, &st.TaskID, &name, &st.Status, &input, &addlIn,
			&output, &addlOut, &isLast, &planned, &created, &agent, &build}
		if err := rows.Scan(append(dest, a.dest()...)...); err != nil {
			return nil, err
		}
		if n := len(steps); n == 0 || steps[n-1].StepID != st.StepID {
			st.Name, st.Input, st.Output = nullString(name), nullString(input), nullString(output)
			st.AdditionalInput = rawJSON(addlIn)
			if addlOut.Valid {
				st.AdditionalOutput = rawJSON(addlOut.String)
			}
			st.IsLast, st.Planned = isLast, planned
			st.CreatedAt = time.UnixMilli(created)
			if build.Valid {
				st.Build = &protocol.StepBuild{Agent: agent.String, SHA256: build.String}
			}
			st.Artifacts = []protocol.Artifact{}
			steps = append(steps, st)
		}
		if a.id.Valid {
			last := &steps[len(steps)-1]
			last.Artifacts = append(last.Artifacts, a.artifact(last.TaskID))
		}
	}
	return steps, rows.Err()
}

// buildAgent and buildID store which agent and build ran a step; NULL for
// a step not run.
func buildAgent(b *protocol.StepBuild) any {
	if b == nil {
		return nil
	}
	return b.Agent
}

func buildID(b *protocol.StepBuild) any {
	if b == nil {
		return nil
	}
	return b.SHA256
}

// nullJSON stores an absent JSON value as NULL.
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}
