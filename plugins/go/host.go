package agent

import (
	"fmt"
	"unsafe"

	"github.com/agentrt/agentrt/plugins/abi"
)

// HostError is a host function's failure. Compare with errors.Is against
// ErrNotFound, ErrBadPath, ErrLimit, ...
type HostError struct {
	Func    string // the host function
	Code    int32  // abi.Err*
	Message string // the host's explanation
}

func (e *HostError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s: %s", e.Func, abi.ErrorName(e.Code))
	}
	return fmt.Sprintf("%s: %s", e.Func, e.Message)
}

// Is makes errors.Is(err, ErrNotFound) and the like work.
func (e *HostError) Is(target error) bool {
	t, ok := target.(*HostError)
	return ok && t.Func == "" && t.Code == e.Code
}

// Errors to compare host errors with, using errors.Is.
var (
	ErrInvalid    error = &HostError{Code: abi.ErrInvalid}
	ErrFault      error = &HostError{Code: abi.ErrFault}
	ErrNotFound   error = &HostError{Code: abi.ErrNotFound}
	ErrBadPath    error = &HostError{Code: abi.ErrBadPath}
	ErrLimit      error = &HostError{Code: abi.ErrLimit}
	ErrNotAllowed error = &HostError{Code: abi.ErrNotAllowed}
	ErrIO         error = &HostError{Code: abi.ErrIO}
)

// hostError builds the error for a failed host call, with the host's
// message.
func hostError(fn string, code int32) error {
	msg, _ := sizedRead(func(buf []byte) int32 { return hostLastError(ptr(buf), uint32(len(buf))) })
	return &HostError{Func: fn, Code: code, Message: string(msg)}
}

// codeError carries a negative code out of sizedRead.
type codeError int32

func (c codeError) Error() string { return abi.ErrorName(int32(c)) }

func int32FromErr(err error) int32 {
	if c, ok := err.(codeError); ok {
		return int32(c)
	}
	return abi.ErrIO
}

// sizedRead calls a host function that follows the sized-read convention:
// it returns the data's length and copies only when the buffer is big
// enough.
func sizedRead(call func(buf []byte) int32) ([]byte, error) {
	buf := make([]byte, 1024)
	for range 3 { // the data may change between calls (a file being written)
		n := call(buf)
		if n < 0 {
			return nil, codeError(n)
		}
		if int(n) <= len(buf) {
			return buf[:n], nil
		}
		buf = make([]byte, n)
	}
	return nil, codeError(abi.ErrIO)
}

// ptr is the address of b's first byte, as the host functions take it.
func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// strPtr is the address of s's first byte.
func strPtr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

// Level is a log level.
type Level int32

// Log levels.
const (
	Debug Level = Level(abi.LevelDebug)
	Info  Level = Level(abi.LevelInfo)
	Warn  Level = Level(abi.LevelWarn)
	Error Level = Level(abi.LevelError)
)

// Log writes one line to the log kept with the step (or, in the task
// handler, with the task). Lines past the call's log limit are dropped.
func Log(level Level, msg string) {
	hostLog(int32(level), strPtr(msg), uint32(len(msg)))
}

// Logf writes a formatted info line to the log.
func Logf(format string, args ...any) {
	Log(Info, fmt.Sprintf(format, args...))
}

// CreateArtifact publishes data as an artifact of the task, named fileName
// in the workspace directory relativePath ("" for its root), and returns
// its id. Created in a step, it is linked to that step. It becomes visible
// only if the handler succeeds.
func CreateArtifact(fileName, relativePath string, data []byte) (string, error) {
	return createArtifact(abi.ArtifactMeta{FileName: fileName, RelativePath: relativePath}, data)
}

// CreateURIArtifact publishes uri as a URI artifact of the task: a
// reference, which agentrt records and never fetches, of a scheme the
// agent may produce. fileName "" names it after the URI's last path
// segment. Created in a step, it is linked to that step. It becomes
// visible only if the handler succeeds.
func CreateURIArtifact(uri, fileName, relativePath string) (string, error) {
	return createArtifact(abi.ArtifactMeta{URI: uri, FileName: fileName, RelativePath: relativePath}, nil)
}

// downloadWriter sends the download handler's bytes to the client.
type downloadWriter struct{}

func (downloadWriter) Write(p []byte) (int, error) {
	if code := hostDownloadWrite(ptr(p), uint32(len(p))); code < 0 {
		return 0, hostError(abi.FuncDownloadWrite, code)
	}
	return len(p), nil
}

func createArtifact(meta abi.ArtifactMeta, data []byte) (string, error) {
	m := meta.AppendJSON(nil)
	id := make([]byte, 36)
	if code := hostArtifactCreate(ptr(m), uint32(len(m)), ptr(data), uint32(len(data)), ptr(id)); code < 0 {
		return "", hostError(abi.FuncArtifactCreate, code)
	}
	return string(id), nil
}
