package agent

import (
	"fmt"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Outbound HTTP: the host makes the request, to the destinations the
// operator granted the agent, filling in the secrets it holds for them
// ("{{secret:NAME}}" in a header value); the plugin never opens a socket
// and never sees a secret. Package http (plugins/go/http) wraps RoundTrip
// as net/http's client is shaped; most plugins use that.

// RoundTrip sends req with body through the host and returns the
// response's message and body. A redirect is followed when the policy
// allows its destination. A refused request is a *HostError:
// ErrNotAllowed for a destination, an address or a secret the agent is
// not granted; ErrInvalid for a malformed request or a header the host
// owns (Host, hop-by-hop, proxy); ErrLimit past a size, a time or a
// count limit; ErrIO when the network or the server failed. An HTTP
// error status (404, 500) is a response, not an error.
func RoundTrip(req *abi.HTTPRequest, body []byte) (*abi.HTTPResponse, []byte, error) {
	msg := req.AppendJSON(nil)
	if code := hostHTTPRequest(ptr(msg), uint32(len(msg)), ptr(body), uint32(len(body))); code < 0 {
		return nil, nil, hostError(abi.FuncHTTPRequest, code)
	}
	meta, err := sizedRead(func(buf []byte) int32 { return hostHTTPResponse(ptr(buf), uint32(len(buf))) })
	if err != nil {
		return nil, nil, hostError(abi.FuncHTTPResponse, int32FromErr(err))
	}
	res, err := abi.DecodeHTTPResponse(meta)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: the host's answer is not valid: %v", abi.FuncHTTPResponse, err)
	}
	data, err := readExactly(res.BodySize, func(buf []byte) int32 { return hostHTTPResponseBody(ptr(buf), uint32(len(buf))) })
	if err != nil {
		return nil, nil, hostError(abi.FuncHTTPResponseBody, int32FromErr(err))
	}
	return res, data, nil
}

// readExactly is sizedRead of data whose size the host told already: one
// call, into a buffer of that size.
func readExactly(size int64, call func(buf []byte) int32) ([]byte, error) {
	if size <= 0 || size > 1<<31-1 {
		return sizedRead(call)
	}
	buf := make([]byte, size)
	n := call(buf)
	switch {
	case n < 0:
		return nil, codeError(n)
	case int64(n) <= size:
		return buf[:n], nil
	}
	return sizedRead(call) // it changed: read it as any other
}

// FetchArtifact fetches the bytes of the task's URI artifact artifactID
// (an http or https URI) into the workspace file path, and returns their
// size. The host fetches them as a GET of the agent's would be: to a
// destination the operator granted, within the agent's limits, with no
// header of the plugin's. Errors are those of RoundTrip, and
// ErrNotFound for an artifact the task does not have.
func FetchArtifact(artifactID, path string) (int64, error) {
	n := hostArtifactFetch(strPtr(artifactID), uint32(len(artifactID)), strPtr(path), uint32(len(path)))
	if n < 0 {
		return 0, hostError(abi.FuncArtifactFetch, n)
	}
	return int64(n), nil
}

// Secret is the placeholder of the secret name, "{{secret:NAME}}", for a
// header value: the host fills in the value for a destination the secret
// is bound to, and refuses the request elsewhere.
func Secret(name string) string { return abi.SecretPrefix + name + abi.SecretSuffix }
