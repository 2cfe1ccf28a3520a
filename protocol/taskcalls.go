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
	running  map[string]context.CancelCauseFunc
	deleting map[string]int // deletions in progress
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
		t.running = map[string]context.CancelCauseFunc{}
	}
	t.running[taskID] = cancel
	return ctx, func() {
		t.mu.Lock()
		delete(t.running, taskID)
		t.mu.Unlock()
		cancel(nil)
	}, nil
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
	if cancel := t.running[taskID]; cancel != nil {
		cancel(why)
	}
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.deleting[taskID]--; t.deleting[taskID] == 0 {
			delete(t.deleting, taskID)
		}
	}
}
