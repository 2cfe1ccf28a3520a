package protocol

import (
	"bytes"
	"context"
	"sync"
	"unicode/utf8"
)

// stepEvents are the events of a step while its handler runs: its
// progress reports and its log lines. Until the step is marked running
// (runningMark) they wait, and a step that ends sooner records them with
// its save, in one write; once it is marked, they are appended to the
// store as they come, by a goroutine of the step's that runs while there
// are some to append (one append at a time, each taking all that
// waited), so that the handler never waits for the store, and watchers
// see them at once.
//
// What they hold is bounded by the call's log limit, which every
// progress report and log line counts against.
type stepEvents struct {
	a      *Agent
	ctx    context.Context
	taskID string

	mu      sync.Mutex
	idle    sync.Cond // signalled when an append ends
	pending []Event
	live    bool // the step is marked: events are appended as they come
	busy    bool // an append is under way
	// stuck is set when an append failed: the events wait for the save,
	// which says why if it fails too.
	stuck bool
}

// newStepEvents returns the events of the step st, run under ctx.
func newStepEvents(ctx context.Context, a *Agent, st *Step) *stepEvents {
	e := &stepEvents{a: a, ctx: context.WithoutCancel(ctx), taskID: st.TaskID}
	e.idle.L = &e.mu
	return e
}

// add keeps ev, to append now if the step is marked.
func (e *stepEvents) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending = append(e.pending, ev)
	e.kick()
}

// marked says that the step is marked running, the mark having recorded
// evs (step.created, step.running): watchers are told of them, and the
// events that waited for the mark, and every one after, are appended as
// they come.
func (e *stepEvents) marked(evs []Event) {
	e.a.feed.publish(e.ctx, e.taskID, evs)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.live = true
	e.kick()
}

// kick starts an append of what waits, unless one is under way; e.mu is
// held.
func (e *stepEvents) kick() {
	if e.live && !e.busy && !e.stuck && len(e.pending) > 0 {
		e.busy = true
		go e.drain()
	}
}

// drain appends what waits until nothing does.
func (e *stepEvents) drain() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.pending) > 0 && !e.stuck {
		batch := e.pending
		e.pending = nil
		e.mu.Unlock()
		err := e.a.store.AppendEvents(e.ctx, e.taskID, batch)
		if err == nil {
			e.a.feed.publish(e.ctx, e.taskID, batch)
		}
		e.mu.Lock()
		if err != nil {
			e.pending = append(batch, e.pending...)
			e.stuck = true
		}
	}
	e.busy = false
	e.idle.Broadcast()
}

// finish waits for an append under way and returns the events not yet
// appended, for the step's save; later events are dropped.
func (e *stepEvents) finish() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.busy {
		e.idle.Wait()
	}
	evs := e.pending
	e.pending, e.live, e.stuck = nil, false, true
	return evs
}

// Progress keeps a progress report of the step handler (progress): a
// message and, unless output is empty, the step's output so far. Both
// may be the plugin's memory: they are counted against the call's log
// limit before anything is copied, and kept as UTF-8 (invalid bytes
// become U+FFFD). It becomes the task's next step.progress event: at
// once for a step marked running, which a report marks (watchers are
// waiting for it), else with the step's save. EMETHOD outside the step
// handler, ETOOLARGE past the log limit.
func (c *Call) Progress(ctx context.Context, message, output []byte) error {
	if c.handler != HandlerStep || c.events == nil {
		return Errorf(EMETHOD, "only the step handler reports progress")
	}
	max := c.build.Limits.MaxLogBytes
	if c.logFull {
		return Errorf(ETOOLARGE, "the log limit of %d bytes was reached", max)
	}
	// As addLog: no byte is read before the least it could take is
	// known to fit.
	size := LogRecordOverhead + len(message) + len(output)
	if c.logBytes+size <= max {
		size = LogRecordSize(message) + LogRecordSize(output) - LogRecordOverhead
	}
	if c.logBytes+size > max {
		return Errorf(ETOOLARGE, "a progress report of %d bytes would put the call over its log limit of %d bytes", size, max)
	}
	c.logBytes += size
	msg := validText(message)
	var out *string
	if len(output) > 0 {
		s := validText(output)
		out = &s
	}
	c.events.add(progressEvent(c.step, msg, out))
	// A step someone may be watching is marked now, not after its delay:
	// its progress is for now. Should the mark fail, the report is
	// recorded with the step's save all the same.
	if c.mark != nil {
		c.mark.write()
	}
	return nil
}

// validText is b as a string, its bytes that are not UTF-8 replaced by
// U+FFFD.
func validText(b []byte) string {
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	return string(b)
}
