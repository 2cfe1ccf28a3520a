package hostapi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime/runtimetest"
)

// fakeHost is a Host in memory, with the real one's errors.
type fakeHost struct {
	input     []byte
	result    []byte
	logs      []string
	artifacts []protocol.ArtifactSpec
	data      [][]byte
	files     map[string][]byte
	config    []byte
	maxResult int
	// downloaded is what download_write sent; maxDownload bounds it.
	downloaded  []byte
	maxDownload int
	// uris are the task's URI artifacts, by id, that FetchArtifact fetches.
	uris map[string]string
	// effects counts BeforeEffect's calls; effectErr is what it answers.
	effects   int
	effectErr error
	// progress are the reports, message and output, progress made.
	progress [][2]string
}

func newFakeHost() *fakeHost {
	return &fakeHost{input: []byte(`{"abi":1,"handler":"step"}`), files: map[string][]byte{},
		config: []byte(`{"model":"small"}`), maxResult: 1 << 10, maxDownload: 1 << 10}
}

func (h *fakeHost) Input() []byte { return h.input }

func (h *fakeHost) SetResult(b []byte) error {
	if len(b) > h.maxResult {
		return protocol.Errorf(protocol.ETOOLARGE, "result over %d bytes", h.maxResult)
	}
	h.result = append([]byte(nil), b...)
	return nil
}

func (h *fakeHost) Log(level string, msg []byte) error {
	switch level {
	case protocol.LevelDebug, protocol.LevelInfo, protocol.LevelWarn, protocol.LevelError:
	default:
		return protocol.Errorf(protocol.EUNPROCESSABLE, "unknown log level %q", level)
	}
	h.logs = append(h.logs, level+":"+string(msg))
	return nil
}

func (h *fakeHost) Progress(ctx context.Context, msg, out []byte) error {
	h.progress = append(h.progress, [2]string{string(msg), string(out)})
	return nil
}

func (h *fakeHost) CreateArtifact(ctx context.Context, meta protocol.ArtifactSpec, data []byte) (string, error) {
	if (meta.FileName == "" && meta.URI == "") || strings.Contains(meta.FileName, "/") {
		return "", protocol.Errorf(protocol.EBADPATH, "bad file name %q", meta.FileName)
	}
	h.artifacts = append(h.artifacts, meta)
	h.data = append(h.data, append([]byte(nil), data...))
	return "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", nil
}

func (h *fakeHost) Config() []byte { return h.config }

func (h *fakeHost) DownloadWrite(ctx context.Context, data []byte) error {
	if len(h.downloaded)+len(data) > h.maxDownload {
		return protocol.Errorf(protocol.ETOOLARGE, "the download would be over %d bytes", h.maxDownload)
	}
	h.downloaded = append(h.downloaded, data...)
	return nil
}

func (h *fakeHost) BeforeEffect(ctx context.Context) error {
	h.effects++
	return h.effectErr
}

func (h *fakeHost) FetchArtifact(ctx context.Context, id, p string, get func(context.Context, string) ([]byte, error)) (int64, error) {
	if _, err := h.clean(p); err != nil {
		return 0, err
	}
	uri, ok := h.uris[id]
	if !ok {
		return 0, protocol.Errorf(protocol.ENOTFOUND, "no artifact %q", id)
	}
	data, err := get(ctx, uri)
	if err != nil {
		return 0, err
	}
	return int64(len(data)), h.WorkspaceWrite(ctx, p, data)
}

func (h *fakeHost) clean(p string) (string, error) { return protocol.CleanFilePath(p) }

func (h *fakeHost) WorkspaceReadInto(ctx context.Context, p string, buf []byte) (int64, error) {
	b, err := h.WorkspaceRead(p)
	if err != nil {
		return 0, err
	}
	if len(b) <= len(buf) {
		copy(buf, b)
	}
	return int64(len(b)), nil
}

func (h *fakeHost) WorkspaceRead(p string) ([]byte, error) {
	p, err := h.clean(p)
	if err != nil {
		return nil, err
	}
	b, ok := h.files[p]
	if !ok {
		return nil, protocol.Errorf(protocol.ENOTFOUND, "no file %q", p)
	}
	return b, nil
}

func (h *fakeHost) WorkspaceWrite(ctx context.Context, p string, data []byte) error {
	p, err := h.clean(p)
	if err != nil {
		return err
	}
	if len(data) > 100 {
		return protocol.Errorf(protocol.ETOOLARGE, "over the quota")
	}
	h.files[p] = append([]byte(nil), data...)
	return nil
}

func (h *fakeHost) WorkspaceList(ctx context.Context, prefix string) ([]protocol.FileInfo, error) {
	var out []protocol.FileInfo
	for p, b := range h.files {
		if strings.HasPrefix(p, prefix) {
			out = append(out, protocol.FileInfo{Path: p, Size: int64(len(b)), ModTime: time.UnixMilli(1700000000000)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (h *fakeHost) WorkspaceStat(ctx context.Context, p string) (protocol.FileInfo, error) {
	b, err := h.WorkspaceRead(p)
	if err != nil {
		return protocol.FileInfo{}, err
	}
	return protocol.FileInfo{Path: p, Size: int64(len(b)), ModTime: time.UnixMilli(1700000000000)}, nil
}

func (h *fakeHost) WorkspaceDelete(ctx context.Context, p string) error {
	if _, err := h.WorkspaceRead(p); err != nil {
		return err
	}
	delete(h.files, p)
	return nil
}

// guest is an instance of testdata/wat/trampoline.wat, whose exports call
// each host function with whatever arguments a test gives.
type guest struct {
	t   *testing.T
	ctx context.Context
	mod api.Module
}

const memSize = 65536

func newGuest(t *testing.T, host Host, cfg Config, opts ...Option) *guest {
	t.Helper()
	code, err := os.ReadFile(runtimetest.Fixture(t, "trampoline"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	if err := Instantiate(ctx, r, cfg); err != nil {
		t.Fatal(err)
	}
	mod, err := r.InstantiateWithConfig(ctx, code, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	if host != nil {
		ctx = WithHost(ctx, host, opts...)
	}
	return &guest{t: t, ctx: ctx, mod: mod}
}

// call calls a host function through its trampoline.
func (g *guest) call(name string, args ...uint32) int32 {
	g.t.Helper()
	params := make([]uint64, len(args))
	for i, a := range args {
		params[i] = api.EncodeU32(a)
	}
	res, err := g.mod.ExportedFunction("call_"+name).Call(g.ctx, params...)
	if err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	return int32(res[0])
}

// put writes b into guest memory at ptr and returns its length.
func (g *guest) put(ptr uint32, b string) uint32 {
	g.t.Helper()
	if !g.mod.Memory().Write(ptr, []byte(b)) {
		g.t.Fatalf("write %d bytes at %d", len(b), ptr)
	}
	return uint32(len(b))
}

func (g *guest) get(ptr, n uint32) string {
	b, ok := g.mod.Memory().Read(ptr, n)
	if !ok {
		g.t.Fatalf("read %d bytes at %d", n, ptr)
	}
	return string(b)
}

// lastError is the message last_error returns.
func (g *guest) lastError() string {
	n := g.call("last_error", 60000, 5000)
	if n < 0 || n > 5000 {
		g.t.Fatalf("last_error returned %d", n)
	}
	return g.get(60000, uint32(n))
}

// wantErr checks a host function's error code and last_error's message.
func (g *guest) wantErr(got, code int32, msg string) {
	g.t.Helper()
	if got != code {
		g.t.Errorf("returned %d, want %d (%s); last error %q", got, code, abi.ErrorName(code), g.lastError())
		return
	}
	if m := g.lastError(); !strings.Contains(m, msg) {
		g.t.Errorf("last error %q does not contain %q", m, msg)
	}
}

// Pointer and length arguments that are out of bounds of a 64 KiB memory,
// including sums that overflow 32 bits.
var badRanges = []struct {
	name     string
	ptr, len uint32
}{
	{"past the end", memSize, 1},
	{"straddling the end", memSize - 4, 8},
	{"far away", 0x7fff0000, 16},
	{"overflowing", 0xfffffff0, 0x20},
	{"negative length", 100, 0xffffffff},
	{"negative pointer", 0xffffffff, 1},
}

func TestInputCopiesOnlyWhatFitsAndAlwaysTellsTheLength(t *testing.T) {
	h := newFakeHost()
	g := newGuest(t, h, Config{})
	n := uint32(len(h.input))
	if got := g.call("input", 100, n); got != int32(n) || g.get(100, n) != string(h.input) {
		t.Errorf("input with room: %d, %q", got, g.get(100, n))
	}
	g.put(200, "untouched")
	if got := g.call("input", 200, 3); got != int32(n) || g.get(200, 9) != "untouched" {
		t.Errorf("input without room returned %d and wrote %q; want the length and no write", got, g.get(200, 9))
	}
	if got := g.call("input", 0, 0); got != int32(n) {
		t.Errorf("input(0, 0) = %d, want the length", got)
	}
	// A buffer outside the plugin's memory is refused, whether the data
	// would fit in it or not.
	for _, r := range badRanges {
		t.Run(r.name, func(t *testing.T) {
			g.wantErr(g.call("input", r.ptr, r.len), abi.ErrFault, "outside the plugin's memory")
		})
	}
}

func TestSetResultAndLog(t *testing.T) {
	h := newFakeHost()
	g := newGuest(t, h, Config{})
	if got := g.call("set_result", 0, g.put(0, `{"output":"hi"}`)); got != 0 || string(h.result) != `{"output":"hi"}` {
		t.Errorf("set_result = %d, result %q", got, h.result)
	}
	g.wantErr(g.call("set_result", 0, 2000), abi.ErrLimit, "result over")
	if got := g.call("log", uint32(abi.LevelWarn), 0, g.put(0, "careful")); got != 0 || h.logs[0] != "warn:careful" {
		t.Errorf("log = %d, logs %q", got, h.logs)
	}
	g.wantErr(g.call("log", 7, 0, 3), abi.ErrInvalid, "unknown log level 7")
	g.wantErr(g.call("log", 0xffffffff, 0, 3), abi.ErrInvalid, "unknown log level -1")
	for _, r := range badRanges {
		t.Run(r.name, func(t *testing.T) {
			g.wantErr(g.call("set_result", r.ptr, r.len), abi.ErrFault, "outside")
			g.wantErr(g.call("log", 1, r.ptr, r.len), abi.ErrFault, "outside")
		})
	}
	if len(h.logs) != 1 {
		t.Errorf("bad calls logged: %q", h.logs)
	}
}

func TestArtifactCreate(t *testing.T) {
	h := newFakeHost()
	g := newGuest(t, h, Config{})
	meta := g.put(0, `{"file_name":"out.txt","relative_path":"docs"}`)
	data := g.put(1000, "payload")
	if got := g.call("artifact_create", 0, meta, 1000, data, 2000); got != 0 {
		t.Fatalf("artifact_create = %d (%s)", got, g.lastError())
	}
	if id := g.get(2000, 36); id != "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0" {
		t.Errorf("id written = %q", id)
	}
	if len(h.artifacts) != 1 || h.artifacts[0].RelativePath != "docs" || string(h.data[0]) != "payload" {
		t.Errorf("created %+v %q", h.artifacts, h.data)
	}
	if got := g.call("artifact_create", 0, meta, 1000, data, 0); got != 0 {
		t.Errorf("artifact_create without id_out = %d", got)
	}
	// A URI artifact's meta reaches the host whole.
	uri := g.put(0, `{"file_name":"","uri":"s3://bucket/key.pdf"}`)
	if got := g.call("artifact_create", 0, uri, 1000, 0, 0); got != 0 || h.artifacts[len(h.artifacts)-1].URI != "s3://bucket/key.pdf" {
		t.Errorf("artifact_create of a URI = %d, created %+v", got, h.artifacts[len(h.artifacts)-1])
	}
	g.wantErr(g.call("artifact_create", 0, g.put(0, `{"file_name":`), 1000, data, 0), abi.ErrInvalid, "meta is not a JSON object")
	g.wantErr(g.call("artifact_create", 0, g.put(0, "\xff\xfe"), 1000, data, 0), abi.ErrInvalid, "meta")
	g.wantErr(g.call("artifact_create", 0, g.put(0, `{"file_name":"a/b"}`), 1000, data, 0), abi.ErrBadPath, "bad file name")
	meta = g.put(0, `{"file_name":"x.txt"}`)
	before := len(h.artifacts)
	for _, r := range badRanges {
		t.Run(r.name, func(t *testing.T) {
			g.wantErr(g.call("artifact_create", r.ptr, r.len, 1000, data, 0), abi.ErrFault, "outside")
			g.wantErr(g.call("artifact_create", 0, meta, r.ptr, r.len, 0), abi.ErrFault, "outside")
			if uint64(r.ptr)+36 <= memSize {
				return // id_out is 36 bytes at the pointer: these fit
			}
			g.wantErr(g.call("artifact_create", 0, meta, 1000, data, r.ptr), abi.ErrFault, "outside")
		})
	}
	g.wantErr(g.call("artifact_create", 0, meta, 1000, data, memSize-10), abi.ErrFault, "outside")
	if len(h.artifacts) != before {
		t.Errorf("calls with a bad argument created %d artifacts", len(h.artifacts)-before)
	}
}

func TestDownloadWriteSendsGuestBytesWithinTheirBound(t *testing.T) {
	h := newFakeHost()
	g := newGuest(t, h, Config{})
	if got := g.call("download_write", 100, g.put(100, "first ")); got != 0 {
		t.Fatalf("download_write = %d (%s)", got, g.lastError())
	}
	g.call("download_write", 100, g.put(100, "second"))
	if string(h.downloaded) != "first second" {
		t.Errorf("downloaded %q", h.downloaded)
	}
	// The host's bound is checked before anything is sent.
	g.wantErr(g.call("download_write", 0, 2000), abi.ErrLimit, "over 1024 bytes")
	for _, r := range badRanges {
		t.Run(r.name, func(t *testing.T) {
			g.wantErr(g.call("download_write", r.ptr, r.len), abi.ErrFault, "outside")
		})
	}
	if string(h.downloaded) != "first second" {
		t.Errorf("refused writes sent bytes: %q", h.downloaded)
	}
}

func TestLastErrorFollowsTheSizedReadConvention(t *testing.T) {
	g := newGuest(t, newFakeHost(), Config{})
	g.call("log", 9, 0, 0)
	msg := "unknown log level 9"
	if n := g.call("last_error", 0, 3); n != int32(len(msg)) {
		t.Errorf("last_error with a small buffer = %d, want %d", n, len(msg))
	}
	if got := g.lastError(); got != msg {
		t.Errorf("last_error = %q", got)
	}
	g.wantErr(g.call("last_error", memSize-2, 100), abi.ErrFault, "outside")
}

func TestConfig(t *testing.T) {
	h := newFakeHost()
	g := newGuest(t, h, Config{})
	if n := g.call("config", 0, 100); n != int32(len(h.config)) || g.get(0, uint32(n)) != string(h.config) {
		t.Errorf("config = %d %q", n, g.get(0, uint32(max(n, 0))))
	}
	g.wantErr(g.call("config", memSize-1, 100), abi.ErrFault, "outside")
}

func TestWorkspaceFunctions(t *testing.T) {
	h := newFakeHost()
	g := newGuest(t, h, Config{})
	path := g.put(0, "notes/a.txt")
	data := g.put(100, "hello")
	if got := g.call("workspace_write", 0, path, 100, data); got != 0 {
		t.Fatalf("write = %d (%s)", got, g.lastError())
	}
	if n := g.call("workspace_read", 0, path, 200, 100); n != 5 || g.get(200, 5) != "hello" {
		t.Errorf("read = %d %q", n, g.get(200, 5))
	}
	if n := g.call("workspace_read", 0, path, 200, 2); n != 5 {
		t.Errorf("read with a small buffer = %d, want the size", n)
	}
	n := g.call("workspace_stat", 0, path, 300, 200)
	var fi abi.FileInfo
	if n < 0 || json.Unmarshal([]byte(g.get(300, uint32(n))), &fi) != nil || fi.Path != "notes/a.txt" || fi.Size != 5 || fi.ModTime != 1700000000000 {
		t.Errorf("stat = %d %q", n, g.get(300, uint32(max(n, 0))))
	}
	g.call("workspace_write", 0, g.put(0, "other.txt"), 100, data)
	n = g.call("workspace_list", 0, g.put(0, "no"), 300, 500)
	var list []abi.FileInfo
	if n < 0 || json.Unmarshal([]byte(g.get(300, uint32(n))), &list) != nil || len(list) != 1 || list[0].Path != "notes/a.txt" {
		t.Errorf("list = %d %q", n, g.get(300, uint32(max(n, 0))))
	}
	n = g.call("workspace_list", 0, 0, 300, 500)
	if json.Unmarshal([]byte(g.get(300, uint32(n))), &list) != nil || len(list) != 2 {
		t.Errorf("list of all = %q", g.get(300, uint32(max(n, 0))))
	}
	if got := g.call("workspace_delete", 0, g.put(0, "other.txt")); got != 0 || len(h.files) != 1 {
		t.Errorf("delete = %d, files %v", got, h.files)
	}

	missing := g.put(0, "missing.txt")
	g.wantErr(g.call("workspace_read", 0, missing, 200, 100), abi.ErrNotFound, `no file "missing.txt"`)
	g.wantErr(g.call("workspace_stat", 0, missing, 200, 100), abi.ErrNotFound, "no file")
	g.wantErr(g.call("workspace_delete", 0, missing), abi.ErrNotFound, "no file")
	g.wantErr(g.call("workspace_write", 0, g.put(0, "big"), 100, 101), abi.ErrLimit, "quota")

	for _, bad := range []string{"../escape", "/etc/passwd", "a/../../b", `a\b`, "a\x00b", ""} {
		p := g.put(0, bad)
		g.wantErr(g.call("workspace_read", 0, p, 200, 100), abi.ErrBadPath, "")
		g.wantErr(g.call("workspace_write", 0, p, 100, data), abi.ErrBadPath, "")
		g.wantErr(g.call("workspace_stat", 0, p, 200, 100), abi.ErrBadPath, "")
		g.wantErr(g.call("workspace_delete", 0, p), abi.ErrBadPath, "")
	}
	g.wantErr(g.call("workspace_read", 0, g.put(0, "a\xffb"), 200, 100), abi.ErrBadPath, "not valid UTF-8")
	g.wantErr(g.call("workspace_list", 0, g.put(0, "a\xffb"), 200, 100), abi.ErrBadPath, "not valid UTF-8")
	g.wantErr(g.call("workspace_read", 0, 5000, 200, 100), abi.ErrBadPath, "too long")

	path = g.put(0, "notes/a.txt")
	for _, r := range badRanges {
		t.Run(r.name, func(t *testing.T) {
			for _, fn := range []string{"workspace_read", "workspace_stat", "workspace_list"} {
				if r.len <= 4096 {
					g.wantErr(g.call(fn, r.ptr, r.len, 200, 100), abi.ErrFault, "outside")
				}
				if r.len >= 200 && uint64(r.ptr)+200 > memSize { // room for the answer, at a bad place
					g.wantErr(g.call(fn, 0, path, r.ptr, r.len), abi.ErrFault, "outside")
				}
				// A buffer big enough for the answer, running off the end.
				g.wantErr(g.call(fn, 0, path, memSize-2, 4096), abi.ErrFault, "outside")
				g.wantErr(g.call(fn, 0, path, 0xfffffff0, 4096), abi.ErrFault, "outside")
			}
			if r.len <= 4096 {
				g.wantErr(g.call("workspace_write", r.ptr, r.len, 100, data), abi.ErrFault, "outside")
				g.wantErr(g.call("workspace_delete", r.ptr, r.len), abi.ErrFault, "outside")
			} else {
				g.wantErr(g.call("workspace_write", r.ptr, r.len, 100, data), abi.ErrBadPath, "too long")
			}
			g.wantErr(g.call("workspace_write", 0, path, r.ptr, r.len), abi.ErrFault, "outside")
		})
	}
}

func TestOutsideAHandlerCallEveryFunctionIsNotAllowed(t *testing.T) {
	g := newGuest(t, nil, Config{})
	if got := g.call("input", 0, 100); got != abi.ErrNotAllowed {
		t.Errorf("input without a call = %d, want %d", got, abi.ErrNotAllowed)
	}
	if got := g.call("workspace_write", 0, 1, 0, 1); got != abi.ErrNotAllowed {
		t.Errorf("workspace_write without a call = %d", got)
	}
}

func TestHostCallFloodStopsTheCall(t *testing.T) {
	h := newFakeHost()
	g := newGuest(t, h, Config{MaxCalls: 1000})
	if _, err := g.mod.ExportedFunction("flood").Call(g.ctx, 1000); err != nil {
		t.Fatalf("1000 calls, at the limit: %v", err)
	}
	// The count is per handler call: a new one starts from zero.
	g.ctx = WithHost(context.Background(), h)
	_, err := g.mod.ExportedFunction("flood").Call(g.ctx, 5000)
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.EPLUGIN || !strings.Contains(perr.Message, "more than 1000 host calls") {
		t.Fatalf("flood of 5000 calls: %v, want a plugin failure naming the limit", err)
	}
	if len(h.logs) != 2000 {
		t.Errorf("%d log calls got through, want 2000 (1000 per handler call)", len(h.logs))
	}
}

// log hands the domain the name package abi gives a level, so the two
// must name the same levels.
func TestEveryABILogLevelIsALevelTheDomainKeeps(t *testing.T) {
	kept := map[string]bool{protocol.LevelDebug: true, protocol.LevelInfo: true, protocol.LevelWarn: true, protocol.LevelError: true}
	for _, level := range []int32{abi.LevelDebug, abi.LevelInfo, abi.LevelWarn, abi.LevelError} {
		if name := abi.LevelName(level); !kept[name] {
			t.Errorf("abi level %d is %q, not a level the domain keeps", level, name)
		}
		delete(kept, abi.LevelName(level))
	}
	if len(kept) != 0 {
		t.Errorf("domain levels no abi level names: %v", kept)
	}
}
