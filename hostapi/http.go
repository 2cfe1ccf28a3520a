package hostapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/tetratelabs/wazero/api"
)

// Outbound HTTP (plugins/ABI.md, "Outbound HTTP"). A host function cannot
// be interrupted by the call's timeout, so the request carries the call's
// context: it ends when the call does. What the plugin hands over is
// bounded before it is read (the request message by
// abi.MaxHTTPRequestMetaBytes, the body by the agent's limit, checked by
// egress before a byte is sent); the response is held once, in host
// memory, until the next request or the call's end.

// Egress makes a plugin's outbound requests under its agent's policy;
// *egress.Client is one.
type Egress interface {
	// Do sends a request and reads its response, or fails with an
	// *egress.Error. The request's body is read only while Do runs.
	Do(ctx context.Context, r *egress.Request) (*egress.Response, error)
	// Limits are the agent's limits; the host functions count requests
	// against MaxRequests.
	Limits() egress.Limits
}

// WithEgress lets the call's plugin make outbound requests through e.
// Without it, http_request and artifact_fetch answer ErrNotAllowed.
func WithEgress(e Egress) Option { return func(c *call) { c.http.egress = e } }

// httpCall is the outbound HTTP of one handler call.
type httpCall struct {
	egress   Egress
	requests int
	// resp is the last response, meta its message for http_response.
	resp *egress.Response
	meta []byte
}

// countRequest counts one more request of the call, refusing it past
// the limit.
func (c *call) countRequest() int32 {
	if c.http.egress == nil {
		return c.fail(abi.ErrNotAllowed, "outbound HTTP is not available here")
	}
	if err := c.countRedirect(); err != nil {
		return c.failEgress(err)
	}
	return 0
}

// countRedirect counts a redirect a request follows as one more request
// of the call (egress.Request.CountRedirect): past the limit, the
// request stops there, and so does every later one of the call.
func (c *call) countRedirect() error {
	max := c.http.egress.Limits().MaxRequests
	if c.http.requests >= max {
		return &egress.Error{Code: egress.Limit, Message: fmt.Sprintf("a handler call may make at most %d outbound requests (each redirect followed is one)", max)}
	}
	c.http.requests++
	return nil
}

// failEgress records an egress error for last_error and returns its code.
func (c *call) failEgress(err error) int32 {
	var e *egress.Error
	if !errors.As(err, &e) {
		return c.failErr(err)
	}
	code := abi.ErrIO
	switch e.Code {
	case egress.Invalid:
		code = abi.ErrInvalid
	case egress.Refused:
		code = abi.ErrNotAllowed
	case egress.Limit:
		code = abi.ErrLimit
	}
	return c.fail(code, e.Message)
}

// http_request(req, req_len, body, body_len) -> 0
func (f *functions) httpRequest(c *call, mod api.Module, stack []uint64) int32 {
	c.http.resp, c.http.meta = nil, nil // the last response is freed first
	if n := arg(stack, 1); n > abi.MaxHTTPRequestMetaBytes {
		// Refused before it is read.
		return c.fail(abi.ErrInvalid, fmt.Sprintf("the request message of %d bytes is over its limit of %d bytes", n, abi.MaxHTTPRequestMetaBytes))
	}
	raw, errno := c.view(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	var req abi.HTTPRequest
	const want = "the request message is not a JSON object of method, url, headers, timeout_ms, max_response_bytes and no_redirects"
	// I-JSON with its members named as written: {"url":a,"url":b} or
	// "URL" would be read one way here and another by anyone else.
	if err := protocol.CheckJSONFields(raw, protocol.MaxJSONDepth, httpRequestFields); err != nil {
		return c.fail(abi.ErrInvalid, want+": "+err.Error())
	}
	if json.Unmarshal(raw, &req) != nil {
		return c.fail(abi.ErrInvalid, want)
	}
	// The body stays in the plugin's memory: egress reads it as it sends
	// it, and checks its length against the agent's limit first.
	body, errno := c.view(mod, arg(stack, 2), arg(stack, 3))
	if errno != 0 {
		return errno
	}
	if errno := c.countRequest(); errno != 0 {
		return errno
	}
	if err := c.host.BeforeEffect(c.ctx); err != nil {
		return c.failErr(err)
	}
	r := &egress.Request{Method: req.Method, URL: req.URL, Header: req.Headers, Body: body,
		MaxResponseBytes: req.MaxResponseBytes, NoRedirects: req.NoRedirects, CountRedirect: c.countRedirect}
	if req.TimeoutMS > 0 && req.TimeoutMS < math.MaxInt64/int64(time.Millisecond) {
		r.Timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	resp, err := c.http.egress.Do(c.ctx, r)
	if err != nil {
		return c.failEgress(err)
	}
	meta, err := protocol.MarshalJSON(abi.HTTPResponse{Status: resp.Status, Headers: resp.Header, BodySize: int64(len(resp.Body)), URL: resp.URL})
	if err != nil {
		return c.failErr(err)
	}
	c.http.resp, c.http.meta = resp, meta
	return 0
}

// http_response(buf, cap) -> len
func (f *functions) httpResponse(c *call, mod api.Module, stack []uint64) int32 {
	if c.http.resp == nil {
		return c.fail(abi.ErrNotFound, "no response: the last request failed, or none was made")
	}
	return c.copyOut(mod, c.http.meta, arg(stack, 0), arg(stack, 1))
}

// http_response_body(buf, cap) -> len
func (f *functions) httpResponseBody(c *call, mod api.Module, stack []uint64) int32 {
	if c.http.resp == nil {
		return c.fail(abi.ErrNotFound, "no response: the last request failed, or none was made")
	}
	return c.copyOut(mod, c.http.resp.Body, arg(stack, 0), arg(stack, 1))
}

// maxArtifactIDBytes bounds artifact_fetch's id (an id has 36).
const maxArtifactIDBytes = 64

// artifact_fetch(id, id_len, path, path_len) -> size
func (f *functions) artifactFetch(c *call, mod api.Module, stack []uint64) int32 {
	if n := arg(stack, 1); n > maxArtifactIDBytes {
		return c.fail(abi.ErrInvalid, fmt.Sprintf("an artifact id of %d bytes is too long", n))
	}
	id, errno := c.view(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	p, errno := c.path(mod, arg(stack, 2), arg(stack, 3))
	if errno != 0 {
		return errno
	}
	// Each fetch counts as a request, whatever becomes of it.
	if errno := c.countRequest(); errno != 0 {
		return errno
	}
	size, err := c.host.FetchArtifact(c.ctx, string(id), p, func(ctx context.Context, uri string) ([]byte, error) {
		// The domain found an http or https URI artifact: it is fetched
		// as a request of the plugin's would be, with nothing of its own.
		resp, err := c.http.egress.Do(ctx, &egress.Request{URL: uri, CountRedirect: c.countRedirect})
		if err != nil {
			return nil, err
		}
		if resp.Status < 200 || resp.Status > 299 {
			return nil, &egress.Error{Code: egress.Failed, Message: fmt.Sprintf("the server answered %d %s", resp.Status, http.StatusText(resp.Status))}
		}
		return resp.Body, nil
	})
	switch {
	case err != nil:
		return c.failEgress(err)
	case size > math.MaxInt32:
		return c.fail(abi.ErrLimit, "the file is larger than 2 GiB")
	}
	return int32(size)
}
