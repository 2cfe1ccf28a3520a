//go:build wasm

package agent

import "unsafe"

// The host's functions (plugins/ABI.md). Pointers are into this module's
// memory; the host copies what it keeps.

//go:wasmimport agentrt_v1 input
func hostInput(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 set_result
func hostSetResult(p unsafe.Pointer, n uint32) int32

//go:wasmimport agentrt_v1 log
func hostLog(level int32, p unsafe.Pointer, n uint32) int32

//go:wasmimport agentrt_v1 artifact_create
func hostArtifactCreate(meta unsafe.Pointer, metaLen uint32, data unsafe.Pointer, dataLen uint32, idOut unsafe.Pointer) int32

//go:wasmimport agentrt_v1 last_error
func hostLastError(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 config
func hostConfig(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 workspace_read
func hostWorkspaceRead(path unsafe.Pointer, pathLen uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 workspace_write
func hostWorkspaceWrite(path unsafe.Pointer, pathLen uint32, data unsafe.Pointer, dataLen uint32) int32

//go:wasmimport agentrt_v1 workspace_list
func hostWorkspaceList(prefix unsafe.Pointer, prefixLen uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 workspace_stat
func hostWorkspaceStat(path unsafe.Pointer, pathLen uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 workspace_delete
func hostWorkspaceDelete(path unsafe.Pointer, pathLen uint32) int32

//go:wasmimport agentrt_v1 download_write
func hostDownloadWrite(data unsafe.Pointer, dataLen uint32) int32

// progress is imported only by a plugin that calls Progress or
// ProgressOutput: the linker drops it from the others, which load on a
// host without it.
//
//go:wasmimport agentrt_v1 progress
func hostProgress(msg unsafe.Pointer, msgLen uint32, output unsafe.Pointer, outputLen uint32) int32
