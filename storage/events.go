package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// MinEventBytes is the least Config.EventBounds.Bytes may be: room for
// the largest progress event (its message and partial output, escaped)
// many times over, so that a bound never trims the event just written.
const MinEventBytes = 256 << 10

// Each task's events are rows of events (migration 0011), ids counted
// per task from 1: the writer, the only one, gives each event one more
// than the highest the task gave (tasks.last_event), in the transaction
// that records what the event says happened. Progress and log events are trimmed, oldest
// first, past the store's bounds, counted in event_usage so that holding
// a bound costs no count of the log; the highest event is never trimmed,
// so ids never go back.

// recordEvents records evs, events of the task taskID, after those it
// holds, setting each one's ID and TaskID, then trims the task's oldest
// trimmable events past the store's bounds. It runs in the writer's
// transaction, and may run again if the transaction is retried.
func (s *Store) recordEvents(w db, taskID string, evs []protocol.Event) error {
	if len(evs) == 0 {
		return nil
	}
	last, err := countTask(w, taskID, 0, 0, len(evs))
	if err != nil {
		return err
	}
	return s.insertEvents(w, taskID, evs, last-int64(len(evs))+1)
}

// countTask adds plugin time d, steps steps and events events to what the
// task taskID counts, and returns the id of its last event: those added
// are the ones up to it. protocol.ENOTFOUND when there is no such task.
func countTask(w db, taskID string, d time.Duration, steps, events int) (last int64, err error) {
	err = w.scanOne(`UPDATE tasks SET plugin_ns = plugin_ns + ?, step_count = step_count + ?, last_event = last_event + ?
		WHERE id = ? RETURNING last_event`, []any{int64(max(d, 0)), steps, events, taskID}, &last)
	if err == sql.ErrNoRows {
		return 0, protocol.Errorf(protocol.ENOTFOUND, "task %q not found", taskID)
	} else if err != nil {
		return 0, fmt.Errorf("count task: %w", err)
	}
	return last, nil
}

// insertEvents inserts evs, events of the task taskID whose ids
// countTask gave, from first, then trims the task's oldest trimmable
// events past the store's bounds.
func (s *Store) insertEvents(w db, taskID string, evs []protocol.Event, first int64) error {
	last := first - 1
	var count, bytes int64
	for i := range evs {
		e := &evs[i]
		last++
		e.ID, e.TaskID = last, taskID
		if e.CreatedAt.IsZero() {
			e.CreatedAt = time.Now()
		}
		if len(e.Data) == 0 {
			e.Data = json.RawMessage(`{}`)
		}
		trim := protocol.Trimmable(e.Type)
		if _, err := w.exec(`INSERT INTO events (task_id, id, type, step_id, created_at, data, trimmable) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			taskID, e.ID, e.Type, nullIfEmpty(e.StepID), millis(e.CreatedAt), string(e.Data), boolInt(trim)); err != nil {
			return fmt.Errorf("record events: %w", err)
		}
		if trim {
			count++
			bytes += int64(len(e.Data))
		}
	}
	if count == 0 {
		return nil
	}
	var held, heldBytes int64
	if err := w.scanOne(`INSERT INTO event_usage (task_id, count, bytes, trimmed, trimmed_through) VALUES (?, ?, ?, 0, 0)
		ON CONFLICT (task_id) DO UPDATE SET count = count + excluded.count, bytes = bytes + excluded.bytes
		RETURNING count, bytes`, []any{taskID, count, bytes}, &held, &heldBytes); err != nil {
		return fmt.Errorf("record events: %w", err)
	}
	if held <= int64(s.events.Count) && heldBytes <= s.events.Bytes {
		return nil
	}
	return s.trimEvents(w, taskID, last, held, heldBytes)
}

// trimEvents removes the task's oldest trimmable events until what it
// holds of them (held events of heldBytes) is within the store's bounds,
// never the event last, the task's highest. It reads only the events it
// removes, and one more.
func (s *Store) trimEvents(w db, taskID string, last, held, heldBytes int64) error {
	rows, err := w.query(`SELECT id, length(data) FROM events WHERE task_id = ? AND trimmable = 1 ORDER BY id`, taskID)
	if err != nil {
		return fmt.Errorf("trim events: %w", err)
	}
	var through, n int64
	for (held > int64(s.events.Count) || heldBytes > s.events.Bytes) && rows.Next() {
		var id, size int64
		if err := rows.Scan(&id, &size); err != nil {
			rows.Close()
			return fmt.Errorf("trim events: %w", err)
		}
		if id >= last {
			break
		}
		through, n = id, n+1
		held--
		heldBytes -= size
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("trim events: %w", err)
	}
	if n == 0 {
		return nil
	}
	if _, err := w.exec(`DELETE FROM events WHERE task_id = ? AND trimmable = 1 AND id <= ?`, taskID, through); err != nil {
		return fmt.Errorf("trim events: %w", err)
	}
	if _, err := w.exec(`UPDATE event_usage SET count = ?, bytes = ?, trimmed = trimmed + ?, trimmed_through = max(trimmed_through, ?)
		WHERE task_id = ?`, held, heldBytes, n, through, taskID); err != nil {
		return fmt.Errorf("trim events: %w", err)
	}
	return nil
}

// AppendEvents records events of a task, what happens while a step runs
// (its progress, its log), after those the task holds, giving each its
// id. Unsynced, as StartStep: the events need survive the process, not
// the machine, and the step's save syncs them with its own.
// protocol.ENOTFOUND when the agent has no such task.
func (s *Store) AppendEvents(ctx context.Context, taskID string, evs []protocol.Event) error {
	err := s.inTxUnsynced(ctx, noTasks, len(evs)+1, func(w db) error {
		if err := taskExists(w, taskID, s.agent); err != nil {
			return err
		}
		return s.recordEvents(w, taskID, evs)
	})
	if err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	return nil
}

// Events returns a page of the task's events with ids above after, at
// most limit of them, in id order, with what was trimmed after after.
// protocol.ENOTFOUND when the agent has no such task.
func (s *Store) Events(ctx context.Context, taskID string, after int64, limit int) (*protocol.EventPage, error) {
	page := &protocol.EventPage{Events: []protocol.Event{}}
	err := s.readTx(ctx, func(r db) error {
		page.Events = page.Events[:0]
		err := r.scanOne(`SELECT last_event FROM tasks WHERE id = ? AND agent = ?`, []any{taskID, s.agent}, &page.Last)
		if err == sql.ErrNoRows {
			return protocol.Errorf(protocol.ENOTFOUND, "task %q not found", taskID)
		} else if err != nil {
			return err
		}
		rows, err := r.query(`SELECT id, type, step_id, created_at, data FROM events WHERE task_id = ? AND id > ? ORDER BY id LIMIT ?`,
			taskID, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e protocol.Event
			var stepID sql.NullString
			var at int64
			var data string
			if err := rows.Scan(&e.ID, &e.Type, &stepID, &at, &data); err != nil {
				return err
			}
			e.TaskID, e.StepID, e.CreatedAt, e.Data = taskID, stepID.String, time.UnixMilli(at), json.RawMessage(data)
			page.Events = append(page.Events, e)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		ends, err := stepEnds(r, taskID, after)
		if err != nil {
			return err
		}
		page.Events = mergeEvents(page.Events, ends, limit)
		err = r.scanOne(`SELECT trimmed, trimmed_through FROM event_usage WHERE task_id = ?`, []any{taskID}, &page.Trimmed, &page.TrimmedThrough)
		switch {
		case err == sql.ErrNoRows:
		case err != nil:
			return err
		case page.TrimmedThrough <= after:
			page.Trimmed, page.TrimmedThrough = 0, 0
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return page, nil
}

// stepEnds returns the end events of the task's steps with ids above
// after, in id order. Each is read from its step's row (end_event,
// end_type), from the newest step back, and the reading stops at the
// first at or below after: a task's steps run one at a time, in the
// order of their rows, so their ends' ids grow with their rows. A
// watcher that keeps up reads a row or two.
func stepEnds(r db, taskID string, after int64) ([]protocol.Event, error) {
	rows, err := r.query(`SELECT id, name, is_last, additional_output, updated_at, end_event, end_type
		FROM steps WHERE task_id = ? ORDER BY seq DESC`, taskID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ends []protocol.Event
	for rows.Next() {
		st := protocol.Step{TaskID: taskID, Status: protocol.StatusCompleted}
		var name, additional, typ sql.NullString
		var at int64
		var end sql.NullInt64
		if err := rows.Scan(&st.StepID, &name, &st.IsLast, &additional, &at, &end, &typ); err != nil {
			return nil, err
		}
		if !end.Valid {
			continue // running, or planned: not ended
		}
		if end.Int64 <= after {
			break
		}
		st.Name = nullString(name)
		var why *protocol.Error
		if typ.String != protocol.EventStepCompleted {
			why = failureOf(additional.String)
		}
		ev := protocol.StepEvent(typ.String, &st, why)
		ev.ID, ev.CreatedAt = end.Int64, time.UnixMilli(at)
		ends = append(ends, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Reverse(ends)
	return ends, nil
}

// failureOf is the failure a failed step's additional_output holds
// (protocol.FailureOutput).
func failureOf(additional string) *protocol.Error {
	var v struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal([]byte(additional), &v) // written by SaveStep: it reads
	return &protocol.Error{Code: v.Error.Code, Message: v.Error.Message}
}

// mergeEvents merges a and b, each in id order, and keeps the first
// limit.
func mergeEvents(a, b []protocol.Event, limit int) []protocol.Event {
	if len(b) == 0 {
		return a
	}
	out := make([]protocol.Event, 0, min(len(a)+len(b), limit))
	for len(out) < limit && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || len(a) > 0 && a[0].ID < b[0].ID {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// nullIfEmpty is s, or NULL for "".
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
