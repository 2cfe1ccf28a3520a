package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/tetratelabs/wazero"
)

// Outbound HTTP end to end: the caller plugin (testdata/plugins/caller)
// makes the requests its steps describe, through the Go kit, against
// servers the tests start on loopback. The policy reaches loopback only
// where a test allows a host by name, as an operator would; names resolve
// through testNames, which the tests control.

func callerPlugin(t testing.TB) string { return goPlugin(t, "testdata/plugins/caller") }

// namesResolver resolves the names it has.
type namesResolver map[string][]netip.Addr

func (r namesResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

var testNames = namesResolver{
	"api.test":      {netip.MustParseAddr("127.0.0.1")},
	"other.test":    {netip.MustParseAddr("127.0.0.1")},
	"rebind.test":   {netip.MustParseAddr("127.0.0.1")},
	"metadata.test": {netip.MustParseAddr("169.254.169.254")},
}

// loopbackServer is a server on loopback, and the port it listens on.
type loopbackServer struct {
	*httptest.Server
	port string
	hits atomic.Int64
}

func startLoopback(t testing.TB, h http.HandlerFunc) *loopbackServer {
	t.Helper()
	s := &loopbackServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	_, s.port, _ = net.SplitHostPort(s.Listener.Addr().String())
	return s
}

// at is the server's URL under host.
func (s *loopbackServer) at(host, path string) string { return "http://" + host + ":" + s.port + path }

// serveCaller serves the caller plugin as the agent "caller", with the
// outbound HTTP flags args, names resolved by testNames.
func serveCaller(t testing.TB, args ...string) *testServer {
	t.Helper()
	cfg, err := parseRunFlags(append([]string{callerPlugin(t), "--name", "caller", "--data", t.TempDir(), "--call-timeout", "5s",
		"--cache", filepath.Join(buildDir, "cache")}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.egress.resolver = testNames
	return startServer(t, cfg)
}

// callOutcome is what the caller plugin saw of one command.
type callOutcome struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	URL     string            `json:"url"`
	Size    int64             `json:"size"`
	Made    int               `json:"made"`
	Error   string            `json:"error"`
	Code    string            `json:"code"`
}

// call runs command c as a step of a new task and returns its outcome.
func (ts *testServer) call(c map[string]any) callOutcome {
	ts.t.Helper()
	task := ts.createTask(`{}`)
	return ts.callIn(task.TaskID, c)
}

func (ts *testServer) callIn(taskID string, c map[string]any) callOutcome {
	ts.t.Helper()
	in, _ := json.Marshal(c)
	body, _ := json.Marshal(map[string]string{"input": string(in)})
	st := ts.step(taskID, string(body))
	var o callOutcome
	if st.Output == nil || json.Unmarshal([]byte(*st.Output), &o) != nil {
		ts.t.Fatalf("the step's output is not an outcome: %v", st.Output)
	}
	return o
}

// wantRefused checks an outcome is a failure of code saying what.
func wantRefused(t testing.TB, o callOutcome, code, what string) {
	t.Helper()
	if o.Code != code || !strings.Contains(o.Error, what) {
		t.Errorf("outcome %+v, want a failure %s saying %q", o, code, what)
	}
}

func TestAPluginReachesAGrantedDestinationAndIsRefusedAnyOther(t *testing.T) {
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen", r.Method+" "+r.URL.Path)
		fmt.Fprint(w, "hello from the server")
	})
	ts := serveCaller(t, "--allow-http", "caller="+s.at("api.test", "/v1"), "--allow-private-host", "api.test")
	o := ts.call(map[string]any{"method": "POST", "url": s.at("api.test", "/v1/x"), "body": "b"})
	if o.Status != 200 || o.Body != "hello from the server" || o.Headers["X-Seen"] != "POST /v1/x" || o.URL != s.at("api.test", "/v1/x") {
		t.Fatalf("outcome %+v", o)
	}
	for _, u := range []string{s.at("api.test", "/v2/x"), s.at("other.test", "/v1/x"), s.at("127.0.0.1", "/v1/x"), "https://example.com/"} {
		wantRefused(t, ts.call(map[string]any{"url": u}), "not_allowed", "is not a destination granted to this agent")
	}
	if n := s.hits.Load(); n != 1 {
		t.Errorf("the server was reached %d times, want once", n)
	}
	if got := strings.Count(ts.log.String(), "outbound request refused"); got != 4 {
		t.Errorf("%d refusals in the operator's log, want 4:\n%s", got, ts.log)
	}
	if !strings.Contains(ts.log.String(), "agent=caller") {
		t.Errorf("the refusals do not name the agent:\n%s", ts.log)
	}
	info := ts.agentInfo("caller")
	if info.HTTP == nil || strings.Join(info.HTTP.Granted, " ") != s.at("api.test", "/v1") || info.HTTP.Asked != nil ||
		strings.Join(info.HTTP.PrivateHosts, " ") != "api.test" {
		t.Errorf("/agents/caller shows %+v", info.HTTP)
	}
	if info.Limits["http_timeout"] != "30s" || info.Limits["max_http_requests"] != float64(32) {
		t.Errorf("/agents/caller limits %v", info.Limits)
	}

	// Nothing granted: nothing reached.
	none := serveCaller(t)
	wantRefused(t, none.call(map[string]any{"url": s.at("api.test", "/v1/x")}), "not_allowed", "none is")
}

func TestARedirectToARefusedHostIsRefused(t *testing.T) {
	other := startLoopback(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other") })
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	ts := serveCaller(t, "--allow-http", "caller="+s.at("api.test", "/"), "--allow-http", "caller="+other.at("other.test", "/ok"),
		"--allow-private-host", "api.test", "--allow-private-host", "other.test")
	for _, to := range []string{other.at("other.test", "/no"), "http://metadata.test/latest/meta-data/", other.at("127.0.0.1", "/ok")} {
		o := ts.call(map[string]any{"url": s.at("api.test", "/go?to=") + to})
		wantRefused(t, o, "not_allowed", "a redirect to")
	}
	if n := other.hits.Load(); n != 0 {
		t.Errorf("refused redirects reached the other server %d times", n)
	}
	o := ts.call(map[string]any{"url": s.at("api.test", "/go?to=") + other.at("other.test", "/ok")})
	if o.Status != 200 || o.Body != "other" || o.URL != other.at("other.test", "/ok") {
		t.Errorf("a redirect to a granted destination: %+v", o)
	}
}

func TestNamesThatResolveToLoopbackOrTheMetadataAddressAndIPv4MappedAddressesAreRefused(t *testing.T) {
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") })
	ts := serveCaller(t, "--allow-http", "caller="+s.at("rebind.test", "/"), "--allow-http", "caller=http://metadata.test",
		"--allow-http", "caller="+s.at("[::ffff:127.0.0.1]", "/"), "--allow-http", "caller=http://[::ffff:169.254.169.254]")
	for _, c := range []struct{ url, what string }{
		{s.at("rebind.test", "/"), "rebind.test resolves to 127.0.0.1, a loopback address"},
		{"http://metadata.test/latest/meta-data/", "metadata.test resolves to 169.254.169.254, a link-local address"},
		{s.at("[::ffff:127.0.0.1]", "/"), "a loopback address"},
		{"http://[::ffff:169.254.169.254]/", "a link-local address"},
	} {
		if o := ts.call(map[string]any{"url": c.url}); o.Code != "not_allowed" || !strings.Contains(o.Error, c.what) {
			t.Errorf("%s: outcome %+v, want a failure not_allowed saying %q", c.url, o, c.what)
		}
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("refused requests reached the server %d times", n)
	}
	// The operator allows rebind.test by name: it is reached.
	allowed := serveCaller(t, "--allow-http", "caller="+s.at("rebind.test", "/"), "--allow-private-host", "caller=rebind.test")
	if o := allowed.call(map[string]any{"url": s.at("rebind.test", "/")}); o.Body != "reached" {
		t.Errorf("rebind.test allowed by name: %+v", o)
	}
}

func TestAPluginCannotSetHostHopByHopOrProxyHeaders(t *testing.T) {
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {})
	ts := serveCaller(t, "--allow-http", "caller="+s.at("api.test", "/"), "--allow-private-host", "api.test")
	for _, h := range [][2]string{{"Host", "metadata.google.internal"}, {"Connection", "close"}, {"Transfer-Encoding", "chunked"},
		{"Proxy-Authorization", "Basic eA=="}, {"X-Evil", "a\r\nHost: x"}} {
		o := ts.call(map[string]any{"url": s.at("api.test", "/"), "headers": [][2]string{h}})
		wantRefused(t, o, "invalid", "")
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("requests with refused headers reached the server %d times", n)
	}
}

func TestAnOversizedResponseIsRefused(t *testing.T) {
	// /sized says its length (Content-Length) and is refused unread;
	// /streamed does not (chunked) and is refused once the limit is read
	// past.
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/streamed" {
			for range 4 {
				w.Write([]byte(strings.Repeat("z", 512)))
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Length", "2048")
		w.Write([]byte(strings.Repeat("x", 2048)))
	})
	ts := serveCaller(t, "--allow-http", "caller="+s.at("api.test", "/"), "--allow-private-host", "api.test",
		"--max-http-response", "1KiB", "--max-http-request", "1KiB")
	for _, c := range []struct {
		cmd  map[string]any
		want string
	}{
		{map[string]any{"url": s.at("api.test", "/sized")}, "the response's body of 2048 bytes is over the limit of 1024 bytes"},
		{map[string]any{"url": s.at("api.test", "/streamed")}, "the response's body is over the limit of 1024 bytes"},
		{map[string]any{"url": s.at("api.test", "/sized"), "max_response": 100}, "the response's body of 2048 bytes is over the limit of 100 bytes"},
		{map[string]any{"url": s.at("api.test", "/streamed"), "max_response": 100}, "the response's body is over the limit of 100 bytes"},
		{map[string]any{"method": "POST", "url": s.at("api.test", "/"), "body": strings.Repeat("y", 1025)},
			"request's body of 1025 bytes is over the limit of 1024 bytes"},
	} {
		if o := ts.call(c.cmd); o.Code != "limit" || !strings.Contains(o.Error, c.want) {
			t.Errorf("%v: outcome %+v, want a failure limit saying %q", c.cmd["url"], o, c.want)
		}
	}
	if n := s.hits.Load(); n != 4 {
		t.Errorf("the server was reached %d times, want 4 (not by the oversized request)", n)
	}
}

func TestASlowResponsePastTheTimeLimitIsRefused(t *testing.T) {
	gone := make(chan struct{}, 2)
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the body never comes
		gone <- struct{}{}
	})
	ts := serveCaller(t, "--allow-http", "caller="+s.at("api.test", "/"), "--allow-private-host", "api.test", "--http-timeout", "300ms")
	wantRefused(t, ts.call(map[string]any{"url": s.at("api.test", "/")}), "limit", "longer than its time limit of 300ms")
	// The plugin's own limit, lower than the agent's, through the kit.
	wantRefused(t, ts.call(map[string]any{"url": s.at("api.test", "/"), "timeout_ms": 100}), "limit", "time limit of 100ms")
	for range 2 {
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			t.Fatal("the server never saw the request end")
		}
	}
}

func TestTheRequestIsCancelledWhenTheHandlerCallEnds(t *testing.T) {
	arrived, gone := make(chan struct{}, 1), make(chan struct{}, 1)
	release := make(chan struct{}) // closed when the test fails, to end the request
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			gone <- struct{}{}
		case <-release:
		}
	})
	// The request's own limit is far off: only the call's end (1s) can end
	// it before the test gives up waiting.
	ts := serveCaller(t, "--allow-http", "caller="+s.at("api.test", "/"), "--allow-private-host", "api.test",
		"--call-timeout", "1s", "--http-timeout", "10m")
	task := ts.createTask(`{}`)
	in, _ := json.Marshal(map[string]any{"url": s.at("api.test", "/")})
	body, _ := json.Marshal(map[string]string{"input": string(in)})
	step := ts.start("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", string(body))
	for _, w := range []struct {
		ch   chan struct{}
		what string
	}{{arrived, "the request did not reach the server"}, {gone, "the server never saw the request end"}} {
		select {
		case <-w.ch:
		case <-time.After(20 * time.Second):
			close(release)
			t.Fatal(w.what)
		}
	}
	step.wait().wantError(t, http.StatusGatewayTimeout, "")
}

func TestAHandlerCallMakesAtMostItsRequests(t *testing.T) {
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {})
	ts := serveCaller(t, "--allow-http", "caller="+s.at("api.test", "/"), "--allow-private-host", "api.test", "--max-http-requests", "3")
	o := ts.call(map[string]any{"url": s.at("api.test", "/"), "requests": 5})
	if o.Made != 3 {
		t.Errorf("made %d requests, want 3: %+v", o.Made, o)
	}
	wantRefused(t, o, "limit", "at most 3 outbound requests")
	// The next call has its own.
	if o := ts.call(map[string]any{"url": s.at("api.test", "/"), "requests": 3}); o.Made != 3 || o.Error != "" {
		t.Errorf("the next call: %+v", o)
	}
}

func TestAURIArtifactIsFetchedThroughThePolicyOnly(t *testing.T) {
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "bytes of "+r.URL.Path) })
	ts := serveCaller(t, "--allow-http", "caller="+s.at("api.test", "/files"), "--allow-private-host", "api.test")
	task := ts.createTask(`{}`)
	var granted, refused protocolArtifact
	ts.upload(task.TaskID, part{name: "uri", value: s.at("api.test", "/files/report.pdf")}).want(t, 200).decode(t, &granted)
	ts.upload(task.TaskID, part{name: "uri", value: s.at("api.test", "/secret/keys.txt")}).want(t, 200).decode(t, &refused)
	o := ts.callIn(task.TaskID, map[string]any{"fetch": granted.ArtifactID, "path": "in/report.pdf"})
	if o.Size != int64(len("bytes of /files/report.pdf")) || o.Error != "" {
		t.Errorf("fetch: %+v", o)
	}
	if o := ts.callIn(task.TaskID, map[string]any{"read": "in/report.pdf"}); o.Body != "bytes of /files/report.pdf" {
		t.Errorf("the fetched file holds %+v", o)
	}
	wantRefused(t, ts.callIn(task.TaskID, map[string]any{"fetch": refused.ArtifactID, "path": "x"}), "not_allowed", "not a destination granted")
	// The same server by its address, which any client could reach.
	var byAddress protocolArtifact
	ts.upload(task.TaskID, part{name: "uri", value: s.at("127.0.0.1", "/files/report.pdf")}).want(t, 200).decode(t, &byAddress)
	wantRefused(t, ts.callIn(task.TaskID, map[string]any{"fetch": byAddress.ArtifactID, "path": "y"}), "not_allowed", "not a destination granted")
	if n := s.hits.Load(); n != 1 {
		t.Errorf("the server was reached %d times, want once", n)
	}
}

// protocolArtifact is the part of an artifact these tests read.
type protocolArtifact struct {
	ArtifactID string `json:"artifact_id"`
}

func TestAManifestAsksAndTheOperatorGrantsAllOrSome(t *testing.T) {
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.URL.Path) })
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "caller.wasm"), pluginBytes(t, callerPlugin(t)))
	putFile(t, filepath.Join(dir, "caller.json"), []byte(fmt.Sprintf(`{"capabilities": {"http": [%q, "https://asked.example"]},
		"limits": {"max_http_requests": 2, "http_timeout": "5s"}}`, s.at("api.test", "/v1"))))
	for _, c := range []struct {
		grant   []string
		granted string
		reach   map[string]bool
	}{
		{[]string{"caller=all"}, s.at("api.test", "/v1") + " https://asked.example", map[string]bool{"/v1/a": true, "/v1/narrow/b": true, "/v2": false}},
		{[]string{"caller=" + s.at("api.test", "/v1/narrow")}, s.at("api.test", "/v1/narrow"), map[string]bool{"/v1/a": false, "/v1/narrow/b": true}},
		{[]string{"caller=" + s.at("api.test", "/")}, s.at("api.test", "/v1"), map[string]bool{"/v1/a": true, "/v2": false}},
		{[]string{"caller=https://not.asked"}, "", map[string]bool{"/v1/a": false}},
		{nil, "", map[string]bool{"/v1/a": false}},
	} {
		var args []string
		for _, g := range c.grant {
			args = append(args, "--allow-http", g)
		}
		ts := serveDir(t, dir, func(cfg *runConfig) {
			applyArgs(t, cfg, append(args, "--allow-private-host", "api.test")...)
			cfg.egress.resolver = testNames
		})
		info := ts.agentInfo("caller")
		if info.HTTP == nil || strings.Join(info.HTTP.Granted, " ") != c.granted || len(info.HTTP.Asked) != 2 {
			t.Errorf("grant %v: /agents/caller shows %+v, want granted %q", c.grant, info.HTTP, c.granted)
		}
		if info.Limits["max_http_requests"] != float64(2) || info.Limits["http_timeout"] != "5s" {
			t.Errorf("the manifest's limits are not the agent's: %v", info.Limits)
		}
		for path, ok := range c.reach {
			task := ts.do("POST", "/agents/caller/ap/v1/agent/tasks", "application/json", "{}")
			var tk struct {
				TaskID string `json:"task_id"`
			}
			task.want(t, 200).decode(t, &tk)
			in, _ := json.Marshal(map[string]any{"url": s.at("api.test", path)})
			body, _ := json.Marshal(map[string]string{"input": string(in)})
			var st struct{ Output string }
			ts.do("POST", "/agents/caller/ap/v1/agent/tasks/"+tk.TaskID+"/steps", "application/json", string(body)).want(t, 200).decode(t, &st)
			var o callOutcome
			json.Unmarshal([]byte(st.Output), &o)
			if got := o.Error == "" && o.Body == path; got != ok {
				t.Errorf("grant %v: %s reached %v, want %v (%+v)", c.grant, path, got, ok, o)
			}
		}
		if c.grant != nil && c.granted == "" && !strings.Contains(ts.log.String(), "does not ask for it") {
			t.Errorf("grant %v: the log does not say the grant does not apply:\n%s", c.grant, ts.log)
		}
	}
}

// applyArgs parses the outbound HTTP flags args into cfg, as the command
// line would.
func applyArgs(t testing.TB, cfg *runConfig, args ...string) {
	t.Helper()
	fresh, err := parseServeFlags(append([]string{"--plugins", "x"}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.egress = fresh.egress
}

func TestThePolicyFlagsRefuseWhatTheyCannotGrant(t *testing.T) {
	t.Setenv("SHORT_KEY", "short")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--allow-http", "api.openai.com"}, `bad -allow-http "api.openai.com": destination "api.openai.com": want a destination`},
		{[]string{"--allow-http", "a=ftp://x"}, "scheme is http or https"},
		{[]string{"--allow-private-host", "a b"}, "bad -allow-private-host"},
		{[]string{"--secret-env", "KEY"}, "want [AGENT=]NAME@DEST"},
		{[]string{"--secret-env", "NOT_SET_ANYWHERE_X@https://x.test"}, "the environment variable NOT_SET_ANYWHERE_X is not set"},
		{[]string{"--secret-env", "SHORT_KEY@https://x.test"}, "at least 8"},
		{[]string{"--http-timeout", "0s"}, "bad -http-timeout"},
		{[]string{"--http-policy", "/no/such/policy.json"}, "http policy"},
	} {
		_, err := parseRunFlags(append([]string{"x.wasm"}, c.args...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "short") {
			t.Errorf("%v: the error holds the secret: %v", c.args, err)
		}
	}
	for v, want := range map[string][2]string{
		"llm-agent=https://api.openai.com": {"llm-agent", "https://api.openai.com"},
		"*=all":                            {"*", "all"},
		"https://api.openai.com/v1/x=y":    {"*", "https://api.openai.com/v1/x=y"},
		"all":                              {"*", "all"},
		"KEY@https://x.test":               {"*", "KEY@https://x.test"},
		"a.b=KEY@https://x.test":           {"a.b", "KEY@https://x.test"},
	} {
		if a, r := agentPrefix(v); a != want[0] || r != want[1] {
			t.Errorf("agentPrefix(%q) = %q, %q", v, a, r)
		}
	}
}

// A plugin that makes no outbound requests does not import the functions,
// and so loads on a host without them, as it did.
func TestOnlyAPluginThatCallsOutImportsTheHTTPFunctions(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	names := map[string]bool{abi.FuncHTTPRequest: true, abi.FuncHTTPResponse: true, abi.FuncHTTPResponseBody: true, abi.FuncArtifactFetch: true}
	for plugin, want := range map[string]int{examplePlugin(t, "echo-go"): 0, examplePlugin(t, "echo-tinygo"): 0, examplePlugin(t, "echo-rust"): 0,
		callerPlugin(t): 4} {
		m, err := r.CompileModule(ctx, pluginBytes(t, plugin))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, f := range m.ImportedFunctions() {
			if mod, name, _ := f.Import(); mod == abi.ImportModule && names[name] {
				got++
			}
		}
		if got != want {
			t.Errorf("%s imports %d of the HTTP functions, want %d", filepath.Base(plugin), got, want)
		}
	}
}
