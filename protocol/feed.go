package protocol

import (
	"context"
	"sort"
	"sync"
)

// feed brings a task's new events to those watching it (Watcher), from
// the store, where every event is recorded first: a watcher sees what any
// other reader of the log would, in the same order, with the same ids.
//
// What it costs: nothing for a task nobody watches (a map look-up when
// its events are recorded). For a watched task, one read of the store
// per write that records events, however many watch it; the events read
// are kept in a ring of the last feedRing, from which every watcher that
// keeps up takes them. A watcher that falls behind the ring reads the
// store itself, so a slow watcher never holds events in memory: it holds
// only its place.
type feed struct {
	store EventStore
	mu    sync.Mutex
	tasks map[string]*taskFeed
}

// feedRing is how many of a watched task's newest events the feed keeps.
const feedRing = 256

// taskFeed is the feed of one watched task.
type taskFeed struct {
	taskID   string
	watchers int // under feed.mu

	mu sync.Mutex
	// last is the highest id the feed has; ring the newest events it
	// has (keep), ids ascending and contiguous but where trimmed.
	last int64
	ring []Event
	// changed is closed, and replaced, when events arrive; onChange are
	// told then too.
	changed  chan struct{}
	onChange map[*Watcher]func()
	// deleted is the task.deleted event once the task is gone.
	deleted *Event
}

// watch returns the feed of taskID with one more watcher, made if it is
// the first, whose newest event is last.
func (f *feed) watch(taskID string, last int64) *taskFeed {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tasks == nil {
		f.tasks = map[string]*taskFeed{}
	}
	tf := f.tasks[taskID]
	if tf == nil {
		tf = &taskFeed{taskID: taskID, last: last, changed: make(chan struct{})}
		f.tasks[taskID] = tf
	}
	tf.watchers++
	return tf
}

// unwatch drops a watcher of tf, and the feed once it has none.
func (f *feed) unwatch(tf *taskFeed) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tf.watchers--; tf.watchers == 0 && f.tasks[tf.taskID] == tf {
		delete(f.tasks, tf.taskID)
	}
}

// watched returns the feed of taskID if anyone watches it.
func (f *feed) watched(taskID string) *taskFeed {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tasks[taskID]
}

// notify tells the feed that events of taskID were recorded: if anyone
// watches it, the feed reads them and wakes the watchers.
func (f *feed) notify(ctx context.Context, taskID string) {
	tf := f.watched(taskID)
	if tf == nil {
		return
	}
	tf.mu.Lock()
	defer tf.mu.Unlock()
	if tf.deleted != nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	got := false
	for {
		page, err := f.store.Events(ctx, taskID, tf.last, feedRing)
		if err != nil || len(page.Events) == 0 {
			// A task gone is told by its deletion; a read that failed
			// leaves the watchers to read the store themselves at the
			// next wake.
			break
		}
		got = true
		tf.keep(page.Events)
		tf.last = page.Events[len(page.Events)-1].ID
		if tf.last >= page.Last {
			break
		}
	}
	if got {
		tf.wake()
	}
}

// publish tells the feed that evs, events of taskID, were recorded, their
// ids given: if anyone watches the task, and they follow the last the
// feed has, it takes them as they are, without reading them back; else
// it reads the store (notify).
func (f *feed) publish(ctx context.Context, taskID string, evs []Event) {
	tf := f.watched(taskID)
	if tf == nil {
		return
	}
	tf.mu.Lock()
	next := tf.last + 1
	follows := len(evs) > 0 && tf.deleted == nil
	for i := range evs {
		follows = follows && evs[i].ID == next+int64(i)
	}
	if follows {
		tf.keep(evs)
		tf.last = evs[len(evs)-1].ID
		tf.wake()
		tf.mu.Unlock()
		return
	}
	tf.mu.Unlock()
	f.notify(ctx, taskID)
}

// deleted tells the watchers of taskID that it was deleted, whose last
// event was last.
func (f *feed) deletedTask(taskID string) {
	tf := f.watched(taskID)
	if tf == nil {
		return
	}
	tf.mu.Lock()
	defer tf.mu.Unlock()
	if tf.deleted == nil {
		ev := taskDeletedEvent(taskID, tf.last)
		tf.deleted = &ev
		tf.wake()
	}
}

// keep adds evs to the ring; tf.mu is held. The ring holds feedRing
// events at least, twice as many at most: it is cut back once it holds
// that many, so that an event kept costs a copy once, not at every one.
func (tf *taskFeed) keep(evs []Event) {
	tf.ring = append(tf.ring, evs...)
	if len(tf.ring) >= 2*feedRing {
		tf.ring = append(make([]Event, 0, 2*feedRing), tf.ring[len(tf.ring)-feedRing:]...)
	}
}

// wake wakes the watchers; tf.mu is held.
func (tf *taskFeed) wake() {
	close(tf.changed)
	tf.changed = make(chan struct{})
	for _, f := range tf.onChange {
		f()
	}
}

// Watcher follows a task's events: those after a given id, then each as
// it is recorded. It is used by one goroutine; Close releases it.
type Watcher struct {
	f    *feed
	tf   *taskFeed
	a    *Agent
	last int64 // the id of the last event returned
	done bool  // the task.deleted event was returned
	// read is set once Next has read the store: the first Next does,
	// so that events recorded after Watch read the store, but before
	// the feed was watched, are not missed.
	read bool
}

// Watch returns a Watcher of the task's events after the event after (0
// for all of them). ENOTFOUND when there is no such task.
func (a *Agent) Watch(ctx context.Context, taskID string, after int64) (*Watcher, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	if after < 0 {
		return nil, Errorf(EINVALID, "an event id is 0 or more, not %d", after)
	}
	page, err := a.store.Events(ctx, taskID, after, 1)
	if err != nil {
		return nil, err
	}
	tf := a.feed.watch(taskID, page.Last)
	return &Watcher{f: &a.feed, tf: tf, a: a, last: after}, nil
}

// Changed returns a channel closed when events may have arrived since:
// take it before Next, and wait on it once Next has none.
func (w *Watcher) Changed() <-chan struct{} {
	w.tf.mu.Lock()
	defer w.tf.mu.Unlock()
	return w.tf.changed
}

// OnChange has f called whenever events may have arrived, until stop is
// called: for a watcher that waits without a goroutine of its own. f is
// called with the feed locked: it must only note the change (and must
// not call the watcher).
func (w *Watcher) OnChange(f func()) (stop func()) {
	tf := w.tf
	tf.mu.Lock()
	defer tf.mu.Unlock()
	if tf.onChange == nil {
		tf.onChange = map[*Watcher]func(){}
	}
	tf.onChange[w] = f
	return func() {
		tf.mu.Lock()
		delete(tf.onChange, w)
		tf.mu.Unlock()
	}
}

// Next returns the events after the last it returned, at most max of
// them: from the feed's ring when it holds them, else from the store. The
// page's Trimmed says what was trimmed since. Empty, when there are none
// yet; ENOTFOUND once the task is gone and its task.deleted event was
// returned (which ends the watch).
func (w *Watcher) Next(ctx context.Context, max int) (*EventPage, error) {
	if w.done {
		return nil, Errorf(ENOTFOUND, "task %q was deleted", w.tf.taskID)
	}
	w.tf.mu.Lock()
	page, ok := w.fromRing(max)
	deleted := w.tf.deleted
	w.tf.mu.Unlock()
	if !ok || !w.read {
		w.read = true
		var err error
		page, err = w.a.store.Events(ctx, w.tf.taskID, w.last, max)
		if err != nil {
			if deleted != nil && ErrorCode(err) == ENOTFOUND {
				return w.ended(deleted), nil
			}
			return nil, err
		}
	}
	if len(page.Events) > 0 {
		w.last = page.Events[len(page.Events)-1].ID
		return page, nil
	}
	if deleted != nil {
		return w.ended(deleted), nil
	}
	return page, nil
}

// fromRing takes the events after w.last from the ring, if it has them
// all: false when the store must be read. tf.mu is held.
func (w *Watcher) fromRing(max int) (*EventPage, bool) {
	tf := w.tf
	page := &EventPage{Events: []Event{}, Last: tf.last}
	if tf.last <= w.last {
		return page, true // nothing new that the feed has read
	}
	if len(tf.ring) == 0 || tf.ring[0].ID > w.last+1 {
		return nil, false // fell behind the ring, or came before it
	}
	i := sort.Search(len(tf.ring), func(i int) bool { return tf.ring[i].ID > w.last })
	page.Events = append(page.Events, tf.ring[i:min(len(tf.ring), i+max)]...)
	return page, true
}

// ended returns the page of the task.deleted event, which ends the watch.
func (w *Watcher) ended(deleted *Event) *EventPage {
	w.done = true
	ev := *deleted
	if ev.ID <= w.last {
		ev.ID = w.last + 1
	}
	return &EventPage{Events: []Event{ev}, Last: ev.ID}
}

// Close releases the watcher.
func (w *Watcher) Close() {
	if w.tf != nil {
		w.f.unwatch(w.tf)
		w.tf = nil
	}
}

// Events returns a page of the task's events after the event after, at
// most limit of them. ENOTFOUND when there is no such task.
func (a *Agent) Events(ctx context.Context, taskID string, after int64, limit int) (*EventPage, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	if after < 0 {
		return nil, Errorf(EINVALID, "an event id is 0 or more, not %d", after)
	}
	return a.store.Events(ctx, taskID, after, limit)
}
