package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// StartStep marks a step running before its handler runs: a planned step
// is updated, a new one inserted (and counted in its task's steps). The
// write is unsynced (inTxUnsynced): it needs to survive the process, not
// the machine, and the SaveStep that ends the step syncs it with its own.
// protocol.ENOTFOUND when the task is gone.
func (s *Store) StartStep(ctx context.Context, st *protocol.Step) error {
	st.Marked = true // its save looks for the row this may write
	now := millis(time.Now())
	e := changesTask(st.TaskID)
	if !st.Planned { // one more step
		e.update = func(t *protocol.Task) { t.StepCount++ }
	}
	err := s.inTxUnsynced(ctx, e, 2, func(w db) error {
		if st.Planned {
			res, err := w.exec(`UPDATE steps SET status = 'running', updated_at = ?, agent = ?, build = ?
				WHERE id = ? AND task_id = ? AND status = 'created'`,
				now, buildAgent(st.Build), buildID(st.Build), st.StepID, st.TaskID)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				return protocol.Errorf(protocol.ENOTFOUND, "step %q of task %q is no longer planned", st.StepID, st.TaskID)
			}
			return nil
		}
		if err := taskExists(w, st.TaskID, s.agent); err != nil {
			return err
		}
		if err := insertStep(w, st, nil); err != nil {
			return err
		}
		return addTaskUsage(w, st.TaskID, 0, 1)
	})
	if err != nil {
		return fmt.Errorf("start step: %w", err)
	}
	return nil
}

// AbandonStep undoes StartStep for a step whose handler never ran.
func (s *Store) AbandonStep(ctx context.Context, st *protocol.Step) error {
	err := s.inTxUnsynced(ctx, changesTask(st.TaskID), 2, func(w db) error {
		if st.Planned {
			_, err := w.exec(`UPDATE steps SET status = 'created', agent = NULL, build = NULL
				WHERE id = ? AND task_id = ? AND status = 'running'`, st.StepID, st.TaskID)
			return err
		}
		res, err := w.exec(`DELETE FROM steps WHERE id = ? AND task_id = ? AND status = 'running'`, st.StepID, st.TaskID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return addTaskUsage(w, st.TaskID, 0, -1)
	})
	if err != nil {
		return fmt.Errorf("abandon step: %w", err)
	}
	return nil
}

// interruptedMessage is what a step left running by a process that died
// records as its failure.
const interruptedMessage = "the step was interrupted: the server stopped while it ran (it was killed or crashed); its handler did not finish"

// failInterruptedSteps marks failed the steps a process that died left
// running, at Open: each is completed with the error code
// protocol.EINTERRUPTED, no output, and its task stays usable. It returns
// how many there were.
func (s *Store) failInterruptedSteps(ctx context.Context) (int, error) {
	output := string(protocol.FailureOutput(&protocol.Error{Code: protocol.EINTERRUPTED, Message: interruptedMessage}))
	var n int64
	err := s.inTx(ctx, anyTasks, 1, func(w db) error {
		res, err := w.exec(`UPDATE steps SET status = 'completed', output = NULL, additional_output = ?, is_last = 0, updated_at = ?
			WHERE status = 'running'`, output, millis(time.Now()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mark interrupted steps: %w", err)
	}
	return int(n), nil
}

// StepSummaries summarises the steps of each of the agent's tasks named:
// one query, over the steps of those tasks.
func (s *Store) StepSummaries(ctx context.Context, taskIDs []string) (map[string]protocol.StepSummary, error) {
	out := map[string]protocol.StepSummary{}
	if len(taskIDs) == 0 {
		return out, nil
	}
	marks := strings.Repeat("?, ", len(taskIDs)-1) + "?"
	args := make([]any, 0, len(taskIDs)+1)
	args = append(args, s.agent)
	for _, id := range taskIDs {
		args = append(args, id)
	}
	err := s.readTx(ctx, func(r db) error {
		rows, err := r.query(`SELECT id FROM tasks WHERE agent = ? AND id IN (`+marks+`)`, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			out[id] = protocol.StepSummary{Planned: []string{}}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// One row per step: a page of tasks is at most 100, and a task's
		// steps are bounded by its limit.
		rows, err = r.query(`SELECT task_id, status, name, json_extract(additional_output, '$.error.code') IS NOT NULL
			FROM steps WHERE task_id IN (`+marks+`) ORDER BY seq`, args[1:]...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				taskID, status string
				name           sql.NullString
				failed         bool
			)
			if err := rows.Scan(&taskID, &status, &name, &failed); err != nil {
				return err
			}
			sum, ok := out[taskID]
			if !ok {
				continue
			}
			switch {
			case status == string(protocol.StatusCreated):
				sum.Planned = append(sum.Planned, name.String)
			case status == string(protocol.StatusRunning):
				sum.Running++
			case failed:
				sum.Failed++
			default:
				sum.Completed++
			}
			out[taskID] = sum
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("step summaries: %w", err)
	}
	return out, nil
}
