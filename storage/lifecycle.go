package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

// UpdateTask changes the metadata fields patch names; protocol.ENOTFOUND
// when the agent has no such task.
func (s *Store) UpdateTask(ctx context.Context, taskID string, patch protocol.TaskPatch) error {
	var set []string
	var args []any
	for _, f := range []struct {
		column string
		p      protocol.PatchField
	}{{"title", patch.Title}, {"description", patch.Description}, {"version", patch.Version}} {
		if f.p.Set {
			set = append(set, f.column+" = ?")
			args = append(args, f.p.Value)
		}
	}
	if len(set) == 0 {
		return nil
	}
	query := `UPDATE tasks SET ` + strings.Join(set, ", ") + ` WHERE id = ? AND agent = ?`
	args = append(args, taskID, s.agent)
	err := s.inTx(ctx, changesTask(taskID), 1, func(w db) error {
		res, err := w.exec(query, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return protocol.Errorf(protocol.ENOTFOUND, "task %q not found", taskID)
		}
		return s.recordEvents(w, taskID, []protocol.Event{protocol.TaskUpdatedEvent(taskID, patch)})
	})
	if err != nil {
		return fmt.Errorf("update task: %w", err)
	}
	return nil
}

// DeleteTask removes a task's rows in one transaction, which also records
// the deletion in task_deletions and, for the task's seq, in seq_floors;
// then its bytes on disk; then the task_deletions row. A process that
// dies after the commit leaves the row, and the next Open removes the
// bytes (finishDeletions). protocol.ENOTFOUND when the agent has no such
// task. Deletions go through here only: what counts tasks follows them
// in this transaction.
func (s *Store) DeleteTask(ctx context.Context, taskID string) error {
	if err := s.deleteTaskRows(ctx, taskID); err != nil {
		return err
	}
	if err := s.removeTaskBytes(taskID); err != nil {
		// The rows are gone, which is what clients see; the bytes go at
		// the next start.
		s.log.ErrorContext(ctx, "removing a deleted task's files failed; the next start removes them", "task_id", taskID, "err", err)
		return nil
	}
	s.forgetDeletion(ctx, taskID)
	return nil
}

// deleteTaskRows is DeleteTask's transaction.
func (s *Store) deleteTaskRows(ctx context.Context, taskID string) error {
	err := s.inTx(ctx, changesTask(taskID), 8, func(w db) error {
		if err := taskExists(w, taskID, s.agent); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM artifacts WHERE task_id = ?`,
			`DELETE FROM steps WHERE task_id = ?`,
			`DELETE FROM task_logs WHERE task_id = ?`,
			`DELETE FROM events WHERE task_id = ?`,
			`DELETE FROM event_usage WHERE task_id = ?`,
			`INSERT INTO seq_floors (name, seq) SELECT 'tasks', seq FROM tasks WHERE id = ?
				ON CONFLICT (name) DO UPDATE SET seq = max(seq, excluded.seq)`,
			`DELETE FROM tasks WHERE id = ?`,
			`INSERT OR IGNORE INTO task_deletions (task_id) VALUES (?)`,
		} {
			if _, err := w.exec(q, taskID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete task: %w", err)
	}
	return nil
}

// removeTaskBytes removes a task's artifact bytes and workspace.
func (s *Store) removeTaskBytes(taskID string) error {
	var errs []error
	for _, dir := range []string{s.taskDir(taskID), s.workspaceDir(taskID)} {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// forgetDeletion removes the task_deletions row of a task whose bytes are
// gone. Unsynced: lost in a power cut, it makes the next start look for
// bytes that are not there.
func (s *Store) forgetDeletion(ctx context.Context, taskID string) {
	err := s.inTxUnsynced(ctx, noTasks, 1, func(w db) error {
		_, err := w.exec(`DELETE FROM task_deletions WHERE task_id = ?`, taskID)
		return err
	})
	if err != nil {
		s.log.WarnContext(ctx, "forgetting a finished deletion failed; the next start does it", "task_id", taskID, "err", err)
	}
}

// schemaDeletions is the migration that made tasks deletable.
const schemaDeletions = 8

// finishDeletions removes the bytes of tasks deleted by a process that
// died before it removed them: at Open, after recoverStaging (which may
// have put a rolled-back upload back into a deleted task's workspace).
func (s *Store) finishDeletions(ctx context.Context) error {
	var ids []string
	rows, err := s.reader(ctx).query(`SELECT task_id FROM task_deletions`)
	if err != nil {
		return fmt.Errorf("finish deletions: %w", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("finish deletions: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("finish deletions: %w", err)
	}
	for _, id := range ids {
		if uuid.Validate(id) != nil || len(id) != 36 {
			continue // not a name this store gave: not a path to remove
		}
		if err := s.removeTaskBytes(id); err != nil {
			return fmt.Errorf("finish the deletion of task %s: %w", id, err)
		}
		s.forgetDeletion(ctx, id)
	}
	if len(ids) > 0 {
		s.log.Info("removed the files of tasks deleted before the last stop", "tasks", len(ids))
	}
	return nil
}
