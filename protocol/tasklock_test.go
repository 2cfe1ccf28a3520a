package protocol

import (
	"errors"
	"testing"
)

// fillWaiters sends MaxTaskWaiters requests for task "t", which another
// holds, and returns once each waits (l.waiting reports on waiting);
// each one's outcome arrives on the channel it returns once it ran.
func fillWaiters(l *taskLocks, waiting <-chan string) <-chan error {
	done := make(chan error, MaxTaskWaiters)
	for range MaxTaskWaiters {
		go func() {
			unlock, err := l.enter("t")
			if err == nil {
				unlock()
			}
			done <- err
		}()
	}
	for range MaxTaskWaiters {
		<-waiting
	}
	return done
}

// The waiters of one task are counted, refused past MaxTaskWaiters, and
// forgotten once they are done: the count does not leak.
func TestTaskLocksRefuseWaitersPastTheBoundAndForgetThemAfter(t *testing.T) {
	var l taskLocks
	waiting := make(chan string, MaxTaskWaiters)
	l.waiting = func(taskID string) { waiting <- taskID }

	for round := range 2 {
		holder, err := l.enter("t")
		if err != nil {
			t.Fatalf("round %d: the first request was refused: %v", round, err)
		}
		done := fillWaiters(&l, waiting)
		_, err = l.enter("t")
		var e *Error
		if !errors.As(err, &e) || e.Code != EUNAVAILABLE || e.RetryAfter <= 0 {
			t.Fatalf("round %d: with %d requests waiting, another got %v; want EUNAVAILABLE with Retry-After", round, MaxTaskWaiters, err)
		}
		other, err := l.enter("other task")
		if err != nil {
			t.Fatalf("round %d: another task was refused: %v", round, err)
		}
		other()
		holder()
		for range MaxTaskWaiters {
			if err := <-done; err != nil {
				t.Errorf("round %d: a waiter was refused: %v", round, err)
			}
		}
		if len(l.m) != 0 {
			t.Fatalf("round %d: %d tasks still counted after every request ended", round, len(l.m))
		}
	}
}
