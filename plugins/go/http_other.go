//go:build !wasm

package agent

import (
	"unsafe"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/plugins/go/internal/harness"
)

// Outside WebAssembly, the outbound HTTP functions reach the test host
// when it has them (httpHost), and are not allowed otherwise.

// httpHost is a host with the outbound HTTP functions.
type httpHost interface {
	httpRequest(req, body []byte) int32
	httpResponse(buf []byte) int32
	httpResponseBody(buf []byte) int32
	artifactFetch(id, path []byte) int32
}

func testHTTPHost() httpHost {
	h, _ := testHost.(httpHost)
	return h
}

func hostHTTPRequest(req unsafe.Pointer, reqLen uint32, body unsafe.Pointer, bodyLen uint32) int32 {
	h := testHTTPHost()
	if h == nil {
		return abi.ErrNotAllowed
	}
	return h.httpRequest(bytesAt(req, reqLen), bytesAt(body, bodyLen))
}

func hostHTTPResponse(buf unsafe.Pointer, capacity uint32) int32 {
	h := testHTTPHost()
	if h == nil {
		return abi.ErrNotAllowed
	}
	return h.httpResponse(bytesAt(buf, capacity))
}

func hostHTTPResponseBody(buf unsafe.Pointer, capacity uint32) int32 {
	h := testHTTPHost()
	if h == nil {
		return abi.ErrNotAllowed
	}
	return h.httpResponseBody(bytesAt(buf, capacity))
}

func hostArtifactFetch(id unsafe.Pointer, idLen uint32, path unsafe.Pointer, pathLen uint32) int32 {
	h := testHTTPHost()
	if h == nil {
		return abi.ErrNotAllowed
	}
	return h.artifactFetch(bytesAt(id, idLen), bytesAt(path, pathLen))
}

// The harness's host, when it has the outbound HTTP functions.

func (a harnessHost) http() harness.HTTPHost {
	h, _ := a.h.(harness.HTTPHost)
	return h
}

func (a harnessHost) httpRequest(req, body []byte) int32 {
	if h := a.http(); h != nil {
		return h.HTTPRequest(req, body)
	}
	return abi.ErrNotAllowed
}

func (a harnessHost) httpResponse(buf []byte) int32 {
	if h := a.http(); h != nil {
		return h.HTTPResponse(buf)
	}
	return abi.ErrNotAllowed
}

func (a harnessHost) httpResponseBody(buf []byte) int32 {
	if h := a.http(); h != nil {
		return h.HTTPResponseBody(buf)
	}
	return abi.ErrNotAllowed
}

func (a harnessHost) artifactFetch(id, path []byte) int32 {
	if h := a.http(); h != nil {
		return h.ArtifactFetch(id, path)
	}
	return abi.ErrNotAllowed
}
