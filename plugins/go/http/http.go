// Package http is outbound HTTP for agentrt plugins, shaped like the
// client of net/http: Get, Post, NewRequest, Client.Do, Header, a
// Response whose Body is read with io.ReadAll. It does not import
// net/http (too big for a plugin, and not built for wasip1 by TinyGo):
// the host makes each request (plugins/ABI.md, "Outbound HTTP").
//
//	resp, err := http.Get("https://api.example.com/v1/items")
//	if err != nil {
//		return agent.Result{}, err
//	}
//	defer resp.Body.Close()
//	body, err := io.ReadAll(resp.Body)
//
// What a plugin may reach is the operator's decision: a destination the
// agent's manifest asks for (capabilities.http) and the operator granted.
// Anything else is an error (errors.Is(err, agent.ErrNotAllowed)), and so
// is an address that is not public (loopback, private, link-local) unless
// the operator allowed its host. Credentials are the host's: a header
// value holds a placeholder, Secret("OPENAI_API_KEY"), which the host
// fills in for the destinations the operator bound the secret to; the
// plugin never sees the value, and the host scrubs it from what comes
// back.
//
// Differences from net/http: a URL is a string; a request's body is read
// whole before it is sent, and a response's body is whole in memory when
// Do returns (within the agent's limit, -max-http-response); redirects are
// followed by the host (Client.NoRedirects turns that off); the plugin
// cannot set Host, hop-by-hop, proxy, Content-Length, Expect or
// Accept-Encoding headers (the host decodes gzip itself); errors are
// *agent.HostError.
package http

import (
	"bytes"
	"errors"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
	agent "github.com/agentrt/agentrt/plugins/go"
)

// Methods a plugin may send.
const (
	MethodGet     = "GET"
	MethodHead    = "HEAD"
	MethodPost    = "POST"
	MethodPut     = "PUT"
	MethodPatch   = "PATCH"
	MethodDelete  = "DELETE"
	MethodOptions = "OPTIONS"
)

// Common status codes, as net/http names them.
const (
	StatusOK                  = 200
	StatusCreated             = 201
	StatusAccepted            = 202
	StatusNoContent           = 204
	StatusMovedPermanently    = 301
	StatusFound               = 302
	StatusSeeOther            = 303
	StatusNotModified         = 304
	StatusTemporaryRedirect   = 307
	StatusPermanentRedirect   = 308
	StatusBadRequest          = 400
	StatusUnauthorized        = 401
	StatusForbidden           = 403
	StatusNotFound            = 404
	StatusConflict            = 409
	StatusUnprocessableEntity = 422
	StatusTooManyRequests     = 429
	StatusInternalServerError = 500
	StatusBadGateway          = 502
	StatusServiceUnavailable  = 503
	StatusGatewayTimeout      = 504
)

var statusText = map[int]string{
	200: "OK", 201: "Created", 202: "Accepted", 204: "No Content",
	301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
	307: "Temporary Redirect", 308: "Permanent Redirect",
	400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
	409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests",
	500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
}

// StatusText is the text of a status code, "" for one it does not know.
func StatusText(code int) string { return statusText[code] }

// Secret is the placeholder of the secret name for a header value:
//
//	req.Header.Set("Authorization", "Bearer "+http.Secret("OPENAI_API_KEY"))
func Secret(name string) string { return agent.Secret(name) }

// Header is a request's or a response's headers, by canonical name.
type Header map[string][]string

// CanonicalHeaderKey is name as a header's canonical name: "content-type"
// is "Content-Type".
func CanonicalHeaderKey(name string) string { return abi.CanonicalHeaderName(name) }

// Add adds a value to the header name.
func (h Header) Add(name, value string) {
	k := CanonicalHeaderKey(name)
	h[k] = append(h[k], value)
}

// Set sets the header name to value alone.
func (h Header) Set(name, value string) { h[CanonicalHeaderKey(name)] = []string{value} }

// Get is the first value of the header name, "" if there is none.
func (h Header) Get(name string) string {
	if v := h[CanonicalHeaderKey(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Values are the values of the header name.
func (h Header) Values(name string) []string { return h[CanonicalHeaderKey(name)] }

// Del removes the header name.
func (h Header) Del(name string) { delete(h, CanonicalHeaderKey(name)) }

// Clone is a copy of h.
func (h Header) Clone() Header {
	if h == nil {
		return nil
	}
	c := make(Header, len(h))
	for k, v := range h {
		c[k] = append([]string(nil), v...)
	}
	return c
}

// Request is an outbound request.
type Request struct {
	Method string // "" is GET
	URL    string // absolute http or https
	Header Header
	// Body, when not nil, is read whole before the request is sent.
	Body io.Reader
}

// NewRequest returns a request of method to url with body (nil for
// none). It fails for a method the host does not send.
func NewRequest(method, url string, body io.Reader) (*Request, error) {
	if method == "" {
		method = MethodGet
	}
	known := false
	for _, m := range abi.HTTPMethods {
		known = known || m == method
	}
	if !known {
		return nil, errors.New("http: the host does not send method " + strconv.Quote(method))
	}
	return &Request{Method: method, URL: url, Header: Header{}, Body: body}, nil
}

// Response is what answered a request.
type Response struct {
	Status     string // "200 OK"
	StatusCode int
	Header     Header
	// Body is the response's body, whole; Close is not needed, but
	// harmless.
	Body          io.ReadCloser
	ContentLength int64
	// URL is the URL that answered: the request's, or its last
	// redirect's.
	URL     string
	Request *Request
}

// Client sends requests. Its zero value is the agent's limits and
// follows redirects.
type Client struct {
	// Timeout, when more than 0, is a time limit of each request, lower
	// than the agent's (the host holds the agent's, and the handler
	// call's, whatever this says).
	Timeout time.Duration
	// MaxResponseBytes, when more than 0, is a limit of a response's body
	// lower than the agent's.
	MaxResponseBytes int64
	// NoRedirects makes a redirect the response instead of following it.
	NoRedirects bool
}

// DefaultClient is the Client of Get, Head and Post.
var DefaultClient = &Client{}

// Do sends req and returns its response, whose body is whole. An error
// is an *agent.HostError (compare with errors.Is against
// agent.ErrNotAllowed, ErrLimit, ErrInvalid, ErrIO), or the error of
// reading req.Body; an error status (404, 500) is a response.
func (c *Client) Do(req *Request) (*Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		if cl, ok := req.Body.(io.Closer); ok {
			cl.Close()
		}
	}
	m := abi.HTTPRequest{Method: req.Method, URL: req.URL, NoRedirects: c.NoRedirects, MaxResponseBytes: c.MaxResponseBytes}
	if c.Timeout > 0 {
		m.TimeoutMS = max(1, int64(c.Timeout/time.Millisecond))
	}
	names := make([]string, 0, len(req.Header))
	for name := range req.Header {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, v := range req.Header[name] {
			m.Headers = append(m.Headers, abi.HTTPHeader{Name: name, Value: v})
		}
	}
	res, data, err := agent.RoundTrip(&m, body)
	if err != nil {
		return nil, err
	}
	h := Header{}
	for _, hd := range res.Headers {
		h.Add(hd.Name, hd.Value)
	}
	status := strconv.Itoa(res.Status)
	if text := StatusText(res.Status); text != "" {
		status += " " + text
	}
	return &Response{Status: status, StatusCode: res.Status, Header: h, Body: io.NopCloser(bytes.NewReader(data)),
		ContentLength: int64(len(data)), URL: res.URL, Request: req}, nil
}

// Get sends a GET request.
func (c *Client) Get(url string) (*Response, error) {
	req, err := NewRequest(MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// Head sends a HEAD request.
func (c *Client) Head(url string) (*Response, error) {
	req, err := NewRequest(MethodHead, url, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// Post sends a POST request with body, of type contentType.
func (c *Client) Post(url, contentType string, body io.Reader) (*Response, error) {
	req, err := NewRequest(MethodPost, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	return c.Do(req)
}

// Get sends a GET request with DefaultClient.
func Get(url string) (*Response, error) { return DefaultClient.Get(url) }

// Head sends a HEAD request with DefaultClient.
func Head(url string) (*Response, error) { return DefaultClient.Head(url) }

// Post sends a POST request with DefaultClient.
func Post(url, contentType string, body io.Reader) (*Response, error) {
	return DefaultClient.Post(url, contentType, body)
}
