//go:build !wasm

package agent

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
)

func TestReadFileReturnsTheWholeFile(t *testing.T) {
	for _, size := range []int{0, 1, 1024, 1025, 300000} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			data := []byte(strings.Repeat("0123456789", size/10+1)[:size])
			useHost(t, &fakeHost{files: map[string][]byte{"notes/a.txt": data}})
			got, err := ReadFile("notes/a.txt")
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(data) {
				t.Errorf("read %d bytes, want the file's %d", len(got), len(data))
			}
		})
	}
}

func TestWriteFileSendsThePathAndTheBytes(t *testing.T) {
	h := useHost(t, &fakeHost{})
	if err := WriteFile("out/r.md", []byte("# R\n")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile("empty", nil); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"out/r.md": []byte("# R\n"), "empty": {}}
	if !reflect.DeepEqual(h.files, want) {
		t.Errorf("workspace %q, want %q", h.files, want)
	}
}

func TestRemoveDeletesTheFile(t *testing.T) {
	h := useHost(t, &fakeHost{files: map[string][]byte{"a": nil, "b": nil}})
	if err := Remove("a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.files["a"]; ok || len(h.files) != 1 {
		t.Errorf("workspace %q after removing a", h.files)
	}
}

func TestListFilesDecodesTheHostsFileInfos(t *testing.T) {
	files := map[string][]byte{"a.txt": []byte("abc"), "notes/1.md": []byte("1"), "notes/2.md": nil, "notesx": nil}
	mod := time.UnixMilli(1700000000123)
	tests := []struct {
		prefix string
		want   []FileInfo
	}{
		{"", []FileInfo{{"a.txt", 3, mod}, {"notes/1.md", 1, mod}, {"notes/2.md", 0, mod}, {"notesx", 0, mod}}},
		{"notes/", []FileInfo{{"notes/1.md", 1, mod}, {"notes/2.md", 0, mod}}},
		{"nothing/", []FileInfo{}},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			useHost(t, &fakeHost{files: files, modTime: mod.UnixMilli()})
			got, err := ListFiles(tt.prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) || len(got) > 0 && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ListFiles(%q) = %v, want %v", tt.prefix, got, tt.want)
			}
		})
	}
}

func TestListFilesReadsAListingLongerThanTheFirstBuffer(t *testing.T) {
	files := map[string][]byte{}
	for i := range 200 {
		files["dir/file-"+strconv.Itoa(1000+i)] = nil
	}
	useHost(t, &fakeHost{files: files})
	got, err := ListFiles("")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 200 || got[0].Path != "dir/file-1000" || got[199].Path != "dir/file-1199" {
		t.Errorf("listed %d files, from %v", len(got), got[:min(len(got), 2)])
	}
}

func TestStatDecodesTheHostsFileInfo(t *testing.T) {
	useHost(t, &fakeHost{files: map[string][]byte{"notes/a.md": []byte("hello")}, modTime: 1700000000123})
	got, err := Stat("notes/a.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := (FileInfo{Path: "notes/a.md", Size: 5, ModTime: time.UnixMilli(1700000000123)}); got != want {
		t.Errorf("Stat = %v, want %v", got, want)
	}
}

func TestAMalformedAnswerIsAnErrorNotAHostError(t *testing.T) {
	tests := []struct {
		name   string
		fn     string
		answer string
		call   func() error
	}{
		{"list", abi.FuncWorkspaceList, `[{"path":"a","size":"big"}]`, func() error { _, err := ListFiles(""); return err }},
		{"stat", abi.FuncWorkspaceStat, `{"path":"a"`, func() error { _, err := Stat("a"); return err }},
		{"config", abi.FuncConfig, `{"n":3}`, func() error { _, err := Config(); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			useHost(t, &fakeHost{files: map[string][]byte{"a": nil}, answer: map[string]string{tt.fn: tt.answer}})
			err := tt.call()
			var he *HostError
			if err == nil || errors.As(err, &he) {
				t.Errorf("err = %v, want a decoding error", err)
			}
		})
	}
}

func TestAFailedHostCallIsAHostErrorWithTheFunctionCodeAndMessage(t *testing.T) {
	calls := []struct {
		fn   string
		call func() error
	}{
		{abi.FuncWorkspaceRead, func() error { _, err := ReadFile("a.txt"); return err }},
		{abi.FuncWorkspaceWrite, func() error { return WriteFile("a.txt", []byte("x")) }},
		{abi.FuncWorkspaceList, func() error { _, err := ListFiles("a"); return err }},
		{abi.FuncWorkspaceStat, func() error { _, err := Stat("a.txt"); return err }},
		{abi.FuncWorkspaceDelete, func() error { return Remove("a.txt") }},
		{abi.FuncConfig, func() error { _, err := Config(); return err }},
		{abi.FuncArtifactCreate, func() error { _, err := PublishFile("a.txt", "a.txt", ""); return err }},
	}
	failures := []struct {
		sentinel error
		failure  hostFailure
	}{
		{ErrNotFound, hostFailure{abi.ErrNotFound, `no file "a.txt" in the task's workspace`}},
		{ErrBadPath, hostFailure{abi.ErrBadPath, `"../a.txt" leads outside the task's workspace`}},
		{ErrLimit, hostFailure{abi.ErrLimit, "the task's workspace would hold 2 files and directories, over its quota of 1"}},
		{ErrIO, hostFailure{abi.ErrIO, "the server's disk is full: nothing was saved"}},
		{ErrFault, hostFailure{abi.ErrFault, ""}},
	}
	for _, c := range calls {
		for _, f := range failures {
			t.Run(c.fn+"/"+abi.ErrorName(f.failure.code), func(t *testing.T) {
				useHost(t, &fakeHost{files: map[string][]byte{"a.txt": nil}, fail: map[string]hostFailure{c.fn: f.failure}})
				err := c.call()
				var he *HostError
				if !errors.As(err, &he) {
					t.Fatalf("err = %v, want a HostError", err)
				}
				if want := (HostError{Func: c.fn, Code: f.failure.code, Message: f.failure.message}); *he != want {
					t.Errorf("err = %+v, want %+v", *he, want)
				}
				if !errors.Is(err, f.sentinel) {
					t.Errorf("errors.Is(%v, its sentinel) = false", err)
				}
			})
		}
	}
}

func TestReadFileAndStatOfAMissingFileAreErrNotFound(t *testing.T) {
	useHost(t, &fakeHost{})
	if _, err := ReadFile("nope"); !errors.Is(err, ErrNotFound) || err.Error() != `workspace_read: no file "nope" in the task's workspace` {
		t.Errorf("ReadFile: %v", err)
	}
	if _, err := Stat("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat: %v", err)
	}
	if err := Remove("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove: %v", err)
	}
}

func TestPublishFileRegistersTheWorkspaceFilesBytes(t *testing.T) {
	tests := []struct {
		name                         string
		path, fileName, relativePath string
		meta                         string
	}{
		{"in a directory", "work/r.md", "report.md", "out",
			`{"file_name":"report.md","relative_path":"out","workspace_path":"work/r.md"}`},
		{"at the root", "r.md", "r.md", "", `{"file_name":"r.md","workspace_path":"r.md"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := useHost(t, &fakeHost{})
			id, err := PublishFile(tt.path, tt.fileName, tt.relativePath)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.artifacts) != 1 {
				t.Fatalf("%d artifacts created, want 1", len(h.artifacts))
			}
			a := h.artifacts[0]
			if a.meta != tt.meta || len(a.data) != 0 {
				t.Errorf("sent meta %s with %d bytes, want %s with none", a.meta, len(a.data), tt.meta)
			}
			if id != a.id {
				t.Errorf("id = %q, want the host's %q", id, a.id)
			}
		})
	}
}

func TestPublishFileWithoutAPathIsErrBadPathWithoutAskingTheHost(t *testing.T) {
	h := useHost(t, &fakeHost{})
	_, err := PublishFile("", "a.txt", "")
	if !errors.Is(err, ErrBadPath) {
		t.Errorf("err = %v, want ErrBadPath", err)
	}
	if n := h.calls[abi.FuncArtifactCreate]; n != 0 {
		t.Errorf("artifact_create called %d times, want 0", n)
	}
}

func TestConfigIsTheOperatorsSettings(t *testing.T) {
	tests := []struct {
		conf string
		want map[string]string
	}{
		{`{}`, map[string]string{}},
		{`{"model":"small","greeting":"h\u00e9llo"}`, map[string]string{"model": "small", "greeting": "héllo"}},
		{`{"long":"` + strings.Repeat("x", 2000) + `"}`, map[string]string{"long": strings.Repeat("x", 2000)}},
	}
	for _, tt := range tests {
		t.Run(tt.conf[:min(len(tt.conf), 20)], func(t *testing.T) {
			useHost(t, &fakeHost{conf: tt.conf})
			got, err := Config()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Config() = %q, want %q", got, tt.want)
			}
		})
	}
}
