// Package client is a client of any Agent Protocol v1 server: its wire
// types as the specification has them, and a Client whose methods are the
// protocol's operations (create a task, execute a step, list, upload and
// download artifacts), each ctx-first. It imports only the standard
// library and none of agentrt's server.
//
// The server is not trusted: JSON answers are read up to a limit, error
// bodies are cut to a line, and SaveArtifact never writes outside the
// directory it is given, whatever names the server sends.
//
// A request the server refuses for now (503 or 429 with Retry-After) is
// sent again after the wait it asks for, within bounds (Client.MaxRetries,
// Client.MaxRetryWait, the request's context): see retry.go for which.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Prefix is where the protocol's routes sit under a server's base URL.
const Prefix = "/ap/v1"

// maxJSONResponseBytes bounds a JSON answer the client reads: a task with
// every artifact listed, or a page of tasks, is far smaller.
const maxJSONResponseBytes = 32 << 20

// Client talks to one Agent Protocol server. Its fields may be set after
// New and before the first call; it is then safe for concurrent use.
type Client struct {
	// HTTPClient sends the requests; http.DefaultClient when nil. Its
	// Timeout, if any, bounds a whole exchange, an artifact's bytes
	// included: bound calls with their context instead.
	HTTPClient *http.Client
	// APIKey, when set, is sent with every request as
	// "Authorization: Bearer APIKey".
	APIKey string
	// UserAgent, when set, is sent as the User-Agent header.
	UserAgent string
	// MaxRetries is how many times a request refused with 503 or 429 and
	// a Retry-After header is sent again, each time after the wait the
	// header asks for (seconds or a date; a backoff from 1 s when it
	// cannot be read) plus a random part of it, so that many clients
	// refused at once do not come back at once. 0 never retries; New
	// sets DefaultMaxRetries. A refusal without Retry-After, or that
	// says the request was recorded (agentrt's step interrupted by a
	// shutdown), is not retried. JSON requests are always retried;
	// UploadArtifact only when its file can be read again (an io.Seeker,
	// such as an *os.File of a regular file); downloads until their
	// first byte. A request retried out returns the last refusal, an
	// *Error with the Retry-After it carried and how often it was sent
	// again.
	MaxRetries int
	// MaxRetryWait bounds one wait before a retry: a Retry-After longer
	// than it is not waited for, and the refusal is returned at once.
	// New sets DefaultMaxRetryWait. A wait also ends, and the request
	// with it, when the request's context does.
	MaxRetryWait time.Duration

	base string // the protocol's root, ending in Prefix
	// afterFunc and nowFunc, when set, are the clock of retries in place
	// of time.After and time.Now: tests wait on events, not on time.
	afterFunc func(time.Duration) <-chan time.Time
	nowFunc   func() time.Time
}

// New returns a client of the server at serverURL: either its base URL
// (http://127.0.0.1:8000, or with a path the server is mounted under) or
// the protocol's root below it (http://127.0.0.1:8000/ap/v1). A URL
// without a scheme is taken as http.
func New(serverURL string) (*Client, error) {
	raw := strings.TrimSpace(serverURL)
	if raw == "" {
		return nil, errors.New("the server URL is empty")
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("bad server URL %q: %w", serverURL, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("bad server URL %q: the scheme must be http or https", serverURL)
	case u.Host == "":
		return nil, fmt.Errorf("bad server URL %q: it names no host", serverURL)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("bad server URL %q: it must have no query or fragment", serverURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	if !strings.HasSuffix(u.Path, Prefix) {
		u.Path += Prefix
	}
	return &Client{base: u.String(), MaxRetries: DefaultMaxRetries, MaxRetryWait: DefaultMaxRetryWait}, nil
}

// URL is the protocol's root the client sends requests under, ending in
// /ap/v1.
func (c *Client) URL() string { return c.base }

// Error is a server's answer outside 2xx: its status, and the message and
// code of its JSON error body ({"message": ..., "code": ...}), or the
// first line of whatever else it sent.
type Error struct {
	StatusCode int    // 404
	Status     string // "404 Not Found"
	Message    string
	// Code is the body's "code", for servers that send one (agentrt does).
	Code string
	// StepID is the body's "step_id": agentrt names the step a plugin
	// failure was recorded on.
	StepID string
	// RetryAfter is the wait the answer's Retry-After header asked for:
	// 0 when it had none, or one that could not be read.
	RetryAfter time.Duration
	// Retries is how many times the request was sent again, after
	// refusals, before this answer.
	Retries int
}

func (e *Error) Error() string {
	s := "the server answered " + e.Status
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Retries > 0 {
		s += fmt.Sprintf(" (sent %d times)", e.Retries+1)
	}
	return s
}

// maxErrorBodyBytes bounds what is read of an error body.
const maxErrorBodyBytes = 64 << 10

// maxErrorMessage bounds the message an Error carries, in bytes.
const maxErrorMessage = 1000

// errorOf reads an error answer into an *Error.
func errorOf(res *http.Response) *Error {
	e := &Error{StatusCode: res.StatusCode, Status: res.Status}
	if e.Status == "" {
		e.Status = fmt.Sprintf("%d %s", res.StatusCode, http.StatusText(res.StatusCode))
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBodyBytes))
	var body struct {
		Message any    `json:"message"`
		Detail  any    `json:"detail"` // what FastAPI servers send
		Code    string `json:"code"`
		StepID  string `json:"step_id"`
	}
	if json.Unmarshal(b, &body) == nil {
		e.Code, e.StepID = body.Code, body.StepID
		if e.Message = messageText(body.Message); e.Message == "" {
			e.Message = messageText(body.Detail)
		}
	}
	if e.Message == "" {
		e.Message, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
	}
	if len(e.Message) > maxErrorMessage {
		e.Message = strings.ToValidUTF8(e.Message[:maxErrorMessage], "") + "…"
	}
	return e
}

// messageText is an error body's message as text: a string as it is,
// any other JSON value as JSON, nothing as "".
func messageText(m any) string {
	switch m := m.(type) {
	case nil:
		return ""
	case string:
		return m
	}
	j, _ := json.Marshal(m)
	return string(j)
}

// httpClient is the client requests go through.
func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

// newRequest builds a request to path below the protocol's root.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	return req, nil
}

// send sends the request newReq makes, again after refusals as exchange
// does, and returns its answer if it is a 2xx; any other answer is an
// *Error, its body read and closed.
func (c *Client) send(ctx context.Context, newReq func() (*http.Request, error), again func(*Error) bool) (*http.Response, error) {
	res, err := c.exchange(ctx, c.httpClient(), newReq, again)
	if err != nil {
		return nil, err
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		defer res.Body.Close()
		return nil, errorOf(res)
	}
	return res, nil
}

// doJSON sends a request with in (if not nil) as its JSON body and decodes
// the JSON answer into out. Its body is bytes: it is sent again after a
// refusal that asks for it (retry.go).
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	_, err := c.callJSON(ctx, jsonCall{method: method, path: path, in: in, out: out})
	return err
}

// jsonCall is one JSON request: what it sends, and where its answer goes.
type jsonCall struct {
	method, path string
	// header holds fields sent beside Accept and Content-Type.
	header http.Header
	in     any // the body, as JSON; nil for none
	out    any // decoded from the answer
	// again decides whether a refusal for now may be sent again
	// (exchange); nil sends again only what recorded nothing.
	again func(*Error) bool
}

// callJSON sends call and decodes its answer; it returns the answer, its
// body read and closed, for its status and headers.
func (c *Client) callJSON(ctx context.Context, call jsonCall) (*http.Response, error) {
	var body []byte
	if call.in != nil {
		b, err := json.Marshal(call.in)
		if err != nil {
			return nil, err
		}
		body = b
	}
	res, err := c.send(ctx, func() (*http.Request, error) {
		var r io.Reader
		if call.in != nil {
			r = bytes.NewReader(body)
		}
		req, err := c.newRequest(ctx, call.method, call.path, r)
		if err != nil {
			return nil, err
		}
		for k, vs := range call.header {
			req.Header[k] = vs
		}
		req.Header.Set("Accept", "application/json")
		if call.in != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, nil
	}, call.again)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	return res, decodeJSON(res.Body, call.out)
}

// decodeJSON decodes one JSON value of at most maxJSONResponseBytes from r
// into out.
func decodeJSON(r io.Reader, out any) error {
	b, err := io.ReadAll(io.LimitReader(r, maxJSONResponseBytes+1))
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if len(b) > maxJSONResponseBytes {
		return fmt.Errorf("the answer is larger than %d bytes", maxJSONResponseBytes)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("the answer is not the JSON the protocol specifies: %w", err)
	}
	return nil
}

// pathID is id escaped as one path segment; an empty id is refused, since
// it would name another route.
func pathID(kind, id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("the %s id is empty", kind)
	}
	return "/" + url.PathEscape(id), nil
}
