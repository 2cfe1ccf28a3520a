package httpapi

import (
	"bytes"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/agentrt/agentrt/protocol"
)

// Defaults for the event stream (ServerConfig).
const (
	// DefaultEventHeartbeat is how long a stream stays silent before a
	// comment line keeps it open through proxies that close idle
	// connections (60 s is a common idle timeout).
	DefaultEventHeartbeat = 15 * time.Second
	// DefaultEventWriteTimeout is how long one write of a stream may
	// take: a client that reads nothing for that long has its stream
	// cut, rather than have the server hold what it does not take.
	DefaultEventWriteTimeout = 10 * time.Second
)

// The JSON page of events: ?limit= events, at most maxEventPage.
const (
	defaultEventPage = 100
	maxEventPage     = 1000
)

// eventsAfter is the id a request for events starts after: the
// Last-Event-ID header a reconnecting EventSource sends, else ?after=,
// else 0 (the task's log from its start).
func eventsAfter(r *http.Request) (int64, error) {
	v, name := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if v == "" {
		v, name = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, protocol.Errorf(protocol.EINVALID, "%s must be an event id, an integer of 0 or more, not %q", name, v)
	}
	return n, nil
}

// wantsEventStream reports whether the request's Accept names
// text/event-stream (with a quality above 0).
func wantsEventStream(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != "text/event-stream" {
			continue
		}
		if q, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(q, 64); err != nil || f <= 0 {
				continue
			}
		}
		return true
	}
	return false
}

// handleEvents serves GET /ap/v1/agent/tasks/{task_id}/events, an
// extension: the task's event log, as Server-Sent Events to a client
// that accepts text/event-stream, else as a JSON page.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	after, err := eventsAfter(r)
	if err != nil {
		return err
	}
	if wantsEventStream(r) {
		return s.streamEvents(w, r, a, ps.ByName("task_id"), after)
	}
	limit := defaultEventPage
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return protocol.Errorf(protocol.EINVALID, "limit must be an integer of 1 or more, not %q", v)
		}
		limit = min(n, maxEventPage)
	}
	page, err := a.Events(r.Context(), ps.ByName("task_id"), after, limit)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, page)
	return nil
}

// streamEvents streams the task's events after the event after, then
// each as it is recorded, until the client goes, the task is deleted (its
// task.deleted event ends the stream), or the server shuts down. Each
// event is written as
//
//	id: 7
//	event: step.progress
//	data: {"id":7,"type":"step.progress",...}
//
// so that an EventSource reconnecting sends Last-Event-ID: 7 and misses
// nothing. When events after the start were trimmed, a "trimmed" event
// (without an id) says how many, first. A comment line is written after
// every heartbeat of silence.
//
// What a stream holds: its place in the log and one page of events being
// written; never a queue. A client that does not take a write within the
// write timeout has its stream cut.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, a *protocol.Agent, taskID string, after int64) error {
	ctx := r.Context()
	watch, err := a.Watch(ctx, taskID, after)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	if conn := hijackStream(w); conn != nil {
		if conn == hijackFailed || !s.streams.park(conn, watch) {
			conn.Close()
			watch.Close()
		}
		return nil
	}
	// A writer that cannot be taken over: the stream is this handler's.
	defer watch.Close()
	rc := http.NewResponseController(w)
	st := &eventStream{w: w, rc: rc, timeout: s.cfg.EventWriteTimeout}
	w.WriteHeader(http.StatusOK)
	// The retry a reconnecting EventSource waits, and the headers out now.
	if !st.write([]byte("retry: 2000\n\n")) {
		return nil
	}
	heartbeat := time.NewTimer(s.cfg.EventHeartbeat)
	defer heartbeat.Stop()
	first := true
	for {
		changed := watch.Changed()
		page, err := watch.Next(ctx, defaultEventPage)
		if err != nil {
			if ctx.Err() == nil && protocol.ErrorCode(err) != protocol.ENOTFOUND {
				s.cfg.Log.WarnContext(ctx, "event stream ended by an error", "task_id", taskID, "err", err)
			}
			return nil // the answer is under way: nothing else to say
		}
		if first && page.Trimmed > 0 && !st.write(trimmedFrame(page)) {
			return nil
		}
		first = false
		if len(page.Events) > 0 {
			if !st.write(eventFrames(page.Events)) {
				return nil
			}
			last := page.Events[len(page.Events)-1]
			if last.Type == protocol.EventTaskDeleted {
				return nil
			}
			heartbeat.Reset(s.cfg.EventHeartbeat)
			if len(page.Events) == defaultEventPage {
				continue // more may be there already
			}
		}
		select {
		case <-changed:
		case <-heartbeat.C:
			if !st.write([]byte(": keep-alive\n\n")) {
				return nil
			}
			heartbeat.Reset(s.cfg.EventHeartbeat)
		case <-ctx.Done():
			return nil
		case <-s.streamsEnd:
			return nil
		}
	}
}

// eventStream writes a stream's frames, each within its write timeout.
type eventStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// write writes and flushes b; false when the stream is over (the client
// went, or did not take b in time).
func (st *eventStream) write(b []byte) bool {
	// Without a deadline of its own, a write to a client that reads
	// nothing would wait for ever, the stream's goroutine with it.
	if err := st.rc.SetWriteDeadline(time.Now().Add(st.timeout)); err != nil {
		return false
	}
	if _, err := st.w.Write(b); err != nil {
		return false
	}
	return st.rc.Flush() == nil
}

// eventFrames encodes events as Server-Sent Events.
func eventFrames(evs []protocol.Event) []byte {
	var b bytes.Buffer
	for i := range evs {
		data, err := protocol.MarshalJSON(&evs[i])
		if err != nil {
			continue
		}
		b.WriteString("id: ")
		b.WriteString(strconv.FormatInt(evs[i].ID, 10))
		b.WriteString("\nevent: ")
		b.WriteString(evs[i].Type)
		b.WriteString("\ndata: ")
		b.Write(data) // JSON on one line: its strings escape line ends
		b.WriteString("\n\n")
	}
	return b.Bytes()
}

// EventStreams is how many event streams the server holds open, waiting
// for their tasks' events.
func (s *Server) EventStreams() int { return s.streams.count() }

// handleCancelStep serves POST /ap/v1/agent/tasks/{task_id}/steps/{step_id}/cancel,
// an extension: it stops the step's handler, records the step as failed
// with the code "cancelled", and answers the step so recorded.
func (s *Server) handleCancelStep(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	st, err := a.CancelStep(r.Context(), ps.ByName("task_id"), ps.ByName("step_id"))
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, st)
	return nil
}

// prefersAsync reports whether the request asks, by RFC 7240's Prefer
// header, to be answered before its work is done (respond-async).
func prefersAsync(r *http.Request) bool {
	for _, v := range r.Header.Values("Prefer") {
		for _, pref := range strings.Split(v, ",") {
			token, _, _ := strings.Cut(strings.TrimSpace(pref), ";")
			if name, _, _ := strings.Cut(token, "="); strings.EqualFold(strings.TrimSpace(name), "respond-async") {
				return true
			}
		}
	}
	return false
}
