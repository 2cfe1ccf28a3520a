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

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/plugins/abi/secretform"
)

// Outbound HTTP in the harness: a plugin's request goes to Host.HTTP,
// in this process, as agentrt would send it to a server: only to a
// destination in Host.Allow, without the headers the host owns, its
// headers bounded as they would be sent (each secret placeholder counted
// as the longest secret), with its secret placeholders filled in for the
// destinations each secret is bound to, its redirects followed (each hop
// checked and counted as a request of the call, a secret's headers
// dropped for a hop it is not bound to, no Referer past the first),
// refused when a hop would carry a secret's value, in any form the host
// scrubs, where the secret is not bound, and the secrets' values scrubbed
// from the response the plugin reads in every form the host scrubs
// (package secretform).

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

// maxRequests are the outbound requests of one call agentrt allows by
// default (--max-http-requests), each redirect followed counted.
const maxRequests = 32

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
	if len(m.Headers) > abi.MaxHTTPHeaders {
		return nil, abi.ErrInvalid, fmt.Sprintf("the request has %d headers, over the limit of %d", len(m.Headers), abi.MaxHTTPHeaders)
	}
	sent := 0
	for _, hd := range m.Headers {
		if why := abi.CheckRequestHeader(hd.Name, hd.Value); why != "" {
			return nil, abi.ErrInvalid, why
		}
		names, why := abi.SecretNames(hd.Value)
		if why != "" {
			return nil, abi.ErrInvalid, "the value of " + hd.Name + ": " + why
		}
		n := abi.SentHeaderBytes(hd.Name, hd.Value, names)
		if sent += n; n > abi.MaxHTTPHeaderBytes || sent > abi.MaxHTTPHeadersBytes {
			return nil, abi.ErrInvalid, fmt.Sprintf("the request's headers are over their bounds as they would be sent (%d bytes each, %d together, each secret placeholder counted as %d bytes)",
				abi.MaxHTTPHeaderBytes, abi.MaxHTTPHeadersBytes, abi.MaxSecretBytes)
		}
	}
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
		for _, hd := range m.Headers {
			if hop > 0 && strings.EqualFold(hd.Name, "Referer") {
				continue // the host sends no Referer past the first request
			}
			v, err := h.expand(hd.Value, target)
			switch {
			case err != nil && hop == 0:
				return nil, abi.ErrNotAllowed, err.Error()
			case err == nil:
				r.Header.Add(hd.Name, v)
			}
		}
		if where := h.carriesUnboundSecret(r, body, target); where != "" {
			return nil, abi.ErrNotAllowed, fmt.Sprintf("the request to %s%s holds, in %s, the value of a secret that is not bound to that destination: agentrt sends a secret only where the operator bound it", target.Origin(), target.Path, where)
		}
		w := httptest.NewRecorder()
		h.HTTP.ServeHTTP(w, r)
		res := w.Result()
		loc := res.Header.Get("Location")
		if m.NoRedirects || loc == "" || res.StatusCode < 300 || res.StatusCode > 399 || res.StatusCode == 304 {
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
		if res.StatusCode != 307 && res.StatusCode != 308 && method != http.MethodHead {
			method, body = http.MethodGet, nil
		}
	}
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
