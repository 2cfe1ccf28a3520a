package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/tetratelabs/wazero"
)

// The artifact-management RFC end to end: uploads of a file or a URI, the
// scheme listing, where each artifact came from, the artifact and
// download handlers of a real plugin, conditional and range downloads,
// and redirects to URI artifacts.

// urisPlugin is testdata/plugins/uris, built.
func urisPlugin(t testing.TB) string { return goPlugin(t, "testdata/plugins/uris") }

// urisManifest lets the uris plugin take memo: URIs and make view: and s3:
// ones, beside bytes and web URIs.
const urisManifest = `{"capabilities": {"artifact_schemes": {
	"input": ["file", "http", "https", "memo"], "output": ["file", "https", "view", "s3"]}}}`

// serveURIs serves the uris plugin with its manifest, as agent "uris" of a
// fleet and at the root.
func serveURIs(t *testing.T, opts ...func(*runConfig)) *testServer {
	t.Helper()
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "uris.wasm"), pluginBytes(t, urisPlugin(t)))
	putFile(t, filepath.Join(dir, "uris.json"), []byte(urisManifest))
	return serveDir(t, dir, opts...)
}

// noRedirects is a client that reports redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// get sends a GET with headers (name, value, name, value...), following
// no redirect.
func (ts *testServer) get(path string, headers ...string) *response {
	ts.t.Helper()
	req, err := http.NewRequest("GET", ts.URL+path, nil)
	if err != nil {
		ts.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		ts.t.Fatalf("GET %s: read body: %v", path, err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}
}

func downloadPath(taskID, artifactID string) string {
	return "/ap/v1/agent/tasks/" + taskID + "/artifacts/" + artifactID
}

// artifactJSON is an artifact as clients read it.
type artifactJSON struct {
	ArtifactID   string  `json:"artifact_id"`
	AgentCreated bool    `json:"agent_created"`
	FileName     string  `json:"file_name"`
	RelativePath string  `json:"relative_path"`
	URI          *string `json:"uri"`
	Source       string  `json:"source"`
	StepID       *string `json:"step_id"`
}

func (r *response) artifact(t testing.TB) artifactJSON {
	t.Helper()
	var a artifactJSON
	r.want(t, 200).decode(t, &a)
	return a
}

func TestAnUploadIsExactlyOneOfAFileAndAURI(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`).TaskID
	file := part{name: "file", fileName: "a.txt", value: "alpha"}
	uri := part{name: "uri", value: "https://example.com/docs/report.pdf?v=2"}

	a := ts.upload(task, file).artifact(t)
	if a.URI != nil || a.FileName != "a.txt" || a.Source != "input" || a.StepID != nil || a.AgentCreated {
		t.Errorf("a file: %+v", a)
	}
	a = ts.upload(task, uri, part{name: "relative_path", value: "refs"}).artifact(t)
	if a.URI == nil || *a.URI != "https://example.com/docs/report.pdf?v=2" || a.FileName != "report.pdf" || a.RelativePath != "refs" || a.Source != "input" {
		t.Errorf("a URI: %+v", a)
	}
	a = ts.upload(task, part{name: "file_name", value: "The Report.pdf"}, uri).artifact(t)
	if a.FileName != "The Report.pdf" {
		t.Errorf("a URI named by file_name: %+v", a)
	}
	for _, tc := range []struct {
		name  string
		parts []part
		want  string
	}{
		{"both, file first", []part{file, uri}, `both a "file" part and a "uri" field`},
		{"both, uri first", []part{uri, file}, `both a "file" part and a "uri" field`},
		{"neither", []part{{name: "relative_path", value: "x"}}, `no "file" part and no "uri" field`},
		{"two URIs", []part{uri, uri}, `more than one "uri" field`},
		{"an empty URI", []part{{name: "uri", value: ""}}, "the URI is empty"},
		{"a URI too long", []part{{name: "uri", value: "https://example.com/" + strings.Repeat("a", protocol.MaxURIBytes)}}, "longer than 4096 bytes"},
		{"a scheme the agent does not take", []part{{name: "uri", value: "s3://bucket/key"}}, "does not accept s3 URIs (its input schemes: file, http, https)"},
		{"file:", []part{{name: "uri", value: "file:///etc/passwd"}}, "upload the file"},
		{"a header in a URI", []part{{name: "uri", value: "https://example.com/\r\nLocation: https://evil.example"}}, "control character"},
		{"credentials", []part{{name: "uri", value: "https://me:secret@example.com/"}}, "user information"},
		{"file_name with a file", []part{{name: "file_name", value: "x.txt"}, file}, `"file_name" field goes with a "uri"`},
		{"a bad file_name", []part{{name: "file_name", value: ".."}, uri}, "not a usable name"},
		// A field given twice: Go's FormValue and most frameworks read the
		// first, so reading either would differ from someone.
		{"two file_names", []part{{name: "file_name", value: "a.pdf"}, uri, {name: "file_name", value: "b.pdf"}}, `more than one "file_name" field`},
		{"two relative_paths, a file", []part{{name: "relative_path", value: "a"}, file, {name: "relative_path", value: "b"}}, `more than one "relative_path" field`},
		{"two relative_paths, a URI", []part{{name: "relative_path", value: "a"}, {name: "relative_path", value: "b"}, uri}, `more than one "relative_path" field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.upload(task, tc.parts...).wantError(t, 422, tc.want)
		})
	}
	var list struct{ Artifacts []artifactJSON }
	ts.do("GET", "/ap/v1/agent/tasks/"+task+"/artifacts", "", "").want(t, 200).decode(t, &list)
	if len(list.Artifacts) != 3 {
		t.Errorf("the task holds %d artifacts after 3 uploads and %d refusals", len(list.Artifacts), 15)
	}
	assertNoStrayFiles(t, ts.cfg.dataDir)
	// A URI artifact is not in the workspace.
	entries, _ := os.ReadDir(filepath.Join(ts.cfg.dataDir, "workspaces", task, "files"))
	if len(entries) != 1 || entries[0].Name() != "a.txt" {
		t.Errorf("the workspace holds %v, want only a.txt", entries)
	}
}

func TestTheSchemeListingIsTheAgentsAtTheRootAndUnderItsName(t *testing.T) {
	ts := serveURIs(t)
	want := `{"input":["file","http","https","memo"],"output":["file","https","view","s3"]}`
	for _, path := range []string{"/ap/v1/agent/artifact-schemes", "/agents/uris/ap/v1/agent/artifact-schemes"} {
		if got := compactJSON(t, ts.do("GET", path, "", "").want(t, 200).body); got != want {
			t.Errorf("GET %s = %s, want %s", path, got, want)
		}
	}
	info := ts.agentInfo("uris")
	if info.ArtifactSchemes == nil || strings.Join(info.ArtifactSchemes.Output, ",") != "file,https,view,s3" || !strings.Contains(strings.Join(info.Handlers, ","), "download") {
		t.Errorf("GET /agents/uris: schemes %+v, handlers %v", info.ArtifactSchemes, info.Handlers)
	}
	// Without a manifest: bytes and web URIs, either way.
	run := serve(t, examplePlugin(t, "echo-go"))
	if got := compactJSON(t, run.do("GET", "/ap/v1/agent/artifact-schemes", "", "").want(t, 200).body); got != `{"input":["file","http","https"],"output":["file","http","https"]}` {
		t.Errorf("the default schemes: %s", got)
	}
	run.do("GET", "/agents/nobody/ap/v1/agent/artifact-schemes", "", "").wantError(t, 404, "no agent")
}

// A URI artifact with no download handler to serve it is a redirect to
// it, and agentrt fetches nothing, ever.
func TestAURIArtifactIsRedirectedToAndNeverFetched(t *testing.T) {
	var fetched atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		io.WriteString(w, "the origin's bytes")
	}))
	defer origin.Close()
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`).TaskID
	target := origin.URL + "/files/report%20v2.pdf?sig=a%2Fb&x=1#page=3"
	a := ts.upload(task, part{name: "uri", value: target}).artifact(t)
	r := ts.get(downloadPath(task, a.ArtifactID))
	r.want(t, http.StatusTemporaryRedirect)
	if loc := r.header.Get("Location"); loc != target {
		t.Errorf("Location %q, want the URI exactly as recorded: %q", loc, target)
	}
	if rp := r.header.Get("Referrer-Policy"); rp != "no-referrer" {
		t.Errorf("Referrer-Policy %q", rp)
	}
	if v := r.json(t); v["uri"] != target || !strings.Contains(v["message"].(string), "URI artifact") {
		t.Errorf("the redirect's body: %s", r.body)
	}
	// Listing, getting the task, running a step: none of it fetches.
	ts.do("GET", "/ap/v1/agent/tasks/"+task, "", "").want(t, 200)
	ts.step(task, `{"input":"hi"}`)
	if n := fetched.Load(); n != 0 {
		t.Fatalf("agentrt fetched the URI artifact %d times", n)
	}
	// A client that follows redirects reads the origin's bytes.
	res, err := http.Get(ts.URL + downloadPath(task, a.ArtifactID))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "the origin's bytes" || fetched.Load() != 1 {
		t.Errorf("following the redirect read %q (%d fetches)", b, fetched.Load())
	}
}

func TestEveryArtifactSaysWhereItCameFromAndEachStepListsWhatItMade(t *testing.T) {
	ts := serveURIs(t)
	task := ts.createTask(`{"input":"seed"}`)
	if len(task.Artifacts) != 1 {
		t.Fatalf("the task handler made %+v", task.Artifacts)
	}
	upload := ts.upload(task.TaskID, part{name: "file", fileName: "in.txt", value: "input"}).artifact(t)
	link := ts.upload(task.TaskID, part{name: "uri", value: "https://example.com/in"}).artifact(t)
	s1 := ts.step(task.TaskID, `{"input":"make one.txt 1"}`)
	s2 := ts.step(task.TaskID, `{"input":"make two.txt 2"}`)
	s3 := ts.step(task.TaskID, `{"input":"link s3://bucket/out/three.pdf"}`)
	ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{"input":"fail"}`).want(t, http.StatusBadGateway)
	s4 := ts.step(task.TaskID, `{"input":"make four.txt 4"}`)

	var list struct{ Artifacts []artifactJSON }
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts?page_size=100", "", "").want(t, 200).decode(t, &list)
	type origin struct {
		name, source string
		step         string // "" for none
	}
	want := []origin{
		{"seed.txt", "output", ""}, // the task handler's
		{"in.txt", "input", ""}, {"in", "input", ""},
		{"one.txt", "output", s1.StepID}, {"two.txt", "output", s2.StepID}, {"three.pdf", "output", s3.StepID},
		{"four.txt", "output", s4.StepID}, // the failed step's is not there
	}
	if len(list.Artifacts) != len(want) {
		t.Fatalf("the task lists %d artifacts: %+v", len(list.Artifacts), list.Artifacts)
	}
	for i, a := range list.Artifacts {
		step := ""
		if a.StepID != nil {
			step = *a.StepID
		}
		if got := (origin{a.FileName, a.Source, step}); got != want[i] || a.AgentCreated != (a.Source == "output") {
			t.Errorf("artifact %d: %+v (agent_created %v), want %+v", i, got, a.AgentCreated, want[i])
		}
	}
	if upload.Source != "input" || link.URI == nil {
		t.Errorf("uploads answered %+v, %+v", upload, link)
	}
	// Each step lists exactly what it made, however it is read.
	var steps struct{ Steps []protocol.Step }
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps?page_size=100", "", "").want(t, 200).decode(t, &steps)
	if len(steps.Steps) != 5 {
		t.Fatalf("%d steps", len(steps.Steps))
	}
	wantMade := [][]string{{"one.txt"}, {"two.txt"}, {"three.pdf"}, {}, {"four.txt"}}
	for i, st := range steps.Steps {
		var got protocol.Step
		ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID, "", "").want(t, 200).decode(t, &got)
		for _, view := range []protocol.Step{st, got} {
			var names []string
			for _, a := range view.Artifacts {
				names = append(names, a.FileName)
				if a.StepID != st.StepID {
					t.Errorf("step %d lists an artifact of step %q", i, a.StepID)
				}
			}
			if strings.Join(names, ",") != strings.Join(wantMade[i], ",") {
				t.Errorf("step %d lists %v, want %v", i, names, wantMade[i])
			}
		}
	}
	if len(s1.Artifacts) != 1 || s1.Artifacts[0].StepID != s1.StepID {
		t.Errorf("execute-step answered %+v", s1.Artifacts)
	}
}

func TestTheArtifactHandlerAcceptsRejectsAndReplacesURIs(t *testing.T) {
	ts := serveURIs(t)
	task := ts.createTask(`{}`).TaskID
	// http is replaced with https by the plugin.
	a := ts.upload(task, part{name: "uri", value: "http://example.com/a.pdf"}).artifact(t)
	if a.URI == nil || *a.URI != "https://example.com/a.pdf" {
		t.Errorf("replaced with %+v", a)
	}
	ts.upload(task, part{name: "uri", value: "https://reject.example/x"}).wantError(t, 422, "nothing from reject.example")
	// A memo: becomes the workspace file the plugin wrote: bytes, named by
	// its path, with a sha256 of its bytes.
	m := ts.upload(task, part{name: "uri", value: "memo:remember%20the%20milk"}, part{name: "file_name", value: "note"}).artifact(t)
	if m.URI != nil || m.FileName != "note" || m.RelativePath != "memos" || m.Source != "input" {
		t.Errorf("the memo became %+v", m)
	}
	r := ts.get(downloadPath(task, m.ArtifactID)).want(t, 200)
	if string(r.body) != "remember%20the%20milk" || r.header.Get("ETag") != `"`+sha256Hex(r.body)+`"` {
		t.Errorf("the memo downloads as %q, ETag %s", r.body, r.header.Get("ETag"))
	}
	// A file: URI never reaches the plugin.
	ts.upload(task, part{name: "uri", value: "file:///etc/passwd"}).wantError(t, 422, "upload the file")
}

func TestAPluginServesTheDownloadsItChooses(t *testing.T) {
	ts := serveURIs(t)
	task := ts.createTask(`{}`).TaskID
	// view: is the plugin's own scheme: the download is the workspace file
	// as it is now, streamed from the sandbox.
	ts.step(task, `{"input":"write notes/big.txt 5000000"}`)
	view := ts.step(task, `{"input":"view notes/big.txt"}`).Artifacts[0]
	if view.URI != "view:notes%2Fbig.txt" || view.FileName != "big.txt" {
		t.Fatalf("the view artifact: %+v", view)
	}
	r := ts.get(downloadPath(task, view.ArtifactID)).want(t, 200)
	if len(r.body) != 5000000 || string(r.body[:20]) != "0123456789abcdef0123" {
		t.Errorf("the view downloads as %d bytes: %.20q", len(r.body), r.body)
	}
	if r.header.Get("ETag") != "" || r.header.Get("Accept-Ranges") != "none" || r.header.Get("Content-Type") != "application/octet-stream" ||
		!strings.Contains(r.header.Get("Content-Disposition"), `filename="big.txt"`) {
		t.Errorf("a plugin's download is sent with %v", r.header)
	}
	ts.step(task, `{"input":"write notes/big.txt 3"}`)
	if r := ts.get(downloadPath(task, view.ArtifactID)).want(t, 200); string(r.body) != "012" {
		t.Errorf("the view after a change: %q", r.body)
	}
	// Bytes the plugin transforms on the way out.
	up := ts.upload(task, part{name: "file", fileName: "shout.upper", value: "quiet words"}).artifact(t)
	if r := ts.get(downloadPath(task, up.ArtifactID)).want(t, 200); string(r.body) != "QUIET WORDS" {
		t.Errorf("the transformed download: %q", r.body)
	}
	// Left to agentrt: the stored bytes, with their ETag and ranges.
	made := ts.step(task, `{"input":"make plain.txt stored"}`).Artifacts[0]
	r = ts.get(downloadPath(task, made.ArtifactID), "Range", "bytes=1-3").want(t, http.StatusPartialContent)
	if string(r.body) != "tor" || r.header.Get("ETag") != `"`+sha256Hex([]byte("stored"))+`"` {
		t.Errorf("the default download: %q, ETag %s", r.body, r.header.Get("ETag"))
	}
	// An s3: artifact the plugin leaves to agentrt, which serves no s3.
	s3 := ts.step(task, `{"input":"link s3://bucket/k"}`).Artifacts[0]
	ts.get(downloadPath(task, s3.ArtifactID)).wantError(t, http.StatusConflict, "s3://bucket/k")
}

// A download the plugin fails after its first byte was sent ends without
// the end of its body: the connection closes and the client reads an
// unexpected EOF. One it fails before any byte is an ordinary error. The
// server goes on serving either way.
func TestADownloadThatFailsMidStreamIsCutShortAndTheClientCanTell(t *testing.T) {
	ts := serveURIs(t, func(c *runConfig) { c.callTimeout = 2 * time.Second })
	task := ts.createTask(`{}`).TaskID
	mid := ts.upload(task, part{name: "file", fileName: "x.fail-mid", value: "stored"}).artifact(t)
	early := ts.upload(task, part{name: "file", fileName: "x.fail-early", value: "stored"}).artifact(t)
	spin := ts.upload(task, part{name: "file", fileName: "x.spin", value: "stored"}).artifact(t)

	for _, a := range []artifactJSON{mid, spin} {
		res, err := http.Get(ts.URL + downloadPath(task, a.ArtifactID))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: status %d, read %d bytes, %v; want 200 and a body cut short (unexpected EOF)", a.FileName, res.StatusCode, len(b), err)
		}
		if res.TransferEncoding == nil || res.TransferEncoding[0] != "chunked" {
			t.Errorf("%s: sent with %v, want chunked", a.FileName, res.TransferEncoding)
		}
	}
	ts.get(downloadPath(task, early.ArtifactID)).wantError(t, http.StatusBadGateway, "download handler failed: failed before the first byte")
	// The time the spin took counts; the task and the server go on.
	var got protocol.Task
	ts.do("GET", "/ap/v1/agent/tasks/"+task, "", "").want(t, 200).decode(t, &got)
	if r := ts.get(downloadPath(task, ts.step(task, `{"input":"make ok.txt fine"}`).Artifacts[0].ArtifactID)); string(r.body) != "fine" {
		t.Errorf("after the failures: %d %q", r.status, r.body)
	}
	if !strings.Contains(ts.log.String(), "a download the agent served failed after it began") {
		t.Errorf("the server did not log the cut download")
	}
}

// A download handler writing to a client that does not read is stopped
// by the call's time limit, not by the pace answers are held to (here a
// minute before it starts): a host function cannot be interrupted, so the
// write itself ends at the call's deadline.
func TestADownloadToAClientThatDoesNotReadEndsAtTheCallTimeout(t *testing.T) {
	ts := serveURIs(t, func(c *runConfig) { c.callTimeout, c.bodyTimeout = 2*time.Second, time.Minute })
	task := ts.createTask(`{}`).TaskID
	flood := ts.upload(task, part{name: "file", fileName: "x.flood", value: "stored"}).artifact(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", downloadPath(task, flood.ArtifactID))
	// The client reads nothing: the handler's write fails at the call's
	// deadline, and the handler with it (its time is up, or net/http
	// cancels the request once a write failed), long before the minute
	// the pace would allow.
	eventually(t, 30*time.Second, "the flood's end", func() bool {
		return strings.Contains(ts.log.String(), "a download the agent served failed after it began")
	})
}

func TestDownloadsHaveAnETagOfTheirSHA256AndAnswerConditionalAndRangeRequests(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`).TaskID
	data := bytes.Repeat([]byte("0123456789"), 1000)
	a := ts.upload(task, part{name: "file", fileName: "d.bin", value: string(data)}).artifact(t)
	path := downloadPath(task, a.ArtifactID)
	sum := sha256.Sum256(data)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`

	r := ts.get(path).want(t, 200)
	if r.header.Get("ETag") != etag || !bytes.Equal(r.body, data) || r.header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("ETag %q (want %q), %d bytes, Accept-Ranges %q", r.header.Get("ETag"), etag, len(r.body), r.header.Get("Accept-Ranges"))
	}
	if r := ts.get(path, "If-None-Match", etag); r.status != http.StatusNotModified || len(r.body) != 0 || r.header.Get("ETag") != etag {
		t.Errorf("If-None-Match with the ETag: %d, %d bytes, ETag %q; want 304, nothing", r.status, len(r.body), r.header.Get("ETag"))
	}
	if r := ts.get(path, "If-None-Match", `"other", `+etag); r.status != http.StatusNotModified {
		t.Errorf("If-None-Match with a list holding the ETag: %d", r.status)
	}
	if r := ts.get(path, "If-None-Match", `"other"`); r.status != 200 || !bytes.Equal(r.body, data) {
		t.Errorf("If-None-Match with another ETag: %d, %d bytes", r.status, len(r.body))
	}
	r = ts.get(path, "Range", "bytes=10-19")
	if r.status != http.StatusPartialContent || string(r.body) != "0123456789" || r.header.Get("ETag") != etag {
		t.Errorf("Range: %d %q %q", r.status, r.body, r.header.Get("ETag"))
	}
	// If-Range: the range while the ETag holds, the whole otherwise.
	if r := ts.get(path, "Range", "bytes=0-4", "If-Range", etag); r.status != http.StatusPartialContent || string(r.body) != "01234" {
		t.Errorf("If-Range with the ETag: %d %q", r.status, r.body)
	}
	if r := ts.get(path, "Range", "bytes=0-4", "If-Range", `"stale"`); r.status != 200 || len(r.body) != len(data) {
		t.Errorf("If-Range with a stale ETag: %d, %d bytes", r.status, len(r.body))
	}
	ts.get(path, "If-Match", `"stale"`).wantError(t, http.StatusPreconditionFailed, "precondition")
	ts.get(path, "Range", "bytes=999999-").wantError(t, http.StatusRequestedRangeNotSatisfiable, "not satisfiable")
	// A refused request names no ETag of bytes it did not send.
	if r := ts.get(path, "Range", "bytes=999999-"); r.header.Get("ETag") != "" {
		t.Errorf("a 416 carries ETag %q", r.header.Get("ETag"))
	}
}

// An upload over the operator's limit is cut off as it streams: 413 long
// before the client has sent it all, and nothing of it is left anywhere.
func TestAnUploadOverTheLimitIsCutOffMidStreamAndLeavesNothing(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"), func(c *runConfig) { c.limits.MaxUploadBytes = 1 << 20 })
	task := ts.createTask(`{}`).TaskID
	const total = 64 << 20
	var sent atomic.Int64
	pr, pw := io.Pipe()
	const boundary = "b0undary"
	go func() {
		// A multipart body whose file part goes on for 64 MiB, chunked.
		fmt.Fprintf(pw, "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"huge.bin\"\r\n\r\n", boundary)
		chunk := bytes.Repeat([]byte("h"), 64<<10)
		for sent.Load() < total {
			n, err := pw.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		fmt.Fprintf(pw, "\r\n--%s--\r\n", boundary)
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", ts.URL+"/ap/v1/agent/tasks/"+task+"/artifacts", pr)
	req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
	res, err := http.DefaultClient.Do(req)
	pr.CloseWithError(errors.New("the test stops sending"))
	if err != nil {
		t.Fatalf("the upload: %v (sent %d bytes)", err, sent.Load())
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "upload limit of 1048576 bytes") {
		t.Errorf("status %d %s, want 413", res.StatusCode, b)
	}
	if n := sent.Load(); n >= total/2 {
		t.Errorf("the client sent %d of its %d bytes before it was refused", n, total)
	}
	var list struct{ Artifacts []artifactJSON }
	ts.do("GET", "/ap/v1/agent/tasks/"+task+"/artifacts", "", "").want(t, 200).decode(t, &list)
	if len(list.Artifacts) != 0 {
		t.Errorf("the refused upload left %+v", list.Artifacts)
	}
	assertNoStrayFiles(t, ts.cfg.dataDir)
	if _, err := os.Stat(filepath.Join(ts.cfg.dataDir, "workspaces", task, "files", "huge.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused upload is in the workspace: %v", err)
	}
}

// The Go kit imports download_write only for a plugin that registers a
// download handler: the others load on a host without it, as they did.
func TestOnlyAGoPluginWithADownloadHandlerImportsDownloadWrite(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	for plugin, want := range map[string]bool{examplePlugin(t, "echo-go"): false, urisPlugin(t): true} {
		m, err := r.CompileModule(ctx, pluginBytes(t, plugin))
		if err != nil {
			t.Fatal(err)
		}
		imports := false
		for _, f := range m.ImportedFunctions() {
			if mod, name, _ := f.Import(); mod == abi.ImportModule && name == abi.FuncDownloadWrite {
				imports = true
			}
		}
		if imports != want {
			t.Errorf("%s imports download_write: %v, want %v", filepath.Base(plugin), imports, want)
		}
	}
}
