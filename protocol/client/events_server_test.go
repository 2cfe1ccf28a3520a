package client

// The client's calls of agentrt's additions (steps in the background,
// cancel, the task's events) against agentrt's own HTTP API and domain,
// over a real listener, with the domain's fakes for a store and a plugin:
// the answers are the server's, not a fake's idea of them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/httpapi"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// oneAgent serves one agent, also as the default.
type oneAgent struct{ a *protocol.Agent }

func (o oneAgent) Agent(name string) (*protocol.Agent, error) {
	if name != "" && name != o.a.Name() {
		return nil, protocol.Errorf(protocol.ENOTFOUND, "no agent %q", name)
	}
	return o.a, nil
}

func (o oneAgent) List(context.Context) ([]protocol.AgentInfo, error) {
	return []protocol.AgentInfo{{Name: o.a.Name(), State: "ready"}}, nil
}

func (o oneAgent) Info(_ context.Context, name string) (*protocol.AgentInfo, error) {
	if _, err := o.Agent(name); err != nil || name == "" {
		return nil, protocol.Errorf(protocol.ENOTFOUND, "no agent %q", name)
	}
	return &protocol.AgentInfo{Name: name, State: "ready"}, nil
}

// agentrtServer is agentrt's HTTP API over an agent whose step handler
// reports progress "working", then waits for release when its input is
// "wait" (until it is cancelled), and answers its input as its output.
type agentrtServer struct {
	*httptest.Server
	agent   *protocol.Agent
	release chan struct{}
	once    sync.Once
}

// releaseSteps lets the steps waiting end.
func (s *agentrtServer) releaseSteps() { s.once.Do(func() { close(s.release) }) }

// serveAgentrt serves the agent through cs (nil: as it is).
func serveAgentrt(t *testing.T, cs *cutStreams) *agentrtServer {
	t.Helper()
	s := &agentrtServer{release: make(chan struct{})}
	step := func(ctx context.Context, call *protocol.Call) (int32, error) {
		call.Progress(ctx, []byte("working"), nil)
		if bytes.Contains(call.Input(), []byte(`"wait"`)) {
			select {
			case <-s.release:
			case <-ctx.Done():
				return 0, protocol.NewPluginFailure(protocol.CauseCancelled, "the plugin call was cancelled")
			case <-time.After(10 * time.Second): // a test that failed waits for no one
			}
		}
		return 0, call.SetResult([]byte(`{"output":"done"}`))
	}
	s.agent = protocol.NewAgent(protocoltest.NewStore(), &protocol.Build{
		Plugin: protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: step}), Limits: protocol.DefaultLimits},
		protocol.AgentConfig{Name: "echo"})
	var h http.Handler = httpapi.NewServer(oneAgent{s.agent}, httpapi.ServerConfig{})
	if cs != nil {
		cs.h, h = h, cs
	}
	s.Server = httptest.NewUnstartedServer(h)
	if cs != nil {
		s.Server.Listener = cs.listener(s.Server.Listener)
	}
	s.Server.Start()
	t.Cleanup(func() {
		s.releaseSteps()
		s.Server.Close()
		s.agent.Wait(context.Background())
	})
	return s
}

func (s *agentrtServer) newTask(t *testing.T, c *Client) string {
	t.Helper()
	task, err := c.CreateTask(context.Background(), TaskRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	return task.TaskID
}

func input(s string) *string { return &s }

func TestClientAsyncStepAnswersRunningWithItsLocationAndEnds(t *testing.T) {
	srv := serveAgentrt(t, nil)
	c := mustNew(t, srv.URL)
	ctx := context.Background()
	task := srv.newTask(t, c)
	step, loc, err := c.ExecuteStepAsync(ctx, task, StepRequestBody{Input: input("wait")})
	if err != nil {
		t.Fatal(err)
	}
	if step.Status != StatusRunning || loc != srv.URL+"/ap/v1/agent/tasks/"+task+"/steps/"+step.StepID {
		t.Fatalf("step %+v at %q, want it running at its absolute URL", step, loc)
	}
	if got, err := c.GetStep(ctx, task, step.StepID); err != nil || got.Status != StatusRunning {
		t.Fatalf("GET while it runs: %+v, %v", got, err)
	}
	// A second step while it runs is refused, naming it.
	_, _, err = c.ExecuteStepAsync(ctx, task, StepRequestBody{})
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusConflict || e.StepID != step.StepID || e.Retries != 0 {
		t.Fatalf("a second step: %v (%+v), want 409 naming %s", err, e, step.StepID)
	}
	srv.releaseSteps()
	srv.agent.Wait(ctx)
	if got, err := c.GetStep(ctx, task, step.StepID); err != nil || got.Status != StatusCompleted || *got.Output != "done" {
		t.Fatalf("GET once it ended: %+v, %v", got, err)
	}
}

// A server that runs steps only as the specification says answers a
// step in the background as any other: ended, 200, with no Location.
func TestClientAsyncStepOfAServerWithoutItIsTheStepEnded(t *testing.T) {
	var rec recorder
	ts := rec.serve(t, func(r *http.Request) (int, string) { return 200, stepJSON })
	step, loc, err := mustNew(t, ts.URL).ExecuteStepAsync(context.Background(), "t/1", StepRequestBody{})
	if err != nil || loc != "" || step.Status != StatusCompleted {
		t.Fatalf("step %+v at %q, %v; want the step ended, no location", step, loc, err)
	}
	if got := rec.last(); got.path != "/ap/v1/agent/tasks/t%2F1/steps" || got.method != "POST" {
		t.Errorf("sent %+v", got)
	}
}

func TestClientCancelStepRecordsItCancelledOnceAndRefusesAStepEnded(t *testing.T) {
	srv := serveAgentrt(t, nil)
	c := mustNew(t, srv.URL)
	ctx := context.Background()
	task := srv.newTask(t, c)
	step, _, err := c.ExecuteStepAsync(ctx, task, StepRequestBody{Input: input("wait")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // cancelling twice answers the same
		got, err := c.CancelStep(ctx, task, step.StepID)
		if err != nil || got.StepID != step.StepID || !got.Cancelled() || got.Status != StatusCompleted {
			t.Fatalf("cancel %d: %+v (%s), %v; want the step recorded cancelled", i+1, got, got.AdditionalOutput, err)
		}
	}
	ended, err := c.ExecuteStep(ctx, task, StepRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		stepID string
		status int
	}{{ended.StepID, http.StatusConflict}, {"no-such-step", http.StatusNotFound}} {
		_, err = c.CancelStep(ctx, task, tc.stepID)
		var e *Error
		if !errors.As(err, &e) || e.StatusCode != tc.status || !strings.Contains(err.Error(), "cancel step "+tc.stepID) {
			t.Errorf("cancel %s: %v, want %d", tc.stepID, err, tc.status)
		}
	}
}

// A cancel refused for now (503 with Retry-After: the step is starting
// or ending) is sent again, though the refusal names the step: a cancel
// done twice is done once. An execute-step refused so is not.
func TestClientCancelIsSentAgainAfterARefusalNamingItsStep(t *testing.T) {
	body := `{"message":"step s1 is starting or ending %d","code":"unavailable","step_id":"s1"}`
	f := &refusing{refusals: 1, refuse: refuseWith(503, "1", body), accept: answerJSON(stepJSON)}
	c := mustNew(t, f.serve(t).URL)
	waits := instantWaits(c, time.Now())
	if _, err := c.CancelStep(context.Background(), "t/1", "s1"); err != nil || f.requests() != 2 || len(*waits) != 1 {
		t.Fatalf("cancel: %v after %d requests, %d waits; want it sent again once", err, f.requests(), len(*waits))
	}
	f = &refusing{refusals: 1, refuse: refuseWith(503, "1", body), accept: answerJSON(stepJSON)}
	c = mustNew(t, f.serve(t).URL)
	noWaits(t, c)
	if _, err := c.ExecuteStep(context.Background(), "t/1", StepRequestBody{}); err == nil || f.requests() != 1 {
		t.Fatalf("execute step: %v after %d requests; want the refusal, sent once", err, f.requests())
	}
}

func TestClientEventsReadsTheLogAPageAtATime(t *testing.T) {
	srv := serveAgentrt(t, nil)
	c := mustNew(t, srv.URL)
	ctx := context.Background()
	task := srv.newTask(t, c)
	step, err := c.ExecuteStep(ctx, task, StepRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	// step.created, step.running, step.progress, step.completed
	want := []string{EventStepCreated, EventStepRunning, EventStepProgress, EventStepCompleted}
	var types []string
	for after := int64(0); ; {
		p, err := c.Events(ctx, task, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if p.Last != 4 || len(p.Events) > 3 {
			t.Fatalf("page after %d: %+v, want at most 3 events and last_event_id 4", after, p)
		}
		if len(p.Events) == 0 {
			break
		}
		for _, ev := range p.Events {
			if ev.ID != after+1 || ev.TaskID != task || ev.StepID != step.StepID || ev.CreatedAt.IsZero() || len(ev.Data) == 0 {
				t.Fatalf("event after %d: %+v", after, ev)
			}
			after = ev.ID
			types = append(types, ev.Type)
		}
	}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("types %q, want %q", types, want)
	}
	_, err = c.Events(ctx, "no-such-task", 0, 0)
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusNotFound {
		t.Errorf("events of no task: %v, want 404", err)
	}
}

// cutStreams cuts the first event stream the server sends after cut
// events, halfway through the next frame, by closing its connection, as
// a network that drops does; it records the Last-Event-ID of every
// stream asked for. It cuts at the connection, below net/http, whatever
// the server does with the stream's writer.
type cutStreams struct {
	h   http.Handler
	cut int

	mu      sync.Mutex
	sent    int  // events sent on streams, until the cut
	done    bool // the cut was made
	lastIDs []string
}

func (cs *cutStreams) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/events") && r.Header.Get("Accept") == "text/event-stream" {
		cs.mu.Lock()
		cs.lastIDs = append(cs.lastIDs, r.Header.Get("Last-Event-ID"))
		cs.mu.Unlock()
	}
	cs.h.ServeHTTP(w, r)
}

func (cs *cutStreams) seen() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]string(nil), cs.lastIDs...)
}

// listener wraps l's connections so that their writes are watched.
func (cs *cutStreams) listener(l net.Listener) net.Listener { return &cutListener{l, cs} }

type cutListener struct {
	net.Listener
	cs *cutStreams
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: c, cs: l.cs}, nil
}

// cutConn counts the frames with an id ("\nid: " in what is written,
// chunked or not) and closes itself in the middle of the one past the
// cut.
type cutConn struct {
	net.Conn
	cs   *cutStreams
	tail []byte // the last bytes written, for a frame's start split across writes
}

func (c *cutConn) Write(b []byte) (int, error) {
	c.cs.mu.Lock()
	defer c.cs.mu.Unlock()
	if c.cs.done {
		return c.Conn.Write(b)
	}
	seen := append(c.tail, b...)
	skip := len(c.tail)
	for i := 0; ; {
		j := bytes.Index(seen[i:], []byte("\nid: "))
		if j < 0 {
			break
		}
		at := i + j + 1 // the frame's start in seen
		i = at
		if at < skip {
			continue // counted with the write before
		}
		if c.cs.sent < c.cs.cut {
			c.cs.sent++
			continue
		}
		end := bytes.Index(seen[at:], []byte("\n\n"))
		if end < 0 {
			end = len(seen) - at
		}
		half := at + end/2 - skip
		c.Conn.Write(b[:half])
		c.cs.done = true
		c.Conn.Close()
		return half, errors.New("the connection was cut")
	}
	c.tail = append([]byte(nil), seen[max(len(seen)-4, 0):]...)
	return c.Conn.Write(b)
}

// eventLog is what a watch was given, for the test to wait on.
type eventLog struct {
	mu     sync.Mutex
	events []Event
	more   chan struct{} // closed and replaced at each event
}

func newEventLog() *eventLog { return &eventLog{more: make(chan struct{})} }

func (l *eventLog) add(ev Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	close(l.more)
	l.more = make(chan struct{})
	return nil
}

// waitFor waits until the watch was given an event that is what is,
// failing the test if the watch ends (done closed) first.
func (l *eventLog) waitFor(t *testing.T, what string, is func(Event) bool, done <-chan struct{}) {
	t.Helper()
	for {
		l.mu.Lock()
		more := l.more
		for _, ev := range l.events {
			if is(ev) {
				l.mu.Unlock()
				return
			}
		}
		l.mu.Unlock()
		select {
		case <-more:
		case <-done:
			t.Fatalf("the watch ended before %s", what)
		}
	}
}

func (l *eventLog) all() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// wantEachOnce fails unless evs have the ids from..to, each once, in
// order.
func wantEachOnce(t *testing.T, evs []Event, from, to int64) {
	t.Helper()
	var ids []int64
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	if int64(len(ids)) != to-from+1 {
		t.Fatalf("ids %v, want %d to %d, each once", ids, from, to)
	}
	for i, id := range ids {
		if id != from+int64(i) {
			t.Fatalf("ids %v, want %d to %d, each once", ids, from, to)
		}
	}
}

// A watch whose connection drops in the middle of the stream, halfway
// through a frame, opens it again from the last event it was given
// (Last-Event-ID), after the reconnection time the server set, and goes
// on live to the task's deletion: each event once, none missed, by ids.
func TestClientWatchResumesAfterADroppedStreamWithoutLossOrRepeat(t *testing.T) {
	cs := &cutStreams{cut: 5}
	srv := serveAgentrt(t, cs)
	c := mustNew(t, srv.URL)
	waits := instantWaits(c, time.Now())
	ctx := context.Background()
	task := srv.newTask(t, c)
	for range 2 { // 8 events before the watch
		if _, err := c.ExecuteStep(ctx, task, StepRequestBody{}); err != nil {
			t.Fatal(err)
		}
	}
	log := newEventLog()
	done := make(chan struct{})
	var watchErr error
	go func() {
		defer close(done)
		watchErr = c.WatchEvents(ctx, task, 0, log.add)
	}()
	log.waitFor(t, "the replay's last event", func(ev Event) bool { return ev.ID == 8 }, done)
	// Live: a step in the background, seen running, then cancelled.
	step, _, err := c.ExecuteStepAsync(ctx, task, StepRequestBody{Input: input("wait")})
	if err != nil {
		t.Fatal(err)
	}
	log.waitFor(t, "the live step's progress", func(ev Event) bool {
		return ev.Type == EventStepProgress && ev.StepID == step.StepID
	}, done)
	if _, err := c.CancelStep(ctx, task, step.StepID); err != nil {
		t.Fatal(err)
	}
	log.waitFor(t, "the cancel", func(ev Event) bool { return ev.Type == EventStepCancelled }, done)
	if err := srv.agent.DeleteTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	<-done
	evs := log.all()
	if watchErr != nil || evs[len(evs)-1].Type != EventTaskDeleted {
		t.Fatalf("the watch ended with %v after %+v, want nil after task.deleted", watchErr, evs[len(evs)-1])
	}
	wantEachOnce(t, evs, 1, evs[len(evs)-1].ID)
	if got := cs.seen(); fmt.Sprint(got) != "[ 5]" {
		t.Errorf("streams asked for with Last-Event-ID %q, want none, then 5", got)
	}
	if len(*waits) != 1 || (*waits)[0] < 2*time.Second || (*waits)[0] > 3*time.Second {
		t.Errorf("waited %v before reconnecting, want once, the server's retry: 2000 ms and up to half more", *waits)
	}
	// The task gone, a watch of it ends at once: 404.
	noWaits(t, c)
	err = c.WatchEvents(ctx, task, 0, log.add)
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusNotFound {
		t.Errorf("a watch of a task deleted: %v, want 404", err)
	}
}

// A watch from an id resumes after it; fn's error ends the watch, as it
// is; so does the end of ctx.
func TestClientWatchStartsAfterAnIDAndStopsOnFnErrorOrCtx(t *testing.T) {
	srv := serveAgentrt(t, nil)
	c := mustNew(t, srv.URL)
	noWaits(t, c)
	ctx := context.Background()
	task := srv.newTask(t, c)
	if _, err := c.ExecuteStep(ctx, task, StepRequestBody{}); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("enough")
	var got []Event
	err := c.WatchEvents(ctx, task, 2, func(ev Event) error {
		got = append(got, ev)
		if ev.ID == 4 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("watch: %v, want fn's error as it is", err)
	}
	wantEachOnce(t, got, 3, 4)

	cctx, cancel := context.WithCancel(ctx)
	err = c.WatchEvents(cctx, task, 0, func(ev Event) error {
		if ev.ID == 4 {
			cancel() // the stream is live: it waits for more
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("watch: %v, want the context's end", err)
	}
}
