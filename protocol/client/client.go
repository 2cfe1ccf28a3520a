// Package client is a client of any Agent Protocol v1 server: its wire
// types as the specification has them, and a Client whose methods are the
// protocol's operations (create a task, execute a step, list, upload and
// download artifacts), each ctx-first. It imports only the standard
// library and none of agentrt's server.
//
// The server is not trusted: JSON answers are read up to a limit, error
// bodies are cut to a line, and SaveArtifact never writes outside the
// directory it is given, whatever names the server sends.
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

	base string // the protocol's root, ending in Prefix
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
	return &Client{base: u.String()}, nil
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
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "the server answered " + e.Status
	}
	return "the server answered " + e.Status + ": " + e.Message
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

// send sends req and returns its answer if it is a 2xx; any other answer
// is an *Error, its body read and closed.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	res, err := c.httpClient().Do(req)
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
// the JSON answer into out.
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.send(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	return decodeJSON(res.Body, out)
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
