package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime/runtimetest"
)

// repoRoot is the repository's top directory.
var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}()

// buildDir holds what the tests build (fixture plugins, the binary) for the
// life of the test process.
var buildDir = func() string {
	dir, err := os.MkdirTemp("", "agentrt-test-")
	if err != nil {
		panic(err)
	}
	return dir
}()

func TestMain(m *testing.M) {
	code := m.Run()
	os.RemoveAll(buildDir)
	os.Exit(code)
}

var built sync.Map // key → *buildResult

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// once builds something at most once per test process.
func once(t testing.TB, key string, build func(out string) error) string {
	t.Helper()
	v, _ := built.LoadOrStore(key, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() {
		b.path = filepath.Join(buildDir, strings.NewReplacer("/", "_", " ", "_").Replace(key))
		b.err = build(b.path)
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", key, b.err)
	}
	return b.path
}

// examplePlugin returns the example plugin <example>-<lang>. Go builds are
// made here (the Go build cache keeps that cheap), so they are never stale;
// TinyGo and Rust builds come from build/plugins, made by "make plugins"
// (AGENTRT_PLUGINS overrides the directory).
func examplePlugin(t testing.TB, name string) string {
	t.Helper()
	example, lang, _ := strings.Cut(name, "-")
	if lang == "go" {
		return goPlugin(t, "examples/"+example+"/go")
	}
	return runtimetest.Plugin(t, name)
}

// goPlugin builds the Go plugin whose main package is at dir (relative to
// the repository) with GOOS=wasip1 -buildmode=c-shared.
func goPlugin(t testing.TB, dir string) string {
	t.Helper()
	return once(t, "go:"+dir+".wasm", func(out string) error {
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./"+dir)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v\n%s", err, b)
		}
		return nil
	})
}

// tinygoPlugin builds the plugin whose main package is at dir (relative to
// the repository) with TinyGo, as "make plugins" builds the examples: the
// TinyGo scripts/toolchains.sh installs, in $AGENTRT_CACHE/bin (by default
// ~/.cache/agentrt/bin), or on PATH.
func tinygoPlugin(t testing.TB, dir string) string {
	t.Helper()
	return once(t, "tinygo:"+dir+".wasm", func(out string) error {
		tinygo, err := exec.LookPath("tinygo")
		cache := os.Getenv("AGENTRT_CACHE")
		if cache == "" {
			if home, herr := os.UserCacheDir(); herr == nil {
				cache = filepath.Join(home, "agentrt")
			}
		}
		if p := filepath.Join(cache, "bin", "tinygo"); cache != "" {
			if _, serr := os.Stat(p); serr == nil {
				tinygo, err = p, nil
			}
		}
		if err != nil {
			return fmt.Errorf("tinygo is not installed; run scripts/toolchains.sh (make test does)")
		}
		cmd := exec.Command(tinygo, "build", "-target=wasip1", "-buildmode=c-shared", "-no-debug", "-scheduler=none", "-o", out, ".")
		cmd.Dir = filepath.Join(repoRoot, dir)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v\n%s", err, b)
		}
		return nil
	})
}

// watPlugin assembles testdata/wat/<name>.wat with wat2wasm (from wabt,
// installed by scripts/toolchains.sh).
func watPlugin(t testing.TB, name string) string {
	t.Helper()
	return runtimetest.Fixture(t, name)
}

// agentrtBinary builds the agentrt command once.
func agentrtBinary(t testing.TB) string {
	t.Helper()
	return once(t, "agentrt", func(out string) error {
		cmd := exec.Command("go", "build", "-o", out, "./cmd/agentrt")
		cmd.Dir = repoRoot
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v\n%s", err, b)
		}
		return nil
	})
}

// testConfig is the configuration tests start from: defaults, a fresh data
// directory, and a short call timeout.
func testConfig(t testing.TB, plugin string) *runConfig {
	cfg, err := parseRunFlags([]string{plugin, "--data", t.TempDir(), "--call-timeout", "5s",
		"--cache", filepath.Join(buildDir, "cache")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testServer is agentrt wired as in "agentrt run", served by httptest.
type testServer struct {
	*httptest.Server
	t   testing.TB
	cfg *runConfig
	srv *server
	log *syncBuffer // what the server logged, at every level
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// held is the memory the buffer holds: the test's record of the log,
// not the server's.
func (b *syncBuffer) held() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return uint64(b.buf.Cap())
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServer serves cfg's plugin in-process until the test ends.
func startServer(t testing.TB, cfg *runConfig) *testServer {
	t.Helper()
	logs := &syncBuffer{}
	var out io.Writer = logs
	if testing.Verbose() {
		out = io.MultiWriter(logs, os.Stderr)
	}
	log := newLogger(out, "text", slog.LevelDebug)
	srv, err := open(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ts := &testServer{Server: httptest.NewServer(srv.handler), t: t, cfg: cfg, srv: srv, log: logs}
	t.Cleanup(ts.stop)
	return ts
}

// stop stops the server as a shutdown past its timeout does: the steps
// still running (in the background too, which a server's close waits
// for) are stopped first.
func (ts *testServer) stop() {
	if ts.srv == nil {
		return
	}
	ts.srv.fleet.Interrupt("the test server stopped")
	ts.Server.Close()
	ts.srv.Close()
	ts.srv = nil
}

// serve is startServer with the test configuration for plugin.
func serve(t testing.TB, plugin string, opts ...func(*runConfig)) *testServer {
	t.Helper()
	cfg := testConfig(t, plugin)
	for _, o := range opts {
		o(cfg)
	}
	return startServer(t, cfg)
}

// response is a response read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r *response) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("response %d is not a JSON object: %v\n%s", r.status, err, r.body)
	}
	return v
}

// decode decodes the body into v.
func (r *response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode response %d: %v\n%s", r.status, err, r.body)
	}
}

// do sends a request with a raw body ("" for none).
func (ts *testServer) do(method, path, contentType, body string) *response {
	ts.t.Helper()
	return doRequest(ts.t, ts.URL, method, path, contentType, strings.NewReader(body))
}

func doRequest(t testing.TB, base, method, path, contentType string, body io.Reader) *response {
	t.Helper()
	res, err := sendRequest(base, method, path, contentType, body)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// sendRequest is doRequest for any goroutine: it returns its failure.
func sendRequest(base, method, path, contentType string, body io.Reader) (*response, error) {
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}, nil
}

// pendingRequest is a request sent on another goroutine, as another client
// would send it, while the test goes on.
type pendingRequest struct {
	t    testing.TB
	done chan struct{} // closed when res or err is set
	res  *response
	err  error
}

// start sends a request on another goroutine; wait returns its response.
func (ts *testServer) start(method, path, contentType, body string) *pendingRequest {
	p := &pendingRequest{t: ts.t, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.res, p.err = sendRequest(ts.URL, method, path, contentType, strings.NewReader(body))
	}()
	return p
}

// answered reports whether the response has arrived, without waiting.
func (p *pendingRequest) answered() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the response; a request that failed fails the test. Call
// it from the test's goroutine.
func (p *pendingRequest) wait() *response {
	p.t.Helper()
	<-p.done
	if p.err != nil {
		p.t.Fatal(p.err)
	}
	return p.res
}

// waitLimiter waits until running calls hold plugin instances and waiting
// calls wait for one, failing the test if one of the requests meant to be
// running or waiting is answered first.
func (ts *testServer) waitLimiter(what string, running, waiting int, requests ...*pendingRequest) {
	ts.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r, w := ts.srv.fleet.Instances()
		if r == running && w == waiting {
			return
		}
		for _, p := range requests {
			if p.answered() {
				res := p.wait()
				ts.t.Fatalf("waiting for %s: a request was answered first: %d %s", what, res.status, res.body)
			}
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("waiting for %s: %d calls run and %d wait, want %d and %d", what, r, w, running, waiting)
		}
		time.Sleep(time.Millisecond)
	}
}

// want fails the test unless the response has the status.
func (r *response) want(t testing.TB, status int) *response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body: %s", r.status, status, r.body)
	}
	return r
}

// wantError checks an error response: the status, a JSON body with a
// message, and (if given) text the message must contain.
func (r *response) wantError(t testing.TB, status int, contains string) string {
	t.Helper()
	r.want(t, status)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q, want application/json", ct)
	}
	msg, _ := r.json(t)["message"].(string)
	if msg == "" {
		t.Fatalf("error body has no message: %s", r.body)
	}
	if !strings.Contains(msg, contains) {
		t.Fatalf("error message %q does not contain %q", msg, contains)
	}
	return msg
}

// createTask creates a task and returns it.
func (ts *testServer) createTask(body string) protocol.Task {
	ts.t.Helper()
	var task protocol.Task
	ts.do("POST", "/ap/v1/agent/tasks", "application/json", body).want(ts.t, 200).decode(ts.t, &task)
	return task
}

// step executes a step and returns it.
func (ts *testServer) step(taskID, body string) protocol.Step {
	ts.t.Helper()
	var st protocol.Step
	ts.do("POST", "/ap/v1/agent/tasks/"+taskID+"/steps", "application/json", body).want(ts.t, 200).decode(ts.t, &st)
	return st
}

// meanwhile calls request over and over on another goroutine, as another
// client would while a test attacks the server, until the returned stop
// is called; stop reports how many calls were made and the slowest. A
// call that fails fails the test (reported from the test's goroutine).
func meanwhile(t testing.TB, request func() error) (stop func() (calls int, slowest time.Duration)) {
	quit, done := make(chan struct{}), make(chan error, 1)
	var calls int
	var slowest time.Duration
	go func() {
		for {
			select {
			case <-quit:
				done <- nil
				return
			default:
			}
			start := time.Now()
			if err := request(); err != nil {
				done <- err
				return
			}
			slowest = max(slowest, time.Since(start))
			calls++
		}
	}()
	return func() (int, time.Duration) {
		t.Helper()
		close(quit)
		if err := <-done; err != nil {
			t.Errorf("another client's request during the attack failed: %v", err)
		}
		return calls, slowest
	}
}

// eventually polls cond until it holds, failing the test after within:
// how a test waits for an event it cannot be told of. within bounds a
// wait for something that happens in far less time; it is not a measure.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// part is one part of a multipart body.
type part struct {
	name, fileName, value string
	// header, when set, is the part's raw Content-Disposition.
	header string
}

// multipartBody builds a multipart/form-data body.
func multipartBody(t testing.TB, parts ...part) (string, *bytes.Buffer) {
	t.Helper()
	ct, body, err := buildMultipart(parts...)
	if err != nil {
		t.Fatal(err)
	}
	return ct, body
}

// buildMultipart is multipartBody for any goroutine: it returns its failure.
func buildMultipart(parts ...part) (string, *bytes.Buffer, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		switch {
		case p.header != "":
			h.Set("Content-Disposition", p.header)
		case p.fileName != "":
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, p.name, p.fileName))
			h.Set("Content-Type", "application/octet-stream")
		default:
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q`, p.name))
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			return "", nil, err
		}
		pw.Write([]byte(p.value))
	}
	if err := w.Close(); err != nil {
		return "", nil, err
	}
	return w.FormDataContentType(), &buf, nil
}

// upload sends a multipart upload to a task.
func (ts *testServer) upload(taskID string, parts ...part) *response {
	ts.t.Helper()
	ct, body := multipartBody(ts.t, parts...)
	return doRequest(ts.t, ts.URL, "POST", "/ap/v1/agent/tasks/"+taskID+"/artifacts", ct, body)
}

// streamUpload streams a multipart body with one file part, so that the test
// does not hold a second copy of data.
func streamUpload(fileName string, data []byte) (string, io.Reader) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("file", fileName)
		if err == nil {
			_, err = fw.Write(data)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return mw.FormDataContentType(), pr
}
