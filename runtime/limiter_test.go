package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// The Limiter's rules, pinned by calls that wait on their own goroutines
// while the test watches the queue (Limiter.Load) instead of the clock.

// slotResult is what an acquire returned.
type slotResult struct {
	release func()
	err     error
}

// acquireAsync asks l for a slot on another goroutine; the result arrives
// on the returned channel.
func acquireAsync(ctx context.Context, l *Limiter) <-chan slotResult {
	return acquireUntil(ctx, l, time.Time{})
}

// acquireUntil is acquireAsync for a call with a deadline.
func acquireUntil(ctx context.Context, l *Limiter, deadline time.Time) <-chan slotResult {
	c := make(chan slotResult, 1)
	go func() {
		r := slotResult{err: l.acquire(ctx, deadline)}
		if r.err == nil {
			r.release = l.release
		}
		c <- r
	}()
	return c
}

// limiterWait bounds how long a test waits for something that should take
// microseconds: past it, the limiter is broken, not slow.
const limiterWait = 10 * time.Second

// waitQueued waits until n calls wait in l's queue, failing the test if
// one of calls returns meanwhile (it should be waiting) or the queue does
// not fill within limiterWait.
func waitQueued(t *testing.T, l *Limiter, n int, calls ...<-chan slotResult) {
	t.Helper()
	deadline := time.Now().Add(limiterWait)
	for {
		if _, waiting := l.Load(); waiting == n {
			return
		}
		for i, c := range calls {
			select {
			case r := <-c:
				t.Fatalf("call %d returned (%v) instead of waiting in the queue", i+1, r.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			_, waiting := l.Load()
			t.Fatalf("%d calls wait in the queue, want %d", waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitSlot waits for a call's result.
func awaitSlot(t *testing.T, what string, c <-chan slotResult) slotResult {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(limiterWait):
		t.Fatalf("%s: still waiting after %v", what, limiterWait)
		return slotResult{}
	}
}

// wantBusy fails the test unless err is the limiter's refusal: 503 with a
// Retry-After.
func wantBusy(t *testing.T, what string, err error) {
	t.Helper()
	var e *protocol.Error
	if !errors.As(err, &e) || e.Code != protocol.EUNAVAILABLE || e.RetryAfter <= 0 {
		t.Fatalf("%s: %v, want %s with a Retry-After", what, err, protocol.EUNAVAILABLE)
	}
}

// holdSlot takes a slot of l at once, and gives it back when the test ends
// if the test did not.
func holdSlot(t *testing.T, l *Limiter) (release func()) {
	t.Helper()
	r := <-acquireAsync(context.Background(), l)
	if r.err != nil {
		t.Fatalf("a free slot: %v", r.err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			r.release()
		}
	})
	return func() { released = true; r.release() }
}

func TestLimiterQueuesAtMostMaxQueueCallsAndRefusesTheNextAtOnce(t *testing.T) {
	l := NewLimiter(1, 2, time.Hour)
	releaseFirst := holdSlot(t, l)

	w1 := acquireAsync(context.Background(), l)
	w2 := acquireAsync(context.Background(), l)
	waitQueued(t, l, 2, w1, w2)

	// The queue is full: the next call is refused without waiting (it
	// would wait the hour otherwise).
	over := awaitSlot(t, "a call past a full queue", acquireAsync(context.Background(), l))
	wantBusy(t, "a call past a full queue", over.err)
	if running, waiting := l.Load(); running != 1 || waiting != 2 {
		t.Errorf("after a refusal: %d running and %d waiting, want 1 and 2", running, waiting)
	}

	// A slot given back goes to a waiter, and the next to the other.
	releaseFirst()
	var r slotResult
	last := w2
	select {
	case r = <-w1:
	case r = <-w2:
		last = w1
	case <-time.After(limiterWait):
		t.Fatal("no waiter got the slot given back")
	}
	if r.err != nil {
		t.Fatalf("a waiter given a free slot: %v", r.err)
	}
	waitQueued(t, l, 1, last)
	r.release()
	r = awaitSlot(t, "the second waiter", last)
	if r.err != nil {
		t.Fatalf("the second waiter given a free slot: %v", r.err)
	}
	r.release()
	if running, waiting := l.Load(); running != 0 || waiting != 0 {
		t.Errorf("after every call: %d running and %d waiting, want none", running, waiting)
	}
}

func TestLimiterRefusesACallThatWaitedPastMaxWait(t *testing.T) {
	const maxWait = 20 * time.Millisecond
	l := NewLimiter(1, 1, maxWait)
	holdSlot(t, l)
	for i := range 2 { // the first refusal left the queue place free
		start := time.Now()
		r := awaitSlot(t, "a call waiting for a slot that is never freed", acquireAsync(context.Background(), l))
		wantBusy(t, "a call that waited past the limiter's wait", r.err)
		if waited := time.Since(start); waited < maxWait {
			t.Errorf("call %d was refused after %v, before waiting the limiter's %v", i+1, waited, maxWait)
		}
		if _, waiting := l.Load(); waiting != 0 {
			t.Errorf("a refused call still holds a place in the queue (%d waiting)", waiting)
		}
	}
}

// A task's time budget ends its call's wait for a slot: the call is
// refused when its deadline passes, long before the limiter's wait.
func TestLimiterRefusesACallWhoseDeadlinePassesWhileItWaits(t *testing.T) {
	l := NewLimiter(1, 1, time.Hour)
	holdSlot(t, l)
	deadline := time.Now().Add(20 * time.Millisecond)
	r := awaitSlot(t, "a call whose deadline passes while it waits", acquireUntil(context.Background(), l, deadline))
	wantBusy(t, "a call whose deadline passed while it waited", r.err)
	if time.Now().Before(deadline) {
		t.Errorf("the call was refused before its deadline")
	}
	if _, waiting := l.Load(); waiting != 0 {
		t.Fatalf("a call refused at its deadline still holds its place in the queue (%d waiting)", waiting)
	}
}

func TestLimiterRefusesACancelledCallAndFreesItsQueuePlace(t *testing.T) {
	l := NewLimiter(1, 1, time.Hour)
	releaseFirst := holdSlot(t, l)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := acquireAsync(ctx, l)
	waitQueued(t, l, 1, gone)
	cancel() // the client went away, or the task's time ran out
	r := awaitSlot(t, "a call whose context ended while it waited", gone)
	wantBusy(t, "a call whose context ended while it waited", r.err)
	if _, waiting := l.Load(); waiting != 0 {
		t.Fatalf("a call whose context ended still holds its place in the queue (%d waiting)", waiting)
	}

	// Its place in the queue is free again, and it took no slot: the
	// next waiter gets the slot as soon as it is given back.
	next := acquireAsync(context.Background(), l)
	waitQueued(t, l, 1, next)
	releaseFirst()
	r = awaitSlot(t, "the next waiter", next)
	if r.err != nil {
		t.Fatalf("the waiter after a cancelled one: %v", r.err)
	}
	r.release()
	if running, waiting := l.Load(); running != 0 || waiting != 0 {
		t.Errorf("after every call: %d running and %d waiting, want none", running, waiting)
	}
}
