package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Steps run in the background (ExecuteStepAsync) are answered at once,
// marked running on disk, and run by a goroutine of the agent's that
// holds their task, as a synchronous step's request does, until they
// end. While one runs, its task takes no other step: a request for one,
// synchronous or not, is refused (ECONFLICT, naming the step running)
// rather than queued, because the next step's input is its client's to
// choose once it has seen this one's output, and a queue of inputs
// chosen blind would be state that a crash must recover.
//
// They are bounded twice: per agent (Limits.MaxBackgroundSteps) and, with
// every agent's, by BackgroundSlots shared across a server. Past either
// bound a request is refused with EUNAVAILABLE and Retry-After before it
// records anything.

// DefaultStepTimeout is the time limit of a step run in the background
// (AgentConfig.StepTimeout): minutes, where a client waiting for a
// synchronous step's answer gets the plugin's call timeout (30 s).
const DefaultStepTimeout = 10 * time.Minute

// cancelWait is how long a cancel waits for its step to stop before it
// answers that it is stopping.
const cancelWait = 10 * time.Second

// DefaultMaxBackgroundSteps bounds the steps one agent runs in the
// background at once, where its limits say nothing
// (Limits.MaxBackgroundSteps).
const DefaultMaxBackgroundSteps = 64

// BackgroundSlots bound the steps every agent of a server runs in the
// background together. Safe for concurrent use.
type BackgroundSlots struct {
	mu   sync.Mutex
	max  int
	used int
}

// NewBackgroundSlots returns slots for at most max background steps; max
// must be at least 1.
func NewBackgroundSlots(max int) *BackgroundSlots {
	return &BackgroundSlots{max: max}
}

// take takes a slot, false when all are taken.
func (s *BackgroundSlots) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used >= s.max {
		return false
	}
	s.used++
	return true
}

func (s *BackgroundSlots) give() {
	s.mu.Lock()
	s.used--
	s.mu.Unlock()
}

// InUse is how many background steps run now.
func (s *BackgroundSlots) InUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Max is the bound.
func (s *BackgroundSlots) Max() int { return s.max }

// background is an agent's steps running in the background.
type background struct {
	mu      sync.Mutex
	running int
	// steps are the background steps running, by task.
	steps map[string]string
	wg    sync.WaitGroup
}

// stepOf returns the id of the step task taskID runs in the background,
// "" when it runs none.
func (bg *background) stepOf(taskID string) string {
	bg.mu.Lock()
	defer bg.mu.Unlock()
	return bg.steps[taskID]
}

// ended forgets stepID, run in the background on taskID, once it has
// ended: the task takes its next step.
func (bg *background) ended(taskID, stepID string) {
	bg.mu.Lock()
	defer bg.mu.Unlock()
	if bg.steps[taskID] == stepID {
		delete(bg.steps, taskID)
	}
}

// busyError refuses a step on a task whose step stepID runs in the
// background.
func busyError(taskID, stepID string) error {
	return &Error{Code: ECONFLICT, StepID: stepID, Message: fmt.Sprintf(
		"task %s is running step %s in the background: one step of a task runs at a time; watch the task's events (or GET the step) and send the next step once it has ended, or cancel it", taskID, stepID)}
}

// ExecuteStepAsync records the task's next step as running and returns
// it at once, its handler run in the background (Prefer: respond-async):
// GET shows the step running until it ends, then its output or its
// failure, and the task's events tell each change. The step is on disk
// before ExecuteStepAsync returns. It runs with the agent's StepTimeout
// as its time limit, within the task's time budget.
//
// ECONFLICT when a step of the task runs in the background (naming it);
// EUNAVAILABLE past the agent's or the server's bound on background
// steps; and what ExecuteStep refuses before its handler runs.
func (a *Agent) ExecuteStepAsync(ctx context.Context, taskID string, body StepRequestBody) (*Step, error) {
	req, err := a.stepRequest(&taskID, body)
	if err != nil {
		return nil, err
	}
	b, err := a.acquire()
	if err != nil {
		return nil, err
	}
	release, err := a.takeBackground(b)
	if err != nil {
		a.release(b)
		return nil, err
	}
	unlock, err := a.locks.enter(taskID)
	if err != nil {
		release()
		a.release(b)
		return nil, err
	}
	done := func() {
		unlock()
		release()
		a.release(b)
	}
	// The lock held, no step of the task runs: one in the background
	// holds it until it has ended.
	runCtx, stop, err := a.tasks.start(ctx, a, taskID)
	if err != nil {
		done()
		return nil, err
	}
	task, step, err := a.nextStep(runCtx, b, taskID, req)
	if err != nil {
		stop()
		done()
		return nil, err
	}
	step.Background = true
	a.tasks.setStep(taskID, step.StepID)
	started := make(chan startResult, 1)
	a.bg.mu.Lock()
	if a.bg.steps == nil {
		a.bg.steps = map[string]string{}
	}
	a.bg.steps[taskID] = step.StepID
	a.bg.wg.Add(1)
	a.bg.mu.Unlock()
	go func() {
		defer a.bg.wg.Done()
		defer func() {
			a.bg.mu.Lock()
			delete(a.bg.steps, taskID)
			a.bg.mu.Unlock()
			stop()
			done()
		}()
		a.runBackground(runCtx, b, task, step, req, started)
	}()
	res := <-started
	if res.err != nil {
		return nil, res.err
	}
	return res.step, nil
}

// startResult is how a background step started: the step as it was
// marked running, or why it could not be.
type startResult struct {
	step *Step
	err  error
}

// takeBackground takes a background slot of the agent's and, if the
// server bounds them, of the server's, and returns what gives them back.
// EUNAVAILABLE when either bound is reached.
func (a *Agent) takeBackground(b *served) (release func(), err error) {
	max := b.Limits.MaxBackgroundSteps
	if max <= 0 {
		max = DefaultMaxBackgroundSteps
	}
	a.bg.mu.Lock()
	full := a.bg.running >= max
	if !full {
		a.bg.running++
	}
	a.bg.mu.Unlock()
	if full {
		return nil, &Error{Code: EUNAVAILABLE, RetryAfter: 5, Message: fmt.Sprintf(
			"agent %s runs %d steps in the background, the most it may; retry shortly", a.name, max)}
	}
	mine := func() {
		a.bg.mu.Lock()
		a.bg.running--
		a.bg.mu.Unlock()
	}
	if s := a.slots; s != nil && !s.take() {
		mine()
		return nil, &Error{Code: EUNAVAILABLE, RetryAfter: 5, Message: fmt.Sprintf(
			"the server runs %d steps in the background, the most it may; retry shortly", s.Max())}
	}
	return func() {
		mine()
		if a.slots != nil {
			a.slots.give()
		}
	}, nil
}

// runBackground runs step, of task, in the background, telling started
// once it is marked running on disk (or why it could not be), then
// records how it ended. A handler that could not run through no fault of
// the plugin's (no instance free, the disk at its floor) fails the step
// with why: its client was told it runs.
func (a *Agent) runBackground(ctx context.Context, b *served, task *Task, step *Step, req *StepRequestBody, started chan<- startResult) {
	run, err := a.runStepWith(ctx, b, task, step, req, started)
	if err != nil {
		// Not started (started was told), or the task is being deleted.
		return
	}
	defer run.call.discard()
	if _, err := a.recordStep(ctx, run); err != nil && run.failure == nil {
		a.log.ErrorContext(ctx, "recording a background step failed", "task_id", step.TaskID, "step_id", step.StepID, "err", err)
	}
}

// Wait waits until every step the agent runs in the background has
// ended, or ctx ends: what a server shutting down gives them.
func (a *Agent) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		a.bg.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// BackgroundSteps is how many steps the agent runs in the background now.
func (a *Agent) BackgroundSteps() int {
	a.bg.mu.Lock()
	defer a.bg.mu.Unlock()
	return a.bg.running
}

// CancelStep cancels a step while its handler runs: the guest is
// stopped and its instance discarded, an outbound request in flight
// cancelled, and the step recorded as failed, its additional_output
// {"error": {"code": "cancelled", ...}}, with a step.cancelled event. It
// returns the step as recorded, once it is. Cancelling a step that was
// cancelled returns it again; one that ended otherwise is ECONFLICT, one
// not yet run (planned) too. ENOTFOUND for no such step.
func (a *Agent) CancelStep(ctx context.Context, taskID, stepID string) (*Step, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	if err := checkID("step", &stepID); err != nil {
		return nil, err
	}
	ended := a.tasks.cancel(taskID, stepID, Errorf(ECANCELLED, "the step was cancelled by a client while it ran"))
	if ended != nil {
		wait := time.NewTimer(cancelWait)
		defer wait.Stop()
		select {
		case <-ended:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait.C:
			// Its guest stops at its next check, which comes within
			// microseconds of running code; what holds it longer is the
			// host's (a write of its end to a slow disk).
			return nil, &Error{Code: EUNAVAILABLE, StepID: stepID, RetryAfter: 1, Message: fmt.Sprintf(
				"step %s is being cancelled and has not stopped yet; ask again to see it cancelled", stepID)}
		}
	}
	st, err := a.store.GetStep(ctx, taskID, stepID)
	if err != nil {
		return nil, err
	}
	switch {
	case stepCancelled(st):
		return st, nil
	case st.Status == StatusCreated:
		return nil, &Error{Code: ECONFLICT, StepID: stepID, Message: fmt.Sprintf("step %s has not run yet: only a running step can be cancelled", stepID)}
	case st.Status == StatusRunning:
		// Running on a process that is not this one's (it died, and its
		// steps are marked at the next start), or between its mark and
		// its registration: nothing here can stop it.
		return nil, &Error{Code: EUNAVAILABLE, StepID: stepID, RetryAfter: 1, Message: fmt.Sprintf("step %s is starting or ending; retry", stepID)}
	}
	return nil, &Error{Code: ECONFLICT, StepID: stepID, Message: fmt.Sprintf("step %s has ended: only a running step can be cancelled", stepID)}
}

// stepCancelled reports whether st ended cancelled.
func stepCancelled(st *Step) bool {
	code, _ := FailureCode(st.AdditionalOutput)
	return code == ECANCELLED
}

// FailureCode is the error code a failed step's additional_output holds
// (FailureOutput), and whether it holds one.
func FailureCode(additional []byte) (string, bool) {
	var v struct {
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if len(additional) == 0 || json.Unmarshal(additional, &v) != nil || v.Error == nil {
		return "", false
	}
	return v.Error.Code, true
}
