// Package hostapi is a plugin's only door to the world: the functions of
// the ABI's import module (plugins/ABI.md), which act on the handler call in
// progress.
//
// Every argument from a plugin is hostile input. Pointers and lengths go
// through one bounds-checked helper (memory.go); a bad one is an error code
// back to the plugin, never a host panic. Strings must be UTF-8. The only
// way a host function stops a plugin is the per-call host-call limit.
package hostapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Host is the handler call the functions act on; *protocol.Call implements
// it. Byte slices it is given may be the plugin's memory: it copies what it
// keeps, and only after checking it against its limits.
//
// Its errors are domain errors, and reach the plugin as the ABI's codes
// (codeOf), their message for last_error: ENOTFOUND is abi.ErrNotFound,
// EBADPATH abi.ErrBadPath, ETOOLARGE abi.ErrLimit, EUNPROCESSABLE and
// EINVALID abi.ErrInvalid, EMETHOD abi.ErrNotAllowed, and anything else
// (a full disk, the store failing, the client gone) abi.ErrIO. Each method
// below says which it returns; none stops the plugin.
type Host interface {
	// Input is the message the handler reads (input), in the ABI's wire
	// format. It cannot fail.
	Input() []byte
	// SetResult keeps the handler's result (set_result), replacing an
	// earlier one. ErrLimit over the result limit, ErrInvalid when it is
	// not I-JSON (protocol.CheckJSON); a refused result fails the call
	// unless a later one replaces it.
	SetResult(result []byte) error
	// Log keeps a line of the handler's log (log) at level, one of
	// protocol.LevelDebug, LevelInfo, LevelWarn and LevelError
	// (ErrInvalid for another). A line that would put the call's log over
	// its limit is refused (ErrLimit), the log says so once, and every
	// later line is refused the same way. Bytes that are not UTF-8 are
	// kept, replaced by U+FFFD.
	Log(level string, message []byte) error
	// Progress reports how far the step handler has come (progress): a
	// message and, when output is not empty, the step's output so far;
	// both may be the plugin's memory, and are within the ABI's size
	// limits. It becomes the task's next step.progress event.
	// ErrNotAllowed outside the step handler; ErrLimit once the call's
	// log limit is reached, which a report counts against as a log line
	// of its text would. Bytes that are not UTF-8 are kept, replaced by
	// U+FFFD.
	Progress(ctx context.Context, message, output []byte) error
	// CreateArtifact stages an artifact (artifact_create) and returns its
	// id: the bytes of data, or of the workspace file spec.WorkspacePath,
	// or a URI artifact, with no bytes. It is recorded, linked to the
	// step, only if the handler succeeds. ErrNotAllowed from the download
	// handler, or for a URI scheme (or file bytes) the agent may not
	// produce; ErrInvalid for a bad URI, or data given with a URI or with
	// a workspace path; ErrBadPath for a file name or relative path
	// refused, or a workspace path refused or naming a directory;
	// ErrNotFound when the workspace file does not exist; ErrLimit past
	// the artifacts a call may create, the artifact size limit or the
	// task's artifact quotas (count and bytes); ErrIO when the bytes
	// could not be staged.
	CreateArtifact(ctx context.Context, spec protocol.ArtifactSpec, data []byte) (id string, err error)
	// Config is the operator's settings for the plugin (config), a JSON
	// object of strings. It cannot fail.
	Config() []byte
	// WorkspaceReadInto reads the workspace file at path into buf when it
	// fits and returns its size either way (workspace_read): a file
	// larger than buf is not read. ErrBadPath for a path refused or naming
	// a directory, ErrNotFound when there is no such file, ErrIO when the
	// store fails.
	WorkspaceReadInto(ctx context.Context, path string, buf []byte) (int64, error)
	// WorkspaceWrite creates or replaces the workspace file at path,
	// making its directories (workspace_write), after BeforeEffect.
	// ErrNotAllowed from the download handler, ErrBadPath for a path
	// refused, naming a directory or under a file, ErrLimit over the
	// workspace's quota of bytes or entries (nothing is changed), and
	// BeforeEffect's errors; ErrIO when the store fails.
	WorkspaceWrite(ctx context.Context, path string, data []byte) error
	// WorkspaceList lists the workspace files whose path starts with
	// prefix, in path order (workspace_list). ErrBadPath for a prefix
	// with characters a path may not hold or over the path length limit,
	// ErrIO when the store fails.
	WorkspaceList(ctx context.Context, prefix string) ([]protocol.FileInfo, error)
	// WorkspaceStat describes the workspace file at path
	// (workspace_stat). ErrBadPath and ErrNotFound as WorkspaceReadInto.
	WorkspaceStat(ctx context.Context, path string) (protocol.FileInfo, error)
	// WorkspaceDelete removes the workspace file at path and the
	// directories it leaves empty (workspace_delete), after BeforeEffect.
	// ErrNotAllowed from the download handler; ErrBadPath and ErrNotFound
	// as WorkspaceReadInto; BeforeEffect's errors.
	WorkspaceDelete(ctx context.Context, path string) error
	// DownloadWrite sends data (the plugin's memory, which it does not
	// hold) to the client downloading, within ctx's deadline
	// (download_write). ErrNotAllowed outside the download handler,
	// ErrLimit when the download would hold more than the artifact limit
	// (nothing is written), ErrIO once the client takes no more (it went
	// away, or took the bytes too slowly), for this write and every later
	// one.
	DownloadWrite(ctx context.Context, data []byte) error
	// BeforeEffect is called before what outlasts the handler call (an
	// outbound request here; WorkspaceWrite and WorkspaceDelete call it
	// themselves): what outlasts the call is recorded as under way first
	// (a step's running mark). An error refuses the effect: ErrNotFound
	// when the task is gone, ErrIO when the mark could not be written.
	BeforeEffect(ctx context.Context) error
	// FetchArtifact writes the bytes of the task's URI artifact
	// artifactID, which get fetches, to the workspace file path, and
	// returns their size (artifact_fetch, http.go). ErrNotAllowed from
	// the download handler or for a URI that is not http or https;
	// ErrBadPath for a path refused; ErrNotFound when the call sees no
	// such artifact; ErrInvalid for an artifact of bytes (they are in the
	// workspace already); BeforeEffect's errors; get's errors as they are
	// (egress's, as failEgress maps them); then WorkspaceWrite's.
	FetchArtifact(ctx context.Context, artifactID, path string, get func(ctx context.Context, uri string) ([]byte, error)) (int64, error)
}

// Config bounds what a plugin may do through the host API.
type Config struct {
	// MaxCalls caps the host calls of one handler call; past it the call is
	// stopped.
	MaxCalls int
}

// DefaultMaxCalls is the host-call limit used when none is configured.
const DefaultMaxCalls = 100_000

// WithHost returns a context under which host functions act on h. Each
// handler call gets its own.
func WithHost(ctx context.Context, h Host, opts ...Option) context.Context {
	c := &call{host: h}
	for _, o := range opts {
		o(c)
	}
	return context.WithValue(ctx, callKey{}, c)
}

// Option adds to what the host functions of a handler call reach.
type Option func(*call)

type callKey struct{}

// WithConstruction returns a context for a plugin's initialization under
// which the functions, answering ErrNotAllowed as they do outside any
// handler call, first tell called the name of each one the plugin calls
// ("agentrt_v1.log"): the runtime takes no snapshot of an initialization
// that calls them.
func WithConstruction(ctx context.Context, called func(name string)) context.Context {
	return context.WithValue(ctx, constructionKey{}, called)
}

type constructionKey struct{}

// call is the host API's state for one handler call.
type call struct {
	host    Host
	calls   int
	lastErr string
	// ctx is the context of the host function running, for the Host
	// methods that do I/O.
	ctx context.Context
	// http is the call's outbound HTTP (http.go).
	http httpCall
}

// Instantiate defines the import module in r. Plugins compiled in r may then
// import its functions.
func Instantiate(ctx context.Context, r wazero.Runtime, cfg Config) error {
	if cfg.MaxCalls <= 0 {
		cfg.MaxCalls = DefaultMaxCalls
	}
	f := &functions{cfg: cfg}
	b := r.NewHostModuleBuilder(abi.ImportModule)
	for _, fn := range []struct {
		name   string
		params int
		impl   func(c *call, mod api.Module, stack []uint64) int32
	}{
		{abi.FuncInput, 2, f.input},
		{abi.FuncSetResult, 2, f.setResult},
		{abi.FuncLog, 3, f.log},
		{abi.FuncArtifactCreate, 5, f.artifactCreate},
		{abi.FuncLastError, 2, f.lastError},
		{abi.FuncConfig, 2, f.config},
		{abi.FuncWorkspaceRead, 4, f.workspaceRead},
		{abi.FuncWorkspaceWrite, 4, f.workspaceWrite},
		{abi.FuncWorkspaceList, 4, f.workspaceList},
		{abi.FuncWorkspaceStat, 4, f.workspaceStat},
		{abi.FuncWorkspaceDelete, 2, f.workspaceDelete},
		{abi.FuncDownloadWrite, 2, f.downloadWrite},
		{abi.FuncHTTPRequest, 4, f.httpRequest},
		{abi.FuncHTTPResponse, 2, f.httpResponse},
		{abi.FuncHTTPResponseBody, 2, f.httpResponseBody},
		{abi.FuncArtifactFetch, 4, f.artifactFetch},
		{abi.FuncProgress, 4, f.progress},
	} {
		impl, name := fn.impl, fn.name
		params := make([]api.ValueType, fn.params)
		for i := range params {
			params[i] = api.ValueTypeI32
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
				stack[0] = api.EncodeI32(f.enter(ctx, mod, stack, name, impl))
			}), params, []api.ValueType{api.ValueTypeI32}).
			Export(fn.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

type functions struct {
	cfg Config
}

// enter counts the call against the limit and runs impl on the handler call
// in progress. Outside a handler call (while a plugin initializes) every
// function answers ErrNotAllowed, and tells a construction watching
// (WithConstruction) that the plugin called function name.
func (f *functions) enter(ctx context.Context, mod api.Module, stack []uint64, name string, impl func(*call, api.Module, []uint64) int32) int32 {
	c, _ := ctx.Value(callKey{}).(*call)
	if c == nil {
		if called, ok := ctx.Value(constructionKey{}).(func(string)); ok {
			called(abi.ImportModule + "." + name)
		}
		return abi.ErrNotAllowed
	}
	c.calls++
	if c.calls > f.cfg.MaxCalls {
		// The only way out of a runaway loop of host calls: stop the call.
		panic(protocol.NewPluginFailure(protocol.CauseHostLimit, "the plugin made more than %d host calls in one handler call", f.cfg.MaxCalls))
	}
	c.ctx = ctx
	return impl(c, mod, stack)
}

// fail records err's message for last_error and returns its code.
func (c *call) fail(code int32, msg string) int32 {
	c.lastErr = msg
	return code
}

// failErr records a host-side error for last_error and returns its code.
func (c *call) failErr(err error) int32 {
	return c.fail(codeOf(err), protocol.ErrorMessage(err))
}

// codeOf maps a domain error to the ABI's error code.
func codeOf(err error) int32 {
	switch protocol.ErrorCode(err) {
	case protocol.ENOTFOUND:
		return abi.ErrNotFound
	case protocol.EBADPATH:
		return abi.ErrBadPath
	case protocol.ETOOLARGE:
		return abi.ErrLimit
	case protocol.EUNPROCESSABLE, protocol.EINVALID:
		return abi.ErrInvalid
	case protocol.EMETHOD:
		return abi.ErrNotAllowed
	}
	return abi.ErrIO
}

// input(buf, cap) -> len
func (f *functions) input(c *call, mod api.Module, stack []uint64) int32 {
	return c.copyOut(mod, c.host.Input(), arg(stack, 0), arg(stack, 1))
}

// set_result(ptr, len) -> 0
func (f *functions) setResult(c *call, mod api.Module, stack []uint64) int32 {
	b, errno := c.view(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	if err := c.host.SetResult(b); err != nil {
		return c.failErr(err)
	}
	return 0
}

// log(level, ptr, len) -> 0
func (f *functions) log(c *call, mod api.Module, stack []uint64) int32 {
	level := int32(arg(stack, 0))
	b, errno := c.view(mod, arg(stack, 1), arg(stack, 2))
	if errno != 0 {
		return errno
	}
	// The names of package abi's levels are the domain's.
	name := abi.LevelName(level)
	if name == "" {
		return c.fail(abi.ErrInvalid, fmt.Sprintf("unknown log level %d", level))
	}
	// b is the plugin's memory, possibly all of it: the host checks it
	// against the log limit before it copies anything.
	if err := c.host.Log(name, b); err != nil {
		return c.failErr(err)
	}
	return 0
}

// The members the JSON a plugin hands over may name, as written.
var (
	artifactMetaFields = protocol.JSONFieldsOf(reflect.TypeFor[abi.ArtifactMeta]())
	httpRequestFields  = protocol.JSONFieldsOf(reflect.TypeFor[abi.HTTPRequest]())
)

// artifact_create(meta, meta_len, data, data_len, id_out) -> 0
func (f *functions) artifactCreate(c *call, mod api.Module, stack []uint64) int32 {
	raw, errno := c.view(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	if len(raw) > abi.MaxArtifactMetaBytes {
		// Refused before it is copied or decoded.
		return c.fail(abi.ErrInvalid, fmt.Sprintf("artifact meta of %d bytes is over its limit of %d bytes", len(raw), abi.MaxArtifactMetaBytes))
	}
	var meta abi.ArtifactMeta
	const want = "artifact_create: meta is not a JSON object of file_name, relative_path, workspace_path and uri"
	// I-JSON, as every JSON a plugin hands over, with its members named
	// as written (not "URI" for uri: protocol.JSONFields).
	if err := protocol.CheckJSONFields(raw, protocol.MaxJSONDepth, artifactMetaFields); err != nil {
		return c.fail(abi.ErrInvalid, want+": "+err.Error())
	}
	if json.Unmarshal(raw, &meta) != nil {
		return c.fail(abi.ErrInvalid, want)
	}
	data, errno := c.view(mod, arg(stack, 2), arg(stack, 3))
	if errno != 0 {
		return errno
	}
	idOut := arg(stack, 4)
	if idOut != 0 {
		// Check the id's destination before creating anything.
		if _, errno := c.view(mod, idOut, 36); errno != 0 {
			return errno
		}
	}
	id, err := c.host.CreateArtifact(c.ctx, protocol.ArtifactSpec{FileName: meta.FileName, RelativePath: meta.RelativePath,
		WorkspacePath: meta.WorkspacePath, URI: meta.URI}, data)
	if err != nil {
		return c.failErr(err)
	}
	if idOut != 0 {
		dst, _ := c.view(mod, idOut, 36) // checked above; memory never shrinks
		copy(dst, id)
	}
	return 0
}

// last_error(buf, cap) -> len
func (f *functions) lastError(c *call, mod api.Module, stack []uint64) int32 {
	msg := c.lastErr
	return c.copyOut(mod, []byte(msg), arg(stack, 0), arg(stack, 1))
}

// config(buf, cap) -> len
func (f *functions) config(c *call, mod api.Module, stack []uint64) int32 {
	return c.copyOut(mod, c.host.Config(), arg(stack, 0), arg(stack, 1))
}

// path reads a path argument: UTF-8 bytes of guest memory.
func (c *call) path(mod api.Module, ptr, n uint32) (string, int32) {
	if n > 4096 {
		return "", c.fail(abi.ErrBadPath, fmt.Sprintf("a path of %d bytes is too long", n))
	}
	b, errno := c.view(mod, ptr, n)
	if errno != 0 {
		return "", errno
	}
	if !utf8.Valid(b) {
		return "", c.fail(abi.ErrBadPath, "the path is not valid UTF-8")
	}
	return string(b), 0
}

// workspace_read(path, path_len, buf, cap) -> size
func (f *functions) workspaceRead(c *call, mod api.Module, stack []uint64) int32 {
	p, errno := c.path(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	// The file is read straight into the plugin's buffer, and only if it
	// fits: the host holds none of its bytes, whatever its size.
	buf, errno := c.view(mod, arg(stack, 2), arg(stack, 3))
	if errno != 0 {
		return errno
	}
	size, err := c.host.WorkspaceReadInto(c.ctx, p, buf)
	if err != nil {
		return c.failErr(err)
	}
	if size > math.MaxInt32 {
		return c.fail(abi.ErrLimit, "the file is larger than 2 GiB")
	}
	return int32(size)
}

// workspace_write(path, path_len, data, data_len) -> 0
func (f *functions) workspaceWrite(c *call, mod api.Module, stack []uint64) int32 {
	p, errno := c.path(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	data, errno := c.view(mod, arg(stack, 2), arg(stack, 3))
	if errno != 0 {
		return errno
	}
	if err := c.host.WorkspaceWrite(c.ctx, p, data); err != nil {
		return c.failErr(err)
	}
	return 0
}

// workspace_list(prefix, prefix_len, buf, cap) -> len
func (f *functions) workspaceList(c *call, mod api.Module, stack []uint64) int32 {
	prefix, errno := c.path(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	files, err := c.host.WorkspaceList(c.ctx, prefix)
	if err != nil {
		return c.failErr(err)
	}
	infos := make([]abi.FileInfo, len(files))
	for i, fi := range files {
		infos[i] = fileInfo(fi)
	}
	return c.copyJSON(mod, infos, arg(stack, 2), arg(stack, 3))
}

// workspace_stat(path, path_len, buf, cap) -> len
func (f *functions) workspaceStat(c *call, mod api.Module, stack []uint64) int32 {
	p, errno := c.path(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	fi, err := c.host.WorkspaceStat(c.ctx, p)
	if err != nil {
		return c.failErr(err)
	}
	return c.copyJSON(mod, fileInfo(fi), arg(stack, 2), arg(stack, 3))
}

// workspace_delete(path, path_len) -> 0
func (f *functions) workspaceDelete(c *call, mod api.Module, stack []uint64) int32 {
	p, errno := c.path(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	if err := c.host.WorkspaceDelete(c.ctx, p); err != nil {
		return c.failErr(err)
	}
	return 0
}

// download_write(data, data_len) -> 0
func (f *functions) downloadWrite(c *call, mod api.Module, stack []uint64) int32 {
	data, errno := c.view(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	// data is the plugin's memory, possibly all of it: the host checks its
	// length against the download's limit, then writes it to the client
	// from where it is, holding none of it.
	if err := c.host.DownloadWrite(c.ctx, data); err != nil {
		return c.failErr(err)
	}
	return 0
}

// copyJSON is copyOut of v as JSON (protocol.MarshalJSON: a path takes at
// most twice its bytes).
func (c *call) copyJSON(mod api.Module, v any, buf, capacity uint32) int32 {
	b, err := protocol.MarshalJSON(v)
	if err != nil {
		return c.failErr(err)
	}
	return c.copyOut(mod, b, buf, capacity)
}

func fileInfo(fi protocol.FileInfo) abi.FileInfo {
	return abi.FileInfo{Path: fi.Path, Size: fi.Size, ModTime: fi.ModTime.UnixMilli()}
}
