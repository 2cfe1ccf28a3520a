package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// agentrt's additions to the protocol (marked "x-agentrt-addition" in
// the openapi.json it serves): steps run in the background (Prefer:
// respond-async), cancel, and a task's events as a JSON page or a
// stream of Server-Sent Events. Their checks are at LevelAdded; a server
// that has none of them (the route answers 404 or 405, or the step is
// run at once) has them skipped, saying so.

var stepAdditionChecks = []Check{{
	ID: "steps.async", Group: "steps", Level: LevelAdded,
	Asserts: `execute-step with "Prefer: respond-async" answers 202 with the Step running, Preference-Applied: respond-async and the step's Location; GET of the Location shows it running or ended, then completed`,
	run:     checkAsyncStep,
}, {
	ID: "steps.cancel-ended", Group: "steps", Level: LevelAdded,
	Asserts: `cancelling a step that has ended (POST .../steps/{step_id}/cancel) answers 409 with a JSON {"message"}`,
	run:     checkCancelEnded,
}}

var eventChecks = []Check{{
	ID: "events.page", Group: "events", Level: LevelAdded,
	Asserts: `GET .../events answers a JSON page {"events", "trimmed", "trimmed_through", "last_event_id"}: the task's events in id order (id, type, task_id, created_at, a data object), one or more for each step; ?after= and ?limit= page through them`,
	run:     checkEventPage,
}, {
	ID: "events.stream-resume", Group: "events", Level: LevelAdded,
	Asserts: "GET .../events with Accept: text/event-stream replays the task's events, ids increasing, each frame's id and event its event's; again with Last-Event-ID, exactly those after that id, none repeated",
	run:     checkEventStreamResume,
}}

// skipAddition skips a check of an addition the server does not have.
func skipAddition(ex *exchange, what string) error {
	return skipf("needs a server with agentrt's additions (%s): %s %s answered %d", what, ex.req.method, ex.path, ex.status)
}

// noRoute says whether an answer is that of a route the server lacks.
func noRoute(ex *exchange) bool {
	return ex.status == http.StatusNotFound || ex.status == http.StatusMethodNotAllowed
}

func checkAsyncStep(s *session) error {
	taskID, err := s.newTask("a task to run a step of in the background")
	if err != nil {
		return err
	}
	r := postJSON(taskPath(taskID, "steps"), stepBody("y")).withHeader("Prefer", "respond-async")
	ex, err := s.do(r)
	if err != nil {
		return err
	}
	if ex.status == http.StatusOK {
		return skipAddition(ex, "steps in the background: the step was run at once")
	}
	if ex.status != http.StatusAccepted {
		return ex.failf("want 202 with the Step running and its Location")
	}
	step, err := ex.object()
	if err == nil {
		err = stepShape(step)
	}
	switch {
	case err != nil:
		return ex.failf("want 202 with the Step (%v)", err)
	case step.str("status") != "running":
		return ex.failf("want the Step running")
	case ex.header.Get("Preference-Applied") != "respond-async":
		return ex.failf("want Preference-Applied: respond-async")
	}
	stepID := step.str("step_id")
	want := taskPath(taskID, "steps", stepID)
	sent, _ := url.Parse(s.root.String() + r.path)
	loc, err := sent.Parse(ex.header.Get("Location"))
	if err != nil || ex.header.Get("Location") == "" || loc.Host != s.root.Host || loc.EscapedPath() != s.root.EscapedPath()+want {
		return ex.failf("want a Location of the step, %s", s.root.Path+want)
	}
	// It ends soon, or has: GET until it has.
	deadline := time.Now().Add(s.client.Timeout)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		ex, err := s.do(get(want))
		if err != nil {
			return err
		}
		got, err := ex.wantObject("the Step")
		if err != nil {
			return err
		}
		switch status := got.str("status"); {
		case got.str("step_id") != stepID:
			return ex.failf("want step %q", stepID)
		case status == "completed":
			return nil
		case status != "running":
			return ex.failf("want the step running, then completed")
		case time.Now().After(deadline):
			return ex.failf("want the step to have ended within %s", s.client.Timeout)
		}
		select {
		case <-s.ctx.Done():
			return s.ctx.Err()
		case <-time.After(wait):
		}
	}
}

func checkCancelEnded(s *session) error {
	taskID, stepIDs, err := s.newSteps(1)
	if err != nil {
		return err
	}
	ex, err := s.do(&request{method: "POST", path: taskPath(taskID, "steps", stepIDs[0], "cancel")})
	if err != nil {
		return err
	}
	if noRoute(ex) {
		return skipAddition(ex, "cancel")
	}
	return ex.wantError("409", func(status int) bool { return status == http.StatusConflict })
}

// eventFields are an event's, as agentrt serves them.
var eventFields = []field{
	{"id", "integer", true},
	{"type", "string", true},
	{"task_id", "string", true},
	{"step_id", "string", false},
	{"created_at", "string", true},
	{"data", "object", true},
}

// eventIDs checks events, of task taskID, and returns their ids: each
// an event, in increasing id order.
func eventIDs(events []any, taskID string) ([]int64, error) {
	var ids []int64
	for i, v := range events {
		ev, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("events[%d] is a JSON %s, not an object", i, kind(v))
		}
		if err := shape(ev, eventFields); err != nil {
			return nil, fmt.Errorf("events[%d] is not an event: %v", i, err)
		}
		if got := object(ev).str("task_id"); got != taskID {
			return nil, fmt.Errorf("events[%d] is of task %q", i, got)
		}
		id, _ := ev["id"].(json.Number).Int64()
		if len(ids) > 0 && id <= ids[len(ids)-1] {
			return nil, fmt.Errorf("events[%d] has id %d, after %d: ids do not increase", i, id, ids[len(ids)-1])
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// eventPage gets a JSON page of a task's events (query: "" or "?...")
// and returns its events' ids and its last_event_id.
func (s *session) eventPage(taskID, query string) (*exchange, []int64, int64, error) {
	ex, err := s.do(get(taskPath(taskID, "events")+query).withHeader("Accept", "application/json"))
	if err != nil {
		return ex, nil, 0, err
	}
	if noRoute(ex) {
		return ex, nil, 0, skipAddition(ex, "a task's events")
	}
	o, err := ex.wantObject("a page of events")
	if err != nil {
		return ex, nil, 0, err
	}
	if err := shape(o, []field{{"events", "array", true}, {"trimmed", "integer", true},
		{"trimmed_through", "integer", true}, {"last_event_id", "integer", true}}); err != nil {
		return ex, nil, 0, ex.failf("want a page of events (%v)", err)
	}
	ids, err := eventIDs(o["events"].([]any), taskID)
	if err != nil {
		return ex, nil, 0, ex.failf("want a page of the task's events (%v)", err)
	}
	last, _ := o["last_event_id"].(json.Number).Int64()
	return ex, ids, last, nil
}

func checkEventPage(s *session) error {
	taskID, _, err := s.newSteps(2)
	if err != nil {
		return err
	}
	ex, ids, last, err := s.eventPage(taskID, "")
	switch {
	case err != nil:
		return err
	case len(ids) < 2:
		return ex.failf("want an event or more for each of the 2 steps executed")
	case last != ids[len(ids)-1]:
		return ex.failf("want last_event_id %d, the id of the newest event", ids[len(ids)-1])
	}
	ex, next, _, err := s.eventPage(taskID, fmt.Sprintf("?after=%d&limit=1", ids[0]))
	if err != nil {
		return err
	}
	if !slices.Equal(next, ids[1:2]) {
		return ex.failf("want the one event after id %d, id %d", ids[0], ids[1])
	}
	return nil
}

// sseEvent is an event of a stream, as read.
type sseEvent struct {
	id, event, data string
	hasID           bool
}

// maxStreamBytes is as much of a stream as a check reads.
const maxStreamBytes = 4 << 20

// errStreamEnded is a stream that ended before what a check waited for.
var errStreamEnded = errors.New("the stream ended")

// stream GETs a stream of Server-Sent Events and reads its events until
// enough says it has them, within the request timeout; the exchange's
// body is what was read. A stream that ends first, or is still open at
// the timeout, is errStreamEnded (with the events read), for the check
// to say what it waited for; an answer that is not 200 is returned
// unread as an exchange. A request that gets no answer is a failure,
// and the session's end, as do's.
func (s *session) stream(r *request, enough func([]sseEvent) bool) (*exchange, []sseEvent, error) {
	ex := &exchange{req: r, path: s.root.Path + r.path}
	s.last = ex
	ctx, cancel := context.WithTimeout(s.ctx, s.client.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.method, s.root.String()+r.path, nil)
	if err != nil {
		return ex, nil, &failure{want: fmt.Sprintf("%s %s: build the request: %v", r.method, ex.path, err)}
	}
	ex.path = req.URL.RequestURI()
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	req.Header.Set("User-Agent", "agentrt-check")
	if s.apiKey != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
	}
	hc := *s.client
	hc.Timeout = 0 // ctx bounds the stream
	start := time.Now()
	res, err := hc.Do(req)
	if err != nil {
		ex.elapsed = time.Since(start)
		ex.err = describeNoAnswer(err, s.client.Timeout)
		if errors.Is(err, context.Canceled) && s.ctx.Err() != nil {
			ex.err = fmt.Errorf("the check was cancelled (%w)", s.ctx.Err())
		}
		s.gone = s.running
		return ex, nil, &failure{ex: ex}
	}
	defer res.Body.Close()
	ex.status, ex.header = res.StatusCode, res.Header
	if res.StatusCode != http.StatusOK {
		ex.body, _ = io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes))
		return ex, nil, nil
	}
	var read bytes.Buffer
	events, err := readEvents(io.TeeReader(io.LimitReader(res.Body, maxStreamBytes), &read), enough)
	ex.body, ex.elapsed = read.Bytes(), time.Since(start)
	return ex, events, err
}

// readEvents reads a stream's events, as the HTML standard parses them
// (lines ended by CRLF, LF or CR, comments, "field: value", data lines
// joined), until enough says it has them: errStreamEnded if the stream
// ends first.
func readEvents(r io.Reader, enough func([]sseEvent) bool) ([]sseEvent, error) {
	br := bufio.NewReader(r)
	var events []sseEvent
	var ev sseEvent
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return events, errStreamEnded
		}
		line = strings.TrimRight(line, "\r\n")
		// A CR alone ends a line too: agentrt sends LF, but a server may.
		for _, l := range strings.Split(line, "\r") {
			if l == "" {
				if data != nil {
					ev.data = strings.Join(data, "\n")
					events = append(events, ev)
					if enough(events) {
						return events, nil
					}
				}
				ev, data = sseEvent{}, nil
				continue
			}
			if l[0] == ':' {
				continue
			}
			name, value, _ := strings.Cut(l, ":")
			value = strings.TrimPrefix(value, " ")
			switch name {
			case "id":
				ev.id, ev.hasID = value, true
			case "event":
				ev.event = value
			case "data":
				data = append(data, value)
			}
		}
	}
}

// streamedEvent is a stream's event as agentrt sends it: its id field,
// its event field the event's type, its data the event as JSON.
func streamedEvent(ev sseEvent, taskID string) (id int64, stepID, typ string, err error) {
	var o map[string]any
	dec := json.NewDecoder(strings.NewReader(ev.data))
	dec.UseNumber()
	if err := dec.Decode(&o); err != nil {
		return 0, "", "", fmt.Errorf("an event's data is not a JSON object: %v", err)
	}
	if err := shape(o, eventFields); err != nil {
		return 0, "", "", fmt.Errorf("an event's data is not an event: %v", err)
	}
	id, _ = o["id"].(json.Number).Int64()
	typ = object(o).str("type")
	switch {
	case !ev.hasID || ev.id != strconv.FormatInt(id, 10):
		return 0, "", "", fmt.Errorf("event %d came with the id field %q", id, ev.id)
	case ev.event != typ:
		return 0, "", "", fmt.Errorf("event %d of type %q came with the event field %q", id, typ, ev.event)
	case object(o).str("task_id") != taskID:
		return 0, "", "", fmt.Errorf("event %d is of task %q", id, object(o).str("task_id"))
	}
	return id, object(o).str("step_id"), typ, nil
}

// stepEnded says whether one of evs (read so far) is the end of step
// stepID.
func stepEnded(evs []sseEvent, stepID string) bool {
	var o struct {
		Type   string `json:"type"`
		StepID string `json:"step_id"`
	}
	for _, ev := range evs {
		if json.Unmarshal([]byte(ev.data), &o) == nil && o.StepID == stepID &&
			(o.Type == "step.completed" || o.Type == "step.failed" || o.Type == "step.cancelled") {
			return true
		}
	}
	return false
}

// replay reads the task's stream (after lastID, unless ""), until the
// end of step stepID, and returns the events' ids, checked.
func (s *session) replay(taskID, lastID, stepID string) (*exchange, []int64, error) {
	r := get(taskPath(taskID, "events")).withHeader("Accept", "text/event-stream")
	if lastID != "" {
		r.withHeader("Last-Event-ID", lastID)
	}
	ex, evs, err := s.stream(r, func(evs []sseEvent) bool { return stepEnded(evs, stepID) })
	if ex.err != nil {
		return ex, nil, err
	}
	if noRoute(ex) {
		return ex, nil, skipAddition(ex, "a task's events")
	}
	if mt, _, _ := mime.ParseMediaType(ex.header.Get("Content-Type")); ex.status != http.StatusOK || mt != "text/event-stream" {
		return ex, nil, ex.failf("want 200 text/event-stream")
	}
	if err != nil {
		return ex, nil, ex.failf("want the task's events through the end of step %s, the last executed, within %s", stepID, s.client.Timeout)
	}
	var ids []int64
	for _, ev := range evs {
		id, _, _, err := streamedEvent(ev, taskID)
		if err != nil {
			return ex, nil, ex.failf("want each event as an id, its type and the event as JSON (%v)", err)
		}
		if len(ids) > 0 && id <= ids[len(ids)-1] {
			return ex, nil, ex.failf("want ids that increase: %d came after %d", id, ids[len(ids)-1])
		}
		ids = append(ids, id)
	}
	return ex, ids, nil
}

func checkEventStreamResume(s *session) error {
	taskID, stepIDs, err := s.newSteps(3)
	if err != nil {
		return err
	}
	last := stepIDs[len(stepIDs)-1]
	ex, ids, err := s.replay(taskID, "", last)
	if err != nil {
		return err
	}
	if len(ids) < 3 {
		return ex.failf("want an event or more for each of the 3 steps executed")
	}
	from := strconv.FormatInt(ids[0], 10)
	ex, after, err := s.replay(taskID, from, last)
	if err != nil {
		return err
	}
	if !slices.Equal(after, ids[1:]) {
		return ex.failf("want exactly the events after id %s, %v, each once", from, ids[1:])
	}
	return nil
}
