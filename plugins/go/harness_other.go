//go:build !wasm

package agent

import "github.com/agentrt/agentrt/plugins/go/internal/harness"

// Outside WebAssembly the kit lends package agenttest its exports and the
// place of its host (testHost), so that a plugin's own tests run its
// handlers against agenttest's in-memory host.
func init() {
	harness.Bind(harness.Kit{
		Use: func(h harness.Host) {
			if h == nil {
				testHost = nil
				return
			}
			testHost = harnessHost{h}
		},
		Handlers:   handlers,
		OnStep:     onStep,
		OnTask:     onTask,
		OnArtifact: onArtifact,
		OnDownload: onDownload,
	})
}

// harnessHost is a harness.Host as the kit's host.
type harnessHost struct{ h harness.Host }

func (a harnessHost) input(buf []byte) int32            { return a.h.Input(buf) }
func (a harnessHost) setResult(result []byte) int32     { return a.h.SetResult(result) }
func (a harnessHost) log(level int32, msg []byte) int32 { return a.h.Log(level, msg) }
func (a harnessHost) lastError(buf []byte) int32        { return a.h.LastError(buf) }
func (a harnessHost) artifactCreate(meta, data, idOut []byte) int32 {
	return a.h.ArtifactCreate(meta, data, idOut)
}
func (a harnessHost) config(buf []byte) int32                { return a.h.Config(buf) }
func (a harnessHost) workspaceRead(path, buf []byte) int32   { return a.h.WorkspaceRead(path, buf) }
func (a harnessHost) workspaceWrite(path, data []byte) int32 { return a.h.WorkspaceWrite(path, data) }
func (a harnessHost) workspaceList(prefix, buf []byte) int32 { return a.h.WorkspaceList(prefix, buf) }
func (a harnessHost) workspaceStat(path, buf []byte) int32   { return a.h.WorkspaceStat(path, buf) }
func (a harnessHost) workspaceDelete(path []byte) int32      { return a.h.WorkspaceDelete(path) }
func (a harnessHost) downloadWrite(data []byte) int32        { return a.h.DownloadWrite(data) }
func (a harnessHost) progress(msg, output []byte) int32      { return a.h.Progress(msg, output) }
