package protocol_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// What the domain holds of fetching a URI artifact: which artifacts may
// be fetched, from which handlers, and where their bytes go. The fetch
// itself (the network, the policy) is the host's; here it is a func.

func TestAURIArtifactIsFetchedIntoTheWorkspaceOnlyWhenItIsAWebURI(t *testing.T) {
	s := protocoltest.NewStore()
	var fetched []string
	get := func(ctx context.Context, uri string) ([]byte, error) {
		fetched = append(fetched, uri)
		if uri == "https://example.com/missing" {
			return nil, errors.New("the server answered 404")
		}
		return []byte("bytes of " + uri), nil
	}
	type attempt struct {
		id, path string
		size     int64
		err      error
	}
	var attempts []attempt
	var ids map[string]string
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		created, err := call.CreateArtifact(ctx, protocol.ArtifactSpec{URI: "https://example.com/made.txt"}, nil)
		if err != nil {
			return 0, err
		}
		ids["made"] = created
		for _, f := range []struct{ id, path string }{
			{ids["web"], "in/report.pdf"}, {ids["made"], "made.txt"}, {ids["s3"], "x"}, {ids["bytes"], "y"},
			{"no-such-artifact", "z"}, {ids["missing"], "m"}, {ids["web"], "../escape"},
		} {
			n, err := call.FetchArtifact(ctx, f.id, f.path, get)
			attempts = append(attempts, attempt{f.id, f.path, n, err})
		}
		return 0, nil
	}})
	a := newAgentWithSchemes(t, s, p, protocol.ArtifactSchemes{Input: []string{"file", "https", "s3"}, Output: []string{"file", "https"}})
	task := mustCreateTask(t, a)
	ids = map[string]string{}
	for name, uri := range map[string]string{"web": "https://example.com/report.pdf", "s3": "s3://bucket/key", "missing": "https://example.com/missing"} {
		art, err := uploadURI(a, task.TaskID, uri, "")
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = art.ArtifactID
	}
	up, err := a.NewUpload(context.Background(), task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Write([]byte("local")); err != nil {
		t.Fatal(err)
	}
	bytesArt, err := up.Commit(context.Background(), "local.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	ids["bytes"] = bytesArt.ArtifactID
	if _, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		size int64
		code string
	}{
		{int64(len("bytes of https://example.com/report.pdf")), ""},
		{int64(len("bytes of https://example.com/made.txt")), ""},
		{0, protocol.EMETHOD},
		{0, protocol.EUNPROCESSABLE},
		{0, protocol.ENOTFOUND},
		{0, protocol.EINTERNAL}, // get's own error, as it is
		{0, protocol.EBADPATH},
	}
	for i, w := range want {
		got := attempts[i]
		if got.size != w.size || protocol.ErrorCode(got.err) != w.code {
			t.Errorf("fetch %s into %s = %d, %v; want %d, code %q", got.id, got.path, got.size, got.err, w.size, w.code)
		}
	}
	if len(fetched) != 3 {
		t.Errorf("fetched %v: only the web URIs are asked for", fetched)
	}
	if got := string(s.Files[task.TaskID]["in/report.pdf"]); got != "bytes of https://example.com/report.pdf" {
		t.Errorf("the workspace holds %q", got)
	}
}

func TestADownloadHandlerCannotFetch(t *testing.T) {
	s := protocoltest.NewStore()
	var fetchErr error
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{
		protocol.HandlerStep: setResult(`{}`),
		protocol.HandlerDownload: func(ctx context.Context, call *protocol.Call) (int32, error) {
			_, fetchErr = call.FetchArtifact(ctx, "x", "y", func(context.Context, string) ([]byte, error) {
				t.Error("the download handler's fetch was made")
				return nil, nil
			})
			return 0, call.SetResult([]byte(`{"default":true}`))
		},
	})
	a := newAgent(t, s, p, protocol.DefaultLimits)
	task := mustCreateTask(t, a)
	art, err := uploadURI(a, task.TaskID, "https://example.com/a", "")
	if err != nil {
		t.Fatal(err)
	}
	a.DownloadArtifact(context.Background(), task.TaskID, art.ArtifactID, nil)
	wantCode(t, "fetch from the download handler", fetchErr, protocol.EMETHOD)
}
