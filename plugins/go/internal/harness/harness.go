// Package harness connects the kit to its test harness (package agenttest)
// on the build machine: the kit lends the harness its exports and a way to
// install a host, and the harness lends the kit a host.
package harness

// Host is agentrt's host functions (plugins/ABI.md) over Go byte slices:
// each pointer+length of the WebAssembly import is a slice of the kit's
// memory, and each result is what the import would return.
type Host interface {
	Input(buf []byte) int32
	SetResult(result []byte) int32
	Log(level int32, msg []byte) int32
	LastError(buf []byte) int32
	// ArtifactCreate's idOut is 36 bytes, or nil when the kit passes no
	// pointer.
	ArtifactCreate(meta, data, idOut []byte) int32
	Config(buf []byte) int32
	WorkspaceRead(path, buf []byte) int32
	WorkspaceWrite(path, data []byte) int32
	WorkspaceList(prefix, buf []byte) int32
	WorkspaceStat(path, buf []byte) int32
	WorkspaceDelete(path []byte) int32
	DownloadWrite(data []byte) int32
	Progress(msg, output []byte) int32
}

// Kit is what the kit lends: its exports (plugins/ABI.md), each as the
// host would call it, and Use, which makes h the host the kit's host
// functions call (nil: none, every function answers ErrNotAllowed).
type Kit struct {
	Use                                              func(h Host)
	Handlers, OnStep, OnTask, OnArtifact, OnDownload func() int32
}

var kit *Kit

// Bind is called by the kit, at its initialization, outside WebAssembly.
func Bind(k Kit) { kit = &k }

// Bound returns what the kit lent, or nil when the kit is not linked in or
// runs in WebAssembly.
func Bound() *Kit { return kit }
