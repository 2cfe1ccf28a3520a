package client

// WatchEvents against scripted servers: streams that skip, repeat, end,
// fail or refuse, as a server might, to pin what the watch gives fn and
// when it opens the stream again.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// sseScript is a server whose n-th answer to a stream is answers[n] (the
// last one again past the end); it records each request's
// Last-Event-ID, Accept and Authorization.
type sseScript struct {
	answers []func(w http.ResponseWriter)

	mu       sync.Mutex
	requests []http.Header
}

func (s *sseScript) serve(t *testing.T) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.requests)
		s.requests = append(s.requests, r.Header.Clone())
		s.mu.Unlock()
		s.answers[min(n, len(s.answers)-1)](w)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// lastIDs are the Last-Event-ID of each request.
func (s *sseScript) lastIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, h := range s.requests {
		ids = append(ids, h.Get("Last-Event-ID"))
	}
	return ids
}

// stream answers a stream of frames, then ends it.
func stream(frames ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, strings.Join(frames, ""))
	}
}

// answer answers status with a JSON error body and headers.
func answer(status int, header ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"message":"answered %d"}`, status)
	}
}

// frame is an agentrt event frame of task t1.
func frame(id int, typ string) string {
	return fmt.Sprintf("id: %d\nevent: %s\ndata: {\"id\":%d,\"type\":%q,\"task_id\":\"t1\",\"created_at\":\"2026-11-29T00:00:00Z\",\"data\":{}}\n\n",
		id, typ, id, typ)
}

const trimmedFrame = "event: trimmed\ndata: {\"trimmed\":2,\"trimmed_through\":4}\n\n"

// watchAll watches t1 from after and returns what fn was given, by id
// ("T" for a trimmed notice), and the watch's error.
func watchAll(c *Client, after int64) (string, error) {
	var got []string
	err := c.WatchEvents(context.Background(), "t1", after, func(ev Event) error {
		if ev.Type == EventTrimmed {
			got = append(got, "T")
		} else {
			got = append(got, fmt.Sprint(ev.ID))
		}
		return nil
	})
	return strings.Join(got, " "), err
}

// wantWaits fails unless each wait is at least the one wanted and at
// most half more.
func wantWaits(t *testing.T, waits []time.Duration, want ...time.Duration) {
	t.Helper()
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v (and up to half more)", waits, want)
	}
	for i := range want {
		if waits[i] < want[i] || waits[i] > want[i]*3/2+minJitter {
			t.Errorf("wait %d: %s, want %s and up to half more", i+1, waits[i], want[i])
		}
	}
}

func TestClientWatchSkipsOnlyWhatTheServerSaysItTrimmed(t *testing.T) {
	deleted := frame(7, EventTaskDeleted)
	for _, tc := range []struct {
		name    string
		answers []func(http.ResponseWriter)
		want    string
		lastIDs string
		err     string
	}{
		{"trimming told at the start", []func(http.ResponseWriter){
			stream("retry: 10\n\n", trimmedFrame, frame(5, "step.progress"), frame(6, "step.completed"), deleted)},
			"T 5 6 7", "[]", ""},
		{"a gap not told: opened again at once, then told", []func(http.ResponseWriter){
			stream(frame(1, "step.created"), frame(2, "step.running"), frame(5, "step.progress")),
			stream(trimmedFrame, frame(5, "step.progress"), frame(6, "step.completed"), deleted)},
			"1 2 T 5 6 7", "[ 2]", ""},
		{"a gap never told", []func(http.ResponseWriter){
			stream(frame(1, "step.created"), frame(3, "step.running")),
			stream(frame(3, "step.running"), deleted)},
			"1", "[ 1]", "the server's events skip from id 1 to 3, and it did not say they were trimmed"},
		{"a gap past what was trimmed", []func(http.ResponseWriter){
			stream(trimmedFrame, frame(6, "step.completed"), deleted)},
			"T", "[ ]", "skip from id 0 to 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sseScript{answers: tc.answers}
			c := mustNew(t, s.serve(t).URL)
			noWaits(t, c)
			got, err := watchAll(c, 0)
			if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("given %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
			if ids := fmt.Sprintf("%q", s.lastIDs()); strings.ReplaceAll(ids, `"`, "") != tc.lastIDs {
				t.Errorf("Last-Event-ID %s, want %s", ids, tc.lastIDs)
			}
		})
	}
}

// A server that replays what the watch had (it ignores Last-Event-ID)
// gives fn nothing twice; a stream the server ends is opened again from
// the last event given, after the reconnection time.
func TestClientWatchNeverGivesAnEventTwice(t *testing.T) {
	s := &sseScript{answers: []func(http.ResponseWriter){
		stream(frame(1, "step.created"), frame(2, "step.running")),
		stream(frame(1, "step.created"), frame(2, "step.running"), frame(3, "step.completed"), frame(4, EventTaskDeleted)),
	}}
	c := mustNew(t, s.serve(t).URL)
	c.APIKey = "k"
	waits := instantWaits(c, time.Now())
	got, err := watchAll(c, 0)
	if got != "1 2 3 4" || err != nil {
		t.Fatalf("given %q, %v; want 1 2 3 4", got, err)
	}
	wantWaits(t, *waits, defaultReconnect)
	for i, h := range s.requests {
		if h.Get("Accept") != "text/event-stream" || h.Get("Authorization") != "Bearer k" {
			t.Errorf("request %d: %v", i+1, h)
		}
	}
	if ids := s.lastIDs(); ids[1] != "2" {
		t.Errorf("Last-Event-ID %q, want the last given", ids)
	}
}

// A refusal that waiting would not mend ends the watch at once, the
// server's error as an *Error; so does an answer that is no event
// stream, or an event that is not JSON.
func TestClientWatchStopsAtWhatWaitingWouldNotMend(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter)
		status int
		err    string
	}{
		{"no such task", answer(404), 404, "404 Not Found"},
		{"no key", answer(401), 401, "401 Unauthorized"},
		{"no access", answer(403), 403, "403 Forbidden"},
		{"a bad id", answer(400), 400, "400 Bad Request"},
		{"a 503 asking for a wait too long", answer(503, "Retry-After", "3600"), 503, "503"},
		{"JSON, not a stream", func(w http.ResponseWriter) { answerJSON(`{"events":[]}`)(w, nil) }, 0, "not an event stream"},
		{"an event that is not JSON", stream("id: 1\ndata: {\n\n"), 0, "not an event in JSON"},
		{"ids that disagree", stream(`id: 2` + "\n" + frame(1, "x")[6:]), 0, "id 1 in its data and 2 in its frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sseScript{answers: []func(http.ResponseWriter){tc.answer}}
			c := mustNew(t, s.serve(t).URL)
			noWaits(t, c)
			_, err := watchAll(c, 0)
			var e *Error
			if err == nil || !strings.Contains(err.Error(), tc.err) || errors.As(err, &e) != (tc.status != 0) ||
				(e != nil && e.StatusCode != tc.status) {
				t.Errorf("watch: %v, want an error saying %q (status %d)", err, tc.err, tc.status)
			}
			if n := len(s.lastIDs()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// Attempts that fail in a row are made again after waits that double
// from the reconnection time (the server's retry:), at most MaxRetries
// times; a 503 or 429's Retry-After is waited for instead; a stream that
// was alive starts the count again.
func TestClientWatchReconnectsWithinItsBounds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answers    []func(http.ResponseWriter)
		maxRetries int
		want       string
		err        string
		waits      []time.Duration
	}{
		{"a failing server, given up", []func(http.ResponseWriter){answer(500)}, 3, "", "500 Internal Server Error",
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"no answer to a stream, given up", []func(http.ResponseWriter){stream("retry: 300\n\n")}, 2, "", "the server ended the event stream",
			[]time.Duration{300 * time.Millisecond, 600 * time.Millisecond}},
		{"503 and 429 with Retry-After, waited for", []func(http.ResponseWriter){
			answer(503, "Retry-After", "3"), answer(429, "Retry-After", "2"), stream(frame(1, "x"), frame(2, EventTaskDeleted))},
			2, "1 2", "", []time.Duration{3 * time.Second, 2 * time.Second}},
		{"streams alive each time, never given up", []func(http.ResponseWriter){
			stream("retry: 100\n\n", frame(1, "x")), stream(": keep-alive\n\n"), stream(frame(2, "x")), stream(frame(3, EventTaskDeleted))},
			0, "1 2 3", "", []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sseScript{answers: tc.answers}
			c := mustNew(t, s.serve(t).URL)
			c.MaxRetries = tc.maxRetries
			waits := instantWaits(c, time.Now())
			got, err := watchAll(c, 0)
			if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("given %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
			wantWaits(t, *waits, tc.waits...)
		})
	}
}

// A watch of a server that is not there tries again within its bounds,
// and says why it gave up.
func TestClientWatchOfNoServerGivesUpSayingWhy(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close()
	c := mustNew(t, url)
	c.MaxRetries = 2
	waits := instantWaits(c, time.Now())
	_, err := watchAll(c, 0)
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "watch events of task t1") {
		t.Errorf("watch: %v, want the refused connection", err)
	}
	wantWaits(t, *waits, time.Second, 2*time.Second)
}
