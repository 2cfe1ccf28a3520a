// Command uris is a test plugin for the artifact-management RFC: URI
// artifacts, where artifacts come from, and the artifact and download
// handlers. Its manifest (written by the tests) lets it take memo: URIs
// and make view: and s3: ones.
//
// Task handler: a task input "seed" creates the artifact seed.txt.
//
// Step handler: the step input is a command:
//
//	make NAME TEXT   create the artifact NAME of bytes TEXT (also written to the workspace)
//	link URI         create a URI artifact of URI, in links/
//	view PATH        create the URI artifact view:PATH, which the download handler serves
//	write PATH N     write N bytes of a pattern to the workspace file PATH
//	fail             create an artifact, then fail
//
// Artifact handler: a URI upload from reject.example is rejected; an
// http: URI is replaced with its https: form; a memo:TEXT URI is replaced
// with the workspace file memos/NAME holding TEXT. Files are accepted.
//
// Download handler: a view:PATH artifact is the workspace file PATH as it
// is now, in chunks of 64 KiB; a *.upper artifact is served upper-cased; a
// *.fail-mid artifact fails after 1000 bytes, a *.fail-early one before
// any; *.spin writes a byte and then never returns; *.flood writes 1 MiB
// at a time until the host refuses, and logs why. Anything else is left
// to agentrt.
//
// Built by the tests (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared).
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strconv"
	"strings"

	agent "github.com/agentrt/agentrt/plugins/go"
)

func init() {
	agent.HandleTask(func(t *agent.Task) ([]agent.PlannedStep, error) {
		if t.Input == "seed" {
			if _, err := agent.CreateArtifact("seed.txt", "", []byte("seeded")); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		op, arg, _ := strings.Cut(s.Input, " ")
		var id string
		var err error
		switch op {
		case "make":
			name, text, _ := strings.Cut(arg, " ")
			if err = agent.WriteFile(name, []byte(text)); err == nil {
				id, err = agent.CreateArtifact(name, "", []byte(text))
			}
		case "link":
			id, err = agent.CreateURIArtifact(arg, "", "links")
		case "view":
			id, err = agent.CreateURIArtifact("view:"+url.PathEscape(arg), path.Base(arg), "views")
		case "write":
			p, n, _ := strings.Cut(arg, " ")
			size, _ := strconv.Atoi(n)
			err = agent.WriteFile(p, pattern(size))
		case "fail":
			agent.CreateArtifact("lost.txt", "", []byte("lost"))
			return agent.Result{}, errors.New("failed on purpose")
		default:
			return agent.Result{}, fmt.Errorf("unknown command %q", s.Input)
		}
		if err != nil {
			return agent.Result{}, err
		}
		return agent.Result{Output: id}, nil
	})
	agent.HandleArtifact(func(t *agent.Task, a *agent.Artifact) error {
		if a.URI == "" {
			return nil
		}
		u, err := url.Parse(a.URI)
		if err != nil {
			return err
		}
		switch {
		case u.Hostname() == "reject.example":
			return agent.Reject("nothing from reject.example, please")
		case u.Scheme == "http":
			u.Scheme = "https"
			return agent.ReplaceWithURI(u.String())
		case u.Scheme == "memo":
			p := "memos/" + a.FileName
			if err := agent.WriteFile(p, []byte(u.Opaque)); err != nil {
				return err
			}
			return agent.ReplaceWithFile(p)
		}
		return nil
	})
	agent.HandleDownload(func(t *agent.Task, a *agent.Artifact, w io.Writer) error {
		switch ext := path.Ext(a.FileName); {
		case strings.HasPrefix(a.URI, "view:"):
			p, err := url.PathUnescape(strings.TrimPrefix(a.URI, "view:"))
			if err != nil {
				return err
			}
			b, err := agent.ReadFile(p)
			if err != nil {
				return err
			}
			for len(b) > 0 {
				n := min(len(b), 64<<10)
				if _, err := w.Write(b[:n]); err != nil {
					return err
				}
				b = b[n:]
			}
			return nil
		case ext == ".upper":
			b, err := agent.ReadFile(a.Path)
			if err != nil {
				return err
			}
			_, err = w.Write(bytes.ToUpper(b))
			return err
		case ext == ".fail-mid":
			w.Write(pattern(1000))
			return errors.New("failed mid-stream")
		case ext == ".fail-early":
			return errors.New("failed before the first byte")
		case ext == ".spin":
			w.Write([]byte("x"))
			for {
			}
		case ext == ".flood":
			chunk := pattern(1 << 20)
			for written := 0; ; written += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					agent.Log(agent.Warn, fmt.Sprintf("flood stopped after %d bytes: %v", written, err))
					return err
				}
			}
		}
		return agent.DefaultDownload()
	})
}

// pattern is n bytes of a repeating, recognizable pattern.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = "0123456789abcdef"[i%16]
	}
	return b
}

func main() {}
