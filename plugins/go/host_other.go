//go:build !wasm

package agent

import (
	"unsafe"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Outside WebAssembly there is no host: every host function answers
// ErrNotAllowed, unless the kit's own tests have installed a stand-in host
// in testHost. This file lets the kit and the examples compile, vet and be
// tested on the build machine; the WebAssembly build (host_wasm.go) has
// neither testHost nor the host interface.

// host is agentrt's host functions (plugins/ABI.md) over Go byte slices:
// each pointer+length of the WebAssembly import becomes a slice of the
// kit's memory, and each result is what the import would return.
type host interface {
	input(buf []byte) int32
	setResult(result []byte) int32
	log(level int32, msg []byte) int32
	lastError(buf []byte) int32
	// artifactCreate's idOut is 36 bytes, or nil when the kit passes no
	// pointer.
	artifactCreate(meta, data, idOut []byte) int32
	config(buf []byte) int32
	workspaceRead(path, buf []byte) int32
	workspaceWrite(path, data []byte) int32
	workspaceList(prefix, buf []byte) int32
	workspaceStat(path, buf []byte) int32
	workspaceDelete(path []byte) int32
	downloadWrite(data []byte) int32
	progress(msg, output []byte) int32
}

// testHost answers the host functions when set; nil means no host.
var testHost host

// bytesAt is the n bytes at p, as the host reads a pointer+length.
func bytesAt(p unsafe.Pointer, n uint32) []byte {
	if p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

func hostInput(buf unsafe.Pointer, capacity uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.input(bytesAt(buf, capacity))
}

func hostSetResult(p unsafe.Pointer, n uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.setResult(bytesAt(p, n))
}

func hostLog(level int32, p unsafe.Pointer, n uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.log(level, bytesAt(p, n))
}

func hostLastError(buf unsafe.Pointer, capacity uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.lastError(bytesAt(buf, capacity))
}

func hostArtifactCreate(meta unsafe.Pointer, metaLen uint32, data unsafe.Pointer, dataLen uint32, idOut unsafe.Pointer) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.artifactCreate(bytesAt(meta, metaLen), bytesAt(data, dataLen), bytesAt(idOut, 36))
}

func hostConfig(buf unsafe.Pointer, capacity uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.config(bytesAt(buf, capacity))
}

func hostWorkspaceRead(path unsafe.Pointer, pathLen uint32, buf unsafe.Pointer, capacity uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.workspaceRead(bytesAt(path, pathLen), bytesAt(buf, capacity))
}

func hostWorkspaceWrite(path unsafe.Pointer, pathLen uint32, data unsafe.Pointer, dataLen uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.workspaceWrite(bytesAt(path, pathLen), bytesAt(data, dataLen))
}

func hostWorkspaceList(prefix unsafe.Pointer, prefixLen uint32, buf unsafe.Pointer, capacity uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.workspaceList(bytesAt(prefix, prefixLen), bytesAt(buf, capacity))
}

func hostWorkspaceStat(path unsafe.Pointer, pathLen uint32, buf unsafe.Pointer, capacity uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.workspaceStat(bytesAt(path, pathLen), bytesAt(buf, capacity))
}

func hostWorkspaceDelete(path unsafe.Pointer, pathLen uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.workspaceDelete(bytesAt(path, pathLen))
}

func hostDownloadWrite(data unsafe.Pointer, dataLen uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.downloadWrite(bytesAt(data, dataLen))
}

func hostProgress(msg unsafe.Pointer, msgLen uint32, output unsafe.Pointer, outputLen uint32) int32 {
	if testHost == nil {
		return abi.ErrNotAllowed
	}
	return testHost.progress(bytesAt(msg, msgLen), bytesAt(output, outputLen))
}
