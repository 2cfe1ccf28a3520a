// Package egress makes plugins' outbound HTTP requests: the one place
// agentrt reaches the network on a plugin's behalf. Each agent has a
// Client holding its Policy (the destinations the operator granted it,
// the hosts whose private addresses it may reach, the secrets it holds)
// and its Limits. A request is refused unless its destination is
// granted; every redirect hop is checked the same way; every connection
// is checked on the address it connects to (address.go); secrets are
// filled in only after the policy allowed the request, only for the
// destinations they are bound to (secrets.go); no request leaves for a
// destination with the value of a secret not bound to it (outgoing.go);
// and secrets are scrubbed from what comes back (scrub.go). docs/SECURITY.md, "Outbound HTTP", lists each check with
// the test that holds it.
//
// What a request costs the host: its body is read from the plugin's
// memory as it is sent, never copied whole; the response's body is read
// into host memory once, up to the limit, and scrubbed in place of a copy
// only when it holds a secret; its headers take at most 64 KiB. A
// Client's idle connections are its own: no agent reuses another's.
package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Limits bound one agent's outbound requests. Each has a flag of agentrt
// run and a field of a manifest's limits.
type Limits struct {
	// Timeout is the time one request may take, redirects and the
	// response's body included, within what is left of the handler call.
	Timeout time.Duration
	// MaxRequests bounds the requests of one handler call (the caller
	// counts them).
	MaxRequests int
	// MaxRequestBytes bounds a request's body, MaxResponseBytes a
	// response's.
	MaxRequestBytes  int64
	MaxResponseBytes int64
}

// DefaultLimits are the limits where none are configured.
var DefaultLimits = Limits{Timeout: 30 * time.Second, MaxRequests: 32, MaxRequestBytes: 4 << 20, MaxResponseBytes: 8 << 20}

// maxResponseHeaderBytes bounds a response's headers.
const maxResponseHeaderBytes = 64 << 10

// Code is the kind of an Error.
type Code int

const (
	// Invalid: the request is malformed (its method, URL or headers).
	Invalid Code = iota + 1
	// Refused: the policy refuses it (its destination, an address it
	// resolves to, a secret it names).
	Refused
	// Limit: a size, count or time limit was reached.
	Limit
	// Failed: the network or the server failed, or the handler call
	// ended.
	Failed
)

// Error is why a request was not answered. Its message never holds a
// secret's value.
type Error struct {
	Code    Code
	Message string
	// secret names the secret a request was refused for carrying, for
	// the operator's log (the plugin is not told which).
	secret string
}

func (e *Error) Error() string { return e.Message }

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Request is an outbound request as a plugin asks for it.
type Request struct {
	Method string // "" is GET
	URL    string
	// Header values may hold secret placeholders.
	Header []abi.HTTPHeader
	// Body may be the plugin's memory: Do reads it only until it returns.
	Body []byte
	// Timeout and MaxResponseBytes, when more than 0 and less than the
	// agent's, are this request's.
	Timeout          time.Duration
	MaxResponseBytes int64
	// NoRedirects makes a redirect the response.
	NoRedirects bool
	// CountRedirect, when not nil, is called before each redirect is
	// followed: an error stops the request there (an *Error as it is,
	// another as a Limit). The host counts redirects with it against
	// the handler call's requests.
	CountRedirect func() error
}

// Response is what answered a request, scrubbed of the agent's secrets.
type Response struct {
	Status int
	// Header is in name order, each name's values in the order received.
	Header []abi.HTTPHeader
	Body   []byte
	// URL is the URL that answered.
	URL string
}

// Policy is what one agent may reach.
type Policy struct {
	// Allow are the destinations granted.
	Allow []abi.Destination
	// PrivateHosts are the hosts whose non-public addresses (loopback,
	// private, link-local, …) may be dialled: names, "*.name" for
	// subdomains, or addresses.
	PrivateHosts []string
	// Secrets are the secrets the agent holds.
	Secrets []Secret
}

// Config configures a Client.
type Config struct {
	// Agent names the agent in the log.
	Agent  string
	Policy Policy
	Limits Limits
	// Resolver looks names up; nil is net.DefaultResolver.
	Resolver Resolver
	// TLS, when not nil, is the TLS configuration (tests trust their own
	// certificate with it); nil is the system's.
	TLS *tls.Config
	// Log gets a line for every refusal (warn) and every request (debug).
	Log *slog.Logger
}

// Client makes one agent's outbound requests. Its methods are safe for
// concurrent use.
type Client struct {
	agent     string
	policy    Policy
	limits    Limits
	log       *slog.Logger
	scrub     *Scrubber
	transport *http.Transport
}

// New returns a Client for cfg. Close it when the agent's build retires.
func New(cfg Config) *Client {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c := &Client{agent: cfg.Agent, policy: cfg.Policy, limits: cfg.Limits, log: cfg.Log, scrub: NewScrubber(cfg.Policy.Secrets)}
	d := &dialer{resolver: cfg.Resolver, private: c.privateAllowed}
	c.transport = &http.Transport{
		Proxy:                  nil, // the environment's proxy would be a destination nobody granted
		DialContext:            d.dial,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        cfg.TLS,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           16,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
	return c
}

// Limits are the agent's limits.
func (c *Client) Limits() Limits { return c.limits }

// Policy is the agent's policy.
func (c *Client) Policy() Policy { return c.policy }

// Close closes the Client's idle connections.
func (c *Client) Close() { c.transport.CloseIdleConnections() }

// allows reports whether a granted destination allows t.
func (c *Client) allows(t abi.Target) bool {
	for _, d := range c.policy.Allow {
		if d.Allows(t) {
			return true
		}
	}
	return false
}

// privateAllowed reports whether the operator allowed host's non-public
// addresses: host is one of PrivateHosts, an address equal to one, or a
// subdomain of a "*.name".
func (c *Client) privateAllowed(host string) bool {
	for _, p := range c.policy.PrivateHosts {
		switch {
		case p == host:
			return true
		case strings.HasPrefix(p, "*.") && strings.HasSuffix(host, p[1:]):
			return true
		}
	}
	return false
}

// Do sends r under the agent's policy and limits and returns the response
// read in full, or an *Error. ctx is the handler call's: the request ends
// when it does, or at the agent's time limit if that comes first. r.Body
// is read only while Do runs.
func (c *Client) Do(ctx context.Context, r *Request) (*Response, error) {
	start := time.Now()
	res, target, err := c.do(ctx, r)
	var e *Error
	switch {
	case errors.As(err, &e):
		// Every message is scrubbed here, whatever made it: a refusal
		// names a URL a server chose (a redirect's), which may echo a
		// secret as an answer may.
		e = &Error{Code: e.Code, Message: c.scrub.String(e.Message), secret: e.secret}
	case err != nil:
		e = &Error{Code: Failed, Message: c.scrub.error(err)}
	}
	// The URL is the plugin's, which holds a secret only if a server
	// handed it over unscrubbed: scrubbed all the same, then cut.
	where := r.URL
	if target != nil {
		where = target.String()
	}
	where = cut(c.scrub.String(where), 512)
	switch {
	case e != nil && e.Code == Refused && e.secret != "":
		c.log.Warn("outbound request refused", "agent", c.agent, "method", r.Method, "url", where, "reason", e.Message, "secret", e.secret)
		return nil, e
	case e != nil && e.Code == Refused:
		c.log.Warn("outbound request refused", "agent", c.agent, "method", r.Method, "url", where, "reason", e.Message)
		return nil, e
	case e != nil:
		c.log.Debug("outbound request failed", "agent", c.agent, "method", r.Method, "url", where, "err", e.Message, "took", time.Since(start))
		return nil, e
	}
	c.log.Debug("outbound request", "agent", c.agent, "method", r.Method, "url", where, "status", res.Status, "bytes", len(res.Body), "took", time.Since(start))
	return res, nil
}

func (c *Client) do(ctx context.Context, r *Request) (*Response, *abi.Target, error) {
	method := r.Method
	if method == "" {
		method = "GET"
	}
	if !slices.Contains(abi.HTTPMethods, method) {
		return nil, nil, errorf(Invalid, "the method %q is not one agentrt sends (%s)", cut(method, 16), strings.Join(abi.HTTPMethods, ", "))
	}
	target, err := abi.ParseTarget(r.URL)
	if err != nil {
		return nil, nil, &Error{Code: Invalid, Message: err.Error()}
	}
	if max := c.limits.MaxRequestBytes; int64(len(r.Body)) > max {
		return nil, &target, errorf(Limit, "the request's body of %d bytes is over the limit of %d bytes", len(r.Body), max)
	}
	if len(r.Header) > abi.MaxHTTPHeaders {
		return nil, &target, errorf(Invalid, "the request has %d headers, over the limit of %d", len(r.Header), abi.MaxHTTPHeaders)
	}
	headers := make([]header, len(r.Header))
	sent := 0
	for i, h := range r.Header {
		if why := abi.CheckRequestHeader(h.Name, h.Value); why != "" {
			return nil, &target, &Error{Code: Invalid, Message: why}
		}
		names, why := abi.SecretNames(h.Value)
		if why != "" {
			return nil, &target, errorf(Invalid, "the value of %s: %s", h.Name, why)
		}
		// The headers as they would be sent are bounded before a secret
		// is filled in, each placeholder counted as the longest secret:
		// whether a request fits tells nothing of a secret's length.
		n := abi.SentHeaderBytes(h.Name, h.Value, names)
		if n > abi.MaxHTTPHeaderBytes {
			return nil, &target, errorf(Invalid, "the header %s is over %d bytes with each of its %d secret placeholders counted as %d bytes (the longest a secret may be)",
				cut(h.Name, 64), abi.MaxHTTPHeaderBytes, len(names), abi.MaxSecretBytes)
		}
		if sent += n; sent > abi.MaxHTTPHeadersBytes {
			return nil, &target, errorf(Invalid, "the request's headers are over %d bytes together, each secret placeholder counted as %d bytes (the longest a secret may be)",
				abi.MaxHTTPHeadersBytes, abi.MaxSecretBytes)
		}
		headers[i] = header{name: h.Name, value: h.Value, secrets: names}
	}
	if !c.allows(target) {
		return nil, &target, errorf(Refused, "%s%s is not a destination granted to this agent%s", target.Origin(), target.Path, c.grantedList())
	}
	// The secrets, after the policy allowed the request.
	hreqHeader := http.Header{}
	for _, h := range headers {
		v, err := c.expand(h, target)
		if err != nil {
			return nil, &target, err
		}
		hreqHeader.Add(h.name, v)
	}
	if hreqHeader.Get("User-Agent") == "" {
		hreqHeader.Set("User-Agent", "agentrt")
	}

	timeout := c.limits.Timeout
	if r.Timeout > 0 && r.Timeout < timeout {
		timeout = r.Timeout
	}
	maxBody := c.limits.MaxResponseBytes
	if r.MaxResponseBytes > 0 && r.MaxResponseBytes < maxBody {
		maxBody = r.MaxResponseBytes
	}
	reqCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(reqCtx, method, target.String(), nil)
	if err != nil {
		return nil, &target, errorf(Invalid, "the request cannot be made: %s", c.scrub.error(err))
	}
	hreq.Header = hreqHeader
	if len(r.Body) > 0 {
		body := newGuestBody(r.Body)
		defer body.release()
		hreq.Body, hreq.ContentLength = body.reader(), int64(len(r.Body))
		hreq.GetBody = func() (io.ReadCloser, error) { return body.reader(), nil }
	}
	last := target
	client := &http.Client{
		Transport: &sender{c: c, base: c.transport, body: r.Body},
		CheckRedirect: func(next *http.Request, via []*http.Request) error {
			if r.NoRedirects {
				return http.ErrUseLastResponse
			}
			if len(via) > abi.MaxHTTPRedirects {
				return errorf(Limit, "the request was redirected more than %d times", abi.MaxHTTPRedirects)
			}
			if r.CountRedirect != nil {
				if err := r.CountRedirect(); err != nil {
					var e *Error
					if errors.As(err, &e) {
						return e
					}
					return &Error{Code: Limit, Message: err.Error()}
				}
			}
			// net/http sets Referer to the URL redirected from, which a
			// server chose and may have put a secret in; a plugin's own
			// Referer goes with its first request only.
			next.Header.Del("Referer")
			t, err := abi.ParseTarget(next.URL.String())
			if err != nil {
				return errorf(Refused, "a redirect to a URL agentrt does not send: %s", err)
			}
			if !c.allows(t) {
				return errorf(Refused, "a redirect to %s%s, which is not a destination granted to this agent%s", t.Origin(), t.Path, c.grantedList())
			}
			u, err := url.Parse(t.String())
			if err != nil {
				return errorf(Refused, "a redirect to a URL agentrt does not send")
			}
			next.URL, next.Host = u, ""
			c.redirectHeaders(next.Header, headers, t)
			last = t
			return nil
		},
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, &target, c.failure(ctx, err, timeout)
	}
	defer resp.Body.Close()
	if resp.ContentLength > maxBody {
		return nil, &target, errorf(Limit, "the response's body of %d bytes is over the limit of %d bytes", resp.ContentLength, maxBody)
	}
	data, err := readBody(resp, maxBody)
	if err != nil {
		return nil, &target, c.failure(ctx, err, timeout)
	}
	if int64(len(data)) > maxBody {
		return nil, &target, errorf(Limit, "the response's body is over the limit of %d bytes", maxBody)
	}
	res := &Response{Status: resp.StatusCode, Body: c.scrub.Bytes(data), URL: c.scrub.String(last.String())}
	res.Header = c.responseHeaders(resp.Header, len(res.Body) != len(data), len(res.Body))
	return res, &target, nil
}

// readBody reads at most max+1 bytes of resp's body, into one buffer of
// the size the response says it has when it says one.
func readBody(resp *http.Response, max int64) ([]byte, error) {
	r := io.LimitReader(resp.Body, max+1)
	n := resp.ContentLength
	if n < 0 || n > max {
		return io.ReadAll(r)
	}
	buf := make([]byte, n+1)
	total := 0
	for total < len(buf) {
		m, err := r.Read(buf[total:])
		total += m
		if err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
	}
	return buf[:total], nil
}

// grantedList names the granted destinations for a refusal, or says
// there are none.
func (c *Client) grantedList() string {
	if len(c.policy.Allow) == 0 {
		return " (none is: the operator grants destinations with --allow-http or a policy file)"
	}
	names := make([]string, 0, len(c.policy.Allow))
	for _, d := range c.policy.Allow {
		names = append(names, d.String())
	}
	return " (granted: " + cut(strings.Join(names, ", "), 1024) + ")"
}

// redirectHeaders sets the headers of a redirect to t: net/http copied
// the first request's (secrets filled in for its destination, and
// sensitive ones dropped for another host); each header that names a
// secret is written again from the plugin's value, filled in for t, or
// dropped when a secret it names is not held for t.
func (c *Client) redirectHeaders(h http.Header, headers []header, t abi.Target) {
	redo := map[string]bool{}
	for _, hd := range headers {
		if len(hd.secrets) > 0 {
			redo[http.CanonicalHeaderKey(hd.name)] = true
		}
	}
	for name := range redo {
		kept := h.Values(name) != nil
		h.Del(name)
		for _, hd := range headers {
			if http.CanonicalHeaderKey(hd.name) != name || (len(hd.secrets) == 0 && !kept) {
				continue
			}
			if v, err := c.expand(hd, t); err == nil {
				h.Add(name, v)
			}
		}
	}
}

// responseHeaders are a response's headers as the plugin gets them:
// scrubbed, in name order, and, when scrubbing changed the body, its
// Content-Length the body's.
func (c *Client) responseHeaders(h http.Header, scrubbed bool, size int) []abi.HTTPHeader {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	out := []abi.HTTPHeader{}
	for _, name := range names {
		if scrubbed && name == "Content-Length" {
			out = append(out, abi.HTTPHeader{Name: name, Value: fmt.Sprint(size)})
			continue
		}
		for _, v := range h[name] {
			out = append(out, abi.HTTPHeader{Name: c.scrub.String(name), Value: c.scrub.String(v)})
		}
	}
	return out
}

// failure explains why a request that was sent got no answer.
func (c *Client) failure(ctx context.Context, err error, timeout time.Duration) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case ctx.Err() != nil:
		return errorf(Failed, "the request was cancelled: the handler call ended")
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(Limit, "the request took longer than its time limit of %s", timeout)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return errorf(Failed, "%s: %s", c.scrub.String(dnsErr.Name), c.scrub.String(dnsErr.Err))
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		return errorf(Failed, "%s", c.scrub.error(opErr.Err))
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return errorf(Failed, "%s", c.scrub.error(urlErr.Err))
	}
	return errorf(Failed, "%s", c.scrub.error(err))
}

// cut is s cut to at most n bytes, saying so.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// guestBody is a request's body read from the plugin's memory, which is
// the plugin's again once the host function returns: the transport may
// still be writing the body then (a server that answered before reading
// it all), so each read holds a lock that release takes, and after
// release, reads fail.
type guestBody struct {
	mu   sync.Mutex
	data []byte
	gone bool
}

func newGuestBody(data []byte) *guestBody { return &guestBody{data: data} }

// reader returns a reader of the whole body (for the request, and again
// for a redirect that resends it).
func (g *guestBody) reader() io.ReadCloser { return &guestReader{g: g} }

// release ends every reader's access to the plugin's memory.
func (g *guestBody) release() {
	g.mu.Lock()
	g.gone, g.data = true, nil
	g.mu.Unlock()
}

var errBodyGone = errors.New("the request's body is no longer readable: the host call returned")

type guestReader struct {
	g   *guestBody
	off int
}

func (r *guestReader) Read(p []byte) (int, error) {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	if r.g.gone {
		return 0, errBodyGone
	}
	if r.off >= len(r.g.data) {
		return 0, io.EOF
	}
	n := copy(p, r.g.data[r.off:])
	r.off += n
	return n, nil
}

func (r *guestReader) Close() error { return nil }
