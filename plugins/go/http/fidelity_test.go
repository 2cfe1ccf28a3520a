package http_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"strings"
	"testing"

	agent "github.com/agentrt/agentrt/plugins/go"
	"github.com/agentrt/agentrt/plugins/go/agenttest"
	"github.com/agentrt/agentrt/plugins/go/http"
)

// The harness sends as agentrt does, so that a plugin's test is refused
// what agentrt would refuse (hostapi/egress): each of these went through
// before the harness held the host's rules.

// A redirect that would carry a secret's value, in any form, to a
// destination the secret is not bound to is refused, and the other
// destination is never reached.
func TestTheHarnessRefusesASecretsValueWhereItIsNotBound(t *testing.T) {
	for _, form := range []string{key, base64.RawURLEncoding.EncodeToString([]byte(key))} {
		reachedOther := false
		host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if r.Host == "other.test" {
				reachedOther = true
				return
			}
			nethttp.Redirect(w, r, "https://other.test/?k="+form, nethttp.StatusFound)
		})
		_, err := step(t, host, func(*agent.Step) (string, error) {
			req, _ := http.NewRequest("GET", "https://api.test/v1/echo", nil)
			req.Header.Set("Authorization", http.Secret("KEY"))
			_, err := http.DefaultClient.Do(req)
			if !errors.Is(err, agent.ErrNotAllowed) || !strings.Contains(err.Error(), "not bound to that destination") {
				return "", fmt.Errorf("a redirect carrying the key to other.test: %v, want it refused", err)
			}
			return "", nil
		})
		if err != nil || reachedOther {
			t.Errorf("form %q: %v (reached other.test: %v)", form, err, reachedOther)
		}
	}
}

// No Referer past the first request; every redirect counts as a request
// of the call, which stops at the host's limit of 32.
func TestTheHarnessCountsRedirectsAndSendsNoRefererOnThem(t *testing.T) {
	var referers []string
	hops := 0
	host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		hops++
		referers = append(referers, r.Header.Get("Referer"))
		if r.URL.Path == "/loop" && hops < 3 {
			nethttp.Redirect(w, r, "/loop", nethttp.StatusFound)
		}
	})
	_, err := step(t, host, func(*agent.Step) (string, error) {
		req, _ := http.NewRequest("GET", "https://api.test/loop", nil)
		req.Header.Set("Referer", "https://mine.example/")
		if _, err := http.DefaultClient.Do(req); err != nil {
			return "", err
		}
		// 3 requests made; 29 left: a chain of redirects runs out.
		for i := 0; i < 29; i++ {
			if _, err := http.Get("https://api.test/ok"); err != nil {
				return "", fmt.Errorf("request %d: %v", i+4, err)
			}
		}
		_, err := http.Get("https://api.test/ok")
		if !errors.Is(err, agent.ErrLimit) {
			return "", fmt.Errorf("the 33rd request: %v, want the limit", err)
		}
		return "", nil
	})
	if err != nil {
		t.Error(err)
	}
	if len(referers) < 3 || referers[0] != "https://mine.example/" || referers[1] != "" || referers[2] != "" {
		t.Errorf("Referers sent: %q, want the plugin's on the first request only", referers[:min(3, len(referers))])
	}
}

// What comes back is scrubbed of the secret in every form the host
// scrubs: a server that answers it quoted as Go's %+q writes it (😀 as
// \U0001f600, which no JSON writer writes), or in base64url without
// padding (which no other form is), hands the plugin the placeholder.
func TestTheHarnessScrubsEveryFormTheHostScrubs(t *testing.T) {
	const clé = "sk-😀-key-01234567"
	host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		fmt.Fprintf(w, "%s %+q", base64.RawURLEncoding.EncodeToString([]byte(clé)), clé)
	})
	host.Secrets["KEY"] = agenttest.Secret{Value: clé, Destinations: []string{"https://api.test/v1"}}
	out, err := step(t, host, func(*agent.Step) (string, error) {
		resp, err := http.Get("https://api.test/v1/echo")
		if err != nil {
			return "", err
		}
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{{secret:KEY}} "{{secret:KEY}}"`; out != want {
		t.Errorf("the plugin read %q, want %q", out, want)
	}
}

// Headers are bounded as they would be sent, each placeholder counted as
// the longest secret: 17 placeholders in one header are over 64 KiB.
func TestTheHarnessBoundsHeadersAsTheyWouldBeSent(t *testing.T) {
	host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {})
	_, err := step(t, host, func(*agent.Step) (string, error) {
		req, _ := http.NewRequest("GET", "https://api.test/v1/", nil)
		for i := 0; i < 17; i++ {
			req.Header.Add(fmt.Sprintf("X-K%d", i), http.Secret("KEY"))
		}
		_, err := http.DefaultClient.Do(req)
		if !errors.Is(err, agent.ErrInvalid) {
			return "", fmt.Errorf("17 placeholders: %v, want them refused as over the headers' bound", err)
		}
		return "", nil
	})
	if err != nil {
		t.Error(err)
	}
}

// A request's body and a response's are held to agentrt's default
// bounds (4 MiB and 8 MiB), and to a client's lower MaxResponseBytes.
func TestTheHarnessBoundsBodiesAsAgentrtDoes(t *testing.T) {
	host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		n := 100
		if r.URL.Path == "/big" {
			n = 8<<20 + 1
		}
		w.Write(make([]byte, n))
	})
	_, err := step(t, host, func(*agent.Step) (string, error) {
		big := strings.NewReader(strings.Repeat("x", 4<<20+1))
		if _, err := http.Post("https://api.test/", "text/plain", big); !errors.Is(err, agent.ErrLimit) {
			return "", fmt.Errorf("a body of 4 MiB and a byte: %v, want the limit", err)
		}
		if _, err := http.Get("https://api.test/big"); !errors.Is(err, agent.ErrLimit) {
			return "", fmt.Errorf("a response of 8 MiB and a byte: %v, want the limit", err)
		}
		c := &http.Client{MaxResponseBytes: 99}
		if _, err := c.Get("https://api.test/small"); !errors.Is(err, agent.ErrLimit) {
			return "", fmt.Errorf("a response of 100 bytes to a client of 99: %v, want the limit", err)
		}
		return "", nil
	})
	if err != nil {
		t.Error(err)
	}
}

// Redirects are followed as Go's client (agentrt's) follows them: only
// 301, 302, 303, 307 and 308; Authorization and cookies the plugin wrote
// are not sent on to another host (a subdomain of the first is not
// another); the headers about a body dropped on a 303 go with it.
func TestTheHarnessFollowsRedirectsAsAgentrtsClientDoes(t *testing.T) {
	seen := map[string]nethttp.Header{}
	host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		seen[r.Host+r.URL.Path] = r.Header.Clone()
		switch r.URL.Path {
		case "/300":
			nethttp.Redirect(w, r, "/elsewhere", nethttp.StatusMultipleChoices)
		case "/to-other":
			nethttp.Redirect(w, r, "https://other.test/landed", nethttp.StatusTemporaryRedirect)
		case "/to-sub":
			nethttp.Redirect(w, r, "https://sub.api.test/landed", nethttp.StatusFound)
		case "/see-other":
			nethttp.Redirect(w, r, "/landed", nethttp.StatusSeeOther)
		}
	})
	host.Allow = append(host.Allow, "https://*.api.test")
	_, err := step(t, host, func(*agent.Step) (string, error) {
		res, err := http.Get("https://api.test/300")
		if err != nil || res.StatusCode != 300 {
			return "", fmt.Errorf("a 300: %v %v, want it answered, not followed", res, err)
		}
		for _, path := range []string{"/to-other", "/to-sub"} {
			req, _ := http.NewRequest("GET", "https://api.test"+path, nil)
			req.Header.Set("Authorization", "Basic dXNlcjpwYXNz")
			req.Header.Set("Cookie", "a=b")
			if _, err := http.DefaultClient.Do(req); err != nil {
				return "", err
			}
		}
		if _, err := http.Post("https://api.test/see-other", "application/json", strings.NewReader("{}")); err != nil {
			return "", err
		}
		return "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := seen["api.test/elsewhere"]; ok {
		t.Error("a 300 was followed")
	}
	if h := seen["other.test/landed"]; h == nil || h.Get("Authorization") != "" || h.Get("Cookie") != "" {
		t.Errorf("another host got %v, want no Authorization and no Cookie", h)
	}
	if h := seen["sub.api.test/landed"]; h == nil || h.Get("Authorization") == "" || h.Get("Cookie") == "" {
		t.Errorf("a subdomain got %v, want the Authorization and Cookie", h)
	}
	if h := seen["api.test/landed"]; h == nil || h.Get("Content-Type") != "" {
		t.Errorf("a 303's next request got %v, want no Content-Type", h)
	}
}

// A secret agentrt would not start with (too short, a trailing newline,
// a destination not in its one spelling) fails the request saying why.
func TestTheHarnessRefusesASecretAgentrtWouldNotStartWith(t *testing.T) {
	for _, tc := range []struct {
		secret agenttest.Secret
		want   string
	}{
		{agenttest.Secret{Value: "short", Destinations: []string{"https://api.test"}}, "a secret has at least 8"},
		{agenttest.Secret{Value: key + "\n", Destinations: []string{"https://api.test"}}, "a trailing newline?"},
		{agenttest.Secret{Value: key, Destinations: []string{"https://api.test:443"}}, "leave the port out"},
	} {
		host := newHost(func(nethttp.ResponseWriter, *nethttp.Request) {})
		host.Secrets["KEY"] = tc.secret
		_, err := step(t, host, func(*agent.Step) (string, error) {
			_, err := http.Get("https://api.test/")
			if !errors.Is(err, agent.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				return "", fmt.Errorf("%v, want it refused: %s", err, tc.want)
			}
			return "", nil
		})
		if err != nil {
			t.Errorf("secret %+v: %v", tc.secret, err)
		}
	}
}

// A secret is filled in only for the destinations it is bound to: a
// first request elsewhere is refused, naming the secret, and a redirect
// to a granted destination it is not bound to goes on without the
// header (as agentrt's client writes each hop's headers again), rather
// than carrying the value there or failing.
func TestTheHarnessFillsInASecretOnlyWhereItIsBound(t *testing.T) {
	seen := map[string]string{}
	host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		seen[r.Host+r.URL.Path] = r.Header.Get("X-Key")
		if r.URL.Path == "/v1/go" {
			nethttp.Redirect(w, r, "/elsewhere", nethttp.StatusFound)
		}
	})
	_, err := step(t, host, func(*agent.Step) (string, error) {
		req, _ := http.NewRequest("GET", "https://other.test/v1/", nil)
		req.Header.Set("X-Key", http.Secret("KEY"))
		_, err := http.DefaultClient.Do(req)
		if want := "no secret KEY is held for https://other.test/v1/"; !errors.Is(err, agent.ErrNotAllowed) || !strings.Contains(err.Error(), want) {
			return "", fmt.Errorf("KEY to other.test: %v, want it refused: %s", err, want)
		}
		req, _ = http.NewRequest("GET", "https://api.test/v1/go", nil)
		req.Header.Set("X-Key", http.Secret("KEY"))
		if _, err := http.DefaultClient.Do(req); err != nil {
			return "", fmt.Errorf("a redirect out of KEY's destination: %v, want it followed without KEY", err)
		}
		return "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"api.test/v1/go": key, "api.test/elsewhere": ""}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("the server got X-Key %v, want %v", seen, want)
	}
}
