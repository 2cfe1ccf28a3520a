package http_test

import (
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

// The wrapper as a plugin uses it, in a step handler run by agenttest,
// whose host sends the requests to a handler of the test's.

// handle is what the step handler does; each test sets it.
var handle func(s *agent.Step) (string, error)

func init() {
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		out, err := handle(s)
		return agent.Result{Output: out, IsLast: true}, err
	})
}

const key = "sk-test-0123456789"

// newHost is a host granting api.test, holding KEY for its /v1.
func newHost(h nethttp.HandlerFunc) *agenttest.Host {
	host := agenttest.New()
	host.HTTP = h
	host.Allow = []string{"https://api.test", "https://other.test"}
	host.Secrets = map[string]agenttest.Secret{"KEY": {Value: key, Destinations: []string{"https://api.test/v1"}}}
	return host
}

// step runs the handler once and returns its output or failure.
func step(t *testing.T, host *agenttest.Host, f func(s *agent.Step) (string, error)) (string, error) {
	t.Helper()
	handle = f
	task, err := host.CreateTask("t")
	if err != nil {
		t.Fatal(err)
	}
	st, err := task.Step("go")
	if err != nil {
		return "", err
	}
	return st.Output, nil
}

func TestDoSendsTheRequestAsTheHostWouldAndReadsTheWholeResponse(t *testing.T) {
	big := strings.Repeat("x", 5000) // more than the kit's first buffer
	var got *nethttp.Request
	var gotBody string
	host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b, _ := io.ReadAll(r.Body)
		got, gotBody = r, string(b)
		w.Header().Add("X-Many", "1")
		w.Header().Add("X-Many", "2")
		w.WriteHeader(201)
		fmt.Fprintf(w, "key=%s %s", r.Header.Get("Authorization"), big)
	})
	out, err := step(t, host, func(*agent.Step) (string, error) {
		req, err := http.NewRequest(http.MethodPost, "https://api.test/v1/chat", strings.NewReader(`{"q":1}`))
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+http.Secret("KEY"))
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s|%s|%d|%s|%s", resp.Status, strings.Join(resp.Header.Values("x-many"), ","), resp.ContentLength, resp.URL, body), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "201 Created|1,2|" + fmt.Sprint(len("key=Bearer {{secret:KEY}} ")+len(big)) + "|https://api.test/v1/chat|key=Bearer {{secret:KEY}} " + big
	if out != want {
		t.Errorf("the plugin read %.200q,\nwant %.200q", out, want)
	}
	if got.Method != "POST" || got.Header.Get("Authorization") != "Bearer "+key || got.Header.Get("Content-Type") != "application/json" || gotBody != `{"q":1}` {
		t.Errorf("the server got %s %v %q", got.Method, got.Header, gotBody)
	}
}

func TestARefusedRequestIsAHostErrorOfItsKind(t *testing.T) {
	reached := 0
	host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		reached++
		if r.URL.Path == "/moved" {
			nethttp.Redirect(w, r, "https://evil.test/", nethttp.StatusFound)
		}
	})
	withHeader := func(url, name, value string) func() error {
		return func() error {
			req, err := http.NewRequest("GET", url, nil)
			if err != nil {
				return err
			}
			req.Header.Set(name, value)
			_, err = http.DefaultClient.Do(req)
			return err
		}
	}
	for _, c := range []struct {
		name string
		do   func() error
		want error
	}{
		{"a destination not granted", func() error { _, err := http.Get("https://evil.test/"); return err }, agent.ErrNotAllowed},
		{"a redirect to one", func() error { _, err := http.Get("https://api.test/moved"); return err }, agent.ErrNotAllowed},
		{"a secret not held for it", withHeader("https://other.test/", "X-Key", http.Secret("KEY")), agent.ErrNotAllowed},
		{"a secret nobody holds", withHeader("https://api.test/v1/", "X-Key", http.Secret("NOBODY")), agent.ErrNotAllowed},
		{"a Host header", withHeader("https://api.test/", "Host", "evil.test"), agent.ErrInvalid},
		{"a hop-by-hop header", withHeader("https://api.test/", "Connection", "close"), agent.ErrInvalid},
		{"a URL with a secret", func() error { _, err := http.Get("https://api.test/?k=" + http.Secret("KEY")); return err }, agent.ErrInvalid},
	} {
		_, err := step(t, host, func(*agent.Step) (string, error) {
			err := c.do()
			var he *agent.HostError
			if !errors.Is(err, c.want) || !errors.As(err, &he) || he.Func != "http_request" {
				return "", fmt.Errorf("got %v, want %v of http_request", err, c.want)
			}
			return "", nil
		})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if reached != 1 {
		t.Errorf("the server was reached %d times, want once (the redirect)", reached)
	}
	if _, err := http.NewRequest("CONNECT", "https://api.test/", nil); err == nil {
		t.Error("NewRequest takes CONNECT")
	}
}

func TestRedirectsAreFollowedUnlessTheClientSaysNot(t *testing.T) {
	host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path == "/v1/old" {
			nethttp.Redirect(w, r, "/v1/new", nethttp.StatusMovedPermanently)
			return
		}
		fmt.Fprintf(w, "at %s with %s", r.URL.Path, r.Header.Get("X-Key"))
	})
	out, err := step(t, host, func(*agent.Step) (string, error) {
		req, _ := http.NewRequest("GET", "https://api.test/v1/old", nil)
		req.Header.Set("X-Key", http.Secret("KEY"))
		resp, err := (&http.Client{NoRedirects: true}).Do(req)
		if err != nil {
			return "", err
		}
		followed, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(followed.Body)
		return fmt.Sprintf("%d %s | %s %s", resp.StatusCode, resp.Header.Get("Location"), followed.URL, b), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "301 /v1/new | https://api.test/v1/new at /v1/new with {{secret:KEY}}"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

func TestFetchArtifactWritesAURIArtifactsBytesToTheWorkspace(t *testing.T) {
	host := newHost(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path == "/missing.pdf" {
			nethttp.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "%PDF of "+r.URL.Path)
	})
	handle = func(*agent.Step) (string, error) { return "", nil }
	task, err := host.CreateTask("t")
	if err != nil {
		t.Fatal(err)
	}
	a, err := task.UploadURI("https://api.test/report.pdf", "", "")
	if err != nil {
		t.Fatal(err)
	}
	missing, _ := task.UploadURI("https://api.test/missing.pdf", "", "")
	elsewhere, _ := task.UploadURI("https://evil.test/x.pdf", "", "")
	handle = func(*agent.Step) (string, error) {
		n, err := agent.FetchArtifact(a.ID, "in/report.pdf")
		if err != nil {
			return "", err
		}
		if _, err := agent.FetchArtifact(missing.ID, "m.pdf"); !errors.Is(err, agent.ErrIO) {
			return "", fmt.Errorf("a 404: %v", err)
		}
		if _, err := agent.FetchArtifact(elsewhere.ID, "e.pdf"); !errors.Is(err, agent.ErrNotAllowed) {
			return "", fmt.Errorf("not granted: %v", err)
		}
		if _, err := agent.FetchArtifact("nope", "n.pdf"); !errors.Is(err, agent.ErrNotFound) {
			return "", fmt.Errorf("no such artifact: %v", err)
		}
		return fmt.Sprint(n), nil
	}
	st, err := task.Step("fetch")
	if err != nil {
		t.Fatal(err)
	}
	data, err := task.ReadFile("in/report.pdf")
	if err != nil || string(data) != "%PDF of /report.pdf" || st.Output != fmt.Sprint(len(data)) {
		t.Errorf("fetched %q (%v), output %q", data, err, st.Output)
	}
}
