// Command construct is a test plugin whose Go init function calls host
// functions while the instance is constructed, before any handler runs.
// Its step handler answers what those calls returned, as a JSON array:
// every one must have been refused (-6, not allowed), whatever the handler
// call that follows.
//
// Built by the tests (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared).
package main

import (
	"encoding/json"
	"unsafe"
)

//go:wasmimport agentrt_v1 input
func hostInput(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 set_result
func hostSetResult(p unsafe.Pointer, n uint32) int32

//go:wasmimport agentrt_v1 log
func hostLog(level uint32, p unsafe.Pointer, n uint32) int32

//go:wasmimport agentrt_v1 artifact_create
func hostArtifactCreate(meta unsafe.Pointer, metaLen uint32, data unsafe.Pointer, dataLen uint32, idOut unsafe.Pointer) int32

//go:wasmimport agentrt_v1 workspace_write
func hostWorkspaceWrite(path unsafe.Pointer, pathLen uint32, data unsafe.Pointer, dataLen uint32) int32

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// construction holds what host calls made while the instance initialized
// (Go's init functions run in _initialize) returned.
var construction []int32

func init() {
	set := []byte(`{"output":"set during construction"}`)
	logged := []byte("logged during construction")
	path, data := []byte("construction.txt"), []byte("written during construction")
	meta := []byte(`{"file_name":"construction.txt"}`)
	buf := make([]byte, 1<<16)
	construction = append(construction,
		hostSetResult(ptr(set), uint32(len(set))),
		hostLog(1, ptr(logged), uint32(len(logged))),
		hostWorkspaceWrite(ptr(path), uint32(len(path)), ptr(data), uint32(len(data))),
		hostArtifactCreate(ptr(meta), uint32(len(meta)), ptr(data), uint32(len(data)), nil),
		hostInput(ptr(buf), uint32(len(buf))),
	)
}

//go:wasmexport agentrt_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport agentrt_on_step
func onStep() int32 {
	b, _ := json.Marshal(construction)
	res, _ := json.Marshal(map[string]string{"output": string(b)})
	return hostSetResult(ptr(res), uint32(len(res)))
}

func main() {}
