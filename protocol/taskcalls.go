package protocol

import (
	"context"
	"sync"
)

// taskCalls are the tasks whose steps are running, so that deleting a
// task can stop its step, and the tasks being deleted, so that no step
// starts on one.
type taskCalls struct {
	mu       sync.Mutex
	running  map[string]*taskCall
	deleting map[string]int // deletions in progress
}

// taskCall is the step running on a task.
type taskCall struct {
	cancel context.CancelCauseFunc
	stepID string        // "" until the step is chosen (setStep)
	ended  chan struct{} // closed when the call has ended
}

// start registers a step about to run on taskID, whose lock the caller
// holds, and returns the context it runs under (Agent.callContext,
// detached from ctx's end) and the function that ends it. ENOTFOUND when
// the task is being deleted.
func (t *taskCalls) start(ctx context.Context, a *Agent, taskID string) (context.Context, func(), error) {
	ctx, cancel := a.callContext(ctx, true)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deleting[taskID] > 0 {
		cancel(nil)
		return nil, nil, notFound("task", taskID)
	}
	if t.running == nil {
		t.running = map[string]*taskCall{}
	}
	c := &taskCall{cancel: cancel, ended: make(chan struct{})}
	t.running[taskID] = c
	return ctx, func() {
		t.mu.Lock()
		delete(t.running, taskID)
		t.mu.Unlock()
		cancel(nil)
		close(c.ended)
	}, nil
}

// setStep names the step running on taskID, which the caller started.
func (t *taskCalls) setStep(taskID, stepID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.running[taskID]; c != nil {
		c.stepID = stepID
	}
}

// cancel stops the step stepID if it runs on taskID, with why as its
// cause, and returns a channel closed once its call has ended (its
// outcome recorded); nil when it does not run here.
func (t *taskCalls) cancel(taskID, stepID string, why *Error) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.running[taskID]
	if c == nil || c.stepID != stepID {
		return nil
	}
	c.cancel(why)
	return c.ended
}

// deleting marks taskID as being deleted until done is called, and stops
// the step running on it, if any, with why as its cause.
func (t *taskCalls) delete(taskID string, why *Error) (done func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deleting == nil {
		t.deleting = map[string]int{}
	}
	t.deleting[taskID]++
	if c := t.running[taskID]; c != nil {
		c.cancel(why)
	}
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.deleting[taskID]--; t.deleting[taskID] == 0 {
			delete(t.deleting, taskID)
		}
	}
}
