package protocol

import (
	"fmt"
	"sync"
)

// MaxTaskWaiters bounds the requests (steps, upload commits) that wait for
// one task while another holds it. Each waits with its decoded body, and
// before any instance limit: without a bound, any number of them piled up
// behind a task whose step was stalled. Past it, a request is refused
// with EUNAVAILABLE before it waits. The holders are bounded by the
// instances and their queue, so at most MaxTaskWaiters × (instances +
// queue) requests wait for tasks in all.
const MaxTaskWaiters = 8

// TaskWaitObserver is told of the requests that wait for a busy task,
// and of those refused because MaxTaskWaiters already wait: what shows
// the bound in metrics. An AgentConfig.Observer that implements it is
// told. Its methods are called on the request's goroutine, only when a
// task is busy, and must be quick and safe for concurrent use.
type TaskWaitObserver interface {
	// TaskWaiting says that a request for a task of agent began (delta
	// 1) or ended (-1) waiting for the request holding it.
	TaskWaiting(agent string, delta int)
	// TaskBusy says that a request for a task of agent was refused:
	// MaxTaskWaiters requests already waited for it.
	TaskBusy(agent string)
}

// taskLocks serialises work on one task while leaving other tasks free.
type taskLocks struct {
	mu sync.Mutex
	m  map[string]*taskLock
	// waiting, when set, is told of a lock about to wait for its task's
	// holder: tests synchronise on it.
	waiting func(taskID string)
	// agent names the agent to observer, if any.
	agent    string
	observer TaskWaitObserver
}

// observe has o, if it is a TaskWaitObserver, told of agent's requests
// that wait for a busy task or are refused.
func (l *taskLocks) observe(agent string, o Observer) {
	l.agent = agent
	l.observer, _ = o.(TaskWaitObserver)
}

type taskLock struct {
	sync.Mutex
	refs int // the holder and those waiting
}

// enter locks the task and returns its unlock function, or refuses with
// EUNAVAILABLE when MaxTaskWaiters requests already wait for it.
func (l *taskLocks) enter(taskID string) (unlock func(), err error) {
	return l.enterBounded(taskID, true)
}

// enterAlways is enter without the bound on those waiting: for a deletion,
// which must not be refused by the requests it will turn away.
func (l *taskLocks) enterAlways(taskID string) (unlock func()) {
	unlock, _ = l.enterBounded(taskID, false)
	return unlock
}

// enterBounded is enter, refusing past MaxTaskWaiters only if bounded.
func (l *taskLocks) enterBounded(taskID string, bounded bool) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*taskLock)
	}
	tl := l.m[taskID]
	if tl == nil {
		tl = &taskLock{}
		l.m[taskID] = tl
	}
	if bounded && tl.refs > MaxTaskWaiters { // a holder and MaxTaskWaiters waiting
		l.mu.Unlock()
		if l.observer != nil {
			l.observer.TaskBusy(l.agent)
		}
		// Nothing of the request was done: agentrt's clients (package
		// client) send it again after RetryAfter.
		return nil, &Error{Code: EUNAVAILABLE, RetryAfter: 1,
			Message: fmt.Sprintf("task %s is busy: %d requests already wait for it, the most that may; retry when its step is done", taskID, MaxTaskWaiters)}
	}
	tl.refs++
	l.mu.Unlock()
	return l.lock(taskID, tl), nil
}

// lock waits for tl, counted in its refs, and returns its unlock function.
func (l *taskLocks) lock(taskID string, tl *taskLock) (unlock func()) {
	if !tl.TryLock() {
		if l.observer != nil {
			l.observer.TaskWaiting(l.agent, 1)
		}
		if l.waiting != nil {
			l.waiting(taskID)
		}
		tl.Lock()
		if l.observer != nil {
			l.observer.TaskWaiting(l.agent, -1)
		}
	}
	return func() {
		tl.Unlock()
		l.mu.Lock()
		if tl.refs--; tl.refs == 0 {
			delete(l.m, taskID)
		}
		l.mu.Unlock()
	}
}
