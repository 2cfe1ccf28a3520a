package egress

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
)

// The tests run servers on loopback, which the policy reaches only where
// a test allows 127.0.0.1 (or a name that resolves to it) by name, as an
// operator would; names resolve through a resolver the test controls.

// fakeResolver resolves the names it has.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

var testResolver = fakeResolver{
	"api.test":      {netip.MustParseAddr("127.0.0.1")},
	"other.test":    {netip.MustParseAddr("127.0.0.1")},
	"rebind.test":   {netip.MustParseAddr("127.0.0.1")},
	"metadata.test": {netip.MustParseAddr("169.254.169.254")},
	"mapped.test":   {netip.MustParseAddr("::ffff:127.0.0.1")},
	"private.test":  {netip.MustParseAddr("10.1.2.3")},
}

// logBuffer is what a client logged.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is a test server on loopback that records what reached it.
type server struct {
	*httptest.Server
	port string
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs, s.body = append(s.reqs, r), append(s.body, b)
		s.mu.Unlock()
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(s.Close)
	_, s.port, _ = net.SplitHostPort(s.Listener.Addr().String())
	return s
}

// requests is how many requests reached the server.
func (s *server) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *server) last() (*http.Request, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		return nil, nil
	}
	return s.reqs[len(s.reqs)-1], s.body[len(s.body)-1]
}

// url is the server's URL under host (a name the resolver knows, or an
// address).
func (s *server) url(host, path string) string { return "http://" + host + ":" + s.port + path }

func dests(t *testing.T, list ...string) []abi.Destination {
	t.Helper()
	var out []abi.Destination
	for _, s := range list {
		d, err := abi.ParseDestination(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// newClient is a client of policy p with the default limits changed by
// limits (zero fields: the defaults).
func newClient(t *testing.T, p Policy, limits Limits) (*Client, *logBuffer) {
	t.Helper()
	l := DefaultLimits
	if limits.Timeout > 0 {
		l.Timeout = limits.Timeout
	}
	if limits.MaxRequestBytes > 0 {
		l.MaxRequestBytes = limits.MaxRequestBytes
	}
	if limits.MaxResponseBytes > 0 {
		l.MaxResponseBytes = limits.MaxResponseBytes
	}
	logs := &logBuffer{}
	c := New(Config{Agent: "test-agent", Policy: p, Limits: l, Resolver: testResolver,
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Cleanup(c.Close)
	return c, logs
}

// wantError checks err is an *Error of code whose message says what.
func wantError(t *testing.T, err error, code Code, what string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want an *Error of code %d", err, err, code)
	}
	if e.Code != code || !strings.Contains(e.Message, what) {
		t.Fatalf("err = %d %q, want code %d saying %q", e.Code, e.Message, code, what)
	}
	return e
}

func TestARequestToAGrantedDestinationIsSentAsTheHostWritesItAndAnswered(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("X-Answer", "1")
		w.Header().Add("X-Answer", "2")
		w.WriteHeader(201)
		fmt.Fprintf(w, "you sent %s %s", r.Method, r.URL.RequestURI())
	})
	c, logs := newClient(t, Policy{Allow: dests(t, s.url("api.test", "/v1")), PrivateHosts: []string{"api.test"}}, Limits{})
	res, err := c.Do(context.Background(), &Request{Method: "POST", URL: s.url("API.test", "/v1/items?x=1"),
		Header: []abi.HTTPHeader{{Name: "content-type", Value: "text/plain"}, {Name: "X-Many", Value: "a"}, {Name: "X-Many", Value: "b"}},
		Body:   []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 201 || string(res.Body) != "you sent POST /v1/items?x=1" || res.URL != s.url("api.test", "/v1/items?x=1") {
		t.Errorf("response = %d %q %s", res.Status, res.Body, res.URL)
	}
	var answers []string
	for _, h := range res.Header {
		if h.Name == "X-Answer" {
			answers = append(answers, h.Value)
		}
	}
	if strings.Join(answers, ",") != "1,2" {
		t.Errorf("X-Answer headers = %v in %v", answers, res.Header)
	}
	r, body := s.last()
	if string(body) != "hello" || r.Header.Get("Content-Type") != "text/plain" || strings.Join(r.Header.Values("X-Many"), ",") != "a,b" ||
		r.Host != "api.test:"+s.port || r.Header.Get("User-Agent") != "agentrt" || r.ContentLength != 5 {
		t.Errorf("the server got %s %s %v %q (Content-Length %d)", r.Host, r.URL, r.Header, body, r.ContentLength)
	}
	if !strings.Contains(logs.String(), "outbound request") {
		t.Errorf("no debug line for the request:\n%s", logs)
	}
}

func TestADestinationNotGrantedIsRefusedBeforeAnythingIsSentAndLogged(t *testing.T) {
	s := newServer(t, nil)
	granted := s.url("api.test", "/v1")
	c, logs := newClient(t, Policy{Allow: dests(t, granted), PrivateHosts: []string{"api.test", "other.test"}}, Limits{})
	for _, u := range []string{
		s.url("other.test", "/v1/x"),         // another host
		s.url("api.test", "/v2/x"),           // another path
		s.url("api.test", "/v10"),            // not a whole segment
		"https://api.test:" + s.port + "/v1", // another scheme
		"http://api.test:1/v1",               // another port
	} {
		_, err := c.Do(context.Background(), &Request{URL: u})
		e := wantError(t, err, Refused, "is not a destination granted to this agent")
		if !strings.Contains(e.Message, "granted: "+granted) {
			t.Errorf("the refusal does not name what is granted: %s", e.Message)
		}
	}
	if n := s.requests(); n != 0 {
		t.Errorf("%d refused requests reached the server", n)
	}
	if got := strings.Count(logs.String(), "outbound request refused"); got != 5 {
		t.Errorf("%d refusals logged, want 5:\n%s", got, logs)
	}
	nothing, _ := newClient(t, Policy{}, Limits{})
	_, err := nothing.Do(context.Background(), &Request{URL: granted})
	wantError(t, err, Refused, "none is")
}

func TestEveryRedirectHopIsChecked(t *testing.T) {
	other := newServer(t, nil)
	var target string
	first := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusFound)
	})
	c, _ := newClient(t, Policy{Allow: dests(t, first.url("api.test", "/"), other.url("other.test", "/ok")),
		PrivateHosts: []string{"api.test", "other.test", "metadata.test"}}, Limits{})
	for _, c2 := range []struct{ to, why string }{
		{other.url("other.test", "/elsewhere"), "a redirect to " + other.url("other.test", "/elsewhere") + ", which is not a destination"},
		{"http://metadata.test/latest/meta-data/", "which is not a destination"},
		{other.url("127.0.0.1", "/ok"), "which is not a destination"},
		{"ftp://other.test/", "a redirect to a URL agentrt does not send"},
	} {
		target = c2.to
		_, err := c.Do(context.Background(), &Request{URL: first.url("api.test", "/start")})
		wantError(t, err, Refused, c2.why)
	}
	if n := other.requests(); n != 0 {
		t.Errorf("refused redirects reached the other server %d times", n)
	}
	target = other.url("other.test", "/ok/here")
	res, err := c.Do(context.Background(), &Request{URL: first.url("api.test", "/start")})
	if err != nil || res.Status != 200 || res.URL != target {
		t.Fatalf("a redirect to a granted destination: %+v, %v", res, err)
	}
	res, err = c.Do(context.Background(), &Request{URL: first.url("api.test", "/start"), NoRedirects: true})
	if err != nil || res.Status != http.StatusFound {
		t.Fatalf("NoRedirects: %+v, %v", res, err)
	}
	var loc string
	for _, h := range res.Header {
		if h.Name == "Location" {
			loc = h.Value
		}
	}
	if loc != target {
		t.Errorf("NoRedirects: Location %q, want %q", loc, target)
	}
}

func TestTooManyRedirectsAreALimit(t *testing.T) {
	var s *server
	s = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, s.url("api.test", "/again"), http.StatusFound)
	})
	c, _ := newClient(t, Policy{Allow: dests(t, s.url("api.test", "/")), PrivateHosts: []string{"api.test"}}, Limits{})
	_, err := c.Do(context.Background(), &Request{URL: s.url("api.test", "/")})
	wantError(t, err, Limit, "redirected more than 10 times")
	if n := s.requests(); n != abi.MaxHTTPRedirects+1 {
		t.Errorf("%d requests reached the server, want %d", n, abi.MaxHTTPRedirects+1)
	}
}

func TestANameThatResolvesToANonPublicAddressIsRefusedUnlessAllowedByName(t *testing.T) {
	s := newServer(t, nil)
	for _, c2 := range []struct {
		url, why string
	}{
		{s.url("rebind.test", "/"), "rebind.test resolves to 127.0.0.1, a loopback address"},
		{"http://metadata.test/latest/meta-data/", "metadata.test resolves to 169.254.169.254, a link-local address"},
		// Go connects to an IPv4-mapped address over IPv4: the hook sees
		// the IPv4 address.
		{s.url("mapped.test", "/"), "mapped.test resolves to 127.0.0.1, a loopback address"},
		{"http://private.test/", "10.1.2.3, a private address"},
		{s.url("127.0.0.1", "/"), "127.0.0.1 is a loopback address"},
		{s.url("[::ffff:127.0.0.1]", "/"), "::ffff:127.0.0.1 is a loopback address"},
		{"http://[::ffff:169.254.169.254]/", "a link-local address"},
		{"http://169.254.169.254/", "169.254.169.254 is a link-local address"},
		{s.url("[::1]", "/"), "::1 is a loopback address"},
		{"http://[64:ff9b::7f00:1]/", "carried in a NAT64 address"},
		{"http://0.0.0.0/", "unspecified"},
	} {
		target, err := abi.ParseTarget(c2.url)
		if err != nil {
			t.Fatal(err)
		}
		c, logs := newClient(t, Policy{Allow: dests(t, target.Origin())}, Limits{})
		_, err = c.Do(context.Background(), &Request{URL: c2.url})
		wantError(t, err, Refused, c2.why)
		if !strings.Contains(logs.String(), "outbound request refused") {
			t.Errorf("%s: the refusal is not logged", c2.url)
		}
	}
	if n := s.requests(); n != 0 {
		t.Errorf("%d refused requests reached the server", n)
	}
	// Allowed by name, the same names reach the server.
	for _, host := range []string{"rebind.test", "mapped.test", "127.0.0.1"} {
		c, _ := newClient(t, Policy{Allow: dests(t, s.url(host, "/")), PrivateHosts: []string{host}}, Limits{})
		if _, err := c.Do(context.Background(), &Request{URL: s.url(host, "/")}); err != nil {
			t.Errorf("%s allowed by name: %v", host, err)
		}
	}
	// A wildcard allows the subdomains of a name.
	c, _ := newClient(t, Policy{Allow: dests(t, s.url("*.test", "/")), PrivateHosts: []string{"*.test"}}, Limits{})
	if _, err := c.Do(context.Background(), &Request{URL: s.url("rebind.test", "/")}); err != nil {
		t.Errorf("*.test allowed by name: %v", err)
	}
}

// Each agent's connections are its own: an agent that may not reach
// loopback cannot ride on a connection another agent made there.
func TestAnAgentNeverReusesAnotherAgentsConnection(t *testing.T) {
	s := newServer(t, nil)
	allowed, _ := newClient(t, Policy{Allow: dests(t, s.url("api.test", "/")), PrivateHosts: []string{"api.test"}}, Limits{})
	if _, err := allowed.Do(context.Background(), &Request{URL: s.url("api.test", "/")}); err != nil {
		t.Fatal(err)
	}
	other, _ := newClient(t, Policy{Allow: dests(t, s.url("api.test", "/"))}, Limits{})
	_, err := other.Do(context.Background(), &Request{URL: s.url("api.test", "/")})
	wantError(t, err, Refused, "loopback")
}

func TestClassifyRefusesEveryNonPublicRangeAndItsIPv6Forms(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "127.255.0.9": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"10.0.0.1": "private", "172.16.5.4": "private", "172.31.255.255": "private", "192.168.1.1": "private",
		"fc00::1": "unique-local", "fd12:3456::1": "unique-local",
		"169.254.169.254": "link-local", "::ffff:169.254.169.254": "link-local", "fe80::1": "link-local",
		"224.0.0.1": "multicast", "239.1.2.3": "multicast", "ff02::1": "multicast",
		"0.0.0.0": "unspecified", "::": "unspecified", "0.1.2.3": "unspecified",
		"100.64.0.1": "shared", "240.0.0.1": "reserved", "255.255.255.255": "reserved",
		"::7f00:1": "IPv4-compatible", "64:ff9b::a9fe:a9fe": "NAT64", "2002:7f00:1::": "6to4", "2001::1": "Teredo",
		"::ffff:10.0.0.1": "private",
	} {
		if got := classify(netip.MustParseAddr(addr)); !strings.Contains(got, want) {
			t.Errorf("classify(%s) = %q, want %q", addr, got, want)
		}
	}
	for _, addr := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::", "172.32.0.1", "100.128.0.1"} {
		if got := classify(netip.MustParseAddr(addr)); got != "" {
			t.Errorf("classify(%s) = %q, want it public", addr, got)
		}
	}
}

// The Control hook refuses on the address the socket connects to,
// whatever name led there.
func TestTheDialersControlHookChecksTheAddressConnectedTo(t *testing.T) {
	for _, c := range []struct {
		host, address string
		private       bool
		refused       bool
	}{
		{"api.test", "127.0.0.1:80", false, true},
		{"api.test", "[::ffff:127.0.0.1]:80", false, true},
		{"api.test", "169.254.169.254:80", false, true},
		{"api.test", "127.0.0.1:80", true, false},
		{"api.test", "93.184.216.34:443", false, false},
		{"api.test", "not an address", false, true},
	} {
		err := checkDialled(c.host, c.address, c.private)
		if _, refused := refusedDial(err); refused != c.refused {
			t.Errorf("checkDialled(%s, %s, %v) = %v, want refused %v", c.host, c.address, c.private, err, c.refused)
		}
	}
}

func TestTheHeadersTheHostOwnsAreRefused(t *testing.T) {
	s := newServer(t, nil)
	c, _ := newClient(t, Policy{Allow: dests(t, s.url("api.test", "/")), PrivateHosts: []string{"api.test"}}, Limits{})
	for _, h := range []abi.HTTPHeader{
		{Name: "Host", Value: "metadata.google.internal"},
		{Name: "host", Value: "evil.test"},
		{Name: "Connection", Value: "close"},
		{Name: "Transfer-Encoding", Value: "chunked"},
		{Name: "Proxy-Authorization", Value: "Basic x"},
		{Name: "Content-Length", Value: "0"},
		{Name: "X-Smuggle", Value: "a\r\nHost: evil.test"},
	} {
		_, err := c.Do(context.Background(), &Request{URL: s.url("api.test", "/"), Header: []abi.HTTPHeader{h}})
		wantError(t, err, Invalid, "")
	}
	if n := s.requests(); n != 0 {
		t.Errorf("%d requests with refused headers reached the server", n)
	}
	var many []abi.HTTPHeader
	for i := range abi.MaxHTTPHeaders + 1 {
		many = append(many, abi.HTTPHeader{Name: fmt.Sprintf("X-%d", i), Value: "v"})
	}
	_, err := c.Do(context.Background(), &Request{URL: s.url("api.test", "/"), Header: many})
	wantError(t, err, Invalid, "101 headers")
	_, err = c.Do(context.Background(), &Request{Method: "CONNECT", URL: s.url("api.test", "/")})
	wantError(t, err, Invalid, "method")
}

func TestBodiesOverTheirLimitsAreRefused(t *testing.T) {
	big := strings.Repeat("x", 1001)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("chunked") != "" {
			w.Write([]byte(big[:500])) // no Content-Length: the cap is found while reading
			w.(http.Flusher).Flush()
			w.Write([]byte(big[500:]))
			return
		}
		w.Write([]byte(big))
	})
	c, _ := newClient(t, Policy{Allow: dests(t, s.url("api.test", "/")), PrivateHosts: []string{"api.test"}},
		Limits{MaxRequestBytes: 100, MaxResponseBytes: 1000})
	_, err := c.Do(context.Background(), &Request{Method: "POST", URL: s.url("api.test", "/"), Body: make([]byte, 101)})
	wantError(t, err, Limit, "request's body of 101 bytes is over the limit of 100 bytes")
	if n := s.requests(); n != 0 {
		t.Errorf("an oversized request reached the server")
	}
	_, err = c.Do(context.Background(), &Request{URL: s.url("api.test", "/")})
	wantError(t, err, Limit, "response's body of 1001 bytes is over the limit of 1000 bytes")
	_, err = c.Do(context.Background(), &Request{URL: s.url("api.test", "/?chunked=1")})
	wantError(t, err, Limit, "response's body is over the limit of 1000 bytes")
	_, err = c.Do(context.Background(), &Request{URL: s.url("api.test", "/"), MaxResponseBytes: 10})
	wantError(t, err, Limit, "over the limit of 10 bytes")
	// A plugin's own cap cannot raise the agent's.
	_, err = c.Do(context.Background(), &Request{URL: s.url("api.test", "/"), MaxResponseBytes: 1 << 30})
	wantError(t, err, Limit, "over the limit of 1000 bytes")
	res, err := c.Do(context.Background(), &Request{Method: "POST", URL: s.url("api.test", "/"), Body: make([]byte, 100), MaxResponseBytes: 2000})
	if err == nil || res != nil {
		t.Fatalf("a body of 1001 bytes within a cap the plugin raised: %v", err)
	}
}

func TestASlowResponsePastTheTimeLimitIsRefusedAndTheServerSeesItCancelled(t *testing.T) {
	gone := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush() // the status comes, the body never does
		<-r.Context().Done()
		close(gone)
	})
	c, _ := newClient(t, Policy{Allow: dests(t, s.url("api.test", "/")), PrivateHosts: []string{"api.test"}}, Limits{Timeout: 200 * time.Millisecond})
	wantError(t, doWithin(t, c, &Request{URL: s.url("api.test", "/")}), Limit, "longer than its time limit of 200ms")
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the request end")
	}
	// A plugin's shorter limit is its own.
	hung := newServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c, _ = newClient(t, Policy{Allow: dests(t, hung.url("api.test", "/")), PrivateHosts: []string{"api.test"}}, Limits{Timeout: time.Minute})
	wantError(t, doWithin(t, c, &Request{URL: hung.url("api.test", "/"), Timeout: 100 * time.Millisecond}), Limit, "time limit of 100ms")
}

// doWithin is c.Do's error, failing the test if Do has not returned
// within 20 seconds (then the request is cancelled, so that nothing
// outlives the test).
func doWithin(t *testing.T, c *Client, r *Request) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, r)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the request did not end at its time limit")
		return nil
	}
}

func TestTheRequestEndsWhenTheHandlerCallDoes(t *testing.T) {
	arrived, gone := make(chan struct{}), make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(gone)
	})
	c, _ := newClient(t, Policy{Allow: dests(t, s.url("api.test", "/")), PrivateHosts: []string{"api.test"}}, Limits{Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel() // the handler call ends
	}()
	_, err := c.Do(ctx, &Request{URL: s.url("api.test", "/")})
	wantError(t, err, Failed, "the handler call ended")
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the request end")
	}
}

// The body is the plugin's memory: once Do has returned, the transport
// reads none of it.
func TestTheRequestBodyIsNotReadOnceDoReturns(t *testing.T) {
	g := newGuestBody([]byte("abcdef"))
	r := g.reader()
	p := make([]byte, 3)
	if n, err := r.Read(p); n != 3 || err != nil || string(p) != "abc" {
		t.Fatalf("Read = %d, %v", n, err)
	}
	g.release()
	if n, err := r.Read(p); n != 0 || !errors.Is(err, errBodyGone) {
		t.Errorf("Read after release = %d, %v", n, err)
	}
	if n, err := g.reader().Read(p); n != 0 || !errors.Is(err, errBodyGone) {
		t.Errorf("a new reader after release = %d, %v", n, err)
	}
}

const (
	secretValue = "sk-test-0123456789abcdef"
	otherValue  = "another-secret-value"
)

func TestASecretIsFilledInOnlyForItsDestinationsAndScrubbedFromTheAnswer(t *testing.T) {
	// The server echoes what it got, in every form a server might.
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		key := strings.TrimPrefix(auth, "Bearer ")
		w.Header().Set("X-Echo", auth)
		w.Header().Set("Location", "http://example.com/?key="+url.QueryEscape(key))
		fmt.Fprintf(w, `{"error": "invalid key %s", "json": %q, "b64": "%s", "url": "%s"}`,
			key, key+"\"", base64.StdEncoding.EncodeToString([]byte(key)), url.QueryEscape(key))
	})
	bound := s.url("api.test", "/v1")
	p := Policy{
		Allow:        dests(t, s.url("api.test", "/")),
		PrivateHosts: []string{"api.test"},
		Secrets: []Secret{
			{Name: "KEY", Value: secretValue, Destinations: dests(t, bound)},
			{Name: "OTHER", Value: otherValue, Destinations: dests(t, "https://elsewhere.test")},
		},
	}
	c, logs := newClient(t, p, Limits{})
	res, err := c.Do(context.Background(), &Request{URL: s.url("api.test", "/v1/chat"),
		Header: []abi.HTTPHeader{{Name: "Authorization", Value: "Bearer {{secret:KEY}}"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := s.last(); r.Header.Get("Authorization") != "Bearer "+secretValue {
		t.Errorf("the server got Authorization %q", r.Header.Get("Authorization"))
	}
	seen := string(res.Body)
	for _, h := range res.Header {
		seen += h.Name + ": " + h.Value + "\n"
	}
	for _, form := range []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue))} {
		if strings.Contains(seen, form) {
			t.Errorf("the plugin's view of the response holds the secret (%q):\n%s", form, seen)
		}
	}
	if !strings.Contains(seen, "invalid key {{secret:KEY}}") || !strings.Contains(seen, "X-Echo: Bearer {{secret:KEY}}") {
		t.Errorf("the secret is not replaced with its placeholder:\n%s", seen)
	}
	for _, h := range res.Header {
		if h.Name == "Content-Length" && h.Value != fmt.Sprint(len(res.Body)) {
			t.Errorf("Content-Length %s is the server's, not the body's %d: it tells the secret's length", h.Value, len(res.Body))
		}
	}

	// Not bound here: refused, in the words used for a secret nobody
	// holds, and nothing is sent.
	before := s.requests()
	for _, name := range []string{"KEY", "OTHER", "NOBODY"} {
		u := s.url("api.test", "/v2/x")
		if name != "KEY" {
			u = s.url("api.test", "/v1/x")
		}
		_, err := c.Do(context.Background(), &Request{URL: u, Header: []abi.HTTPHeader{{Name: "X-Key", Value: "{{secret:" + name + "}}"}}})
		e := wantError(t, err, Refused, "no secret "+name+" is held for ")
		if strings.Contains(e.Message, secretValue) || strings.Contains(e.Message, otherValue) {
			t.Errorf("a refusal holds a secret: %s", e.Message)
		}
	}
	if s.requests() != before {
		t.Errorf("a request with a secret not held for its destination was sent")
	}
	if strings.Contains(logs.String(), secretValue) || strings.Contains(logs.String(), otherValue) {
		t.Errorf("the log holds a secret:\n%s", logs)
	}
	_, err = c.Do(context.Background(), &Request{URL: bound, Header: []abi.HTTPHeader{{Name: "X-Key", Value: "{{secret:KEY"}}})
	wantError(t, err, Invalid, "not closed")
}

func TestARedirectCarriesASecretOnlyToAHostItIsBoundTo(t *testing.T) {
	got := make(chan http.Header, 4)
	bound := newServer(t, func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() })
	unbound := newServer(t, func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() })
	var target string
	start := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	})
	p := Policy{
		Allow:        dests(t, start.url("api.test", "/"), bound.url("other.test", "/"), unbound.url("other.test", "/")),
		PrivateHosts: []string{"api.test", "other.test"},
		Secrets: []Secret{{Name: "KEY", Value: secretValue,
			Destinations: dests(t, start.url("api.test", "/"), bound.url("other.test", "/"))}},
	}
	c, _ := newClient(t, p, Limits{})
	send := func() http.Header {
		t.Helper()
		_, err := c.Do(context.Background(), &Request{Method: "POST", URL: start.url("api.test", "/go"), Body: []byte("b"),
			Header: []abi.HTTPHeader{{Name: "X-Api-Key", Value: "{{secret:KEY}}"}, {Name: "Authorization", Value: "Bearer {{secret:KEY}}"},
				{Name: "X-Plain", Value: "kept"}}})
		if err != nil {
			t.Fatal(err)
		}
		return <-got
	}
	target = unbound.url("other.test", "/x")
	h := send()
	if h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" || h.Get("X-Plain") != "kept" {
		t.Errorf("a redirect to a host the secret is not bound to got %v", h)
	}
	target = bound.url("other.test", "/x")
	h = send()
	if h.Get("X-Api-Key") != secretValue || h.Get("Authorization") != "Bearer "+secretValue {
		t.Errorf("a redirect to a host the secret is bound to got %v", h)
	}
}

func TestScrubbingCostsNothingWhenTheAnswerHoldsNoSecret(t *testing.T) {
	s := NewScrubber([]Secret{{Name: "KEY", Value: secretValue}})
	body := []byte(strings.Repeat("nothing to see here ", 1000))
	if got := s.Bytes(body); &got[0] != &body[0] {
		t.Error("a body without a secret was copied")
	}
	if allocs := testing.AllocsPerRun(10, func() { s.Bytes(body) }); allocs != 0 {
		t.Errorf("scrubbing a body without a secret allocates %v times", allocs)
	}
}

// A server the secret is bound to may echo it anywhere, the URL it
// redirects to included: a refusal names the redirect's URL, and so it
// is scrubbed like an answer.
func TestARefusalOfARedirectThatEchoesASecretHoldsItsPlaceholder(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		http.Redirect(w, r, "http://elsewhere.test/keys/"+key, http.StatusFound)
	})
	p := Policy{
		Allow:        dests(t, s.url("api.test", "/")),
		PrivateHosts: []string{"api.test"},
		Secrets:      []Secret{{Name: "KEY", Value: secretValue, Destinations: dests(t, s.url("api.test", "/"))}},
	}
	c, logs := newClient(t, p, Limits{})
	_, err := c.Do(context.Background(), &Request{URL: s.url("api.test", "/v1"),
		Header: []abi.HTTPHeader{{Name: "Authorization", Value: "Bearer {{secret:KEY}}"}}})
	e := wantError(t, err, Refused, "a redirect to http://elsewhere.test/keys/{{secret:KEY}}, which is not a destination")
	if strings.Contains(e.Message, secretValue) {
		t.Errorf("the refusal holds the secret: %s", e.Message)
	}
	if strings.Contains(logs.String(), secretValue) {
		t.Errorf("the log holds the secret:\n%s", logs)
	}
}
