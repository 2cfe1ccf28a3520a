package protocol

import "sync"

// taskLocks serialises work on one task while leaving other tasks free.
type taskLocks struct {
	mu sync.Mutex
	m  map[string]*taskLock
	// waiting, when set, is told of a lock about to wait for its task's
	// holder: tests synchronise on it.
	waiting func(taskID string)
}

type taskLock struct {
	sync.Mutex
	refs int
}

// lock locks the task and returns its unlock function.
func (l *taskLocks) lock(taskID string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*taskLock)
	}
	tl := l.m[taskID]
	if tl == nil {
		tl = &taskLock{}
		l.m[taskID] = tl
	}
	tl.refs++
	l.mu.Unlock()

	if !tl.TryLock() {
		if l.waiting != nil {
			l.waiting(taskID)
		}
		tl.Lock()
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
