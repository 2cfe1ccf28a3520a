package client

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

func ptr(s string) *string { return &s }

func TestClientLocalPathKeepsArtifactsInsideTheDirectory(t *testing.T) {
	for _, tc := range []struct {
		rel        *string
		name, want string
		err        string
	}{
		{nil, "output.txt", "output.txt", ""},
		{ptr(""), "output.txt", "output.txt", ""},
		{ptr("python/code/"), "main.py", "python/code/main.py", ""},
		{ptr("./docs//in/."), "notes.txt", "docs/in/notes.txt", ""},
		{ptr("/"), "root.txt", "root.txt", ""},
		{ptr("/etc"), "passwd", "etc/passwd", ""}, // read below the directory, as the protocol's relative_path is
		{ptr("ünïcödé"), "日本語.txt", "ünïcödé/日本語.txt", ""},
		{ptr("..file"), "..txt", "..file/..txt", ""},
		{nil, "../../x", "", "path separator"},
		{nil, "/etc/passwd", "", "path separator"},
		{nil, `..\..\x`, "", "path separator"},
		{nil, `C:\Windows\x`, "", "path separator"},
		{nil, "..", "", "not a file name"},
		{nil, ".", "", "not a file name"},
		{nil, "", "", "not a file name"},
		{nil, "a\x00b", "", "control character"},
		{nil, "\x1b[31mred", "", "control character"},
		{nil, "line\nbreak", "", "control character"},
		{ptr("../.."), "x", "", "leads out"},
		{ptr("a/../../b"), "x", "", "leads out"},
		{ptr("a/.."), "x", "", "leads out"},
		{ptr(`..\..`), "x", "", "backslash"},
		{ptr("a\x00"), "x", "", "control character"},
	} {
		a := Artifact{ArtifactID: "a", FileName: tc.name, RelativePath: tc.rel}
		got, err := LocalPath(a)
		rel := "<nil>"
		if tc.rel != nil {
			rel = *tc.rel
		}
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("LocalPath(%q, %q) = %q, %v; want an error saying %q", rel, tc.name, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("LocalPath(%q, %q) = %q, %v; want %q", rel, tc.name, got, err, tc.want)
		}
	}
}

// artifactServer serves one artifact's bytes for any id, and counts the
// downloads it served.
func artifactServer(t *testing.T, body string) (*httptest.Server, *atomic.Int32) {
	var downloads atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downloads.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	return ts, &downloads
}

// filesUnder lists the files (not directories) below dir, slash-separated.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestClientSaveArtifactFromAHostileServerWritesNothingOutsideTheDirectory(t *testing.T) {
	ts, _ := artifactServer(t, "pwned")
	c := mustNew(t, ts.URL)
	top := t.TempDir()
	dir, outside := filepath.Join(top, "downloads"), filepath.Join(top, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A link the user (or an earlier download) left in the directory,
	// leading out of it.
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "target.txt"), filepath.Join(dir, "file-link")); err != nil {
		t.Fatal(err)
	}
	for _, a := range []Artifact{
		{ArtifactID: "dotdot-name", FileName: "../../x"},
		{ArtifactID: "absolute-name", FileName: "/tmp/x"},
		{ArtifactID: "backslash-name", FileName: `..\..\x`},
		{ArtifactID: "nul-name", FileName: "x\x00y"},
		{ArtifactID: "dotdot-path", FileName: "x", RelativePath: ptr("../outside")},
		{ArtifactID: "deep-dotdot-path", FileName: "x", RelativePath: ptr("a/b/../../../outside")},
		{ArtifactID: "backslash-path", FileName: "x", RelativePath: ptr(`..\outside`)},
		{ArtifactID: "through-a-link", FileName: "x", RelativePath: ptr("link")},
		{ArtifactID: "through-a-link-below", FileName: "x", RelativePath: ptr("link/sub")},
	} {
		if path, _, err := c.SaveArtifact(context.Background(), "t", a, dir, false, nil); err == nil {
			t.Errorf("artifact %s (%q in %v) was saved as %s", a.ArtifactID, a.FileName, a.RelativePath, path)
		} else if !strings.Contains(err.Error(), "save artifact "+a.ArtifactID) {
			t.Errorf("error %q does not name artifact %s", err, a.ArtifactID)
		}
	}
	// Told to replace, the link itself is replaced: its target is not written.
	if _, _, err := c.SaveArtifact(context.Background(), "t", Artifact{ArtifactID: "onto-a-link", FileName: "file-link"}, dir, true, nil); err != nil {
		t.Fatal(err)
	}
	// An absolute relative_path is read below the directory.
	path, _, err := c.SaveArtifact(context.Background(), "t", Artifact{ArtifactID: "abs", FileName: "x", RelativePath: ptr("/etc")}, dir, false, nil)
	if err != nil || path != filepath.Join(dir, "etc", "x") {
		t.Errorf("absolute relative_path: saved as %q, %v", path, err)
	}
	if files := filesUnder(t, outside); len(files) != 0 {
		t.Errorf("files written outside the directory: %v", files)
	}
	if files := filesUnder(t, top); !slices.Equal(files, []string{"downloads/etc/x", "downloads/file-link", "downloads/link"}) {
		t.Errorf("files = %v", files)
	}
}

func TestClientSaveArtifactReplacesAFileOnlyWhenTold(t *testing.T) {
	ts, downloads := artifactServer(t, "new bytes")
	c := mustNew(t, ts.URL)
	dir := t.TempDir()
	dest := filepath.Join(dir, "docs", "out.txt")
	a := Artifact{ArtifactID: "a", FileName: "out.txt", RelativePath: ptr("docs")}
	path, n, err := c.SaveArtifact(context.Background(), "t", a, dir, false, nil)
	if err != nil || path != dest || n != int64(len("new bytes")) {
		t.Fatalf("first save: %q, %d, %v", path, n, err)
	}
	if err := os.WriteFile(dest, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := downloads.Load()
	_, _, err = c.SaveArtifact(context.Background(), "t", a, dir, false, nil)
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("saving over an existing file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(dest); string(b) != "mine" {
		t.Errorf("the existing file now holds %q", b)
	}
	if downloads.Load() != before {
		t.Errorf("the artifact was downloaded though it could not be saved")
	}
	if _, _, err := c.SaveArtifact(context.Background(), "t", a, dir, true, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dest); string(b) != "new bytes" {
		t.Errorf("told to overwrite, the file holds %q", b)
	}
	if files := filesUnder(t, dir); !slices.Equal(files, []string{"docs/out.txt"}) {
		t.Errorf("files = %v: a temporary file was left", files)
	}
}

func TestClientASaveThatFailsOrIsCancelledLeavesNothingHalfWritten(t *testing.T) {
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, strings.Repeat("x", 500))
		if strings.HasSuffix(r.URL.Path, "/hang") {
			w.(http.Flusher).Flush()
			select { // until the client goes away
			case <-r.Context().Done():
			case <-release:
			}
		}
		// Else the handler ends 500 bytes short, and the connection closes.
	}))
	defer ts.Close()
	defer close(release)
	c := mustNew(t, ts.URL)

	t.Run("cut short", func(t *testing.T) {
		dir := t.TempDir()
		_, _, err := c.SaveArtifact(context.Background(), "t", Artifact{ArtifactID: "cut", FileName: "f.bin", RelativePath: ptr("sub")}, dir, false, nil)
		if err == nil {
			t.Fatal("a download cut short was saved")
		}
		if files := filesUnder(t, dir); len(files) != 0 {
			t.Errorf("files left: %v", files)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Cancelled as soon as the first bytes are written, as Ctrl-C would.
		progress := func(done, total int64) { cancel() }
		_, _, err := c.SaveArtifact(ctx, "t", Artifact{ArtifactID: "hang", FileName: "f.bin"}, dir, false, progress)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled save: %v", err)
		}
		if files := filesUnder(t, dir); len(files) != 0 {
			t.Errorf("files left: %v", files)
		}
	})
}
