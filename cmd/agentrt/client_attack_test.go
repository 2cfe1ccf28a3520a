package main

// Attacks by hostile clients (as opposed to hostile plugins, hostile_test.go):
// bytes that are not UTF-8 or that strict JSON parsers refuse, requests the
// client cancels, range requests that name no bytes, and request bodies
// trickled in to hold the server's resources. Each test attacks the way the
// security review found the hole and asserts that the server contains it.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

// Class 13: client bytes must be valid UTF-8 and JSON a strict parser takes.

// loneSurrogateEscape returns the offset of the first \u escape in b, a JSON
// text, that stands for half a surrogate pair without the other half right
// after it (serde_json and other strict parsers refuse those), or -1 if
// there is none. It is written apart from the server's checkJSON, so that
// each checks the other.
func loneSurrogateEscape(b []byte) int {
	hex := func(i int) rune {
		if i+4 > len(b) {
			return -1
		}
		v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(v)
	}
	inString := false
	for i := 0; i < len(b); i++ {
		if !inString {
			inString = b[i] == '"'
			continue
		}
		switch b[i] {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(b) || b[i+1] != 'u' {
				i++ // \" \\ \/ \b \f \n \r \t: the escaped byte is not special
				continue
			}
			switch r := hex(i + 2); {
			case 0xd800 <= r && r <= 0xdbff:
				if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					if low := hex(i + 8); 0xdc00 <= low && low <= 0xdfff {
						i += 11
						continue
					}
				}
				return i
			case 0xdc00 <= r && r <= 0xdfff:
				return i
			}
			i += 5
		}
	}
	return -1
}

// strictJSONProblem says why b is not JSON that a strict parser accepts, or
// returns "" if it is.
func strictJSONProblem(b []byte) string {
	switch {
	case !utf8.Valid(b):
		return "not valid UTF-8"
	case !json.Valid(b):
		return "not valid JSON"
	case loneSurrogateEscape(b) >= 0:
		return fmt.Sprintf("a lone surrogate escape at byte %d", loneSurrogateEscape(b))
	}
	return ""
}

// wantEnvelope checks that res is an error in the JSON envelope: status,
// Content-Type application/json, a body that is strict JSON with a
// non-empty message and the code (any code if code is ""). It reports
// whether the status was right.
func wantEnvelope(t testing.TB, res *response, status int, code string) bool {
	t.Helper()
	if res.status != status {
		t.Errorf("status %d, want %d; body %q", res.status, status, res.body)
		return false
	}
	wantJSONError(t, res, code)
	return true
}

// wantJSONError checks that res, an error response, is the JSON envelope.
func wantJSONError(t testing.TB, res *response, code string) {
	t.Helper()
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("status %d: Content-Type %q, want application/json; body %q", res.status, ct, res.body)
		return
	}
	if p := strictJSONProblem(res.body); p != "" {
		t.Errorf("status %d: error body is %s: %q", res.status, p, res.body)
		return
	}
	var e struct{ Message, Code string }
	if err := json.Unmarshal(res.body, &e); err != nil || e.Message == "" || e.Code == "" {
		t.Errorf("status %d: error body %q lacks a message or a code (%v)", res.status, res.body, err)
		return
	}
	if code != "" && e.Code != code {
		t.Errorf("status %d: code %q, want %q; message %q", res.status, e.Code, code, e.Message)
	}
}

func TestLoneSurrogateCheckerOfTheseTests(t *testing.T) {
	for _, tc := range []struct {
		json string
		want int
	}{
		{`"plain"`, -1},
		{`"\ud83d\ude00"`, -1},
		{`"\uD83D\uDE00 and \u00e9"`, -1},
		{`"\\ud800"`, -1}, // an escaped backslash, then text
		{`"\\\ud800"`, 3},
		{`"\ud800"`, 1},
		{`"\udc00"`, 1},
		{`["ok", "\ud800\u0041"]`, 8},
		{`"\ud800\ud800"`, 1},
		{`"\udc00\ud800"`, 1},
		{`{"\udbff": 1}`, 2},
		{`"\ud83d\ude00\ud83d"`, 13},
	} {
		if got := loneSurrogateEscape([]byte(tc.json)); got != tc.want {
			t.Errorf("loneSurrogateEscape(%s) = %d, want %d", tc.json, got, tc.want)
		}
	}
}

func TestBodiesThatAreNotStrictUTF8JSONAre422AndNeverServed(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	// Unusual but valid text is taken and served back as it came.
	const goodInput = "caf\u00e9 \U0001F600 \uffff \U0010FFFF a\x00b \ufeff"
	good := ts.createTask(`{"input":"caf\u00e9 \ud83d\ude00 \uffff \udbff\udfff a\u0000b \ufeff",` +
		`"additional_input":{"emoji":"\ud83d\ude00","raw":"日本語 😀","bom":"` + "\ufeff" + `"}}`)
	if good.Input == nil || *good.Input != goodInput {
		t.Fatalf("valid input came back as %q, want %q", deref(good.Input), goodInput)
	}
	goodStep := ts.step(good.TaskID, `{"input":"\ud83d\ude00 😀","additional_input":{"k":"\u0000\ufeff"}}`)

	deep := func(n int, open, close string) string {
		return `{"additional_input":{"k":` + strings.Repeat(open, n) + "1" + strings.Repeat(close, n) + `}}`
	}
	for _, tc := range []struct{ name, body string }{
		// Raw bytes that are not UTF-8, wherever they are.
		{"invalid byte in an additional_input value", "{\"additional_input\":{\"k\":\"a\xffb\"}}"},
		{"invalid byte in an additional_input key", "{\"additional_input\":{\"a\xffb\":1}}"},
		{"invalid byte in input", "{\"input\":\"a\xffb\"}"},
		{"invalid byte in nested arrays", "{\"additional_input\":{\"k\":[[[\"ok\",[\"a\xfe\"]]]]}}"},
		{"invalid byte in an unknown field", "{\"input\":\"x\",\"other\":\"\xff\"}"},
		{"invalid byte as a top-level key", "{\"\xff\":1}"},
		{"invalid byte outside strings", "{\"input\":\"x\",\xff}"},
		{"lone continuation byte", "{\"input\":\"\x80\"}"},
		{"overlong slash C0 AF", "{\"input\":\"..\xc0\xaf..\"}"},
		{"overlong NUL C0 80", "{\"additional_input\":{\"k\":\"\xc0\x80\"}}"},
		{"three-byte overlong E0 80 AF", "{\"input\":\"\xe0\x80\xaf\"}"},
		{"raw high surrogate ED A0 80", "{\"input\":\"\xed\xa0\x80\"}"},
		{"raw low surrogate ED B0 80 in a key", "{\"additional_input\":{\"\xed\xb0\x80\":1}}"},
		{"CESU-8 surrogate pair", "{\"input\":\"\xed\xa0\xbd\xed\xb8\x80\"}"},
		{"beyond U+10FFFF F4 90 80 80", "{\"input\":\"\xf4\x90\x80\x80\"}"},
		{"F5 lead byte", "{\"input\":\"\xf5\x80\x80\x80\"}"},
		{"Latin-1 text", "{\"input\":\"caf\xe9\"}"},
		// \u escapes that leave half a surrogate pair.
		{`lone high surrogate \ud800`, `{"additional_input":{"k":"\ud800"}}`},
		{`lone low surrogate \udc00`, `{"additional_input":{"k":"\udc00"}}`},
		{`high surrogate then a letter escape`, `{"input":"\ud800\u0041"}`},
		{`high surrogate then plain text`, `{"input":"\ud800x"}`},
		{`two high surrogates`, `{"input":"\ud800\ud800"}`},
		{`pair in the wrong order`, `{"input":"\udc00\ud800"}`},
		{`upper-case lone low surrogate`, `{"input":"\uDFFF"}`},
		{`lone surrogate at the end of a string`, `{"input":"ok \udbff"}`},
		{`lone surrogate in a key`, `{"additional_input":{"\ud800":1}}`},
		{`lone surrogate in nested arrays`, `{"additional_input":{"k":[[["\udc01"]]]}}`},
		{`lone surrogate after a good pair`, `{"input":"\ud83d\ude00\ud83d"}`},
		{`lone surrogate in an unknown field`, `{"input":"x","other":"\ud800"}`},
		// Nesting: the body is level 1, additional_input level 2.
		{"arrays nested 101 deep", deep(99, "[", "]")},
		{"objects nested 101 deep", deep(99, `{"a":`, "}")},
		{"arrays nested 100000 deep", deep(100000, "[", "]")},
		// What a fuzzer-ish client sends.
		{"UTF-8 cut short at the end of the body", "{\"input\":\"\xe2\x82"},
		{"UTF-8 cut short before the closing quote", "{\"input\":\"a\xe2\x82\"}"},
		{"UTF-8 cut short after the object", "{\"input\":\"a\"}\xe2\x82"},
		{"raw NUL in a string", "{\"input\":\"a\x00b\"}"},
		{"NUL after the object", "{\"input\":\"a\"}\x00"},
		{"NUL before the object", "\x00{\"input\":\"a\"}"},
		{"NUL only", "\x00"},
		{"UTF-8 byte order mark", "\xef\xbb\xbf{\"input\":\"bom\"}"},
		{"UTF-16LE body", "{\x00\"\x00i\x00\"\x00:\x001\x00}\x00"},
		{"UTF-16BE body with BOM", "\xfe\xff\x00{\x00}"},
		{"raw control character", "{\"input\":\"a\x01b\"}"},
	} {
		for _, route := range []struct{ name, path string }{
			{"create task", "/ap/v1/agent/tasks"},
			{"execute step", "/ap/v1/agent/tasks/" + good.TaskID + "/steps"},
		} {
			t.Run(route.name+"/"+tc.name, func(t *testing.T) {
				res := ts.do("POST", route.path, "application/json", tc.body)
				wantEnvelope(t, res, 422, protocol.EUNPROCESSABLE)
			})
		}
	}

	t.Run("upload names that are not UTF-8", func(t *testing.T) {
		file := func(name string) part {
			return part{name: "file", header: `form-data; name="file"; filename="` + name + `"`, value: "x"}
		}
		path := func(p string) part { return part{name: "relative_path", value: p} }
		ok := part{name: "file", fileName: "ok.txt", value: "x"}
		for _, tc := range []struct {
			name  string
			parts []part
		}{
			{"relative_path with FF", []part{path("a\xffb"), ok}},
			{"relative_path overlong C0 AF", []part{path("a\xc0\xafb"), ok}},
			{"relative_path raw surrogate", []part{ok, path("dir/\xed\xa0\x80")}},
			{"relative_path cut short", []part{path("dir/\xe2\x82"), ok}},
			{"relative_path Latin-1", []part{path("caf\xe9"), ok}},
			{"filename with FF", []part{file("a\xffb.txt")}},
			{"filename overlong C0 AF", []part{file("\xc0\xaf.txt")}},
			{"filename raw surrogate", []part{file("\xed\xa0\x80.txt")}},
			{"filename cut short", []part{file("name\xe2\x82")}},
			{"RFC 5987 filename* with %FF", []part{{name: "file", header: `form-data; name="file"; filename*=UTF-8''a%FFb.txt`, value: "x"}}},
			{"RFC 5987 filename* raw surrogate", []part{{name: "file", header: `form-data; name="file"; filename*=UTF-8''%ED%A0%80.txt`, value: "x"}}},
			{"RFC 5987 filename* overlong", []part{{name: "file", header: `form-data; name="file"; filename*=UTF-8''%C0%AF`, value: "x"}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantEnvelope(t, ts.upload(good.TaskID, tc.parts...), 422, "")
			})
		}
		var arts protocol.ArtifactList
		ts.do("GET", "/ap/v1/agent/tasks/"+good.TaskID+"/artifacts", "", "").want(t, 200).decode(t, &arts)
		if arts.Pagination.TotalItems != 0 {
			t.Errorf("refused uploads left %d artifacts: %+v", arts.Pagination.TotalItems, arts.Artifacts)
		}
		assertNoStrayFiles(t, ts.cfg.dataDir)
		filepath.WalkDir(filepath.Join(ts.cfg.dataDir, "workspaces"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Errorf("a refused upload left %s in a workspace", p)
			}
			return nil
		})
	})

	// Everything the server serves is JSON a strict parser takes, and the
	// refused requests created nothing.
	get := func(path string) []byte {
		t.Helper()
		res := ts.do("GET", path, "", "").want(t, 200)
		if p := strictJSONProblem(res.body); p != "" {
			t.Errorf("GET %s is %s: %q", path, p, res.body)
		}
		return res.body
	}
	var tasks protocol.TaskList
	json.Unmarshal(get("/ap/v1/agent/tasks?page_size=100"), &tasks)
	if tasks.Pagination.TotalItems != 1 || len(tasks.Tasks) != 1 || tasks.Tasks[0].TaskID != good.TaskID {
		t.Errorf("tasks = %+v, want only the one created with valid text", tasks)
	}
	for _, task := range tasks.Tasks {
		get("/ap/v1/agent/tasks/" + task.TaskID)
		get("/ap/v1/agent/tasks/" + task.TaskID + "/artifacts")
		get("/ap/v1/agent/tasks/" + task.TaskID + "/logs")
		var steps protocol.StepList
		json.Unmarshal(get("/ap/v1/agent/tasks/"+task.TaskID+"/steps?page_size=100"), &steps)
		if steps.Pagination.TotalItems != 1 || len(steps.Steps) != 1 || steps.Steps[0].StepID != goodStep.StepID {
			t.Errorf("steps of %s = %+v, want only the one executed with valid text", task.TaskID, steps)
		}
		for _, st := range steps.Steps {
			get("/ap/v1/agent/tasks/" + task.TaskID + "/steps/" + st.StepID)
			get("/ap/v1/agent/tasks/" + task.TaskID + "/steps/" + st.StepID + "/logs")
		}
	}
}

// Class 14: a cancelled request is not a server error.

func TestCancelledRequestIsRequestAbortedNotAnInternalError(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{"input":"t"}`)
	st := ts.step(task.TaskID, `{"input":"s"}`)
	var art protocol.Artifact
	ts.upload(task.TaskID, part{name: "file", fileName: "a.txt", value: "artifact"}).want(t, 200).decode(t, &art)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	serveCancelled := func(method, path, body string) *response {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, strings.NewReader(body)).WithContext(cancelled)
		ts.srv.handler.ServeHTTP(rec, req)
		return &response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	}
	taskPath := "/ap/v1/agent/tasks/" + task.TaskID
	// Every GET reads the store with the request's context, and
	// database/sql checks that context before it takes a connection: none
	// of them can finish before noticing.
	for _, path := range []string{
		"/ap/v1/agent/tasks",
		taskPath,
		taskPath + "/logs",
		taskPath + "/steps",
		taskPath + "/steps/" + st.StepID,
		taskPath + "/steps/" + st.StepID + "/logs",
		taskPath + "/artifacts",
		taskPath + "/artifacts/" + art.ArtifactID,
	} {
		t.Run("GET "+path, func(t *testing.T) {
			wantEnvelope(t, serveCancelled("GET", path, ""), 400, protocol.EABORTED)
		})
	}
	// Writes do not look at the context once the body is read: a task is
	// stored ("once asked for, a write happens", storage inTx) and a step
	// runs to completion (Agent.ExecuteStep runs it WithoutCancel), so
	// that what the client asked for is done and can be read later.
	for _, path := range []string{"/ap/v1/agent/tasks", taskPath + "/steps"} {
		t.Run("POST "+path, func(t *testing.T) {
			res := serveCancelled("POST", path, `{"input":"after cancel"}`)
			if res.status != 200 {
				t.Errorf("status %d, want 200 (done in spite of the cancel); body %s", res.status, res.body)
			}
		})
	}
	logs := ts.log.String()
	if strings.Contains(logs, "level=ERROR") {
		t.Errorf("a cancelled request was logged as an error:\n%s", logs)
	}
	if n := strings.Count(logs, "request cancelled by the client"); n != 8 {
		t.Errorf("the log has %d lines for the 8 cancelled requests, want 8:\n%s", n, logs)
	}
}

func TestACreateTaskCancelledWhileItsTaskHandlerRunsIsAbortedNotAPluginFailure(t *testing.T) {
	ts := serve(t, examplePlugin(t, "planner-go"))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/ap/v1/agent/tasks", strings.NewReader(`{"input":"plan this"}`)).WithContext(cancelled)
	ts.srv.handler.ServeHTTP(rec, req)
	wantEnvelope(t, &response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, 400, protocol.EABORTED)
	var list protocol.TaskList
	ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200).decode(t, &list)
	if list.Pagination.TotalItems != 0 {
		t.Errorf("a cancelled create-task left %d tasks", list.Pagination.TotalItems)
	}
	if logs := ts.log.String(); strings.Contains(logs, "task handler failed") || strings.Contains(logs, "level=ERROR") {
		t.Errorf("a cancelled create-task was logged as a failure:\n%s", logs)
	}
}

func TestHalfClosedConnectionsGetNoServerError(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	var ids []string
	for i := range 60 {
		ids = append(ids, ts.createTask(fmt.Sprintf(`{"input":"task %d %s","additional_input":{"pad":%q}}`,
			i, strings.Repeat("x", 100), strings.Repeat("y", 500))).TaskID)
	}
	ts.step(ids[0], `{"input":"a step"}`)
	paths := []string{
		"/ap/v1/agent/tasks?page_size=100",
		"/ap/v1/agent/tasks/" + ids[0],
		"/ap/v1/agent/tasks/" + ids[0] + "/steps",
		"/ap/v1/agent/tasks/" + ids[len(ids)-1] + "/artifacts",
	}
	const conns, parallel = 300, 24
	type outcome struct {
		status int // 0: no response came back
		err    error
	}
	outcomes := make([]outcome, conns)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outcomes[i] = func() outcome {
				c, err := net.Dial("tcp", ts.Listener.Addr().String())
				if err != nil {
					return outcome{err: err}
				}
				defer c.Close()
				conn := c.(*net.TCPConn)
				conn.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: agentrt\r\n\r\n", paths[i%len(paths)]); err != nil {
					return outcome{err: err}
				}
				conn.CloseWrite()
				b, err := io.ReadAll(conn)
				if len(b) == 0 {
					return outcome{err: err} // the server closed without answering: fine
				}
				res, perr := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
				if perr != nil {
					return outcome{err: fmt.Errorf("unparsable response %q: %v", b, perr)}
				}
				return outcome{status: res.StatusCode}
			}()
		}()
	}
	wg.Wait()
	statuses := map[int]int{}
	var failures []string
	for i, o := range outcomes {
		statuses[o.status]++
		switch {
		case o.status >= 500:
			failures = append(failures, fmt.Sprintf("connection %d (GET %s): status %d", i, paths[i%len(paths)], o.status))
		case o.err != nil && !errors.Is(o.err, syscall.ECONNRESET) && !errors.Is(o.err, syscall.EPIPE):
			failures = append(failures, fmt.Sprintf("connection %d (GET %s): %v", i, paths[i%len(paths)], o.err))
		}
	}
	t.Logf("statuses of %d half-closed requests (0: closed without a response): %v", conns, statuses)
	if len(failures) > 0 {
		t.Errorf("%d of %d half-closed requests failed; the first:\n%s", len(failures), conns, strings.Join(failures[:min(len(failures), 5)], "\n"))
	}
	if logs := ts.log.String(); strings.Contains(logs, "level=ERROR") {
		lines := strings.Split(errorLines(logs), "\n")
		t.Errorf("half-closed requests were logged as errors (%d lines); the first:\n%s", len(lines), strings.Join(lines[:min(len(lines), 5)], "\n"))
	}
}

// errorLines is the ERROR lines of a log.
func errorLines(logs string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Class 15: every error body is the JSON envelope, 416 and 412 included.

// getWith sends a GET with extra headers.
func getWith(t testing.TB, url string, header ...string) *response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}
}

func TestUnsatisfiableRangesAndFailedPreconditionsAreJSONErrors(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`)
	var art protocol.Artifact
	ts.upload(task.TaskID, part{name: "file", fileName: "ten.txt", value: "0123456789"}).want(t, 200).decode(t, &art)
	url := ts.URL + "/ap/v1/agent/tasks/" + task.TaskID + "/artifacts/" + art.ArtifactID

	for _, rng := range []string{"bytes=1000-2000", "bytes=10-", "bytes=20-30,40-50", "bytes=10-10,11-"} {
		t.Run("unsatisfiable "+rng, func(t *testing.T) {
			res := getWith(t, url, "Range", rng)
			wantEnvelope(t, res, 416, protocol.ERANGE)
			if cr := res.header.Get("Content-Range"); cr != "bytes */10" {
				t.Errorf("Content-Range %q, want bytes */10", cr)
			}
			if cd := res.header.Get("Content-Disposition"); cd != "" {
				t.Errorf("an error carries Content-Disposition %q", cd)
			}
		})
	}
	// http.ServeContent answers a Range it cannot parse with 416 (it does
	// not ignore it, as RFC 9110 would allow), a header with no ranges at
	// all with the whole file, and skips empty elements of a list.
	for _, tc := range []struct {
		rng    string
		status int
		body   string
	}{
		{"bytes=abc", 416, ""},
		{"bytes=5-2", 416, ""},
		{"bytes=-", 416, ""},
		{"bytes 0-1", 416, ""},
		{"items=0-1", 416, ""},
		{"bytes=--1", 416, ""},
		{"bytes=", 200, "0123456789"},
		{"bytes=0-1,,", 206, "01"},
	} {
		t.Run("malformed "+tc.rng, func(t *testing.T) {
			res := getWith(t, url, "Range", tc.rng)
			if res.status >= 400 {
				wantEnvelope(t, res, tc.status, protocol.ERANGE)
				if cd := res.header.Get("Content-Disposition"); cd != "" {
					t.Errorf("an error carries Content-Disposition %q", cd)
				}
				return
			}
			if res.status != tc.status || string(res.body) != tc.body {
				t.Errorf("status %d body %q, want %d %q", res.status, res.body, tc.status, tc.body)
			}
			if ct := res.header.Get("Content-Type"); ct != "application/octet-stream" {
				t.Errorf("Content-Type %q, want application/octet-stream", ct)
			}
		})
	}
	for _, tc := range []struct{ name, header, value string }{
		{"If-Match that matches nothing", "If-Match", `"no-such-etag"`},
		{"If-Match list that matches nothing", "If-Match", `"a", W/"b"`},
		{"If-Unmodified-Since before the upload", "If-Unmodified-Since", "Mon, 02 Jan 2006 15:04:05 GMT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := getWith(t, url, tc.header, tc.value)
			wantEnvelope(t, res, 412, protocol.EPRECONDITION)
			if cd := res.header.Get("Content-Disposition"); cd != "" {
				t.Errorf("an error carries Content-Disposition %q", cd)
			}
		})
	}
	for _, tc := range []struct{ rng, body, contentRange string }{
		{"bytes=2-5", "2345", "bytes 2-5/10"},
		{"bytes=-3", "789", "bytes 7-9/10"},
		{"bytes=5-100", "56789", "bytes 5-9/10"},
		{"bytes=0-1,20-30", "01", "bytes 0-1/10"}, // the part that overlaps
		{"bytes=9-9", "9", "bytes 9-9/10"},
	} {
		t.Run("satisfiable "+tc.rng, func(t *testing.T) {
			res := getWith(t, url, "Range", tc.rng)
			if res.status != 206 || string(res.body) != tc.body || res.header.Get("Content-Range") != tc.contentRange {
				t.Errorf("status %d, body %q, Content-Range %q; want 206, %q, %q",
					res.status, res.body, res.header.Get("Content-Range"), tc.body, tc.contentRange)
			}
			if ct := res.header.Get("Content-Type"); ct != "application/octet-stream" {
				t.Errorf("Content-Type %q, want application/octet-stream", ct)
			}
			if !strings.HasPrefix(res.header.Get("Content-Disposition"), "attachment;") {
				t.Errorf("Content-Disposition %q, want an attachment", res.header.Get("Content-Disposition"))
			}
		})
	}
	t.Run("If-Match * still downloads", func(t *testing.T) {
		if res := getWith(t, url, "If-Match", "*"); res.status != 200 || string(res.body) != "0123456789" {
			t.Errorf("status %d body %q", res.status, res.body)
		}
	})
	if strings.Contains(ts.log.String(), "level=ERROR") {
		t.Errorf("range and precondition failures were logged as errors:\n%s", errorLines(ts.log.String()))
	}
}

func TestEveryErrorResponseIsTheJSONEnvelope(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"), func(c *runConfig) {
		c.maxBody = 1 << 10
		c.limits.MaxUploadBytes = 1 << 10
	})
	task := ts.createTask(`{}`)
	st := ts.step(task.TaskID, `{"input":"x"}`)
	var art protocol.Artifact
	ts.upload(task.TaskID, part{name: "file", fileName: "a.txt", value: "a"}).want(t, 200).decode(t, &art)

	type request struct {
		method, path, contentType string
		body                      []byte
	}
	var reqs []request
	add := func(method, path, contentType string, body []byte) {
		reqs = append(reqs, request{method, path, contentType, body})
	}
	tasks := "/ap/v1/agent/tasks"
	routes := func(taskID, stepID, artID string) []string {
		tp := tasks + "/" + taskID
		return []string{tasks, tp, tp + "/logs", tp + "/steps", tp + "/steps/" + stepID, tp + "/steps/" + stepID + "/logs",
			tp + "/artifacts", tp + "/artifacts/" + artID}
	}
	good := routes(task.TaskID, st.StepID, art.ArtifactID)
	// Unknown and malformed ids, on every method of every route.
	for _, bad := range []string{uuid.NewString(), "nope", "%FF%FE", strings.Repeat("9", 200), "..%2F.."} {
		for _, p := range append(routes(bad, st.StepID, art.ArtifactID),
			routes(task.TaskID, bad, bad)...) {
			add("GET", p, "", nil)
			add("POST", p, "application/json", []byte(`{"input":"x"}`))
		}
	}
	// Page parameters out of range or not numbers.
	for _, q := range []string{"current_page=0", "page_size=-1", "page_size=abc", "current_page=99999999999",
		"current_page=1e3", "page_size=%00", "current_page=%FF"} {
		for _, p := range []string{good[0], good[3], good[6]} {
			add("GET", p+"?"+q, "", nil)
		}
	}
	// Methods the routes do not take, and routes that do not exist.
	for _, p := range good {
		for _, m := range []string{"PUT", "DELETE", "PATCH", "POST", "GET"} {
			add(m, p, "application/json", []byte(`{}`))
		}
	}
	for _, p := range []string{"/", "/ap", "/ap/v1/agent", "/ap/v1/agent/tasks/" + task.TaskID + "/nope",
		"/ap/v1/agent/tasks/%FF", "/ap/v2/agent/tasks", "/\xff", "/ap/v1/agent/tasks/" + task.TaskID + "/steps/a/b"} {
		add("GET", p, "", nil)
		add("POST", p, "application/json", []byte(`{}`))
	}
	// Bodies over the limit, and bodies that are not JSON.
	big := []byte(`{"input":"` + strings.Repeat("b", 2<<10) + `"}`)
	add("POST", good[0], "application/json", big)
	add("POST", good[3], "application/json", big)
	add("POST", good[0], "application/json", []byte("{\"input\":\"\xff\"}"))
	add("POST", good[3], "text/plain", []byte("not json"))
	// Bad multipart bodies.
	ct, mp := multipartBody(t, part{name: "file", fileName: "big.bin", value: strings.Repeat("z", 4<<10)})
	add("POST", good[6], ct, mp.Bytes())
	ct, mp = multipartBody(t, part{name: "file", fileName: "cut.bin", value: strings.Repeat("z", 512)})
	add("POST", good[6], ct, mp.Bytes()[:mp.Len()/2])
	add("POST", good[6], "multipart/form-data", []byte("--x\r\n\r\n"))
	add("POST", good[6], "multipart/form-data; boundary=x", []byte("garbage"))
	add("POST", good[6], "multipart/form-data; boundary=x", []byte("--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nabc\r\n--x--\r\n--x"))
	add("POST", good[6], "application/json", []byte(`{"file":"x"}`))
	add("POST", good[6], "", nil)
	add("POST", tasks+"/"+uuid.NewString()+"/artifacts", ct, mp.Bytes())

	errs := 0
	for _, r := range reqs {
		req, err := http.NewRequest(r.method, ts.URL+r.path, bytes.NewReader(r.body))
		if err != nil {
			req, err = http.NewRequest(r.method, ts.URL, bytes.NewReader(r.body))
			if err != nil {
				t.Fatal(err)
			}
			req.URL.RawPath, req.URL.Path = "", r.path // a path net/url will not parse
		}
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s %q: %v", r.method, r.path, err)
			continue
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Errorf("%s %q: read: %v", r.method, r.path, err)
			continue
		}
		if res.StatusCode < 400 {
			continue
		}
		errs++
		t.Run(fmt.Sprintf("%s %q %d", r.method, r.path, res.StatusCode), func(t *testing.T) {
			wantJSONError(t, &response{status: res.StatusCode, header: res.Header, body: b}, "")
		})
	}
	if errs < len(reqs)*3/4 {
		t.Errorf("only %d of %d bad requests were errors", errs, len(reqs))
	}
}

// Class 16: slow request bodies are timed out, uploads in flight are bounded.

// dialRaw opens a TCP connection to ts for requests written by hand, from
// the loopback address local (nil: any).
func dialRaw(t testing.TB, ts *testServer, local net.IP) (*net.TCPConn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	c, err := d.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn), bufio.NewReader(c)
}

// readRawResponse reads one response from a connection, giving up after
// within.
func readRawResponse(conn net.Conn, br *bufio.Reader, within time.Duration) (*response, error) {
	conn.SetReadDeadline(time.Now().Add(within))
	defer conn.SetReadDeadline(time.Time{})
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}, nil
}

// wantClosed checks that the server closed conn (after a response that
// said it would): reading it ends, well before within.
func wantClosed(t testing.TB, conn net.Conn, br *bufio.Reader, within time.Duration) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(within))
	n, err := br.Read(make([]byte, 64))
	var ne net.Error
	switch {
	case n > 0:
		t.Errorf("the server sent %d more bytes on a connection it should have closed", n)
	case errors.As(err, &ne) && ne.Timeout():
		t.Errorf("the server left the connection of a timed-out body open for %s%s", within, drainHint)
	case err == nil:
		t.Errorf("reading a connection the server should have closed returned nothing and no error")
	}
}

// trickler writes data a byte at a time, one byte per tick, until it is
// done, stopped, or a write fails.
type trickler struct {
	started chan struct{} // closed once the first byte is written
	done    chan struct{}
	stopc   chan struct{}
	once    sync.Once
	sent    int // read after done
}

func trickle(w io.Writer, data []byte, every time.Duration) *trickler {
	tr := &trickler{started: make(chan struct{}), done: make(chan struct{}), stopc: make(chan struct{})}
	go func() {
		defer close(tr.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := range data {
			if _, err := w.Write(data[i : i+1]); err != nil {
				return
			}
			tr.sent++
			if i == 0 {
				close(tr.started)
			}
			select {
			case <-tr.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return tr
}

// waitStarted waits for the first byte to be out.
func (tr *trickler) waitStarted(t testing.TB) {
	t.Helper()
	select {
	case <-tr.started:
	case <-tr.done:
		t.Fatal("the trickled body could not be sent")
	}
}

func (tr *trickler) stop() {
	tr.once.Do(func() { close(tr.stopc) })
	<-tr.done
}

// stagingEntries is what the data directory's staging/ holds.
func stagingEntries(t testing.TB, ts *testServer) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(ts.cfg.dataDir, "staging"))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// drainHint is what to suspect when a client that stops sending its body
// gets no answer: once a handler has answered without reading the whole
// body, net/http reads up to 256 KiB more of it before it sends the
// response, and again as it closes the request. Unless a read deadline
// still holds then, the client's pace rules. (The server as these tests
// were first written lifted the deadline after a timed-out body, and set
// none for bodies no handler reads.)
const drainHint = "; is net/http reading the rest of the body, with no read deadline, before it answers?"

// slowBodyConfig makes bodies time out quickly: 300 ms, then a second per
// KiB.
func slowBodyConfig(c *runConfig) {
	c.bodyTimeout = 300 * time.Millisecond
	c.minBodyRate = 1024
}

const trickleEvery = 50 * time.Millisecond

func TestSlowJSONBodyGets408LongBeforeItEnds(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"), slowBodyConfig)
	// 10 KiB: the server allows it 300 ms and then 10 s, if it came at the
	// slowest pace allowed; trickled in a byte per 50 ms, it would take
	// 512 s, and its deadline moves by a millisecond per byte that comes.
	body := []byte(`{"input":"` + strings.Repeat("s", 10<<10-12) + `"}`)
	whole := time.Duration(len(body)) * trickleEvery
	const within = time.Minute // long before the trickle ends, however busy the machine
	conn, br := dialRaw(t, ts, nil)
	fmt.Fprintf(conn, "POST /ap/v1/agent/tasks HTTP/1.1\r\nHost: agentrt\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	start := time.Now()
	tr := trickle(conn, body, trickleEvery)
	defer tr.stop()
	tr.waitStarted(t)

	// Other clients are served meanwhile.
	ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200)
	other := ts.createTask(`{"input":"a client at a normal pace"}`)

	res, err := readRawResponse(conn, br, within)
	if err != nil {
		t.Fatalf("no response to the trickled body within %s (the whole trickle takes %s): %v%s", within, whole, err, drainHint)
	}
	t.Logf("408 after %s; the whole trickle takes %s", time.Since(start).Round(time.Millisecond), whole)
	wantEnvelope(t, res, 408, protocol.ESLOWBODY)
	wantClosed(t, conn, br, 30*time.Second)

	var list protocol.TaskList
	ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200).decode(t, &list)
	if list.Pagination.TotalItems != 1 || list.Tasks[0].TaskID != other.TaskID {
		t.Errorf("tasks = %+v, want only the one from the client at a normal pace", list.Tasks)
	}
}

// multipartHead is the start of a multipart upload of one file, up to its
// bytes, with the boundary "b0undary".
const multipartHead = "--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.bin\"\r\n" +
	"Content-Type: application/octet-stream\r\n\r\n"

// startUpload writes the headers of an upload to taskID declaring
// contentLength bytes of body, and the body's first bytes, prefix.
func startUpload(t testing.TB, conn net.Conn, taskID string, contentLength int, prefix string) {
	t.Helper()
	_, err := fmt.Fprintf(conn, "POST /ap/v1/agent/tasks/%s/artifacts HTTP/1.1\r\nHost: agentrt\r\n"+
		"Content-Type: multipart/form-data; boundary=b0undary\r\nContent-Length: %d\r\n\r\n%s", taskID, contentLength, prefix)
	if err != nil {
		t.Fatal(err)
	}
}

func TestSlowUploadGets408AndLeavesNothingInStaging(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"), slowBodyConfig)
	task := ts.createTask(`{}`)
	// A burst, then a byte per 50 ms. The pace is an average: the burst
	// buys the upload three seconds, so that it is seen being received
	// however busy the machine; the trickle after it falls behind the
	// slowest pace allowed, and the upload is cut off.
	const burst = 3 << 10
	file := strings.Repeat("u", 10<<10) // the rest: 358 s at a byte per 50 ms
	whole := time.Duration(len(file)-burst) * trickleEvery
	const within = time.Minute // long before the trickle ends, however busy the machine
	body := multipartHead + file + "\r\n--b0undary--\r\n"
	conn, br := dialRaw(t, ts, nil)
	startUpload(t, conn, task.TaskID, len(body), multipartHead+file[:burst])
	start := time.Now()
	tr := trickle(conn, []byte(file[burst:]), trickleEvery)
	defer tr.stop()
	tr.waitStarted(t)

	eventually(t, within, "the slow upload being received", func() bool { return stagingEntries(t, ts) == 1 })
	eventually(t, within, "the slow upload's staging file being removed", func() bool { return stagingEntries(t, ts) == 0 })
	res, err := readRawResponse(conn, br, within)
	if err != nil {
		t.Fatalf("no response to the trickled upload within %s (the whole trickle takes %s): %v%s", within, whole, err, drainHint)
	}
	t.Logf("408 after %s; the whole trickle takes %s", time.Since(start).Round(time.Millisecond), whole)
	wantEnvelope(t, res, 408, protocol.ESLOWBODY)
	wantClosed(t, conn, br, 30*time.Second)
	tr.stop()

	var arts protocol.ArtifactList
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", "", "").want(t, 200).decode(t, &arts)
	if arts.Pagination.TotalItems != 0 {
		t.Errorf("the timed-out upload left artifacts: %+v", arts.Artifacts)
	}
	assertNoStrayFiles(t, ts.cfg.dataDir)
}

// uploadFrom sends a small upload to taskID from the loopback address
// local (nil: any). With expectContinue, the client sends "Expect:
// 100-continue" and its body only if the server asks for it.
func uploadFrom(t testing.TB, ts *testServer, local net.IP, taskID string, expectContinue bool) (*response, bool) {
	t.Helper()
	ct, body := multipartBody(t, part{name: "file", fileName: "small.txt", value: "a small file"})
	sent := &readCounter{r: body}
	tr := &http.Transport{ExpectContinueTimeout: time.Minute}
	if local != nil {
		tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: local}}).DialContext
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest("POST", ts.URL+"/ap/v1/agent/tasks/"+taskID+"/artifacts", sent)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(body.Len())
	req.Header.Set("Content-Type", ct)
	if expectContinue {
		req.Header.Set("Expect", "100-continue")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := (&http.Client{Transport: tr}).Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("upload: read response: %v", err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}, sent.n > 0
}

// readCounter counts what is read through it.
type readCounter struct {
	r  io.Reader
	mu sync.Mutex
	n  int
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.mu.Lock()
	c.n += n
	c.mu.Unlock()
	return n, err
}

func TestUploadsInFlightAreCappedPerClientAndInAll(t *testing.T) {
	// Another loopback address is another client (Linux routes 127/8 to lo).
	other := net.ParseIP("127.0.0.2")
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Logf("no second loopback address (%v): the other-client checks are skipped", err)
		other = nil
	} else {
		ln.Close()
	}
	for _, tc := range []struct {
		name              string
		maxUploads        int
		perClient         int
		message           string
		otherClientStatus int
	}{
		{"two per client", 64, 2, "from your address", 200},
		{"two in all", 2, -1, "the most it takes at once", 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const bodyTimeout, minBodyRate = time.Second, 1024
			ts := serve(t, examplePlugin(t, "echo-go"), func(c *runConfig) {
				c.bodyTimeout = bodyTimeout
				c.minBodyRate = minBodyRate
				c.maxUploads = tc.maxUploads
				c.maxUploadsPer = tc.perClient
			})
			task := ts.createTask(`{}`)
			// Two uploads send their headers and a burst of the body, then
			// stall. The pace is an average: the burst buys them stall
			// before they time out, far more than the checks below take,
			// however busy the machine.
			const burst = 4 << 10
			const stall = bodyTimeout + burst*time.Second/minBodyRate
			type held struct {
				conn *net.TCPConn
				br   *bufio.Reader
			}
			var stalled []held
			start := time.Now()
			for range 2 {
				conn, br := dialRaw(t, ts, nil)
				startUpload(t, conn, task.TaskID, 1<<20, multipartHead+strings.Repeat("b", burst))
				stalled = append(stalled, held{conn, br})
			}
			eventually(t, stall, "two uploads being received", func() bool { return stagingEntries(t, ts) == 2 })

			refused := func(t *testing.T, res *response) {
				t.Helper()
				if !wantEnvelope(t, res, 503, protocol.EUNAVAILABLE) {
					return
				}
				if !strings.Contains(string(res.body), tc.message) {
					t.Errorf("message %s does not say %q", res.body, tc.message)
				}
				if ra := res.header.Get("Retry-After"); ra == "" {
					t.Errorf("503 without Retry-After")
				} else if n, err := strconv.Atoi(ra); err != nil || n < 1 {
					t.Errorf("Retry-After %q is not a positive number of seconds", ra)
				}
			}
			// A third upload from the same address is refused before its
			// body is read: a client that waits for "100 Continue" never
			// has to send it.
			res, sent := uploadFrom(t, ts, nil, task.TaskID, true)
			refused(t, res)
			if sent {
				t.Errorf("the refused upload's body was asked for")
			}
			// A client that sends its body at once is refused too.
			res, _ = uploadFrom(t, ts, nil, task.TaskID, false)
			refused(t, res)
			if other != nil {
				res, _ := uploadFrom(t, ts, other, task.TaskID, true)
				if res.status != tc.otherClientStatus {
					t.Errorf("an upload from another address: status %d, want %d; body %s", res.status, tc.otherClientStatus, res.body)
				}
				if res.status == 503 {
					refused(t, res)
				}
			}
			if elapsed := time.Since(start); elapsed >= stall {
				t.Fatalf("the refused uploads took %s, past the stalled ones' timeout; the test proves nothing on so busy a machine", elapsed)
			}

			// The two stalled uploads time out and get their 408 while they
			// still stall; their slots were given back as their handlers
			// returned, before the 408 was written, so an upload is taken
			// at once.
			for i, h := range stalled {
				res, err := readRawResponse(h.conn, h.br, stall+time.Minute)
				if err != nil {
					t.Fatalf("stalled upload %d: no response: %v%s", i, err, drainHint)
				}
				wantEnvelope(t, res, 408, protocol.ESLOWBODY)
			}
			if res, _ := uploadFrom(t, ts, nil, task.TaskID, true); res.status != 200 {
				t.Errorf("an upload after the stalled ones timed out: status %d; body %s", res.status, res.body)
			}
			eventually(t, 5*time.Second, "staging being emptied", func() bool { return stagingEntries(t, ts) == 0 })
			if logs := ts.log.String(); strings.Contains(logs, "level=ERROR") {
				t.Errorf("refused and timed-out uploads were logged as errors:\n%s", errorLines(logs))
			}
		})
	}
}

func TestARequestBodyThatNeverComesIsAnsweredAndClosed(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"), slowBodyConfig)
	task := ts.createTask(`{}`)
	// Each request declares a body 100 bytes longer than what it sends.
	// Whatever the route does with the body (reads it and times out,
	// answers without reading it, or reads part of it and answers), the
	// client gets its answer and the connection is closed: it cannot hold
	// a connection and a goroutine for longer than the body timeout.
	multipart := "multipart/form-data; boundary=b0undary"
	for _, tc := range []struct {
		name, method, path, contentType string
		status                          int
		sent                            string // what of the body is sent
	}{
		{"upload refused before its body: not multipart", "POST", "/ap/v1/agent/tasks/" + task.TaskID + "/artifacts", "text/plain", 422, ""},
		{"upload refused after its first bytes: a bad file name", "POST", "/ap/v1/agent/tasks/" + task.TaskID + "/artifacts", multipart, 422,
			"--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"..\"\r\n\r\n"},
		{"a whole upload whose epilogue never comes", "POST", "/ap/v1/agent/tasks/" + task.TaskID + "/artifacts", multipart, 408,
			"--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nhello\r\n--b0undary--\r\n"},
		{"create task", "POST", "/ap/v1/agent/tasks", "application/json", 408, ""},
		{"execute step", "POST", "/ap/v1/agent/tasks/" + task.TaskID + "/steps", "application/json", 408, ""},
		{"upload", "POST", "/ap/v1/agent/tasks/" + task.TaskID + "/artifacts", multipart, 408, ""},
		{"upload to an unknown task", "POST", "/ap/v1/agent/tasks/" + uuid.NewString() + "/artifacts", multipart, 404, ""},
		{"list tasks with a body", "GET", "/ap/v1/agent/tasks", "application/json", 200, ""},
		{"wrong method with a body", "PUT", "/ap/v1/agent/tasks", "application/json", 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, br := dialRaw(t, ts, nil)
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: agentrt\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
				tc.method, tc.path, tc.contentType, len(tc.sent)+100, tc.sent)
			// The body timeout is 300 ms (and a second of slack): the
			// wait is bounded far beyond, not measured.
			res, err := readRawResponse(conn, br, 30*time.Second)
			if err != nil {
				t.Fatalf("no response within 30 s (the body timeout is 300 ms): %v%s", err, drainHint)
			}
			if res.status != tc.status {
				t.Errorf("status %d, want %d; body %s", res.status, tc.status, res.body)
			}
			if res.status >= 400 {
				wantJSONError(t, res, "")
			}
			wantClosed(t, conn, br, 30*time.Second)
		})
	}
}

func TestUploadAtAGoodPaceIsNotCutOffByTheBodyTimeout(t *testing.T) {
	const bodyTimeout = time.Second
	ts := serve(t, examplePlugin(t, "echo-go"), func(c *runConfig) {
		c.bodyTimeout = bodyTimeout
		c.minBodyRate = 64 << 10
	})
	task := ts.createTask(`{}`)
	data := make([]byte, 3<<20)
	rand.Read(data)
	// 1 MiB/s in 64 KiB steps: sixteen times the slowest pace allowed, and
	// three seconds in all, three times the body timeout.
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	ct := mw.FormDataContentType()
	go func() {
		fw, err := mw.CreateFormFile("file", "paced.bin")
		tick := time.NewTicker(time.Second / 16)
		defer tick.Stop()
		for off := 0; err == nil && off < len(data); off += 64 << 10 {
			<-tick.C
			_, err = fw.Write(data[off : off+64<<10])
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	start := time.Now()
	res := doRequest(t, ts.URL, "POST", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", ct, pr)
	elapsed := time.Since(start)
	res.want(t, 200)
	if elapsed < 2*bodyTimeout {
		t.Fatalf("the paced upload took %s, not the 3 s it should; the test proves nothing", elapsed)
	}
	var art protocol.Artifact
	res.decode(t, &art)
	dl := ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts/"+art.ArtifactID, "", "").want(t, 200)
	if !bytes.Equal(dl.body, data) {
		t.Errorf("downloaded %d bytes that differ from the %d uploaded", len(dl.body), len(data))
	}
	t.Logf("%d MiB uploaded in %s with a %s body timeout", len(data)>>20, elapsed.Round(time.Millisecond), bodyTimeout)
}
