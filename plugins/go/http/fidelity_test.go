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
