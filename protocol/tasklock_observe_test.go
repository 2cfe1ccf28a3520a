package protocol

import (
	"sync"
	"testing"
	"time"
)

// waitCounts is a TaskWaitObserver that counts, by agent.
type waitCounts struct {
	mu            sync.Mutex
	waiting, busy map[string]int
	mostWaiting   int
}

func (w *waitCounts) HandlerDone(string, Handler, time.Duration, string) {}

func (w *waitCounts) TaskWaiting(agent string, delta int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting[agent] += delta
	w.mostWaiting = max(w.mostWaiting, w.waiting[agent])
}

func (w *waitCounts) TaskBusy(agent string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy[agent]++
}

func (w *waitCounts) get() (waiting, busy, most int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting["writer"], w.busy["writer"], w.mostWaiting
}

// An observer that is a TaskWaitObserver is told, under its agent's
// name, of each request that waits for a busy task, until it stops
// waiting, and of each refused past MaxTaskWaiters: what the metrics
// show of the bound.
func TestTaskLocksTellTheObserverOfWaitersAndRefusals(t *testing.T) {
	var l taskLocks
	obs := &waitCounts{waiting: map[string]int{}, busy: map[string]int{}}
	l.observe("writer", obs)
	waiting := make(chan string, MaxTaskWaiters)
	l.waiting = func(taskID string) { waiting <- taskID }

	holder, err := l.enter("t")
	if err != nil {
		t.Fatal(err)
	}
	done := fillWaiters(&l, waiting)
	if w, b, _ := obs.get(); w != MaxTaskWaiters || b != 0 {
		t.Errorf("with %d waiting: told of %d waiting and %d refused", MaxTaskWaiters, w, b)
	}
	for range 3 {
		if _, err := l.enter("t"); err == nil {
			t.Fatal("a request past the bound was let wait")
		}
	}
	if w, b, _ := obs.get(); w != MaxTaskWaiters || b != 3 {
		t.Errorf("after 3 refusals: told of %d waiting and %d refused", w, b)
	}
	holder()
	for range MaxTaskWaiters {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if w, b, most := obs.get(); w != 0 || b != 3 || most != MaxTaskWaiters {
		t.Errorf("once every request ended: told of %d waiting (at most %d) and %d refused; want 0 (%d) and 3", w, most, b, MaxTaskWaiters)
	}
}
