//go:build wasm

package agent

import "unsafe"

// The host's outbound HTTP functions (plugins/ABI.md, "Outbound HTTP").
// Only a plugin that calls RoundTrip or FetchArtifact imports them: the
// linker drops them from the others, which load on a host without them.

//go:wasmimport agentrt_v1 http_request
func hostHTTPRequest(req unsafe.Pointer, reqLen uint32, body unsafe.Pointer, bodyLen uint32) int32

//go:wasmimport agentrt_v1 http_response
func hostHTTPResponse(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 http_response_body
func hostHTTPResponseBody(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 artifact_fetch
func hostArtifactFetch(id unsafe.Pointer, idLen uint32, path unsafe.Pointer, pathLen uint32) int32
