package hostapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
)

// fakeEgress answers requests as the test sets, and records them.
type fakeEgress struct {
	limits egress.Limits
	reqs   []egress.Request
	bodies []string // each request's body, as Do read it
	resp   *egress.Response
	err    error
}

func (e *fakeEgress) Do(ctx context.Context, r *egress.Request) (*egress.Response, error) {
	e.reqs = append(e.reqs, *r)
	e.bodies = append(e.bodies, string(r.Body))
	return e.resp, e.err
}

func (e *fakeEgress) Limits() egress.Limits { return e.limits }

func newFakeEgress() *fakeEgress {
	return &fakeEgress{limits: egress.Limits{MaxRequests: 3}, resp: &egress.Response{Status: 200,
		Header: []abi.HTTPHeader{{Name: "Content-Type", Value: "text/plain"}}, Body: []byte("the body"), URL: "https://api.test/x"}}
}

func TestHTTPRequestSendsTheRequestAndKeepsItsResponseForSizedReads(t *testing.T) {
	e := newFakeEgress()
	g := newGuest(t, newFakeHost(), Config{}, WithEgress(e))
	req := g.put(0, `{"method":"POST","url":"https://api.test/x","headers":[{"name":"Authorization","value":"Bearer {{secret:KEY}}"}],"timeout_ms":1500,"max_response_bytes":99,"no_redirects":true}`)
	body := g.put(1000, "payload")
	if got := g.call("http_request", 0, req, 1000, body); got != 0 {
		t.Fatalf("http_request = %d (%s)", got, g.lastError())
	}
	want := egress.Request{Method: "POST", URL: "https://api.test/x", Header: []abi.HTTPHeader{{Name: "Authorization", Value: "Bearer {{secret:KEY}}"}},
		Timeout: 1500 * time.Millisecond, MaxResponseBytes: 99, NoRedirects: true}
	got := e.reqs[0]
	if got.CountRedirect == nil {
		t.Error("the request does not count its redirects")
	}
	got.Body, got.CountRedirect = nil, nil
	if !reflect.DeepEqual(got, want) || e.bodies[0] != "payload" {
		t.Errorf("egress got %+v %q, want %+v", got, e.bodies[0], want)
	}
	n := g.call("http_response", 2000, 10)
	var meta abi.HTTPResponse
	if n <= 10 || g.call("http_response", 2000, uint32(n)) != n || json.Unmarshal([]byte(g.get(2000, uint32(n))), &meta) != nil {
		t.Fatalf("http_response = %d %q", n, g.get(2000, uint32(max(n, 0))))
	}
	if meta.Status != 200 || meta.BodySize != 8 || meta.URL != "https://api.test/x" || meta.Headers[0].Value != "text/plain" {
		t.Errorf("response = %+v", meta)
	}
	if n := g.call("http_response_body", 3000, 3); n != 8 || g.get(3000, 3) == "the" {
		t.Errorf("http_response_body without room = %d, wrote %q", n, g.get(3000, 3))
	}
	if n := g.call("http_response_body", 3000, 8); n != 8 || g.get(3000, 8) != "the body" {
		t.Errorf("http_response_body = %d %q", n, g.get(3000, 8))
	}
	// A failed request leaves no response to read.
	e.resp, e.err = nil, &egress.Error{Code: egress.Refused, Message: "not granted"}
	g.wantErr(g.call("http_request", 0, g.put(0, `{"url":"https://other.test/"}`), 0, 0), abi.ErrNotAllowed, "not granted")
	g.wantErr(g.call("http_response", 2000, 100), abi.ErrNotFound, "no response")
	g.wantErr(g.call("http_response_body", 2000, 100), abi.ErrNotFound, "no response")
}

// An outbound request outlasts the handler call: the host is told before
// it is sent (a step is marked running first), and refuses it when that
// fails.
func TestAnOutboundRequestIsAnnouncedToTheHostBeforeItIsSent(t *testing.T) {
	h := newFakeHost()
	e := newFakeEgress()
	g := newGuest(t, h, Config{}, WithEgress(e))
	req := g.put(0, `{"url":"https://api.test/"}`)
	if got := g.call("http_request", 0, req, 0, 0); got != 0 || h.effects != 1 || len(e.reqs) != 1 {
		t.Fatalf("http_request = %d (%s): %d effects announced, %d requests sent; want 1 and 1", got, g.lastError(), h.effects, len(e.reqs))
	}
	h.effectErr = protocol.Errorf(protocol.EINSUFFICIENT, "the disk is full")
	g.wantErr(g.call("http_request", 0, req, 0, 0), abi.ErrIO, "the disk is full")
	if len(e.reqs) != 1 {
		t.Errorf("a request whose announcement failed was sent (%d requests)", len(e.reqs))
	}
}

func TestHTTPRequestMapsEachRefusalToItsCode(t *testing.T) {
	for code, want := range map[egress.Code]int32{egress.Invalid: abi.ErrInvalid, egress.Refused: abi.ErrNotAllowed,
		egress.Limit: abi.ErrLimit, egress.Failed: abi.ErrIO} {
		e := newFakeEgress()
		e.err = &egress.Error{Code: code, Message: "why"}
		g := newGuest(t, newFakeHost(), Config{}, WithEgress(e))
		g.wantErr(g.call("http_request", 0, g.put(0, `{"url":"https://api.test/"}`), 0, 0), want, "why")
	}
}

func TestHTTPRequestBoundsWhatThePluginHandsOverBeforeReadingIt(t *testing.T) {
	e := newFakeEgress()
	g := newGuest(t, newFakeHost(), Config{}, WithEgress(e))
	g.wantErr(g.call("http_request", 0, abi.MaxHTTPRequestMetaBytes+1, 0, 0), abi.ErrInvalid, "over its limit of 65536 bytes")
	g.wantErr(g.call("http_request", 0, g.put(0, `{"url":`), 0, 0), abi.ErrInvalid, "not a JSON object")
	g.wantErr(g.call("http_request", 0, g.put(0, "\xff"), 0, 0), abi.ErrInvalid, "not a JSON object")
	g.wantErr(g.call("http_request", 0, g.put(0, `{"url":"x","headers":"no"}`), 0, 0), abi.ErrInvalid, "not a JSON object")
	req := g.put(0, `{"url":"https://api.test/"}`)
	for _, r := range badRanges {
		t.Run(r.name, func(t *testing.T) {
			if r.len <= abi.MaxHTTPRequestMetaBytes {
				g.wantErr(g.call("http_request", r.ptr, r.len, 0, 0), abi.ErrFault, "outside")
			} else {
				g.wantErr(g.call("http_request", r.ptr, r.len, 0, 0), abi.ErrInvalid, "over its limit")
			}
			g.wantErr(g.call("http_request", 0, req, r.ptr, r.len), abi.ErrFault, "outside")
			g.wantErr(g.call("http_response", r.ptr, r.len), abi.ErrNotFound, "")
		})
	}
	if len(e.reqs) != 0 {
		t.Errorf("%d refused requests reached egress", len(e.reqs))
	}
	// A timeout that does not fit a time.Duration is no timeout of the
	// plugin's own: the agent's holds.
	g.call("http_request", 0, g.put(0, `{"url":"https://api.test/","timeout_ms":9223372036854775807}`), 0, 0)
	if len(e.reqs) != 1 || e.reqs[0].Timeout != 0 {
		t.Errorf("a huge timeout_ms reached egress as %v", e.reqs)
	}
}

func TestAHandlerCallMakesAtMostItsRequestsAndNoneWithoutEgress(t *testing.T) {
	h := newFakeHost()
	h.uris = map[string]string{"art": "https://files.test/a.pdf"}
	e := newFakeEgress()
	g := newGuest(t, h, Config{}, WithEgress(e))
	req := g.put(0, `{"url":"https://api.test/"}`)
	g.call("http_request", 0, req, 0, 0)
	g.call("http_request", 0, req, 0, 0)
	id, path := g.put(500, "art"), g.put(600, "in/a.pdf")
	g.call("artifact_fetch", 500, id, 600, path)
	g.wantErr(g.call("http_request", 0, req, 0, 0), abi.ErrLimit, "at most 3 outbound requests")
	g.wantErr(g.call("artifact_fetch", 500, id, 600, path), abi.ErrLimit, "at most 3 outbound requests")
	if len(e.reqs) != 3 {
		t.Errorf("%d requests reached egress, want 3", len(e.reqs))
	}
	// The count is per handler call.
	g.ctx = WithHost(context.Background(), h, WithEgress(e))
	if got := g.call("http_request", 0, req, 0, 0); got != 0 {
		t.Errorf("the next call's first request = %d (%s)", got, g.lastError())
	}

	none := newGuest(t, newFakeHost(), Config{})
	none.wantErr(none.call("http_request", 0, none.put(0, `{"url":"https://api.test/"}`), 0, 0), abi.ErrNotAllowed, "not available")
	none.wantErr(none.call("artifact_fetch", 0, none.put(0, "art"), 100, none.put(100, "a")), abi.ErrNotAllowed, "not available")
}

func TestArtifactFetchWritesAURIArtifactsBytesThroughEgress(t *testing.T) {
	h := newFakeHost()
	h.uris = map[string]string{"art": "https://files.test/a.pdf"}
	e := newFakeEgress()
	e.limits.MaxRequests = 100
	g := newGuest(t, h, Config{}, WithEgress(e))
	id, path := g.put(500, "art"), g.put(600, "in/a.pdf")
	if got := g.call("artifact_fetch", 500, id, 600, path); got != 8 || string(h.files["in/a.pdf"]) != "the body" {
		t.Fatalf("artifact_fetch = %d (%s), files %q", got, g.lastError(), h.files)
	}
	if r := e.reqs[0]; r.URL != "https://files.test/a.pdf" || r.Method != "" || r.Header != nil || r.Body != nil {
		t.Errorf("egress got %+v", r)
	}
	e.resp = &egress.Response{Status: 404, URL: "https://files.test/a.pdf"}
	g.wantErr(g.call("artifact_fetch", 500, id, 600, path), abi.ErrIO, "the server answered 404 Not Found")
	e.resp, e.err = nil, &egress.Error{Code: egress.Refused, Message: "not granted"}
	g.wantErr(g.call("artifact_fetch", 500, id, 600, path), abi.ErrNotAllowed, "not granted")
	g.wantErr(g.call("artifact_fetch", 500, g.put(500, "nope"), 600, path), abi.ErrNotFound, "no artifact")
	g.wantErr(g.call("artifact_fetch", 500, 65, 600, path), abi.ErrInvalid, "too long")
	id = g.put(500, "art")
	g.wantErr(g.call("artifact_fetch", 500, id, 600, g.put(600, "../x")), abi.ErrBadPath, "")
	path = g.put(600, "in/a.pdf")
	for _, r := range badRanges {
		t.Run(r.name, func(t *testing.T) {
			if r.len <= 64 {
				g.wantErr(g.call("artifact_fetch", r.ptr, r.len, 600, path), abi.ErrFault, "outside")
			}
			if r.len <= 4096 {
				g.wantErr(g.call("artifact_fetch", 500, id, r.ptr, r.len), abi.ErrFault, "outside")
			}
		})
	}
}

// The host's answers to http_response have the shape of the golden
// messages the kits read.
func TestTheHostWritesHTTPResponsesAsTheGoldens(t *testing.T) {
	paths, err := filepath.Glob("../plugins/abi/testdata/golden/http_response/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var want abi.HTTPResponse
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		e := newFakeEgress()
		e.resp = &egress.Response{Status: want.Status, Header: want.Headers, Body: make([]byte, want.BodySize), URL: want.URL}
		g := newGuest(t, newFakeHost(), Config{}, WithEgress(e))
		g.call("http_request", 0, g.put(0, `{"url":"https://api.test/"}`), 0, 0)
		n := g.call("http_response", 1000, 4000)
		var got, golden any
		json.Unmarshal([]byte(g.get(1000, uint32(n))), &got)
		json.Unmarshal(data, &golden)
		for k := range golden.(map[string]any) {
			if strings.HasPrefix(k, "future_") {
				delete(golden.(map[string]any), k)
			}
		}
		if !reflect.DeepEqual(got, golden) {
			t.Errorf("%s: the host writes %s", filepath.Base(p), g.get(1000, uint32(n)))
		}
	}
}

// redirectingEgress follows redirects as egress does: it counts each
// through the request's CountRedirect before it would send it.
type redirectingEgress struct {
	*fakeEgress
	redirects int // each request is redirected this many times
	hops      int // requests that would have reached a server
}

func (e *redirectingEgress) Do(ctx context.Context, r *egress.Request) (*egress.Response, error) {
	e.hops++
	for range e.redirects {
		if err := r.CountRedirect(); err != nil {
			return nil, err
		}
		e.hops++
	}
	return e.fakeEgress.Do(ctx, r)
}

func TestEachRedirectCountsAsARequestOfTheCallAndStopsTheRequestPastTheLimit(t *testing.T) {
	h := newFakeHost()
	h.uris = map[string]string{"art": "https://files.test/a.pdf"}
	e := &redirectingEgress{fakeEgress: newFakeEgress(), redirects: 1} // a limit of 3
	g := newGuest(t, h, Config{}, WithEgress(e))
	req := g.put(0, `{"url":"https://api.test/"}`)
	if got := g.call("http_request", 0, req, 0, 0); got != 0 {
		t.Fatalf("a request and its redirect, 2 of 3: %d (%s)", got, g.lastError())
	}
	// The third is the next request; its redirect would be the fourth.
	g.wantErr(g.call("http_request", 0, req, 0, 0), abi.ErrLimit, "at most 3 outbound requests (each redirect followed is one)")
	if e.hops != 3 {
		t.Errorf("%d requests would have reached a server, want 3", e.hops)
	}
	g.wantErr(g.call("http_request", 0, req, 0, 0), abi.ErrLimit, "at most 3 outbound requests")
	// A fetch's redirects count the same.
	e.hops = 0
	g.ctx = WithHost(context.Background(), h, WithEgress(e))
	id, path := g.put(500, "art"), g.put(600, "in/a.pdf")
	if got := g.call("artifact_fetch", 500, id, 600, path); got < 0 {
		t.Fatalf("a fetch and its redirect: %d (%s)", got, g.lastError())
	}
	g.wantErr(g.call("artifact_fetch", 500, id, 600, path), abi.ErrLimit, "at most 3 outbound requests")
	if e.hops != 3 {
		t.Errorf("%d fetches would have reached a server, want 3", e.hops)
	}
}
