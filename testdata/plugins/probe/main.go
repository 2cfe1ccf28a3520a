// Command probe is a test plugin that exercises the host API on request.
//
// Task handler: a task input "plan:a,b,c" plans steps a, b and c; "fail"
// fails; "write-then-fail" writes a workspace file, then fails.
//
// Step handler: a planned step answers "ran NAME planned with INPUT,
// request REQUEST" (is_last for a step named "last"). Otherwise the step
// input is a JSON command run against the host API, e.g.
// {"op":"write","path":"a.txt","data":"x"}, and the output is a JSON
// object: {"ok": ...} or {"code": N, "err": "..."} with the host's error.
//
// Artifact handler: rejects *.exe, fails on *.fail, and for *.upper writes
// an upper-cased copy to processed/NAME.txt and publishes it.
//
// Built by the tests (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	agent "github.com/agentrt/agentrt/plugins/go"
)

type command struct {
	Op, Path, Data, Prefix, Name, Dir string
}

func init() {
	agent.HandleTask(func(t *agent.Task) ([]agent.PlannedStep, error) {
		switch {
		case strings.HasPrefix(t.Input, "plan:"):
			var plan []agent.PlannedStep
			for i, name := range strings.Split(strings.TrimPrefix(t.Input, "plan:"), ",") {
				plan = append(plan, agent.PlannedStep{Name: name, Input: "input of " + name, AdditionalInput: map[string]int{"n": i}})
			}
			agent.Logf("planned %d steps", len(plan))
			return plan, nil
		case t.Input == "fail":
			return nil, errors.New("cannot plan this")
		case t.Input == "write-then-fail":
			if err := agent.WriteFile("scratch.txt", []byte("left behind?")); err != nil {
				return nil, err
			}
			return nil, errors.New("failed after writing")
		}
		return nil, nil
	})
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		if s.Planned {
			return agent.Result{
				Output:           fmt.Sprintf("ran %s planned with %s, request %s", s.Name, s.Input, s.Request.Input),
				AdditionalOutput: map[string]any{"planned_additional_input": s.AdditionalInput},
				IsLast:           s.Name == "last",
			}, nil
		}
		var c command
		if err := json.Unmarshal([]byte(s.Input), &c); err != nil {
			return agent.Result{Output: "not a command: " + s.Input}, nil
		}
		v, err := run(c)
		out := map[string]any{"ok": v}
		var he *agent.HostError
		if errors.As(err, &he) {
			out = map[string]any{"code": he.Code, "err": he.Message}
		} else if err != nil {
			out = map[string]any{"code": 0, "err": err.Error()}
		}
		b, _ := json.Marshal(out)
		return agent.Result{Output: string(b)}, nil
	})
	agent.HandleArtifact(func(t *agent.Task, a *agent.Artifact) error {
		agent.Logf("received %s", a.Path)
		switch {
		case strings.HasSuffix(a.FileName, ".exe"):
			return agent.Reject("executables are not accepted")
		case strings.HasSuffix(a.FileName, ".fail"):
			return errors.New("could not process " + a.FileName)
		case strings.HasSuffix(a.FileName, ".upper"):
			b, err := agent.ReadFile(a.Path)
			if err != nil {
				return err
			}
			out := "processed/" + a.FileName + ".txt"
			if err := agent.WriteFile(out, []byte(strings.ToUpper(string(b)))); err != nil {
				return err
			}
			_, err = agent.PublishFile(out, a.FileName+".txt", "processed")
			return err
		}
		return nil
	})
}

func run(c command) (any, error) {
	switch c.Op {
	case "write":
		return nil, agent.WriteFile(c.Path, []byte(c.Data))
	case "read":
		b, err := agent.ReadFile(c.Path)
		return string(b), err
	case "list":
		files, err := agent.ListFiles(c.Prefix)
		var paths []string
		for _, f := range files {
			paths = append(paths, fmt.Sprintf("%s:%d", f.Path, f.Size))
		}
		return paths, err
	case "stat":
		fi, err := agent.Stat(c.Path)
		return fmt.Sprintf("%s:%d:%t", fi.Path, fi.Size, !fi.ModTime.IsZero()), err
	case "delete":
		return nil, agent.Remove(c.Path)
	case "publish":
		return agent.PublishFile(c.Path, c.Name, c.Dir)
	case "create":
		return agent.CreateArtifact(c.Name, c.Dir, []byte(c.Data))
	case "config":
		return agent.Config()
	}
	return nil, fmt.Errorf("unknown op %q", c.Op)
}

func main() {}
