package protocol_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// The artifact-management RFC in the domain: URI artifacts, where they
// come from, and the handlers that take and serve them, pinned against
// protocoltest.Store and protocoltest.Plugin.

func newAgentWithSchemes(t *testing.T, s *protocoltest.Store, p *protocoltest.Plugin, schemes protocol.ArtifactSchemes) *protocol.Agent {
	t.Helper()
	return protocol.NewAgent(s, &protocol.Build{Plugin: p, ID: "build-1", Limits: protocol.DefaultLimits, Schemes: schemes},
		protocol.AgentConfig{Name: "test"})
}

// uploadURI uploads a URI artifact.
func uploadURI(a *protocol.Agent, taskID, uri, name string) (*protocol.Artifact, error) {
	up, err := a.NewUpload(context.Background(), taskID)
	if err != nil {
		return nil, err
	}
	defer up.Discard()
	return up.CommitURI(context.Background(), uri, name, "links")
}

// inputArtifact is the artifact of a handler's input.
func inputArtifact(t *testing.T, call *protocol.Call) map[string]any {
	t.Helper()
	var in struct {
		Artifact map[string]any `json:"artifact"`
	}
	if err := json.Unmarshal(call.Input(), &in); err != nil {
		t.Fatal(err)
	}
	return in.Artifact
}

func TestAURIUploadIsRecordedAsAReferenceWithNoBytes(t *testing.T) {
	s := protocoltest.NewStore()
	var seen map[string]any
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerArtifact: func(ctx context.Context, call *protocol.Call) (int32, error) {
		seen = inputArtifact(t, call)
		return 0, nil
	}})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	art, err := uploadURI(a, task.TaskID, "HTTPS://example.com/wiki/Caf%C3%A9?x=1", "")
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.Artifact{ArtifactID: art.ArtifactID, FileName: "Café", RelativePath: "links",
		URI: "https://example.com/wiki/Caf%C3%A9?x=1", TaskID: task.TaskID, CreatedAt: art.CreatedAt}
	if *art != want || art.Source() != protocol.SourceInput {
		t.Errorf("artifact %+v, want %+v", *art, want)
	}
	// Nothing staged, nothing placed in the workspace: agentrt holds no
	// bytes of it, and fetched none.
	if len(s.Placed) != 0 || len(s.Staged) != 0 || len(s.Recorded) != 0 || s.Discarded != 0 {
		t.Errorf("placed %d, staged %d, recorded %d, discarded %d; want nothing", len(s.Placed), len(s.Staged), len(s.Recorded), s.Discarded)
	}
	// The artifact handler saw the URI, and no workspace path.
	if seen["uri"] != want.URI || seen["workspace_path"] != nil {
		t.Errorf("the handler saw %v", seen)
	}
	got, _ := s.GetTask(context.Background(), task.TaskID)
	if len(got.Artifacts) != 1 || got.Artifacts[0].URI != want.URI {
		t.Errorf("recorded %+v", got.Artifacts)
	}
	// As clients see it: uri, source, and a null step_id.
	b, _ := protocol.MarshalJSON(art)
	var v map[string]any
	json.Unmarshal(b, &v)
	if v["uri"] != want.URI || v["source"] != "input" || v["step_id"] != nil || v["agent_created"] != false {
		t.Errorf("the artifact serves as %s", b)
	}
	if _, ok := v["step_id"]; !ok {
		t.Errorf("step_id is absent, want null: %s", b)
	}
}

func TestUploadsAreHeldToTheAgentsInputSchemes(t *testing.T) {
	s := protocoltest.NewStore()
	a := newAgentWithSchemes(t, s, protocoltest.NewPlugin(nil), protocol.ArtifactSchemes{Input: []string{"s3"}})
	task := mustCreateTask(t, a)
	if _, err := uploadURI(a, task.TaskID, "s3://bucket/key", ""); err != nil {
		t.Fatalf("an s3 URI: %v", err)
	}
	_, err := uploadURI(a, task.TaskID, "https://example.com/x", "")
	wantCode(t, "an https URI", err, protocol.EUNPROCESSABLE)
	if !strings.Contains(err.Error(), "does not accept https URIs (its input schemes: s3)") {
		t.Errorf("refusal: %v", err)
	}
	_, err = upload(a, task.TaskID, "a.txt", "bytes")
	wantCode(t, "a file", err, protocol.EUNPROCESSABLE)
	if !strings.Contains(err.Error(), "takes no uploaded files") {
		t.Errorf("refusal: %v", err)
	}
	got, _ := s.GetTask(context.Background(), task.TaskID)
	if len(got.Artifacts) != 1 || len(s.Staged) != 0 {
		t.Errorf("refused uploads left %d artifacts, %d staged", len(got.Artifacts), len(s.Staged))
	}
	// The default takes bytes and web URIs, and nothing else.
	d := newAgent(t, protocoltest.NewStore(), protocoltest.NewPlugin(nil), protocol.DefaultLimits)
	schemes, err := d.ArtifactSchemes()
	if err != nil || strings.Join(schemes.Input, ",") != "file,http,https" || strings.Join(schemes.Output, ",") != "file,http,https" {
		t.Errorf("default schemes %+v, %v", schemes, err)
	}
}

func TestTheArtifactHandlerMayReplaceAURIUpload(t *testing.T) {
	for name, tc := range map[string]struct {
		result   string
		files    map[string]string
		limit    int64 // the upload limit, if set
		code     string
		wantURI  string
		wantPath string
		wantData string
	}{
		"another URI":             {result: `{"replace":{"uri":"https://b.example.com/r.pdf"}}`, wantURI: "https://b.example.com/r.pdf"},
		"a workspace file":        {result: `{"replace":{"workspace_path":"./in//r.pdf"}}`, files: map[string]string{"in/r.pdf": "%PDF"}, wantPath: "in/r.pdf", wantData: "%PDF"},
		"a file at the root":      {result: `{"replace":{"workspace_path":"r.pdf"}}`, files: map[string]string{"r.pdf": "x"}, wantPath: "r.pdf", wantData: "x"},
		"a URI it does not take":  {result: `{"replace":{"uri":"ftp://b/r.pdf"}}`, code: protocol.EPLUGIN},
		"a URI that is refused":   {result: `{"replace":{"uri":"https://user:pw@b/r.pdf"}}`, code: protocol.EPLUGIN},
		"no such file":            {result: `{"replace":{"workspace_path":"gone.pdf"}}`, code: protocol.EPLUGIN},
		"a path out of bounds":    {result: `{"replace":{"workspace_path":"../x"}}`, code: protocol.EPLUGIN},
		"both":                    {result: `{"replace":{"uri":"https://b/x","workspace_path":"r.pdf"}}`, files: map[string]string{"r.pdf": "x"}, code: protocol.EPLUGIN},
		"neither":                 {result: `{"replace":{}}`, code: protocol.EPLUGIN},
		"over the upload limit":   {result: `{"replace":{"workspace_path":"big"}}`, files: map[string]string{"big": "12345"}, limit: 4, code: protocol.EPLUGIN},
		"accepted as it is":       {result: `{}`, wantURI: "s3://bucket/r.pdf"},
		"rejected, not replaced":  {result: `{"reject":"no thanks","replace":{"uri":"https://b/x"}}`, code: protocol.EREJECTED},
		"failed, with a replacer": {result: `{"error":"boom","replace":{"uri":"https://b/x"}}`, code: protocol.EPLUGIN},
	} {
		t.Run(name, func(t *testing.T) {
			s := protocoltest.NewStore()
			p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerArtifact: setResult(tc.result)})
			limits := protocol.DefaultLimits
			if tc.limit > 0 {
				limits.MaxUploadBytes = tc.limit
			}
			a := protocol.NewAgent(s, &protocol.Build{Plugin: p, ID: "b", Limits: limits,
				Schemes: protocol.ArtifactSchemes{Input: []string{"file", "s3", "https"}}}, protocol.AgentConfig{})
			task := mustCreateTask(t, a)
			ws := s.Workspace(task.TaskID, protocol.WorkspaceQuota{Bytes: 100, Entries: 100})
			for name, data := range tc.files {
				ws.Write(context.Background(), name, []byte(data))
			}
			art, err := uploadURI(a, task.TaskID, "s3://bucket/r.pdf", "")
			wantCode(t, "the upload", err, tc.code)
			got, _ := s.GetTask(context.Background(), task.TaskID)
			if tc.code != "" {
				if len(got.Artifacts) != 0 || len(s.Staged) != 0 {
					t.Errorf("a refused replacement left %d artifacts, %d staged", len(got.Artifacts), len(s.Staged))
				}
				return
			}
			if art.URI != tc.wantURI || art.WorkspacePath() != tc.wantPath && tc.wantPath != "" || art.AgentCreated {
				t.Errorf("artifact %+v, want uri %q, path %q, an input", *art, tc.wantURI, tc.wantPath)
			}
			if len(got.Artifacts) != 1 || got.Artifacts[0] != *art {
				t.Errorf("recorded %+v, answered %+v", got.Artifacts, *art)
			}
			if b, ok := s.Recorded[art.ArtifactID]; tc.wantPath != "" && (!ok || string(b) != tc.wantData || art.Size != int64(len(tc.wantData)) || art.SHA256 == "") {
				t.Errorf("recorded bytes %q (%v), size %d, sha256 %q; want %q", b, ok, art.Size, art.SHA256, tc.wantData)
			}
		})
	}
	// An uploaded file is not replaced: the handler fails.
	s := protocoltest.NewStore()
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerArtifact: setResult(`{"replace":{"uri":"https://b/x"}}`)}), protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	_, err := upload(a, task.TaskID, "a.txt", "x")
	wantCode(t, "replacing a file", err, protocol.EPLUGIN)
	if !strings.Contains(err.Error(), "only URI uploads are replaced") || len(s.Placed) != 1 || !s.Placed[0].Rolled {
		t.Errorf("%v; placed %d", err, len(s.Placed))
	}
}

func TestPluginsCreateURIArtifactsOfTheirOutputSchemes(t *testing.T) {
	var errs []error
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		for _, spec := range []protocol.ArtifactSpec{
			{URI: "s3://bucket/out/report.pdf"},
			{URI: "s3://bucket/x", FileName: "named.pdf", RelativePath: "links"},
			{URI: "https://example.com/page"},                   // not an output scheme
			{URI: "s3://bucket/y", WorkspacePath: "a.txt"},      // a URI has no bytes
			{URI: "file:///etc/passwd"},                         // never a URI
			{URI: "s3://bucket/z", FileName: "a/b"},             // names are names
			{FileName: "bytes.txt"},                             // bytes: not an output scheme either
			{URI: "s3://bucket/" + strings.Repeat("a", 5000)},   // too long
			{URI: "s3://bucket/\r\nLocation: https://evil.com"}, // a header's end
		} {
			data := []byte(nil)
			if spec.WorkspacePath != "" {
				data = nil
			}
			_, err := call.CreateArtifact(ctx, spec, data)
			errs = append(errs, err)
		}
		return 0, call.SetResult([]byte(`{}`))
	}})
	s := protocoltest.NewStore()
	a := newAgentWithSchemes(t, s, p, protocol.ArtifactSchemes{Output: []string{"s3"}})
	task := mustCreateTask(t, a)
	st, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	wantCodes := []string{"", "", protocol.EMETHOD, protocol.EUNPROCESSABLE, protocol.EUNPROCESSABLE, protocol.EBADPATH,
		protocol.EMETHOD, protocol.EUNPROCESSABLE, protocol.EUNPROCESSABLE}
	for i, err := range errs {
		if protocol.ErrorCode(err) != wantCodes[i] {
			t.Errorf("artifact %d: %v, want code %q", i, err, wantCodes[i])
		}
	}
	if len(st.Artifacts) != 2 {
		t.Fatalf("the step made %+v", st.Artifacts)
	}
	first, second := st.Artifacts[0], st.Artifacts[1]
	if first.URI != "s3://bucket/out/report.pdf" || first.FileName != "report.pdf" || first.StepID != st.StepID || !first.AgentCreated ||
		first.Source() != protocol.SourceOutput || first.Size != 0 || first.SHA256 != "" {
		t.Errorf("first %+v", first)
	}
	if second.FileName != "named.pdf" || second.RelativePath != "links" {
		t.Errorf("second %+v", second)
	}
	if len(s.Staged) != 0 || len(s.Recorded) != 0 {
		t.Errorf("URI artifacts staged %d, recorded %d bytes", len(s.Staged), len(s.Recorded))
	}
}

// downloadBuffer is a client taking a download: it fails once it holds
// failAfter bytes, when that is set.
type downloadBuffer struct {
	bytes.Buffer
	failAfter int
	writes    int
}

func (d *downloadBuffer) WriteDownload(ctx context.Context, a *protocol.Artifact, p []byte) (int, error) {
	d.writes++
	if d.failAfter > 0 && d.Len()+len(p) > d.failAfter {
		n := d.failAfter - d.Len()
		d.Write(p[:n])
		return n, errors.New("connection reset by peer")
	}
	return d.Write(p)
}

func TestTheDownloadHandlerServesOrLeavesTheDownloadToTheHost(t *testing.T) {
	write := func(parts ...string) protocoltest.Handler {
		return func(ctx context.Context, call *protocol.Call) (int32, error) {
			for _, p := range parts {
				if err := call.DownloadWrite(ctx, []byte(p)); err != nil {
					// As a plugin does: the host's refusal is its error.
					b, _ := json.Marshal(map[string]string{"error": err.Error()})
					return 1, call.SetResult(b)
				}
			}
			return 0, call.SetResult([]byte(`{}`))
		}
	}
	for name, tc := range map[string]struct {
		handler  protocoltest.Handler
		served   bool
		body     string
		code     string
		redirect string
	}{
		"writes":                {handler: write("# out", ".md"), served: true, body: "# out.md"},
		"writes nothing":        {handler: write(), served: true},
		"leaves it to the host": {handler: setResult(`{"default":true}`), body: "stored bytes"},
		"fails before writing":  {handler: setResult(`{"error":"renderer crashed"}`), code: protocol.EPLUGIN},
		"fails after writing": {handler: func(ctx context.Context, call *protocol.Call) (int32, error) {
			call.DownloadWrite(ctx, []byte("half"))
			return 1, nil
		}, code: protocol.EPLUGIN, body: "half"},
		"writes, then asks for the host": {handler: func(ctx context.Context, call *protocol.Call) (int32, error) {
			call.DownloadWrite(ctx, []byte("x"))
			return 0, call.SetResult([]byte(`{"default":true}`))
		}, code: protocol.EPLUGIN, body: "x"},
		"times out": {handler: func(context.Context, *protocol.Call) (int32, error) {
			return 0, protocol.NewPluginFailure(protocol.CauseTimeout, "too slow")
		}, code: protocol.ETIMEOUT},
		"past the artifact limit, refused": {handler: write("12345678", "9"), code: protocol.ETOOLARGE, body: "12345678"},
	} {
		t.Run(name, func(t *testing.T) {
			s := protocoltest.NewStore()
			p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{
				protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
					_, err := call.CreateArtifact(ctx, protocol.ArtifactSpec{FileName: "out.md"}, []byte("stored bytes"))
					return 0, err
				},
				protocol.HandlerDownload: tc.handler,
			})
			limits := protocol.DefaultLimits
			limits.MaxArtifactBytes = 8
			limits.MaxUploadBytes = 100
			a := newAgent(t, s, p, protocol.DefaultLimits)
			task := mustCreateTask(t, a)
			st, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
			if err != nil {
				t.Fatal(err)
			}
			a.Serve(&protocol.Build{Plugin: p, ID: "b", Limits: limits}) // an 8-byte download limit from now on
			var w downloadBuffer
			d, err := a.DownloadArtifact(context.Background(), task.TaskID, st.Artifacts[0].ArtifactID, &w)
			if tc.code == protocol.ETOOLARGE {
				// The host refused the write; the handler failed with it.
				wantCode(t, "the download", err, protocol.EPLUGIN)
				if !strings.Contains(err.Error(), "more than 8 bytes") {
					t.Errorf("failure %v", err)
				}
			} else {
				wantCode(t, "the download", err, tc.code)
			}
			if err == nil && d.Served != tc.served {
				t.Errorf("served = %v, want %v", d.Served, tc.served)
			}
			body := w.String()
			if err == nil && !d.Served {
				b, _ := io.ReadAll(d.Bytes)
				d.Bytes.Close()
				body = string(b)
			}
			if body != tc.body {
				t.Errorf("body %q, want %q", body, tc.body)
			}
			// The handler's time counts against the task's budget.
			got, _ := s.GetTask(context.Background(), task.TaskID)
			if got.PluginTime != 2*p.Elapsed {
				t.Errorf("plugin time %s, want two calls' %s", got.PluginTime, 2*p.Elapsed)
			}
		})
	}
}

func TestADownloadHandlerChangesNothingAndStopsWhenItsClientDoes(t *testing.T) {
	var errs []error
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerDownload: func(ctx context.Context, call *protocol.Call) (int32, error) {
		errs = append(errs,
			call.WorkspaceWrite(ctx, "a.txt", []byte("x")),
			call.WorkspaceDelete(ctx, "b.txt"),
			func() error {
				_, err := call.CreateArtifact(ctx, protocol.ArtifactSpec{FileName: "c.txt"}, nil)
				return err
			}(),
		)
		for range 3 {
			errs = append(errs, call.DownloadWrite(ctx, []byte("0123456789")))
		}
		return 0, call.SetResult([]byte(`{}`))
	}})
	a := newAgentWithSchemes(t, s, p, protocol.ArtifactSchemes{Input: []string{"s3"}})
	task := mustCreateTask(t, a)
	s.Workspace(task.TaskID, protocol.WorkspaceQuota{Bytes: 100, Entries: 10}).Write(context.Background(), "b.txt", []byte("b"))
	art, err := uploadURI(a, task.TaskID, "s3://b/k", "")
	if err != nil {
		t.Fatal(err)
	}
	w := &downloadBuffer{failAfter: 15}
	_, err = a.DownloadArtifact(context.Background(), task.TaskID, art.ArtifactID, w)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	for i, want := range []string{protocol.EMETHOD, protocol.EMETHOD, protocol.EMETHOD, "", protocol.EABORTED, protocol.EABORTED} {
		if protocol.ErrorCode(errs[i]) != want {
			t.Errorf("call %d: %v, want code %q", i, errs[i], want)
		}
	}
	// Once the client took no more, nothing more is sent to it.
	if w.writes != 2 || w.String() != "012345678901234" {
		t.Errorf("%d writes reached the client, %q; want 2, the first 15 bytes", w.writes, w.String())
	}
	if _, ok := s.Files[task.TaskID]["a.txt"]; ok || string(s.Files[task.TaskID]["b.txt"]) != "b" {
		t.Errorf("the download handler changed the workspace: %v", s.Files[task.TaskID])
	}
	got, _ := s.GetTask(context.Background(), task.TaskID)
	if len(got.Artifacts) != 1 {
		t.Errorf("the download handler created artifacts: %+v", got.Artifacts)
	}
}

func TestWithoutADownloadHandlerTheHostServesBytesRedirectsOrRefuses(t *testing.T) {
	s := protocoltest.NewStore()
	a := newAgentWithSchemes(t, s, protocoltest.NewPlugin(nil), protocol.ArtifactSchemes{Input: []string{"file", "http", "s3"}})
	task := mustCreateTask(t, a)
	file, err := upload(a, task.TaskID, "a.txt", "bytes")
	if err != nil {
		t.Fatal(err)
	}
	web, _ := uploadURI(a, task.TaskID, "http://example.com/a", "")
	s3, _ := uploadURI(a, task.TaskID, "s3://bucket/k", "")
	for _, gone := range []bool{false, true} {
		if gone {
			<-a.Serve(nil) // a gone agent's artifacts are still served
		}
		d, err := a.DownloadArtifact(context.Background(), task.TaskID, file.ArtifactID, &downloadBuffer{})
		if err != nil || d.Bytes == nil || d.Artifact.SHA256 != file.SHA256 {
			t.Fatalf("bytes (gone %v): %+v, %v", gone, d, err)
		}
		b, _ := io.ReadAll(d.Bytes)
		d.Bytes.Close()
		if string(b) != "bytes" {
			t.Errorf("served %q", b)
		}
		d, err = a.DownloadArtifact(context.Background(), task.TaskID, web.ArtifactID, &downloadBuffer{})
		if err != nil || d.Redirect != "http://example.com/a" || d.Bytes != nil {
			t.Errorf("http (gone %v): %+v, %v; want a redirect", gone, d, err)
		}
		_, err = a.DownloadArtifact(context.Background(), task.TaskID, s3.ArtifactID, &downloadBuffer{})
		wantCode(t, "s3", err, protocol.EREFERENCE)
		if !strings.Contains(err.Error(), "s3://bucket/k") {
			t.Errorf("s3: %v", err)
		}
	}
}
