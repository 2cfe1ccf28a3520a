// Command caller is a test plugin for outbound HTTP: each step makes the
// request its input describes, through the Go kit's http package, and
// answers with what the plugin saw of it.
//
// Step input (JSON):
//
//	{"method": "POST", "url": "http://…", "headers": [["Authorization", "Bearer {{secret:KEY}}"]],
//	 "body": "…", "timeout_ms": 300, "no_redirects": true, "max_response": 10}
//
// or {"fetch": ARTIFACT_ID, "path": "in/x"} to fetch a URI artifact into
// the workspace, {"read": "in/x"} to read a workspace file, or
// {"requests": N, "url": …} to make N requests. The
// step's output is JSON: {"status", "headers", "body", "url"} of the
// response, or {"error", "code"} (code: invalid, not_allowed, limit, io,
// not_found) of the failure; with "publish": true, the body is also
// created as the artifact response.txt and written to the workspace.
//
// Built by the tests (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	agent "github.com/agentrt/agentrt/plugins/go"
	"github.com/agentrt/agentrt/plugins/go/http"
)

type command struct {
	Method      string      `json:"method"`
	URL         string      `json:"url"`
	Headers     [][2]string `json:"headers"`
	Body        string      `json:"body"`
	TimeoutMS   int         `json:"timeout_ms"`
	NoRedirects bool        `json:"no_redirects"`
	MaxResponse int64       `json:"max_response"`
	Publish     bool        `json:"publish"`
	Fetch       string      `json:"fetch"`
	Path        string      `json:"path"`
	Requests    int         `json:"requests"`
	Read        string      `json:"read"`
}

type outcome struct {
	Status  int               `json:"status,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	URL     string            `json:"url,omitempty"`
	Size    int64             `json:"size,omitempty"`
	Made    int               `json:"made,omitempty"`
	Error   string            `json:"error,omitempty"`
	Code    string            `json:"code,omitempty"`
}

func init() {
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		var c command
		if err := json.Unmarshal([]byte(s.Input), &c); err != nil {
			return agent.Result{}, fmt.Errorf("bad command: %v", err)
		}
		out := run(&c)
		b, err := json.Marshal(out)
		if err != nil {
			return agent.Result{}, err
		}
		return agent.Result{Output: string(b), IsLast: true}, nil
	})
}

func run(c *command) outcome {
	if c.Read != "" {
		b, err := agent.ReadFile(c.Read)
		if err != nil {
			return failure(err)
		}
		return outcome{Body: string(b)}
	}
	if c.Fetch != "" {
		n, err := agent.FetchArtifact(c.Fetch, c.Path)
		if err != nil {
			return failure(err)
		}
		return outcome{Size: n}
	}
	if c.Requests > 0 {
		for i := range c.Requests {
			if _, err := http.Get(c.URL); err != nil {
				o := failure(err)
				o.Made = i
				return o
			}
		}
		return outcome{Made: c.Requests}
	}
	req, err := http.NewRequest(c.Method, c.URL, strings.NewReader(c.Body))
	if err != nil {
		return failure(err)
	}
	for _, h := range c.Headers {
		req.Header.Add(h[0], h[1])
	}
	client := &http.Client{Timeout: time.Duration(c.TimeoutMS) * time.Millisecond, NoRedirects: c.NoRedirects, MaxResponseBytes: c.MaxResponse}
	resp, err := client.Do(req)
	if err != nil {
		return failure(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return failure(err)
	}
	o := outcome{Status: resp.StatusCode, Headers: map[string]string{}, Body: string(body), URL: resp.URL}
	for name, values := range resp.Header {
		o.Headers[name] = strings.Join(values, ", ")
	}
	if c.Publish {
		if err := agent.WriteFile("response.txt", body); err != nil {
			return failure(err)
		}
		if _, err := agent.CreateArtifact("response.txt", "", body); err != nil {
			return failure(err)
		}
		agent.Logf("the response was %s", body)
	}
	return o
}

func failure(err error) outcome {
	o := outcome{Error: err.Error(), Code: "other"}
	for code, target := range map[string]error{"invalid": agent.ErrInvalid, "not_allowed": agent.ErrNotAllowed,
		"limit": agent.ErrLimit, "io": agent.ErrIO, "not_found": agent.ErrNotFound} {
		if errors.Is(err, target) {
			o.Code = code
		}
	}
	return o
}

func main() {}
