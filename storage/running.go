package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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
	write := s.inTxUnsynced
	if st.Background {
		write = s.inTx // its client is answered on the strength of it
	}
	err := write(ctx, e, 2+len(st.Events), func(w db) error {
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
			return s.recordEvents(w, st.TaskID, st.Events)
		}
		if err := taskExists(w, st.TaskID, s.agent); err != nil {
			return err
		}
		if err := insertStep(w, st, nil, time.Now(), nil, nil); err != nil {
			return err
		}
		// One more step, and its events' ids, in one update.
		last, err := countTask(w, st.TaskID, 0, 1, len(st.Events))
		if err != nil {
			return err
		}
		return s.insertEvents(w, st.TaskID, st.Events, last-int64(len(st.Events))+1)
	})
	if err != nil {
		return fmt.Errorf("start step: %w", err)
	}
	return nil
}

// AbandonStep undoes StartStep for a step whose handler never ran.
func (s *Store) AbandonStep(ctx context.Context, st *protocol.Step) error {
	// Its events stay (ids never go back): one more says it did not run.
	abandoned := []protocol.Event{protocol.StepEvent(protocol.EventStepAbandoned, st, nil)}
	err := s.inTxUnsynced(ctx, changesTask(st.TaskID), 2, func(w db) error {
		if st.Planned {
			res, err := w.exec(`UPDATE steps SET status = 'created', agent = NULL, build = NULL
				WHERE id = ? AND task_id = ? AND status = 'running'`, st.StepID, st.TaskID)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return err
			}
			return s.recordEvents(w, st.TaskID, abandoned)
		}
		res, err := w.exec(`DELETE FROM steps WHERE id = ? AND task_id = ? AND status = 'running'`, st.StepID, st.TaskID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		if err := addTaskUsage(w, st.TaskID, 0, -1); err != nil {
			return err
		}
		return s.recordEvents(w, st.TaskID, abandoned)
	})
	if err != nil {
		return fmt.Errorf("abandon step: %w", err)
	}
	return nil
}

// interruptedMessage is what a step left running by a process that died
// records as its failure.
const interruptedMessage = "the step was interrupted: the server stopped while it ran (it was killed or crashed); its handler did not finish"

// interruptedOutput is an interrupted step's additional_output.
var interruptedOutput = string(protocol.FailureOutput(&protocol.Error{Code: protocol.EINTERRUPTED, Message: interruptedMessage}))

// Steps a process that died left running are marked failed when the
// store opens: each is completed with the error code
// protocol.EINTERRUPTED, no output, and its task stays usable. That is a
// write, and a store must open on a full disk (to serve reads while the
// operator frees space): when the disk has no room for it, the marks
// wait.
//
// While they wait, every read shows each of those steps as its mark will
// (leftRunning.read), and no write is committed before them: the writer
// writes them first, before any batch (markInterrupted), so the first
// write that finds room writes them, and a write that finds none fails as
// it would have anyway (507). A goroutine the store owns tries again
// meanwhile (retryInterrupted), so that they are written even if nothing
// else is. The store never holds a step of this process running beside
// one a dead process left.

// leftRunning is the ids of steps a dead process left running whose
// marks wait for room; nil when none wait.
type leftRunning map[string]bool

// interruptedRetry is how long retryInterrupted first waits; it waits
// twice as long after each try that finds no room, up to
// interruptedRetryMax. A try on a full disk costs a failed write of a few
// pages.
const (
	interruptedRetry    = time.Second
	interruptedRetryMax = 15 * time.Second
)

// leftRunning returns the steps whose marks wait. Take it before the
// query whose steps it is to read: a step in it is never one of this
// process, so a set taken before the marks were written reads nothing
// wrong, and an empty one means they were written before the query.
func (s *Store) leftRunning() leftRunning {
	if p := s.interrupted.Load(); p != nil {
		return *p
	}
	return nil
}

// read shows st, if a dead process left it running and its mark waits,
// as the mark will write it.
func (l leftRunning) read(st *protocol.Step) {
	if st.Status != protocol.StatusRunning || !l[st.StepID] {
		return
	}
	st.Status = protocol.StatusCompleted
	st.Output = nil
	st.AdditionalOutput = json.RawMessage(interruptedOutput)
	st.IsLast = false
}

// readAll is read for each step.
func (l leftRunning) readAll(steps []protocol.Step) {
	if l == nil {
		return
	}
	for i := range steps {
		l.read(&steps[i])
	}
}

// recoverInterruptedSteps marks failed the steps a process that died left
// running, at Open. On a full disk it leaves them to markInterrupted and
// retryInterrupted, logged once now and once when done; any other failure
// fails Open.
func (s *Store) recoverInterruptedSteps(ctx context.Context) error {
	left := leftRunning{}
	rows, err := s.reader(ctx).query(`SELECT id FROM steps WHERE status = 'running'`)
	if err != nil {
		return fmt.Errorf("find interrupted steps: %w", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("find interrupted steps: %w", err)
		}
		left[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("find interrupted steps: %w", err)
	}
	if len(left) == 0 {
		return nil
	}
	s.interrupted.Store(&left)
	err = s.markInterruptedNow()
	switch {
	case err == nil:
		return nil
	case protocol.ErrorCode(err) == protocol.EINSUFFICIENT:
		s.interruptedSince.Store(time.Now().UnixNano())
		s.log.Warn("the disk is full: steps running when the last process stopped read as failed (interrupted), and are recorded so once there is room; until then writes are refused",
			"steps", len(left), "err", err)
		s.retryDone = make(chan struct{})
		go s.retryInterrupted(s.retryFirst)
		return nil
	default:
		return fmt.Errorf("mark interrupted steps: %w", err)
	}
}

// markInterruptedNow has the writer write the marks that wait, if any:
// a write of nothing, which the writer does after them (markInterrupted).
// The disk floor does not hold it back: the marks are a few rows, of the
// kind the floor keeps room for.
func (s *Store) markInterruptedNow() error {
	return s.hand(&writeReq{fn: func(db) error { return nil }, effect: noTasks, rows: 1, done: make(chan error, 1)})
}

// retryInterrupted writes the marks that wait, trying again after first,
// then twice as long each time up to interruptedRetryMax, until they are
// written (by it or by a write that found room first) or the store
// closes. The store owns it: Close stops it and waits.
func (s *Store) retryInterrupted(first time.Duration) {
	defer close(s.retryDone)
	wait := first
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		if s.interrupted.Load() == nil {
			return
		}
		if err := s.markInterruptedNow(); err == nil || errors.Is(err, errClosed) {
			return
		}
		wait = min(2*wait, interruptedRetryMax)
		t.Reset(wait)
	}
}

// markInterrupted writes, in the writer goroutine, the marks that wait,
// in a transaction of their own; nil at once when none wait. The writer
// calls it before every batch and writes the batch only if it succeeds.
func (s *Store) markInterrupted(w *writer) error {
	p := s.interrupted.Load()
	if p == nil {
		return nil
	}
	ids := make([]string, 0, len(*p))
	for id := range *p {
		ids = append(ids, id)
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	var n int64
	req := &writeReq{effect: noTasks, rows: len(ids), done: make(chan error, 1), fn: func(w db) error {
		if err := s.recordInterrupted(w, string(list)); err != nil {
			return err
		}
		res, err := w.exec(`UPDATE steps SET status = 'completed', output = NULL, additional_output = ?, is_last = 0, updated_at = ?
			WHERE status = 'running' AND id IN (SELECT value FROM json_each(?))`, interruptedOutput, millis(time.Now()), string(list))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	}}
	s.commit(w, []*writeReq{req})
	if err := <-req.done; err != nil {
		return fmt.Errorf("mark interrupted steps: %w", err)
	}
	s.interrupted.Store(nil)
	if since := s.interruptedSince.Load(); since == 0 {
		s.log.Warn("steps running when the last process stopped are marked failed (interrupted)", "steps", n)
	} else {
		s.log.Info("the disk has room again: steps running when the last process stopped are now recorded as failed (interrupted)",
			"steps", n, "waited", time.Since(time.Unix(0, since)).Round(time.Second).String())
	}
	return nil
}

// recordInterrupted records the step.failed event of each step of list (a
// JSON array of ids) still running, before it is marked interrupted.
func (s *Store) recordInterrupted(w db, list string) error {
	rows, err := w.query(`SELECT id, task_id, name FROM steps WHERE status = 'running' AND id IN (SELECT value FROM json_each(?))`, list)
	if err != nil {
		return err
	}
	var steps []protocol.Step
	for rows.Next() {
		var st protocol.Step
		var name sql.NullString
		if err := rows.Scan(&st.StepID, &st.TaskID, &name); err != nil {
			rows.Close()
			return err
		}
		st.Name, st.Status = nullString(name), protocol.StatusCompleted
		steps = append(steps, st)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	why := &protocol.Error{Code: protocol.EINTERRUPTED, Message: interruptedMessage}
	for i := range steps {
		ev := protocol.StepEvent(protocol.EventStepFailed, &steps[i], why)
		if err := s.recordEvents(w, steps[i].TaskID, []protocol.Event{ev}); err != nil {
			return err
		}
	}
	return nil
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
	left := s.leftRunning() // before the query: see leftRunning
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
		rows, err = r.query(`SELECT id, task_id, status, name, json_extract(additional_output, '$.error.code') IS NOT NULL
			FROM steps WHERE task_id IN (`+marks+`) ORDER BY seq`, args[1:]...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id, taskID, status string
				name               sql.NullString
				failed             bool
			)
			if err := rows.Scan(&id, &taskID, &status, &name, &failed); err != nil {
				return err
			}
			if status == string(protocol.StatusRunning) && left[id] {
				status, failed = string(protocol.StatusCompleted), true // as its mark will write it
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
