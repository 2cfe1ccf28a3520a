package egress

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/plugins/abi/secretform"
)

// An attacker who read the source holds a destination the secret is
// bound to that reflects what it gets (or a plugin that got the value
// unscrubbed), and a destination granted to the agent that the secret is
// not bound to. Every path a value could take from the one to the other
// is tried: the URL of a redirect in each form, the Referer net/http
// writes, a header net/http copies to the next hop, a body a 307 or 308
// sends again.

// urlSafeSecret is a secret of characters a URL may carry as they are,
// whose forms differ: a URL's query and path escape some of them, base64
// writes it otherwise.
const urlSafeSecret = "sk:live@key!$*'(),;=+~0123"

// leakSetup is a server the secret KEY is bound to, whose handler the
// test sets, and one granted to the agent that KEY is not bound to.
type leakSetup struct {
	bound, unbound *server
	handler        http.HandlerFunc
	client         *Client
	logs           *logBuffer
	// sent is how many requests had reached unbound at reset.
	sent int
}

// reset starts an attempt: the log emptied, unbound's requests counted.
func (s *leakSetup) reset() {
	s.logs.mu.Lock()
	s.logs.buf.Reset()
	s.logs.mu.Unlock()
	s.sent = s.unbound.requests()
}

func newLeakSetup(t *testing.T, value string) *leakSetup {
	t.Helper()
	s := &leakSetup{}
	s.bound = newServer(t, func(w http.ResponseWriter, r *http.Request) { s.handler(w, r) })
	s.unbound = newServer(t, nil)
	p := Policy{
		Allow:        dests(t, s.bound.url("api.test", "/"), s.unbound.url("other.test", "/")),
		PrivateHosts: []string{"api.test", "other.test"},
		Secrets:      []Secret{{Name: "KEY", Value: value, Destinations: dests(t, s.bound.url("api.test", "/v1"))}},
	}
	s.client, s.logs = newClient(t, p, Limits{})
	s.reset()
	return s
}

// wantLeakRefused checks err is the refusal of a request that carries
// the secret value where it is not bound, saying where, naming the
// secret in the operator's log and nowhere its value.
func (s *leakSetup) wantLeakRefused(t *testing.T, err error, value, where string) {
	t.Helper()
	e := wantError(t, err, Refused, "holds, in "+where+", the value of a secret that is not bound to that destination")
	for _, form := range secretform.Of(value) {
		if strings.Contains(e.Message, form) || strings.Contains(s.logs.String(), form) {
			t.Errorf("the refusal or the log holds the secret as %q:\n%s\n%s", form, e.Message, s.logs)
		}
	}
	if !strings.Contains(s.logs.String(), "secret=KEY") {
		t.Errorf("the log does not name the secret the request carried:\n%s", s.logs)
	}
	if n := s.unbound.requests() - s.sent; n != 0 {
		t.Errorf("the destination the secret is not bound to got %d requests", n)
	}
}

func TestARedirectHoldingASecretInAnyFormIsNotFollowedWhereTheSecretIsNotBound(t *testing.T) {
	s := newLeakSetup(t, urlSafeSecret)
	var location func(key string) string
	s.handler = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/start" {
			return
		}
		// The bound server reflects the key it got into the URL it
		// redirects to.
		w.Header().Set("Location", location(r.Header.Get("X-Api-Key")))
		w.WriteHeader(http.StatusFound)
	}
	other := s.unbound.url("other.test", "")
	for name, loc := range map[string]func(key string) string{
		"in the query":                 func(k string) string { return other + "/x?key=" + k },
		"in the path":                  func(k string) string { return other + "/keys/" + k },
		"query-escaped":                func(k string) string { return other + "/x?key=" + url.QueryEscape(k) },
		"path-escaped":                 func(k string) string { return other + "/keys/" + url.PathEscape(k) },
		"escaped in lower-case hex":    func(k string) string { return other + "/x?key=" + strings.ToLower(url.QueryEscape(k)) },
		"each byte escaped":            func(k string) string { return other + "/x?key=" + escapeAll(k) },
		"escaped in part":              func(k string) string { return other + "/x?key=" + strings.ReplaceAll(k, "@", "%40") },
		"as base64":                    func(k string) string { return other + "/x?key=" + base64.StdEncoding.EncodeToString([]byte(k)) },
		"as base64 without padding":    func(k string) string { return other + "/x?key=" + base64.RawStdEncoding.EncodeToString([]byte(k)) },
		"as base64url":                 func(k string) string { return other + "/x?key=" + base64.URLEncoding.EncodeToString([]byte(k)) },
		"as base64url without padding": func(k string) string { return other + "/x?key=" + base64.RawURLEncoding.EncodeToString([]byte(k)) },
		// Granted, on the same server, but not bound.
		"to a path of the same server": func(k string) string { return "/v2/x?key=" + url.QueryEscape(k) },
	} {
		t.Run(name, func(t *testing.T) {
			s.reset()
			location = loc
			before := s.bound.requests()
			_, err := s.client.Do(context.Background(), &Request{URL: s.bound.url("api.test", "/v1/start"),
				Header: []abi.HTTPHeader{{Name: "X-Api-Key", Value: "{{secret:KEY}}"}}})
			s.wantLeakRefused(t, err, urlSafeSecret, "its URL")
			if got := s.bound.requests() - before; got != 1 {
				t.Errorf("%d requests reached the bound server, want the first only", got)
			}
		})
	}
	// Where the secret is bound, the same redirect is followed.
	location = func(k string) string { return s.bound.url("api.test", "/v1/x?key="+url.QueryEscape(k)) }
	res, err := s.client.Do(context.Background(), &Request{URL: s.bound.url("api.test", "/v1/start"),
		Header: []abi.HTTPHeader{{Name: "X-Api-Key", Value: "{{secret:KEY}}"}}})
	if err != nil || res.Status != 200 || res.URL != s.bound.url("api.test", "/v1/x?key={{secret:KEY}}") {
		t.Fatalf("a redirect within the secret's destination: %+v, %v", res, err)
	}
}

// escapeAll escapes every byte of s, as a server may.
func escapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

func TestNoRefererIsSentOnARedirect(t *testing.T) {
	s := newLeakSetup(t, urlSafeSecret)
	s.handler = func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/start":
			// Where the key is bound, a URL may hold it ...
			http.Redirect(w, r, "/v1/next?key="+url.QueryEscape(r.Header.Get("X-Api-Key")), http.StatusFound)
		default:
			// ... which net/http would send on as Referer.
			http.Redirect(w, r, s.unbound.url("other.test", "/plain"), http.StatusFound)
		}
	}
	res, err := s.client.Do(context.Background(), &Request{URL: s.bound.url("api.test", "/v1/start"),
		Header: []abi.HTTPHeader{{Name: "X-Api-Key", Value: "{{secret:KEY}}"}, {Name: "Referer", Value: "https://plugin.test/"}}})
	if err != nil || res.Status != 200 {
		t.Fatalf("the chain: %+v, %v", res, err)
	}
	hops := append(s.bound.all(), s.unbound.all()...)
	if len(hops) != 3 {
		t.Fatalf("%d requests reached the servers, want 3", len(hops))
	}
	if got := hops[0].Header.Get("Referer"); got != "https://plugin.test/" {
		t.Errorf("the first request's Referer, the plugin's, is %q", got)
	}
	for i, r := range hops[1:] {
		if got := r.Header.Get("Referer"); got != "" {
			t.Errorf("hop %d (%s) got Referer %q", i+1, r.URL, got)
		}
	}
	if r := hops[2]; r.Host != "other.test:"+s.unbound.port || r.Header.Get("X-Api-Key") != "" {
		t.Errorf("the last hop: %s %v", r.Host, r.Header)
	}
}

func TestABodyHoldingASecretIsNotSentWhereTheSecretIsNotBound(t *testing.T) {
	for _, value := range []string{urlSafeSecret, `sk-"quoted"<&>\back`} {
		s := newLeakSetup(t, value)
		status := 0
		s.handler = func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, s.unbound.url("other.test", "/x"), status)
		}
		// A body that holds the value (a plugin that got it unscrubbed,
		// in the JSON it writes).
		body := []byte(`{"echo": "` + secretform.JSONString(value, true) + `"}`)
		post := func(to string) error {
			_, err := s.client.Do(context.Background(), &Request{Method: "POST", URL: to, Body: body})
			return err
		}
		for _, status = range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			s.reset()
			s.wantLeakRefused(t, post(s.bound.url("api.test", "/v1/x")), value, "its body")
		}
		s.reset()
		s.wantLeakRefused(t, post(s.unbound.url("other.test", "/x")), value, "its body")
		// A 302 or 303 makes the next hop a GET without the body: it is
		// followed.
		for _, status = range []int{http.StatusFound, http.StatusSeeOther} {
			if err := post(s.bound.url("api.test", "/v1/x")); err != nil {
				t.Errorf("a %d to a GET without the body: %v", status, err)
			}
		}
		if r, b := s.unbound.last(); s.unbound.requests() != 2 || r.Method != "GET" || len(b) != 0 {
			t.Errorf("the destination the secret is not bound to got %d requests, the last %v %q", s.unbound.requests(), r, b)
		}
		// Where it is bound, the body goes.
		status = 0
		s.handler = func(w http.ResponseWriter, r *http.Request) {}
		if err := post(s.bound.url("api.test", "/v1/x")); err != nil {
			t.Errorf("a body holding the secret, to where it is bound: %v", err)
		}
	}
}

func TestAHeaderHoldingASecretIsNotCarriedWhereTheSecretIsNotBound(t *testing.T) {
	s := newLeakSetup(t, urlSafeSecret)
	var target string
	s.handler = func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, http.StatusFound) }
	for _, c := range []struct {
		name   string
		header abi.HTTPHeader
		to     string
	}{
		// net/http copies every header to a hop on the same host, and
		// all but Authorization, Cookie and the like to another.
		{"a header the plugin wrote the value in, to another host", abi.HTTPHeader{Name: "X-Copy", Value: "k=" + urlSafeSecret}, s.unbound.url("other.test", "/x")},
		{"its base64, to another host", abi.HTTPHeader{Name: "X-Copy", Value: base64.StdEncoding.EncodeToString([]byte(urlSafeSecret))}, s.unbound.url("other.test", "/x")},
		{"a Cookie, to a path of the same host", abi.HTTPHeader{Name: "Cookie", Value: "session=" + url.QueryEscape(urlSafeSecret)}, s.bound.url("api.test", "/v2/x")},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.reset()
			target = c.to
			before := s.bound.requests()
			_, err := s.client.Do(context.Background(), &Request{URL: s.bound.url("api.test", "/v1/x"), Header: []abi.HTTPHeader{c.header}})
			s.wantLeakRefused(t, err, urlSafeSecret, "its header "+http.CanonicalHeaderKey(c.header.Name))
			if got := s.bound.requests() - before; got != 1 {
				t.Errorf("%d requests reached the bound server, want the first only", got)
			}
		})
	}
	// Sent directly where it is not bound: refused before it leaves.
	s.reset()
	_, err := s.client.Do(context.Background(), &Request{URL: s.unbound.url("other.test", "/x"), Header: []abi.HTTPHeader{{Name: "X-Copy", Value: urlSafeSecret}}})
	s.wantLeakRefused(t, err, urlSafeSecret, "its header X-Copy")
	// And in the URL the plugin asks for.
	s.reset()
	_, err = s.client.Do(context.Background(), &Request{URL: s.unbound.url("other.test", "/x?k="+url.QueryEscape(urlSafeSecret))})
	s.wantLeakRefused(t, err, urlSafeSecret, "its URL")
}

// all are the requests that reached s, in order.
func (s *server) all() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

func TestEachRedirectIsCountedAndTheRequestStopsWhenTheCountRunsOut(t *testing.T) {
	var s *server
	s = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, s.url("api.test", "/again"), http.StatusFound)
	})
	c, _ := newClient(t, Policy{Allow: dests(t, s.url("api.test", "/")), PrivateHosts: []string{"api.test"}}, Limits{})
	counted := 0
	_, err := c.Do(context.Background(), &Request{URL: s.url("api.test", "/"), CountRedirect: func() error {
		if counted == 2 {
			return errors.New("no more requests in this call")
		}
		counted++
		return nil
	}})
	wantError(t, err, Limit, "no more requests in this call")
	if n := s.requests(); n != 3 {
		t.Errorf("%d requests reached the server, want the first and the 2 redirects counted", n)
	}
	// An *Error keeps its code.
	_, err = c.Do(context.Background(), &Request{URL: s.url("api.test", "/"), CountRedirect: func() error {
		return &Error{Code: Refused, Message: "not now"}
	}})
	wantError(t, err, Refused, "not now")
}
