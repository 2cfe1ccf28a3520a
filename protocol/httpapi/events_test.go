package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// eventServer serves one agent whose step handler waits for release
// (reporting progress first), over a real listener: streams need one.
func eventServer(t *testing.T, cfg ServerConfig, release <-chan struct{}) (*httptest.Server, *protocol.Agent) {
	t.Helper()
	step := func(ctx context.Context, call *protocol.Call) (int32, error) {
		call.Progress(ctx, []byte("working"), nil)
		select {
		case <-release:
		case <-ctx.Done():
			return 0, protocol.NewPluginFailure(protocol.CauseCancelled, "the plugin call was cancelled")
		}
		return 0, call.SetResult([]byte(`{"output":"done"}`))
	}
	a := protocol.NewAgent(protocoltest.NewStore(), &protocol.Build{
		Plugin: protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: step}), Limits: protocol.DefaultLimits},
		protocol.AgentConfig{Name: "echo"})
	api := NewServer(agentsOf{a}, cfg)
	var h http.Handler = api
	if heldStreams {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { api.ServeHTTP(unhijackable{w}, r) })
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(api.Drain)
	return srv, a
}

// heldStreams, when set, serves streams through a writer whose
// connection cannot be taken over: each stream is then held by its
// handler (the fallback).
var heldStreams bool

// unhijackable is a ResponseWriter that flushes and takes deadlines but
// cannot be hijacked.
type unhijackable struct{ w http.ResponseWriter }

func (u unhijackable) Header() http.Header         { return u.w.Header() }
func (u unhijackable) Write(p []byte) (int, error) { return u.w.Write(p) }
func (u unhijackable) WriteHeader(code int)        { u.w.WriteHeader(code) }
func (u unhijackable) Flush()                      { http.NewResponseController(u.w).Flush() }
func (u unhijackable) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(u.w).SetWriteDeadline(t)
}

// bothWays runs test with streams parked (as served) and held by their
// handlers (the fallback).
func bothWays(t *testing.T, test func(t *testing.T)) {
	t.Run("parked", test)
	t.Run("held", func(t *testing.T) {
		heldStreams = true
		defer func() { heldStreams = false }()
		test(t)
	})
}

func newTask(t *testing.T, base string) string {
	t.Helper()
	res, err := http.Post(base+"/ap/v1/agent/tasks", "application/json", strings.NewReader(`{"input":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var task struct {
		TaskID string `json:"task_id"`
	}
	json.NewDecoder(res.Body).Decode(&task)
	return task.TaskID
}

// patch changes the task's description: one task.updated event.
func patch(t *testing.T, base, taskID, description string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"description": description})
	req, _ := http.NewRequest("PATCH", base+"/ap/v1/agent/tasks/"+taskID, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("PATCH: %d", res.StatusCode)
	}
}

// sseEvent is one frame of a stream.
type sseEvent struct {
	id, event, data string
	comment         bool
}

// sseReader reads a stream's frames.
type sseReader struct {
	res *http.Response
	r   *bufio.Reader
}

func openStream(t *testing.T, url string, lastID string) *sseReader {
	t.Helper()
	// A stream that stops sending fails the test, not hangs it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { res.Body.Close() })
	return &sseReader{res: res, r: bufio.NewReader(res.Body)}
}

// next reads the next frame: an event, or a comment.
func (s *sseReader) next(t *testing.T) sseEvent {
	t.Helper()
	var ev sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.event != "" || ev.data != "" || ev.comment {
				return ev
			}
		case strings.HasPrefix(line, ":"):
			ev.comment = true
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// nextEvent skips comments.
func (s *sseReader) nextEvent(t *testing.T) sseEvent {
	t.Helper()
	for {
		if ev := s.next(t); !ev.comment {
			return ev
		}
	}
}

func TestAnAsyncStepIsAnswered202WithItsLocationThenReadEnded(t *testing.T) {
	release := make(chan struct{})
	srv, a := eventServer(t, ServerConfig{}, release)
	task := newTask(t, srv.URL)
	req, _ := http.NewRequest("POST", srv.URL+"/ap/v1/agent/tasks/"+task+"/steps", strings.NewReader(`{"input":"go"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "wait=5, respond-async")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var step protocol.Step
	json.NewDecoder(res.Body).Decode(&step)
	res.Body.Close()
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusAccepted || step.Status != protocol.StatusRunning || loc != "/ap/v1/agent/tasks/"+task+"/steps/"+step.StepID ||
		res.Header.Get("Preference-Applied") != "respond-async" {
		t.Fatalf("answered %d, %+v, Location %q, Preference-Applied %q", res.StatusCode, step, loc, res.Header.Get("Preference-Applied"))
	}
	get := func() protocol.Step {
		res, err := http.Get(srv.URL + loc)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var st protocol.Step
		json.NewDecoder(res.Body).Decode(&st)
		return st
	}
	if st := get(); st.Status != protocol.StatusRunning {
		t.Fatalf("GET Location while it runs: %+v", st)
	}
	// A second step while it runs: 409, naming it.
	res2 := serveRequest(srv.Config.Handler, "POST", "/ap/v1/agent/tasks/"+task+"/steps", `{}`)
	if res2.Code != http.StatusConflict || !strings.Contains(res2.Body.String(), step.StepID) {
		t.Errorf("a second step while one runs in the background: %d %s", res2.Code, res2.Body)
	}
	close(release)
	a.Wait(context.Background())
	if st := get(); st.Status != protocol.StatusCompleted || st.Output == nil || *st.Output != "done" {
		t.Fatalf("GET Location once it ended: %+v", st)
	}
	// A plain request is the specification's: synchronous, 200.
	if res := serveRequest(srv.Config.Handler, "POST", "/ap/v1/agent/tasks/"+task+"/steps", `{}`); res.Code != http.StatusOK {
		t.Errorf("a step without Prefer: %d", res.Code)
	}
}

// A stream replays the task's events, goes live, and a client that
// reconnects with Last-Event-ID in the middle gets exactly what it
// missed: no event lost or repeated, by ids.
func TestAStreamResumedWithLastEventIDMissesNothingAndRepeatsNothing(t *testing.T) {
	bothWays(t, streamResumed)
}

func streamResumed(t *testing.T) {
	srv, _ := eventServer(t, ServerConfig{}, nil)
	task := newTask(t, srv.URL)
	url := srv.URL + "/ap/v1/agent/tasks/" + task + "/events"
	for i := range 3 {
		patch(t, srv.URL, task, fmt.Sprint("before ", i))
	}
	s := openStream(t, url, "")
	var seen []int
	read := func(s *sseReader, n int) {
		for range n {
			ev := s.nextEvent(t)
			id, err := strconv.Atoi(ev.id)
			if err != nil || ev.event != protocol.EventTaskUpdated {
				t.Fatalf("frame %+v", ev)
			}
			var e protocol.Event
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.ID != int64(id) || e.TaskID != task {
				t.Fatalf("data %s of frame %d: %v", ev.data, id, err)
			}
			seen = append(seen, id)
		}
	}
	read(s, 3) // the replay
	patch(t, srv.URL, task, "live")
	read(s, 1) // live
	s.res.Body.Close()
	// Missed while away, then the reconnect.
	patch(t, srv.URL, task, "missed 1")
	patch(t, srv.URL, task, "missed 2")
	s = openStream(t, url, strconv.Itoa(seen[len(seen)-1]))
	read(s, 2)
	patch(t, srv.URL, task, "live again")
	read(s, 1)
	for i, id := range seen {
		if id != i+1 {
			t.Fatalf("ids seen %v; want 1 to %d, each once", seen, len(seen))
		}
	}
	// ?after= does what Last-Event-ID does.
	s = openStream(t, url+"?after=6", "")
	if ev := s.nextEvent(t); ev.id != "7" {
		t.Errorf("?after=6 starts at %s", ev.id)
	}
}

func TestAStreamEndsWithTheTasksDeletion(t *testing.T) {
	bothWays(t, streamDeleted)
}

func streamDeleted(t *testing.T) {
	srv, _ := eventServer(t, ServerConfig{}, nil)
	task := newTask(t, srv.URL)
	patch(t, srv.URL, task, "one")
	s := openStream(t, srv.URL+"/ap/v1/agent/tasks/"+task+"/events", "")
	s.nextEvent(t)
	if res := serveRequest(srv.Config.Handler, "DELETE", "/ap/v1/agent/tasks/"+task, ""); res.Code != 204 && res.Code != 200 {
		t.Fatalf("delete: %d", res.Code)
	}
	if ev := s.nextEvent(t); ev.event != protocol.EventTaskDeleted || ev.id != "2" {
		t.Fatalf("after the deletion the stream sent %+v", ev)
	}
	if _, err := s.r.ReadString('\n'); err != io.EOF {
		t.Errorf("the stream goes on after task.deleted: %v", err)
	}
}

func TestAnIdleStreamIsKeptOpenByHeartbeats(t *testing.T) {
	bothWays(t, idleStream)
}

func idleStream(t *testing.T) {
	srv, _ := eventServer(t, ServerConfig{EventHeartbeat: 20 * time.Millisecond}, nil)
	task := newTask(t, srv.URL)
	s := openStream(t, srv.URL+"/ap/v1/agent/tasks/"+task+"/events", "")
	for range 3 {
		if ev := s.next(t); !ev.comment {
			t.Fatalf("an idle stream sent %+v; want heartbeat comments", ev)
		}
	}
}

// waitFor waits until cond holds, or fails after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A client that opens a stream and never reads it: the server does not
// hold what it does not take. Its writes block once the connection's
// buffers are full, and the stream is cut at the write timeout.
func TestAStreamNeverReadIsCutNotBuffered(t *testing.T) {
	srv, _ := eventServer(t, ServerConfig{EventWriteTimeout: 300 * time.Millisecond}, nil)
	task := newTask(t, srv.URL)
	server := srv.Config.Handler.(*Server)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /ap/v1/agent/tasks/%s/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n", task)
	waitFor(t, 5*time.Second, "the stream to be held", func() bool { return server.EventStreams() == 1 })
	// 64 KiB events, far more than the connection buffers (a few MiB).
	big := strings.Repeat("d", protocol.MaxDescriptionBytes-16)
	for i := 0; i < 400 && server.EventStreams() == 1; i++ {
		patch(t, srv.URL, task, fmt.Sprint(i, big))
	}
	waitFor(t, 10*time.Second, "a stream never read to be cut", func() bool { return server.EventStreams() == 0 })
	// What the connection still holds is what was written before the cut;
	// then it ends.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Errorf("reading the cut stream to its end: %v", err)
	}
}

func TestTheEventsPageAsJSON(t *testing.T) {
	srv, _ := eventServer(t, ServerConfig{}, nil)
	task := newTask(t, srv.URL)
	for i := range 5 {
		patch(t, srv.URL, task, fmt.Sprint(i))
	}
	res := serveRequest(srv.Config.Handler, "GET", "/ap/v1/agent/tasks/"+task+"/events?after=1&limit=2", "")
	var page protocol.EventPage
	if err := json.Unmarshal(res.Body.Bytes(), &page); err != nil || res.Code != 200 {
		t.Fatalf("%d %s", res.Code, res.Body)
	}
	if len(page.Events) != 2 || page.Events[0].ID != 2 || page.Last != 5 {
		t.Errorf("page %+v", page)
	}
	for _, q := range []string{"?after=-1", "?after=x", "?limit=0"} {
		if res := serveRequest(srv.Config.Handler, "GET", "/ap/v1/agent/tasks/"+task+"/events"+q, ""); res.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, res.Code)
		}
	}
	if res := serveRequest(srv.Config.Handler, "GET", "/ap/v1/agent/tasks/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/events", ""); res.Code != 404 {
		t.Errorf("events of no task: %d", res.Code)
	}
}

func TestCancelOverHTTP(t *testing.T) {
	release := make(chan struct{})
	srv, a := eventServer(t, ServerConfig{}, release)
	task := newTask(t, srv.URL)
	req, _ := http.NewRequest("POST", srv.URL+"/ap/v1/agent/tasks/"+task+"/steps", strings.NewReader(`{}`))
	req.Header.Set("Prefer", "respond-async")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var step protocol.Step
	json.NewDecoder(res.Body).Decode(&step)
	res.Body.Close()
	path := "/ap/v1/agent/tasks/" + task + "/steps/" + step.StepID + "/cancel"
	for range 2 { // twice: the same answer
		res := serveRequest(srv.Config.Handler, "POST", path, "")
		if res.Code != 200 || !strings.Contains(res.Body.String(), `"code":"cancelled"`) {
			t.Fatalf("cancel: %d %s", res.Code, res.Body)
		}
	}
	close(release)
	a.Wait(context.Background())
	done := serveRequest(srv.Config.Handler, "POST", "/ap/v1/agent/tasks/"+task+"/steps", `{}`)
	var next protocol.Step
	json.Unmarshal(done.Body.Bytes(), &next)
	if res := serveRequest(srv.Config.Handler, "POST", "/ap/v1/agent/tasks/"+task+"/steps/"+next.StepID+"/cancel", ""); res.Code != http.StatusConflict {
		t.Errorf("cancel of a finished step: %d %s", res.Code, res.Body)
	}
}
