//go:build !wasm

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

// The kit's tests run on the build machine (not in WebAssembly, hence
// their build constraint), against fakeHost installed in host_other.go's
// testHost.

// fakeHost is agentrt's side of ABI v1 for the kit's tests, installed in
// testHost by useHost. It follows the ABI's conventions (sized reads copy
// only what fits and always return the length; a failed call leaves its
// message for last_error) and records what the kit sent it.
type fakeHost struct {
	in      []byte            // the call's input message
	files   map[string][]byte // the task's workspace
	modTime int64             // every file's mod_time, Unix milliseconds
	conf    string            // config's JSON object

	// fail makes a host function (abi.Func*) fail with a code and message.
	fail map[string]hostFailure
	// answer replaces the data a sized read returns (abi.Func*).
	answer map[string]string
	// growInput makes the input 1 KiB longer at every call, longer than
	// the buffer the kit just sized for it: data that changes between a
	// sized read's calls.
	growInput bool

	calls      map[string]int // host calls, by function
	results    []string       // every set_result
	downloaded []byte         // what download_write sent
	reports    [][2]string    // each progress report: message, output
	logs       []logLine
	artifacts  []createdArtifact
	lastErr    string
}

type hostFailure struct {
	code    int32
	message string
}

type logLine struct {
	level int32
	text  string
}

type createdArtifact struct {
	meta string
	data []byte
	id   string
}

// useHost installs h as the host for the rest of the test.
func useHost(t *testing.T, h *fakeHost) *fakeHost {
	t.Helper()
	if h.files == nil {
		h.files = map[string][]byte{}
	}
	if h.conf == "" {
		h.conf = "{}"
	}
	h.calls = map[string]int{}
	testHost = h
	t.Cleanup(func() { testHost = nil })
	return h
}

// result is the last result the kit set ("" for none).
func (h *fakeHost) result() string {
	if len(h.results) == 0 {
		return ""
	}
	return h.results[len(h.results)-1]
}

// failed answers whether fn is set to fail, recording the call.
func (h *fakeHost) failed(fn string) (int32, bool) {
	h.calls[fn]++
	f, ok := h.fail[fn]
	if ok {
		h.lastErr = f.message
	}
	return f.code, ok
}

// sized answers a sized read of data into buf.
func (h *fakeHost) sized(fn string, buf []byte, data string) int32 {
	if a, ok := h.answer[fn]; ok {
		data = a
	}
	if len(data) <= len(buf) {
		copy(buf, data)
	}
	return int32(len(data))
}

func (h *fakeHost) errorf(code int32, format string, args ...any) int32 {
	h.lastErr = fmt.Sprintf(format, args...)
	return code
}

func (h *fakeHost) input(buf []byte) int32 {
	if code, ok := h.failed(abi.FuncInput); ok {
		return code
	}
	if h.growInput {
		h.in = append(h.in, strings.Repeat(" ", 1024)...)
	}
	return h.sized(abi.FuncInput, buf, string(h.in))
}

func (h *fakeHost) setResult(b []byte) int32 {
	if code, ok := h.failed(abi.FuncSetResult); ok {
		return code
	}
	h.results = append(h.results, string(b))
	return 0
}

func (h *fakeHost) log(level int32, msg []byte) int32 {
	if code, ok := h.failed(abi.FuncLog); ok {
		return code
	}
	h.logs = append(h.logs, logLine{level, string(msg)})
	return 0
}

func (h *fakeHost) lastError(buf []byte) int32 {
	h.calls[abi.FuncLastError]++
	return h.sized(abi.FuncLastError, buf, h.lastErr)
}

func (h *fakeHost) artifactCreate(meta, data, idOut []byte) int32 {
	if code, ok := h.failed(abi.FuncArtifactCreate); ok {
		return code
	}
	id := fmt.Sprintf("00000000-0000-7000-8000-%012d", len(h.artifacts)+1)
	copy(idOut, id)
	h.artifacts = append(h.artifacts, createdArtifact{meta: string(meta), data: append([]byte(nil), data...), id: id})
	return 0
}

func (h *fakeHost) config(buf []byte) int32 {
	if code, ok := h.failed(abi.FuncConfig); ok {
		return code
	}
	return h.sized(abi.FuncConfig, buf, h.conf)
}

func (h *fakeHost) workspaceRead(path, buf []byte) int32 {
	if code, ok := h.failed(abi.FuncWorkspaceRead); ok {
		return code
	}
	data, ok := h.files[string(path)]
	if !ok {
		return h.errorf(abi.ErrNotFound, "no file %q in the task's workspace", path)
	}
	return h.sized(abi.FuncWorkspaceRead, buf, string(data))
}

func (h *fakeHost) workspaceWrite(path, data []byte) int32 {
	if code, ok := h.failed(abi.FuncWorkspaceWrite); ok {
		return code
	}
	h.files[string(path)] = append([]byte{}, data...)
	return 0
}

func (h *fakeHost) downloadWrite(data []byte) int32 {
	if code, ok := h.failed(abi.FuncDownloadWrite); ok {
		return code
	}
	h.downloaded = append(h.downloaded, data...)
	return 0
}

func (h *fakeHost) progress(msg, output []byte) int32 {
	if code, ok := h.failed(abi.FuncProgress); ok {
		return code
	}
	h.reports = append(h.reports, [2]string{string(msg), string(output)})
	return 0
}

func (h *fakeHost) info(path string) abi.FileInfo {
	return abi.FileInfo{Path: path, Size: int64(len(h.files[path])), ModTime: h.modTime}
}

func (h *fakeHost) workspaceList(prefix, buf []byte) int32 {
	if code, ok := h.failed(abi.FuncWorkspaceList); ok {
		return code
	}
	infos := []abi.FileInfo{}
	for p := range h.files {
		if strings.HasPrefix(p, string(prefix)) {
			infos = append(infos, h.info(p))
		}
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Path < infos[j].Path })
	b, _ := json.Marshal(infos)
	return h.sized(abi.FuncWorkspaceList, buf, string(b))
}

func (h *fakeHost) workspaceStat(path, buf []byte) int32 {
	if code, ok := h.failed(abi.FuncWorkspaceStat); ok {
		return code
	}
	if _, ok := h.files[string(path)]; !ok {
		return h.errorf(abi.ErrNotFound, "no file %q in the task's workspace", path)
	}
	b, _ := json.Marshal(h.info(string(path)))
	return h.sized(abi.FuncWorkspaceStat, buf, string(b))
}

func (h *fakeHost) workspaceDelete(path []byte) int32 {
	if code, ok := h.failed(abi.FuncWorkspaceDelete); ok {
		return code
	}
	if _, ok := h.files[string(path)]; !ok {
		return h.errorf(abi.ErrNotFound, "no file %q in the task's workspace", path)
	}
	delete(h.files, string(path))
	return 0
}

func TestHostErrorMatchesTheSentinelOfItsCodeOnly(t *testing.T) {
	sentinels := []struct {
		err  error
		code int32
	}{
		{ErrInvalid, -1}, {ErrFault, -2}, {ErrNotFound, -3}, {ErrBadPath, -4},
		{ErrLimit, -5}, {ErrNotAllowed, -6}, {ErrIO, -7},
	}
	for _, s := range sentinels {
		for _, target := range sentinels {
			err := error(&HostError{Func: abi.FuncWorkspaceRead, Code: s.code, Message: "m"})
			want := s.code == target.code
			if got := errors.Is(err, target.err); got != want {
				t.Errorf("errors.Is(code %d, sentinel of %d) = %v, want %v", s.code, target.code, got, want)
			}
			if got := errors.Is(fmt.Errorf("read notes: %w", err), target.err); got != want {
				t.Errorf("errors.Is(wrapped code %d, sentinel of %d) = %v, want %v", s.code, target.code, got, want)
			}
		}
	}
	// Only the sentinels, which name no function, match by code.
	err := &HostError{Func: abi.FuncWorkspaceRead, Code: abi.ErrNotFound}
	if errors.Is(err, &HostError{Func: abi.FuncWorkspaceStat, Code: abi.ErrNotFound}) {
		t.Error("a HostError naming a function matched another host error of the same code")
	}
}

func TestHostErrorNamesTheFunctionAndTheHostsMessage(t *testing.T) {
	tests := []struct {
		name string
		err  HostError
		want string
	}{
		{"the host's message", HostError{Func: "workspace_read", Code: abi.ErrNotFound, Message: `no file "a.txt" in the task's workspace`},
			`workspace_read: no file "a.txt" in the task's workspace`},
		{"no message: the code's name", HostError{Func: "workspace_write", Code: abi.ErrLimit}, "workspace_write: limit reached"},
		{"an unknown code", HostError{Func: "log", Code: -42}, "log: unknown error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWithoutAHostEveryFunctionIsNotAllowed(t *testing.T) {
	testHost = nil
	calls := []struct {
		name string
		call func() error
	}{
		{"ReadFile", func() error { _, err := ReadFile("a.txt"); return err }},
		{"WriteFile", func() error { return WriteFile("a.txt", []byte("x")) }},
		{"ListFiles", func() error { _, err := ListFiles(""); return err }},
		{"Stat", func() error { _, err := Stat("a.txt"); return err }},
		{"Remove", func() error { return Remove("a.txt") }},
		{"Config", func() error { _, err := Config(); return err }},
		{"CreateArtifact", func() error { _, err := CreateArtifact("a.txt", "", []byte("x")); return err }},
		{"PublishFile", func() error { _, err := PublishFile("a.txt", "a.txt", ""); return err }},
		{"CreateURIArtifact", func() error { _, err := CreateURIArtifact("s3://b/k", "", ""); return err }},
		{"download's Write", func() error { _, err := downloadWriter{}.Write([]byte("x")); return err }},
		{"Progress", func() error { return Progress("x") }},
		{"ProgressOutput", func() error { return ProgressOutput("x", "y") }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); !errors.Is(err, ErrNotAllowed) {
				t.Errorf("err = %v, want ErrNotAllowed", err)
			}
		})
	}
	resetHandlers(t)
	HandleStep(func(*Step) (Result, error) { return Result{}, nil })
	if code := exportOnStep(); code == 0 {
		t.Error("the step export succeeded with no host to read its input from")
	}
}

func TestLogSendsTheLevelAsTheABIsNumberAndTheLineAsIs(t *testing.T) {
	tests := []struct {
		name  string
		log   func()
		level int32
		text  string
	}{
		{"debug", func() { Log(Debug, "d") }, 0, "d"},
		{"info", func() { Log(Info, "i") }, 1, "i"},
		{"warn", func() { Log(Warn, "w") }, 2, "w"},
		{"error", func() { Log(Error, "e") }, 3, "e"},
		{"empty line", func() { Log(Info, "") }, 1, ""},
		{"multi-line text is one line", func() { Log(Warn, "a\nb") }, 2, "a\nb"},
		{"Logf formats at info", func() { Logf("%d words in %q", 3, "a.txt") }, 1, `3 words in "a.txt"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := useHost(t, &fakeHost{})
			tt.log()
			if want := []logLine{{tt.level, tt.text}}; fmt.Sprint(h.logs) != fmt.Sprint(want) {
				t.Errorf("logged %q, want %q", h.logs, want)
			}
		})
	}
}

func TestALogLinePastTheLimitDoesNotFailTheHandler(t *testing.T) {
	resetHandlers(t)
	h := useHost(t, &fakeHost{in: []byte(stepInput), fail: map[string]hostFailure{abi.FuncLog: {abi.ErrLimit, "the call's log is full"}}})
	HandleStep(func(*Step) (Result, error) {
		Log(Error, "dropped")
		Logf("dropped too")
		return Result{Output: "done"}, nil
	})
	if code := exportOnStep(); code != 0 {
		t.Errorf("returned %d, want 0", code)
	}
	if got, want := h.result(), `{"output":"done"}`; got != want {
		t.Errorf("result %s, want %s", got, want)
	}
	if h.calls[abi.FuncLog] != 2 {
		t.Errorf("log called %d times, want 2", h.calls[abi.FuncLog])
	}
}

func TestCreateArtifactSendsItsMetaAndBytesAndReturnsTheNewID(t *testing.T) {
	tests := []struct {
		name                   string
		fileName, relativePath string
		data                   []byte
		meta                   string
	}{
		{"in a directory", "report.md", "out", []byte("# Report\n"), `{"file_name":"report.md","relative_path":"out"}`},
		{"at the root", "a.txt", "", []byte("x"), `{"file_name":"a.txt"}`},
		{"empty", "empty.txt", "", nil, `{"file_name":"empty.txt"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := useHost(t, &fakeHost{})
			id, err := CreateArtifact(tt.fileName, tt.relativePath, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.artifacts) != 1 {
				t.Fatalf("%d artifacts created, want 1", len(h.artifacts))
			}
			a := h.artifacts[0]
			if a.meta != tt.meta || string(a.data) != string(tt.data) {
				t.Errorf("sent meta %s and %q, want %s and %q", a.meta, a.data, tt.meta, tt.data)
			}
			if id != a.id {
				t.Errorf("id = %q, want the host's %q", id, a.id)
			}
		})
	}
}

func TestCreateArtifactFailureCarriesTheHostsCodeAndMessage(t *testing.T) {
	h := useHost(t, &fakeHost{fail: map[string]hostFailure{abi.FuncArtifactCreate: {abi.ErrLimit, "a call may create at most 64 artifacts"}}})
	id, err := CreateArtifact("a.txt", "", []byte("x"))
	var he *HostError
	if !errors.As(err, &he) || *he != (HostError{Func: "artifact_create", Code: abi.ErrLimit, Message: "a call may create at most 64 artifacts"}) {
		t.Fatalf("err = %#v, want the host's limit error", err)
	}
	if id != "" {
		t.Errorf("id = %q, want none", id)
	}
	if h.calls[abi.FuncLastError] != 1 {
		t.Errorf("last_error called %d times, want 1", h.calls[abi.FuncLastError])
	}
}

func TestSizedReadGrowsItsBufferToTheLengthTheHostNames(t *testing.T) {
	for _, size := range []int{0, 1, 1023, 1024, 1025, 70000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := strings.Repeat("x", size)
			calls := 0
			got, err := sizedRead(func(buf []byte) int32 {
				calls++
				if len(data) <= len(buf) {
					copy(buf, data)
				}
				return int32(len(data))
			})
			if err != nil || string(got) != data {
				t.Fatalf("read %d bytes (%v), want %d", len(got), err, size)
			}
			if want := 1 + btoi(size > 1024); calls != want {
				t.Errorf("%d calls, want %d", calls, want)
			}
		})
	}
}

func TestSizedReadGivesUpOnDataThatKeepsGrowing(t *testing.T) {
	n, calls := 1000, 0
	_, err := sizedRead(func(buf []byte) int32 {
		calls++
		n += 1000
		return int32(n)
	})
	if err != codeError(abi.ErrIO) {
		t.Errorf("err = %v, want ErrIO", err)
	}
	if calls != 3 {
		t.Errorf("%d calls, want 3", calls)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
