// Package abi is the one place where the host↔plugin contract is written in
// Go: names, numbers and message shapes shared by the host (hostapi, runtime)
// and the Go/TinyGo plugin kit. plugins/ABI.md is its prose; the Rust kit
// mirrors it by hand.
//
// This package must stay small and free of dependencies beyond encoding/json:
// it is compiled into every Go and TinyGo plugin.
package abi

import "encoding/json"

// Version is the ABI version this package describes. A plugin reports the
// version it was built for from its VersionExport; the host refuses any
// version it does not serve.
const Version = 1

// ImportModule is the module name under which the host provides its
// functions. The version is part of the name so that a future ABI can live
// beside this one.
const ImportModule = "agentrt_v1"

// Exports a plugin may define.
const (
	// VersionExport: () -> i32, required; returns the ABI version.
	VersionExport = "agentrt_abi_version"
	// StepExport: () -> i32, required; runs for every executed step.
	StepExport = "agentrt_on_step"
	// TaskExport: () -> i32, optional; runs once when a task is created.
	TaskExport = "agentrt_on_task"
	// ArtifactExport: () -> i32, optional; runs when a client uploads an
	// artifact to a task.
	ArtifactExport = "agentrt_on_artifact"
	// DownloadExport: () -> i32, optional; runs when a client downloads an
	// artifact of a task, and may write its bytes (FuncDownloadWrite).
	DownloadExport = "agentrt_on_download"
	// HandlersExport: () -> i32, optional; a bit set (HandlerBit*) of the
	// handlers the plugin really defines. Kits that always export every
	// handler function use it so that the host skips the ones nobody
	// registered. Without it, an exported handler function is a handler.
	HandlersExport = "agentrt_handlers"
	// InitializeExport is the reactor constructor (Go and TinyGo
	// -buildmode=c-shared). The host calls it once per instance, before any
	// handler.
	InitializeExport = "_initialize"
)

// Bits of HandlersExport's result.
const (
	HandlerBitTask     int32 = 1 << 0
	HandlerBitStep     int32 = 1 << 1
	HandlerBitArtifact int32 = 1 << 2
	HandlerBitDownload int32 = 1 << 3
)

// ExportOf returns the export that implements a handler (HandlerTask, ...),
// or "" for an unknown handler.
func ExportOf(handler string) string {
	switch handler {
	case HandlerTask:
		return TaskExport
	case HandlerStep:
		return StepExport
	case HandlerArtifact:
		return ArtifactExport
	case HandlerDownload:
		return DownloadExport
	}
	return ""
}

// Host functions, all in ImportModule. Every pointer+length names a range of
// the plugin's exported memory. Every function returns an i32: zero or a
// length on success, a negative error code on failure.
const (
	// input(buf, cap) -> len: copies the call's input message into buf when
	// it fits (len <= cap) and always returns its length.
	FuncInput = "input"
	// set_result(ptr, len) -> 0: the handler's result message. A later call
	// replaces an earlier one.
	FuncSetResult = "set_result"
	// log(level, ptr, len) -> 0: one log line, kept with the step.
	FuncLog = "log"
	// artifact_create(meta, meta_len, data, data_len, id_out) -> 0: registers
	// an artifact (ArtifactMeta) with the given bytes, or with the bytes of a
	// workspace file when meta.workspace_path is set (data_len must be 0).
	// When id_out is not 0, the new artifact's 36-byte id is written there.
	FuncArtifactCreate = "artifact_create"
	// last_error(buf, cap) -> len: the message of the most recent failed host
	// call in this instance; copies when it fits.
	FuncLastError = "last_error"
	// workspace_read(path, path_len, buf, cap) -> size: copies the file when
	// it fits and always returns its size.
	FuncWorkspaceRead = "workspace_read"
	// workspace_write(path, path_len, data, data_len) -> 0: creates or
	// replaces a file, making parent directories.
	FuncWorkspaceWrite = "workspace_write"
	// workspace_list(prefix, prefix_len, buf, cap) -> len: a JSON array of
	// FileInfo for every file whose path starts with prefix, in path order.
	FuncWorkspaceList = "workspace_list"
	// workspace_stat(path, path_len, buf, cap) -> len: a JSON FileInfo.
	FuncWorkspaceStat = "workspace_stat"
	// workspace_delete(path, path_len) -> 0: removes a file.
	FuncWorkspaceDelete = "workspace_delete"
	// config(buf, cap) -> len: the operator's settings for this plugin as a
	// JSON object of strings.
	FuncConfig = "config"
	// download_write(data, data_len) -> 0: the next bytes of the download
	// the download handler serves, sent to the client as they come.
	FuncDownloadWrite = "download_write"
)

// Error codes returned (negated) by host functions.
const (
	// ErrInvalid: a malformed argument (bad JSON, bad UTF-8, bad value).
	ErrInvalid int32 = -1
	// ErrFault: a pointer/length outside the plugin's memory.
	ErrFault int32 = -2
	// ErrNotFound: no such file.
	ErrNotFound int32 = -3
	// ErrBadPath: a path was refused (absolute, "..", NUL, too long, ...).
	ErrBadPath int32 = -4
	// ErrLimit: a size, count or quota limit was reached.
	ErrLimit int32 = -5
	// ErrNotAllowed: the function cannot be used from this handler.
	ErrNotAllowed int32 = -6
	// ErrIO: the host failed; the message says why.
	ErrIO int32 = -7
)

// ErrorName returns a short name for an error code, for messages.
func ErrorName(code int32) string {
	switch code {
	case ErrInvalid:
		return "invalid argument"
	case ErrFault:
		return "bad pointer"
	case ErrNotFound:
		return "not found"
	case ErrBadPath:
		return "bad path"
	case ErrLimit:
		return "limit reached"
	case ErrNotAllowed:
		return "not allowed"
	case ErrIO:
		return "host I/O error"
	}
	return "unknown error"
}

// Log levels for FuncLog.
const (
	LevelDebug int32 = 0
	LevelInfo  int32 = 1
	LevelWarn  int32 = 2
	LevelError int32 = 3
)

// LevelName returns the name of a log level ("debug", "info", ...), or "" for
// an unknown one.
func LevelName(level int32) string {
	switch level {
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	case LevelError:
		return "error"
	}
	return ""
}

// Handler names, as they appear in Input.Handler.
const (
	HandlerTask     = "task"
	HandlerStep     = "step"
	HandlerArtifact = "artifact"
	HandlerDownload = "download"
)

// Input is the message a handler reads with FuncInput.
type Input struct {
	ABI     int    `json:"abi"`
	Handler string `json:"handler"`
	Task    Task   `json:"task"`
	// Step is set for the step handler.
	Step *Step `json:"step,omitempty"`
	// Request is set for the step handler: the execute-step request body.
	Request *Request `json:"request,omitempty"`
	// Artifact is set for the artifact handler, the uploaded artifact
	// (whose bytes, unless it is a URI, are in the workspace at
	// WorkspacePath), and for the download handler, the artifact
	// downloaded.
	Artifact *Artifact `json:"artifact,omitempty"`
}

// Task is a task as a plugin sees it.
type Task struct {
	TaskID          string          `json:"task_id"`
	Input           *string         `json:"input"`
	AdditionalInput json.RawMessage `json:"additional_input,omitempty"`
	Artifacts       []Artifact      `json:"artifacts"`
}

// Step is the step being executed.
type Step struct {
	StepID          string          `json:"step_id"`
	Name            *string         `json:"name"`
	Input           *string         `json:"input"`
	AdditionalInput json.RawMessage `json:"additional_input,omitempty"`
	// Planned is true when the task handler planned this step.
	Planned bool `json:"planned"`
}

// Request is an execute-step request body.
type Request struct {
	Input           *string         `json:"input"`
	AdditionalInput json.RawMessage `json:"additional_input,omitempty"`
}

// Artifact is an artifact as a plugin sees it.
type Artifact struct {
	ArtifactID   string `json:"artifact_id"`
	AgentCreated bool   `json:"agent_created"`
	FileName     string `json:"file_name"`
	RelativePath string `json:"relative_path"`
	// WorkspacePath is where the artifact's bytes are in the workspace;
	// absent for a URI artifact.
	WorkspacePath string `json:"workspace_path,omitempty"`
	// URI is set for a URI artifact: a reference to bytes held elsewhere.
	URI string `json:"uri,omitempty"`
	// StepID is the step that made the artifact; absent when none did.
	StepID string `json:"step_id,omitempty"`
}

// TaskResult is the task handler's result.
type TaskResult struct {
	// Steps are planned, in order; each is listed with status "created"
	// until it is executed.
	Steps []PlannedStep `json:"steps,omitempty"`
	Error string        `json:"error,omitempty"`
}

// PlannedStep is one step planned by the task handler.
type PlannedStep struct {
	Name            string          `json:"name"`
	Input           *string         `json:"input,omitempty"`
	AdditionalInput json.RawMessage `json:"additional_input,omitempty"`
}

// StepResult is the step handler's result.
type StepResult struct {
	Output           *string         `json:"output,omitempty"`
	AdditionalOutput json.RawMessage `json:"additional_output,omitempty"`
	// Name, when set, replaces the step's name.
	Name   *string `json:"name,omitempty"`
	IsLast bool    `json:"is_last,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// ArtifactResult is the artifact handler's result. A Reject reason refuses
// the upload; the client sees it. Replace, for a URI upload, keeps
// another artifact in its place.
type ArtifactResult struct {
	Reject  string           `json:"reject,omitempty"`
	Replace *ArtifactReplace `json:"replace,omitempty"`
	Error   string           `json:"error,omitempty"`
}

// ArtifactReplace is what an artifact handler keeps in place of a URI
// upload: another URI, or the bytes of a workspace file (the artifact is
// then named by its path). Exactly one is set.
type ArtifactReplace struct {
	URI           string `json:"uri,omitempty"`
	WorkspacePath string `json:"workspace_path,omitempty"`
}

// DownloadResult is the download handler's result. Default leaves the
// download to the host, as if there were no download handler: the stored
// bytes, or a redirect to an http or https URI. The handler must then
// have written nothing.
type DownloadResult struct {
	Default bool   `json:"default,omitempty"`
	Error   string `json:"error,omitempty"`
}

// MaxArtifactMetaBytes bounds FuncArtifactCreate's meta argument: a longer
// one is refused with ErrInvalid before it is read.
const MaxArtifactMetaBytes = 4096

// ArtifactMeta is FuncArtifactCreate's meta argument.
type ArtifactMeta struct {
	// FileName is the artifact's name; with a URI, "" names it after the
	// URI's last path segment.
	FileName     string `json:"file_name"`
	RelativePath string `json:"relative_path,omitempty"`
	// WorkspacePath, when set, registers that workspace file's bytes.
	WorkspacePath string `json:"workspace_path,omitempty"`
	// URI, when set, registers a URI artifact: a reference with no bytes
	// (data_len 0, no workspace_path), of a scheme the agent may produce.
	URI string `json:"uri,omitempty"`
}

// FileInfo describes a workspace file (FuncWorkspaceStat, FuncWorkspaceList).
type FileInfo struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// ModTime is Unix milliseconds.
	ModTime int64 `json:"mod_time"`
}
