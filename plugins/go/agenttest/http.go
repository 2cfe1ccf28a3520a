package agenttest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Outbound HTTP in the harness: a plugin's request goes to Host.HTTP,
// in this process, as agentrt would send it to a server: only to a
// destination in Host.Allow, without the headers the host owns, with its
// secret placeholders filled in for the destinations each secret is bound
// to, its redirects followed (each hop checked, a secret's headers
// dropped for a hop it is not bound to), and the secrets' values scrubbed
// from the response the plugin reads.

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
	res, code, msg := c.task.host.send(m, body)
	if code != 0 {
		return c.fail(code, "%s", msg)
	}
	c.resp = res
	return 0
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
	res, code, msg := c.task.host.send(abi.HTTPRequest{URL: a.URI}, nil)
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
func (h *Host) send(m abi.HTTPRequest, body []byte) (*sentResponse, int32, string) {
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
	for _, hd := range m.Headers {
		if why := abi.CheckRequestHeader(hd.Name, hd.Value); why != "" {
			return nil, abi.ErrInvalid, why
		}
		if _, why := abi.SecretNames(hd.Value); why != "" {
			return nil, abi.ErrInvalid, "the value of " + hd.Name + ": " + why
		}
	}
	for hop := 0; ; hop++ {
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
			v, err := h.expand(hd.Value, target)
			switch {
			case err != nil && hop == 0:
				return nil, abi.ErrNotAllowed, err.Error()
			case err == nil:
				r.Header.Add(hd.Name, v)
			}
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
		bound := false
		for _, dest := range s.Destinations {
			if d, err := abi.ParseDestination(dest); err == nil && d.Allows(t) {
				bound = true
			}
		}
		if !ok || !bound {
			return "", fmt.Errorf("no secret %s is held for %s%s (agenttest.Host.Secrets)", name, t.Origin(), t.Path)
		}
		values[name] = s.Value
	}
	return abi.ExpandSecrets(value, func(n string) string { return values[n] }), nil
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

// scrubber replaces each secret's value, as it is and as JSON, a URL and
// base64 write it, with its placeholder, as agentrt does.
func (h *Host) scrubber() *strings.Replacer {
	var pairs []string
	for name, s := range h.Secrets {
		if s.Value == "" {
			continue
		}
		placeholder := abi.SecretPrefix + name + abi.SecretSuffix
		quoted, _ := json.Marshal(s.Value)
		for _, form := range []string{s.Value, string(quoted[1 : len(quoted)-1]), url.QueryEscape(s.Value),
			base64.StdEncoding.EncodeToString([]byte(s.Value))} {
			pairs = append(pairs, form, placeholder)
		}
	}
	return strings.NewReplacer(pairs...)
}
