package runtime

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// Limiter bounds how many plugin instances run at once and how many calls
// may wait for one. A call that finds the queue full, or waits longer than
// the limiter allows, fails with protocol.EUNAVAILABLE (503 with
// Retry-After): excess load costs a small, fixed amount of memory, never
// an instance. One Limiter may be shared by several plugins.
type Limiter struct {
	slots    chan struct{}
	maxQueue int64
	maxWait  time.Duration
	waiting  atomic.Int64
}

// NewLimiter allows instances concurrent instances, with up to queue calls
// waiting at most wait each.
func NewLimiter(instances, queue int, wait time.Duration) *Limiter {
	return &Limiter{slots: make(chan struct{}, max(instances, 1)), maxQueue: int64(max(queue, 0)), maxWait: wait}
}

// acquire waits for a free instance slot, which release gives back, until
// ctx ends or deadline (when not zero) passes.
func (l *Limiter) acquire(ctx context.Context, deadline time.Time) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	if l.waiting.Add(1) > l.maxQueue {
		l.waiting.Add(-1)
		return l.busy()
	}
	defer l.waiting.Add(-1)
	wait := l.maxWait
	if !deadline.IsZero() {
		wait = min(wait, time.Until(deadline))
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-timer.C:
		// Waited too long, or the task's time budget ran out while
		// waiting: either way, nothing ran.
		return l.busy()
	case <-ctx.Done():
		// The caller went away (a client, an interrupt, a deletion):
		// nothing ran.
		return l.busy()
	}
}

func (l *Limiter) release() { <-l.slots }

// Load reports how many calls hold an instance slot and how many wait for
// one, at this moment (a call refused for a full queue is counted as
// waiting for an instant). Tests synchronise on it.
func (l *Limiter) Load() (running, waiting int) {
	return len(l.slots), int(l.waiting.Load())
}

func (l *Limiter) busy() error {
	return &protocol.Error{
		Code: protocol.EUNAVAILABLE,
		Message: fmt.Sprintf("the agent is busy: all %d plugin instances are running and %d calls are waiting; retry shortly",
			cap(l.slots), l.waiting.Load()),
		RetryAfter: 1,
	}
}
