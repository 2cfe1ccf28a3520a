package agenttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/plugins/abi/secretform"
)

// Outbound HTTP in the harness: a plugin's request goes to Host.HTTP,
// in this process, as agentrt would send it to a server: only to a
// destination in Host.Allow, read as agentrt reads it (abi.ParseTarget,
// abi.ParseDestination); with its body and headers within agentrt's
// default bounds (the headers as they would be sent, each secret
// placeholder counted as the longest secret), and none the host owns;
// with its secret placeholders filled in for the destinations each
// secret is bound to (a secret agentrt would not start with is refused);
// its redirects followed as Go's client follows them (each hop checked
// and counted as a request of the call, a secret's headers dropped for a
// hop it is not bound to, Authorization and cookies for another host,
// no Referer past the first); refused when a hop would carry a secret's
// value, in any form the host scrubs, where the secret is not bound; the
// response within agentrt's bound; and the secrets' values scrubbed from
// what the plugin reads in every form the host scrubs (package
// secretform).

// Secret is a secret the host holds for the plugin.
type Secret struct {
	Value string
	// Destinations are where the value may be sent.
	Destinations []string
}

// sentResponse is what answered the plugin's last request.
type sentResponse struct {
	meta []byte
	body []byte
}

func (c *call) HTTPRequest(req, body []byte) int32 {
	c.resp = nil
	if len(req) > abi.MaxHTTPRequestMetaBytes {
		return c.fail(abi.ErrInvalid, "the request message of %d bytes is over its limit of %d bytes", len(req), abi.MaxHTTPRequestMetaBytes)
	}
	var m abi.HTTPRequest
	if err := json.Unmarshal(req, &m); err != nil {
		return c.fail(abi.ErrInvalid, "the request message is not valid: %v", err)
	}
	res, code, msg := c.task.host.send(m, body, c.countRequest)
	if code != 0 {
		return c.fail(code, "%s", msg)
	}
	c.resp = res
	return 0
}

// agentrt's default bounds on the outbound requests of one call
// (--max-http-requests), each redirect followed counted, on a request's
// body and on a response's (hostapi/egress.DefaultLimits).
const (
	maxRequests      = 32
	maxRequestBytes  = 4 << 20
	maxResponseBytes = 8 << 20
)

// countRequest counts one more outbound request of the call, or says why
// the host would refuse it.
func (c *call) countRequest() (int32, string) {
	if c.requests >= maxRequests {
		return abi.ErrLimit, fmt.Sprintf("a handler call may make at most %d outbound requests", maxRequests)
	}
	c.requests++
	return 0, ""
}

func (c *call) HTTPResponse(buf []byte) int32 {
	if c.resp == nil {
		return c.fail(abi.ErrNotFound, "no response: the last request failed, or none was made")
	}
	return sized(buf, c.resp.meta)
}

func (c *call) HTTPResponseBody(buf []byte) int32 {
	if c.resp == nil {
		return c.fail(abi.ErrNotFound, "no response: the last request failed, or none was made")
	}
	return sized(buf, c.resp.body)
}

func (c *call) ArtifactFetch(id, path []byte) int32 {
	if code, refused := c.readOnly(); refused {
		return code
	}
	p, err := cleanFilePath(string(path))
	if err != nil {
		return c.fail(abi.ErrBadPath, "%v", err)
	}
	var a *Artifact
	for _, list := range [][]Artifact{c.task.artifacts, c.artifacts} {
		for i := range list {
			if list[i].ID == string(id) {
				a = &list[i]
			}
		}
	}
	switch {
	case a == nil:
		return c.fail(abi.ErrNotFound, "the task has no artifact %q", id)
	case a.URI == "":
		return c.fail(abi.ErrInvalid, "artifact %s is bytes, in the workspace at %q already: read it there", a.ID, a.Path())
	case !strings.HasPrefix(a.URI, "http://") && !strings.HasPrefix(a.URI, "https://"):
		return c.fail(abi.ErrNotAllowed, "artifact %s is not an http or https URI: only those are fetched", a.ID)
	}
	res, code, msg := c.task.host.send(abi.HTTPRequest{URL: a.URI}, nil, c.countRequest)
	if code != 0 {
		return c.fail(code, "%s", msg)
	}
	var meta abi.HTTPResponse
	json.Unmarshal(res.meta, &meta)
	if meta.Status < 200 || meta.Status > 299 {
		return c.fail(abi.ErrIO, "the server answered %d %s", meta.Status, http.StatusText(meta.Status))
	}
	if code := c.WorkspaceWrite([]byte(p), res.body); code != 0 {
		return code
	}
	return int32(len(res.body))
}

// send sends m as agentrt would, to h.HTTP, and returns the response, or
// the error code and message agentrt would give the plugin.
func (h *Host) send(m abi.HTTPRequest, body []byte, count func() (int32, string)) (*sentResponse, int32, string) {
	if why := h.checkSecrets(); why != "" {
		return nil, abi.ErrInvalid, why
	}
	method := m.Method
	if method == "" {
		method = http.MethodGet
	}
	if !slices.Contains(abi.HTTPMethods, method) {
		return nil, abi.ErrInvalid, fmt.Sprintf("the method %q is not one agentrt sends", method)
	}
	target, err := abi.ParseTarget(m.URL)
	if err != nil {
		return nil, abi.ErrInvalid, err.Error()
	}
	if len(body) > maxRequestBytes {
		return nil, abi.ErrLimit, fmt.Sprintf("the request's body of %d bytes is over the limit of %d bytes", len(body), maxRequestBytes)
	}
	if len(m.Headers) > abi.MaxHTTPHeaders {
		return nil, abi.ErrInvalid, fmt.Sprintf("the request has %d headers, over the limit of %d", len(m.Headers), abi.MaxHTTPHeaders)
	}
	sent := 0
	secrets := make([][]string, len(m.Headers))
	for i, hd := range m.Headers {
		if why := abi.CheckRequestHeader(hd.Name, hd.Value); why != "" {
			return nil, abi.ErrInvalid, why
		}
		names, why := abi.SecretNames(hd.Value)
		if why != "" {
			return nil, abi.ErrInvalid, "the value of " + hd.Name + ": " + why
		}
		secrets[i] = names
		n := abi.SentHeaderBytes(hd.Name, hd.Value, names)
		if sent += n; n > abi.MaxHTTPHeaderBytes || sent > abi.MaxHTTPHeadersBytes {
			return nil, abi.ErrInvalid, fmt.Sprintf("the request's headers are over their bounds as they would be sent (%d bytes each, %d together, each secret placeholder counted as %d bytes)",
				abi.MaxHTTPHeaderBytes, abi.MaxHTTPHeadersBytes, abi.MaxSecretBytes)
		}
	}
	maxBody := int64(maxResponseBytes)
	if m.MaxResponseBytes > 0 && m.MaxResponseBytes < maxBody {
		maxBody = m.MaxResponseBytes
	}
	// What Go's client drops on a redirect, for good once dropped: the
	// credentials for another host than the first (and not a subdomain
	// of it), the headers about the body when the body is.
	first := target.Host
	stripCredentials, stripBody := false, false
	for hop := 0; ; hop++ {
		if code, why := count(); code != 0 {
			return nil, code, why
		}
		if ok, err := h.allowed(target); err != nil {
			return nil, abi.ErrInvalid, err.Error()
		} else if !ok {
			return nil, abi.ErrNotAllowed, fmt.Sprintf("%s%s is not a destination granted to this agent (agenttest.Host.Allow)", target.Origin(), target.Path)
		}
		if h.HTTP == nil {
			return nil, abi.ErrIO, "no server answers: set agenttest.Host.HTTP"
		}
		r := httptest.NewRequest(method, target.String(), bytes.NewReader(body))
		for i, hd := range m.Headers {
			// A header with a secret is filled in again for each hop,
			// and dropped where the secret is not bound.
			if hop > 0 && len(secrets[i]) == 0 && dropsOnRedirect(hd.Name, stripCredentials, stripBody) {
				continue
			}
			v, err := h.expand(hd.Value, target)
			switch {
			case err != nil && hop == 0:
				return nil, abi.ErrNotAllowed, err.Error()
			case err == nil:
				r.Header.Add(hd.Name, v)
			}
		}
		if r.Header.Get("User-Agent") == "" {
			r.Header.Set("User-Agent", "agentrt")
		}
		if where := h.carriesUnboundSecret(r, body, target); where != "" {
			return nil, abi.ErrNotAllowed, fmt.Sprintf("the request to %s%s holds, in %s, the value of a secret that is not bound to that destination: agentrt sends a secret only where the operator bound it", target.Origin(), target.Path, where)
		}
		w := httptest.NewRecorder()
		h.HTTP.ServeHTTP(w, r)
		res := w.Result()
		if n := int64(w.Body.Len()); n > maxBody {
			return nil, abi.ErrLimit, fmt.Sprintf("the response's body of %d bytes is over the limit of %d bytes", n, maxBody)
		}
		loc := res.Header.Get("Location")
		follows := slices.Contains([]int{301, 302, 303, 307, 308}, res.StatusCode) // as Go's client
		if m.NoRedirects || loc == "" || !follows {
			return h.answer(res.StatusCode, res.Header, w.Body.Bytes(), target), 0, ""
		}
		if hop == abi.MaxHTTPRedirects {
			return nil, abi.ErrLimit, fmt.Sprintf("the request was redirected more than %d times", abi.MaxHTTPRedirects)
		}
		base, _ := url.Parse(target.String())
		next, err := base.Parse(loc)
		if err != nil {
			return nil, abi.ErrNotAllowed, "a redirect to a URL agentrt does not send"
		}
		if target, err = abi.ParseTarget(next.String()); err != nil {
			return nil, abi.ErrNotAllowed, "a redirect to a URL agentrt does not send: " + err.Error()
		}
		if target.Host != first && !strings.HasSuffix(target.Host, "."+first) {
			stripCredentials = true
		}
		if res.StatusCode != 307 && res.StatusCode != 308 {
			if method != http.MethodGet && method != http.MethodHead {
				method = http.MethodGet
			}
			body, stripBody = nil, true
		}
	}
}

// dropsOnRedirect reports whether a header the plugin wrote without a
// secret is left out of a redirect's request: Referer always (agentrt
// sends none past the first request), the credentials Go's client drops
// for another host, and the headers about the body it drops with it.
func dropsOnRedirect(name string, stripCredentials, stripBody bool) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Referer":
		return true
	case "Authorization", "Www-Authenticate", "Cookie", "Cookie2":
		return stripCredentials
	case "Content-Encoding", "Content-Language", "Content-Location", "Content-Type":
		return stripBody
	}
	return false
}

// checkSecrets says what in h.Secrets agentrt would refuse to start with
// ("" when nothing): a secret's name or value (hostapi/egress's
// checkSecret), or a destination not in its one spelling.
func (h *Host) checkSecrets() string {
	for name, s := range h.Secrets {
		if why := checkSecret(name, s.Value); why != "" {
			return "agenttest.Host.Secrets: " + why
		}
		for i, dest := range s.Destinations {
			if _, err := abi.ParseDestination(dest); err != nil {
				return fmt.Sprintf("agenttest.Host.Secrets[%q].Destinations[%d]: %v", name, i, err)
			}
		}
	}
	return ""
}

// minSecretBytes is the shortest value agentrt holds as a secret.
const minSecretBytes = 8

// checkSecret says why agentrt refuses the secret name with value, ""
// when it does not, in agentrt's words.
func checkSecret(name, value string) string {
	switch {
	case !abi.ValidSecretName(name):
		return fmt.Sprintf("secret name %q: want 1 to %d letters, digits and _, not starting with a digit", name, abi.MaxSecretNameBytes)
	case len(value) < minSecretBytes:
		return fmt.Sprintf("secret %s: its value has %d bytes; a secret has at least %d, so that scrubbing it from answers garbles nothing else", name, len(value), minSecretBytes)
	case len(value) > abi.MaxSecretBytes:
		return fmt.Sprintf("secret %s: its value is over %d bytes", name, abi.MaxSecretBytes)
	case strings.Contains(value, abi.SecretPrefix):
		return fmt.Sprintf("secret %s: its value holds a secret placeholder", name)
	case !utf8.ValidString(value):
		return fmt.Sprintf("secret %s: its value is not UTF-8", name)
	}
	for _, r := range value {
		switch {
		case r < 0x20 || r == 0x7f:
			return fmt.Sprintf("secret %s: its value holds a control character (a trailing newline?), which a header cannot carry", name)
		case r >= 0x80 && r <= 0x9f, r == '\u2028', r == '\u2029':
			return fmt.Sprintf("secret %s: its value holds %U, a control or line-breaking character, which a header cannot carry", name, r)
		}
	}
	if value[0] == ' ' || value[len(value)-1] == ' ' {
		return fmt.Sprintf("secret %s: its value begins or ends with a space, which a receiver trims from a header", name)
	}
	return ""
}

// allowed reports whether a destination of h.Allow allows t.
func (h *Host) allowed(t abi.Target) (bool, error) {
	for i, s := range h.Allow {
		d, err := abi.ParseDestination(s)
		if err != nil {
			return false, fmt.Errorf("agenttest.Host.Allow[%d]: %v", i, err)
		}
		if d.Allows(t) {
			return true, nil
		}
	}
	return false, nil
}

// expand fills in a header value's secret placeholders for t, or says
// which secret is not held for it.
func (h *Host) expand(value string, t abi.Target) (string, error) {
	names, _ := abi.SecretNames(value)
	values := map[string]string{}
	for _, name := range names {
		s, ok := h.Secrets[name]
		if !ok || !s.bound(t) {
			return "", fmt.Errorf("no secret %s is held for %s%s (agenttest.Host.Secrets)", name, t.Origin(), t.Path)
		}
		values[name] = s.Value
	}
	return abi.ExpandSecrets(value, func(n string) string { return values[n] }), nil
}

// carriesUnboundSecret says where r (with body) holds a form of the value
// of a secret not bound to t, "" when it holds none: as the host checks
// each request it sends, redirects too.
func (h *Host) carriesUnboundSecret(r *http.Request, body []byte, t abi.Target) string {
	raw := r.URL.String()
	path, _ := url.PathUnescape(raw)
	query, _ := url.QueryUnescape(raw)
	for _, s := range h.Secrets {
		if s.Value == "" || s.bound(t) {
			continue
		}
		for _, form := range secretform.Of(s.Value) {
			switch {
			case strings.Contains(raw, form), strings.Contains(path, form), strings.Contains(query, form):
				return "its URL"
			case bytes.Contains(body, []byte(form)):
				return "its body"
			}
			for name, values := range r.Header {
				for _, v := range values {
					if strings.Contains(name, form) || strings.Contains(v, form) {
						return "its header " + name
					}
				}
			}
		}
	}
	return ""
}

// bound reports whether s may be sent to t.
func (s Secret) bound(t abi.Target) bool {
	for _, dest := range s.Destinations {
		if d, err := abi.ParseDestination(dest); err == nil && d.Allows(t) {
			return true
		}
	}
	return false
}

// answer is a response as the plugin reads it: the secrets scrubbed.
func (h *Host) answer(status int, header http.Header, body []byte, t abi.Target) *sentResponse {
	scrub := h.scrubber()
	names := make([]string, 0, len(header))
	for name := range header {
		names = append(names, name)
	}
	sort.Strings(names)
	meta := abi.HTTPResponse{Status: status, Headers: []abi.HTTPHeader{}, URL: scrub.Replace(t.String())}
	scrubbed := []byte(scrub.Replace(string(body)))
	for _, name := range names {
		for _, v := range header[name] {
			if name == "Content-Length" {
				v = fmt.Sprint(len(scrubbed))
			}
			meta.Headers = append(meta.Headers, abi.HTTPHeader{Name: name, Value: scrub.Replace(v)})
		}
	}
	meta.BodySize = int64(len(scrubbed))
	b, _ := json.Marshal(meta)
	return &sentResponse{meta: b, body: scrubbed}
}

// scrubber replaces each secret's value, in every form the host scrubs
// (package secretform), with its placeholder, the longest forms first.
func (h *Host) scrubber() *strings.Replacer {
	type pair struct{ form, placeholder string }
	var pairs []pair
	for name, s := range h.Secrets {
		if s.Value == "" {
			continue
		}
		for _, form := range secretform.Of(s.Value) {
			pairs = append(pairs, pair{form, abi.SecretPrefix + name + abi.SecretSuffix})
		}
	}
	sort.SliceStable(pairs, func(i, j int) bool {
		if len(pairs[i].form) != len(pairs[j].form) {
			return len(pairs[i].form) > len(pairs[j].form)
		}
		return pairs[i].form < pairs[j].form
	})
	var args []string
	for _, p := range pairs {
		args = append(args, p.form, p.placeholder)
	}
	return strings.NewReplacer(args...)
}
