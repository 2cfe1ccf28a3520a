package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
)

// agentrt's additions, as the fakeServer serves them: a step in the
// background is run at once and answered 202, running (GET then shows it
// completed, as a quick step would be); every step ended, so none can be
// cancelled; a task's events are one step.completed per step, ids from 1.

// serveAdditions serves the request if it is for an addition, and says
// whether it was.
func (f *fakeServer) serveAdditions(w http.ResponseWriter, r *http.Request, segs []string) (*fakeError, bool) {
	if f.noAdditions {
		return nil, false
	}
	switch {
	case len(segs) == 2 && segs[1] == "steps" && r.Method == "POST" && strings.Contains(r.Header.Get("Prefer"), "respond-async"):
		return f.executeStepAsync(w, r, segs[0]), true
	case len(segs) == 4 && segs[1] == "steps" && segs[3] == "cancel" && r.Method == "POST":
		return f.cancelStep(w, segs[0], segs[2]), true
	case len(segs) == 2 && segs[1] == "events" && r.Method == "GET":
		return f.events(w, r, segs[0]), true
	}
	return nil, false
}

func (f *fakeServer) executeStepAsync(w http.ResponseWriter, r *http.Request, taskID string) *fakeError {
	rec := httptest.NewRecorder()
	if err := f.executeStep(rec, r, taskID); err != nil {
		return err
	}
	var step map[string]any
	json.Unmarshal(rec.Body.Bytes(), &step)
	step["status"] = "running"
	if !f.asyncNoLocation {
		w.Header().Set("Location", r.URL.EscapedPath()+"/"+step["step_id"].(string))
	}
	w.Header().Set("Preference-Applied", "respond-async")
	writeJSON(w, http.StatusAccepted, step)
	return nil
}

func (f *fakeServer) cancelStep(w http.ResponseWriter, taskID, stepID string) *fakeError {
	t, err := f.task(taskID)
	if err != nil {
		return err
	}
	s := f.steps[stepID]
	if s == nil || s.taskID != t.id {
		return errorf(404, "no step %q in task %q", stepID, taskID)
	}
	if f.cancelEnded200 {
		writeJSON(w, 200, f.stepJSON(s))
		return nil
	}
	return errorf(409, "step %s has ended: only a running step can be cancelled", stepID)
}

func (f *fakeServer) events(w http.ResponseWriter, r *http.Request, taskID string) *fakeError {
	t, err := f.task(taskID)
	if err != nil {
		return err
	}
	var events []any
	for i, s := range t.steps {
		events = append(events, map[string]any{"id": i + 1, "type": "step.completed", "task_id": t.id, "step_id": s.id,
			"created_at": "2026-11-29T00:00:00Z", "data": map[string]any{"name": nil, "status": "completed", "is_last": s.isLast}})
	}
	after := 0
	if r.Header.Get("Accept") == "text/event-stream" {
		if v := r.Header.Get("Last-Event-ID"); v != "" && !f.eventsIgnoreLastID {
			after, _ = strconv.Atoi(v)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 2000\n\n: a comment\n\n")
		for _, ev := range events[min(after, len(events)):] {
			b, _ := json.Marshal(ev)
			m := ev.(map[string]any)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", m["id"], m["type"], b)
		}
		return nil
	}
	limit := 100
	if v := r.URL.Query().Get("after"); v != "" {
		after, _ = strconv.Atoi(v)
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		limit, _ = strconv.Atoi(v)
	}
	page := events[min(after, len(events)):]
	page = page[:min(limit, len(page))]
	if f.eventPageBare {
		writeJSON(w, 200, nonNil(page))
		return nil
	}
	if f.eventPageNoCounts {
		writeJSON(w, 200, map[string]any{"events": nonNil(page)})
		return nil
	}
	writeJSON(w, 200, map[string]any{"events": nonNil(page), "trimmed": 0, "trimmed_through": 0, "last_event_id": len(events)})
	return nil
}
