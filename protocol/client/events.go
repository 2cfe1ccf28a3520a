package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// A task's events are an agentrt addition to the protocol (GET
// /agent/tasks/{task_id}/events): a log of what happened to the task,
// each event with an id counted from 1, read as a JSON page (Events) or
// followed live as Server-Sent Events (WatchEvents).

// The types of a task's events (Event.Type).
const (
	EventStepCreated     = "step.created"     // a step exists: planned, or about to run
	EventStepRunning     = "step.running"     // a step's handler runs
	EventStepProgress    = "step.progress"    // the running handler reported progress
	EventStepLog         = "step.log"         // the running handler logged a line
	EventStepCompleted   = "step.completed"   // a step ended well
	EventStepFailed      = "step.failed"      // a step failed; its data holds the error
	EventStepCancelled   = "step.cancelled"   // a step was cancelled while it ran
	EventStepAbandoned   = "step.abandoned"   // a step marked running did not run after all
	EventArtifactCreated = "artifact.created" // an artifact was uploaded or made
	EventTaskUpdated     = "task.updated"     // the task's metadata changed
	EventTaskDeleted     = "task.deleted"     // the task was deleted: the last event
	// EventTrimmed is no event of the log: WatchEvents hands it on when
	// the server says that progress and log events after the place it
	// resumed from were trimmed (the log holds a bounded number): ID 0,
	// Data {"trimmed": n, "trimmed_through": id}.
	EventTrimmed = "trimmed"
)

// Event is one event of a task's log.
type Event struct {
	// ID counts the task's events from 1 and only grows.
	ID     int64  `json:"id"`
	Type   string `json:"type"`
	TaskID string `json:"task_id"`
	// StepID names the step a step event is about; "" for the others.
	StepID    string    `json:"step_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Data is a JSON object, its members the event type's.
	Data json.RawMessage `json:"data"`
}

// EventPage is a page of a task's events, in id order.
type EventPage struct {
	Events []Event `json:"events"`
	// Trimmed counts the progress and log events the server trimmed from
	// the log after the page's start, TrimmedThrough the highest id
	// trimmed: both 0 when none was.
	Trimmed        int64 `json:"trimmed"`
	TrimmedThrough int64 `json:"trimmed_through"`
	// Last is the id of the task's newest event when the page was read:
	// the page reaches the end when its last event's id is Last.
	Last int64 `json:"last_event_id"`
}

// Events returns a page of the task's events with ids above after, at
// most limit of them (0: the server's default, 100 on agentrt, which
// serves at most 1000 a page).
func (c *Client) Events(ctx context.Context, taskID string, after int64, limit int) (*EventPage, error) {
	if after < 0 || limit < 0 {
		return nil, fmt.Errorf("events of task %s: after and limit are 0 or more, not %d and %d", taskID, after, limit)
	}
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	query := ""
	if len(q) > 0 {
		query = "?" + q.Encode()
	}
	var p EventPage
	if err := c.getJSON(ctx, "events of task", taskID, "/events", query, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// defaultReconnect is the wait before a watch reconnects when the stream
// set none (retry:); agentrt sets 2 s.
const defaultReconnect = time.Second

// WatchEvents calls fn with each of the task's events after the event
// after (0: from the first), in id order, then with each as the server
// records it, over one Server-Sent Events stream. It returns nil after
// fn was given the task.deleted event, the last; fn's error as it is
// when fn returns one; ctx's error when ctx ends.
//
// A stream that ends or drops is opened again from the last event fn
// was given (Last-Event-ID), after the reconnection time the stream set
// (retry:), plus a random part: fn never sees an event twice, nor misses
// one. ids strictly increase; they skip only over events the server says
// it trimmed, which WatchEvents tells fn with an EventTrimmed event.
// agentrt counts a task's events without gaps but for those: a stream
// that skips others is opened again from the last event given, once, and
// if the server still skips them WatchEvents returns an error.
//
// Attempts to open the stream that fail (no answer, 5xx) are made again
// after a wait doubling from the reconnection time, up to MaxRetryWait,
// at most MaxRetries times in a row: a stream that was alive (gave an
// event, or a heartbeat) starts the count again. A 503 or 429 with
// Retry-After waits for it, as other calls do. Any other refusal (404 for
// no such task, 401, 403) is returned as an *Error at once.
//
// HTTPClient's Timeout, if any, cuts each stream it lasts past (the
// watch then resumes): leave it 0 for watches.
func (c *Client) WatchEvents(ctx context.Context, taskID string, after int64, fn func(Event) error) error {
	task, err := pathID("task", taskID)
	if err != nil {
		return fmt.Errorf("watch events: %w", err)
	}
	if after < 0 {
		return fmt.Errorf("watch events of task %s: after is 0 or more, not %d", taskID, after)
	}
	w := &watch{c: c, taskID: taskID, path: "/agent/tasks" + task + "/events", last: after, fn: fn, retry: defaultReconnect, gapAt: -1}
	if err := w.run(ctx); err != nil {
		var fe fnError
		if errors.As(err, &fe) {
			return fe.err
		}
		return fmt.Errorf("watch events of task %s: %w", taskID, err)
	}
	return nil
}

// watch is the state of one WatchEvents.
type watch struct {
	c            *Client
	taskID, path string
	fn           func(Event) error
	// last is the id of the last event fn was given.
	last int64
	// trimmedThrough is the highest id the server said it trimmed.
	trimmedThrough int64
	// retry is the reconnection time: the stream's retry:, else
	// defaultReconnect.
	retry time.Duration
	// gapAt is the last id before a gap the server did not report, once
	// the stream was opened again for it; -1 when none.
	gapAt int64
}

// fnError is fn's error, handed back as it is.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// errWatchEnded says fn was given the task.deleted event.
var errWatchEnded = errors.New("the task was deleted")

// errGap says the stream skipped events the server did not say it
// trimmed: it is opened again at once from the last event given.
var errGap = errors.New("the stream skipped events")

// run opens the stream again and again until the watch ends.
func (w *watch) run(ctx context.Context) error {
	failures := 0 // attempts in a row that opened no live stream
	for {
		alive, err := w.stream(ctx)
		var refused *refusal
		switch {
		case errors.Is(err, errWatchEnded):
			return nil
		case errors.As(err, new(fnError)):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errGap):
			continue // at once: the server reports trimming at a stream's start
		case errors.As(err, new(*streamError)):
			return err
		case errors.As(err, &refused) && !refused.forNow():
			return err // no such task, no access: waiting would not mend it
		}
		if alive {
			failures = 0
		} else if failures++; failures > w.c.MaxRetries {
			return err
		}
		wait, ok := w.wait(failures, refused)
		if !ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.c.after(wait):
		}
	}
}

// wait is how long to wait before opening the stream again, after
// failures attempts in a row that failed (0 after a stream that was
// alive), the last refused: a 503 or 429's Retry-After, as retryWait
// reads it (false for one longer than MaxRetryWait), else the
// reconnection time doubled with each failure, within MaxRetryWait, and
// a random part added.
func (w *watch) wait(failures int, refused *refusal) (time.Duration, bool) {
	if refused != nil && refused.header.Get("Retry-After") != "" &&
		(refused.e.StatusCode == http.StatusServiceUnavailable || refused.e.StatusCode == http.StatusTooManyRequests) {
		return w.c.retryWait(refused.e, refused.header, failures-1)
	}
	d := min(w.retry<<min(max(failures-1, 0), 16), w.c.MaxRetryWait)
	return min(d+jitter(d), w.c.MaxRetryWait), true
}

// refusal is an answer outside 2xx to opening the stream, with its
// headers.
type refusal struct {
	e      *Error
	header http.Header
}

func (r *refusal) Error() string { return r.e.Error() }
func (r *refusal) Unwrap() error { return r.e }

// forNow says whether the refusal may pass: the server busy (503, 429)
// or failing (5xx).
func (r *refusal) forNow() bool {
	return r.e.StatusCode == http.StatusTooManyRequests || r.e.StatusCode >= 500
}

// streamError is a stream the server got wrong: opening it again would
// not mend it.
type streamError struct{ msg string }

func (e *streamError) Error() string { return e.msg }

// errStreamEnded is a stream the server ended (it drains, for one) before
// the task.deleted event: it is opened again.
var errStreamEnded = errors.New("the server ended the event stream")

// stream opens the stream from w.last and hands its events to fn until
// it ends. alive says whether it gave an event or a heartbeat. A
// stream's end is never nil: errWatchEnded after task.deleted,
// errStreamEnded when the server ended it, else what ended it.
func (w *watch) stream(ctx context.Context) (alive bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := w.c.newRequest(ctx, "GET", w.path, nil)
	if err != nil {
		return false, &streamError{err.Error()}
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if w.last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(w.last, 10))
	}
	res, err := w.c.httpClient().Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return false, &refusal{errorOf(res), res.Header}
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, &streamError{fmt.Sprintf("the server answered %s, not an event stream (text/event-stream): does it serve agentrt's events?",
			res.Header.Get("Content-Type"))}
	}
	r := newSSEReader(res.Body)
	defer func() { alive = alive || r.lines > 0 }()
	for {
		f, err := r.next()
		if r.retry >= 0 {
			w.retry = min(r.retry, w.c.MaxRetryWait)
		}
		switch {
		case err == errSSETooLong:
			return alive, &streamError{err.Error()}
		case err == io.EOF:
			return alive, errStreamEnded
		case err != nil:
			return alive, fmt.Errorf("the event stream was cut: %w", err)
		}
		if f.event == EventTrimmed && !f.hasID {
			if err := w.trimmed(f); err != nil {
				return alive, err
			}
			continue
		}
		ev, err := decodeEvent(f)
		if err != nil {
			return alive, err
		}
		switch {
		case ev.ID <= w.last:
			continue // given already: the server replayed it
		case ev.ID-1 > w.last && ev.ID-1 > w.trimmedThrough:
			if w.gapAt == w.last {
				return alive, &streamError{fmt.Sprintf("the server's events skip from id %d to %d, and it did not say they were trimmed", w.last, ev.ID)}
			}
			w.gapAt = w.last
			return alive, errGap
		}
		alive = true
		w.last = ev.ID
		if err := w.fn(ev); err != nil {
			return alive, fnError{err}
		}
		if ev.Type == EventTaskDeleted {
			return alive, errWatchEnded
		}
	}
}

// trimmed takes the server's word that events were trimmed, and tells
// fn, once: a stream opened again may tell it again.
func (w *watch) trimmed(f sseFrame) error {
	var t struct {
		Trimmed        int64 `json:"trimmed"`
		TrimmedThrough int64 `json:"trimmed_through"`
	}
	if err := json.Unmarshal([]byte(f.data), &t); err != nil {
		return &streamError{fmt.Sprintf("the server's trimmed event is not the JSON agentrt sends: %v", err)}
	}
	if t.TrimmedThrough <= w.trimmedThrough {
		return nil // told already, by the stream before
	}
	w.trimmedThrough = t.TrimmedThrough
	if err := w.fn(Event{Type: EventTrimmed, TaskID: w.taskID, Data: json.RawMessage(f.data)}); err != nil {
		return fnError{err}
	}
	return nil
}

// decodeEvent reads a frame's data, the event as JSON. Its id is the
// frame's id field when the data has none; the two must agree.
func decodeEvent(f sseFrame) (Event, error) {
	var ev Event
	if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
		return Event{}, &streamError{fmt.Sprintf("the server sent an event (%q) whose data is not an event in JSON: %v", f.event, err)}
	}
	if f.hasID {
		id, err := strconv.ParseInt(f.id, 10, 64)
		switch {
		case err != nil:
			return Event{}, &streamError{fmt.Sprintf("the server sent an event whose id %q is not a number", f.id)}
		case ev.ID == 0:
			ev.ID = id
		case ev.ID != id:
			return Event{}, &streamError{fmt.Sprintf("the server sent an event with id %d in its data and %d in its frame", ev.ID, id)}
		}
	}
	if ev.ID <= 0 {
		return Event{}, &streamError{fmt.Sprintf("the server sent an event (%q) without an id", f.event)}
	}
	if ev.Type == "" {
		ev.Type = f.event
	}
	return ev, nil
}
