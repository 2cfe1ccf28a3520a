//go:build !wasm

package agent

import (
	"unsafe"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Outside WebAssembly there is no host: every host function answers
// ErrNotAllowed. This file lets the kit and the examples compile, vet and
// be tested on the build machine.

func hostInput(unsafe.Pointer, uint32) int32      { return abi.ErrNotAllowed }
func hostSetResult(unsafe.Pointer, uint32) int32  { return abi.ErrNotAllowed }
func hostLog(int32, unsafe.Pointer, uint32) int32 { return abi.ErrNotAllowed }
func hostLastError(unsafe.Pointer, uint32) int32  { return abi.ErrNotAllowed }
func hostArtifactCreate(unsafe.Pointer, uint32, unsafe.Pointer, uint32, unsafe.Pointer) int32 {
	return abi.ErrNotAllowed
}
func hostConfig(unsafe.Pointer, uint32) int32 { return abi.ErrNotAllowed }
func hostWorkspaceRead(unsafe.Pointer, uint32, unsafe.Pointer, uint32) int32 {
	return abi.ErrNotAllowed
}
func hostWorkspaceWrite(unsafe.Pointer, uint32, unsafe.Pointer, uint32) int32 {
	return abi.ErrNotAllowed
}
func hostWorkspaceList(unsafe.Pointer, uint32, unsafe.Pointer, uint32) int32 {
	return abi.ErrNotAllowed
}
func hostWorkspaceStat(unsafe.Pointer, uint32, unsafe.Pointer, uint32) int32 {
	return abi.ErrNotAllowed
}
func hostWorkspaceDelete(unsafe.Pointer, uint32) int32 { return abi.ErrNotAllowed }
