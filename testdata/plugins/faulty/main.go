// Command faulty is a test plugin that fails on request: the step input
// names the failure; "sleep:MS" sleeps MS milliseconds, a long step.
// Anything else is echoed, like examples/echo. Its task handler fails a
// task whose input is "fail-task"; its artifact handler rejects a file
// named *.bad and fails on one named *.fail, logging first.
//
// Built by the tests, with Go (GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared) and with TinyGo.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	agent "github.com/agentrt/agentrt/plugins/go"
)

func init() {
	agent.HandleTask(func(t *agent.Task) ([]agent.PlannedStep, error) {
		if t.Input != "fail-task" {
			return nil, nil
		}
		agent.Logf("planning %q", t.Input)
		fmt.Fprintln(os.Stderr, "cannot plan this")
		return nil, errors.New("the plan failed")
	})
	agent.HandleArtifact(func(t *agent.Task, a *agent.Artifact) error {
		agent.Logf("checking %s", a.Path)
		switch {
		case strings.HasSuffix(a.FileName, ".bad"):
			return agent.Reject("no .bad files, please")
		case strings.HasSuffix(a.FileName, ".fail"):
			return errors.New("cannot read it")
		}
		return nil
	})
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		if ms, ok := strings.CutPrefix(s.Input, "sleep:"); ok {
			// A long step: it sleeps (through poll_oneoff, for real).
			n, _ := strconv.Atoi(ms)
			time.Sleep(time.Duration(n) * time.Millisecond)
			return agent.Result{Output: "slept " + ms + " ms"}, nil
		}
		switch s.Input {
		case "error":
			return agent.Result{}, errors.New("the agent gave up")
		case "panic":
			panic("something impossible happened")
		case "exit":
			fmt.Fprintln(os.Stderr, "exiting with code 3")
			os.Exit(3)
		case "loop":
			for {
			}
		case "artifact-then-error":
			if _, err := agent.CreateArtifact("partial.txt", "", []byte("half")); err != nil {
				return agent.Result{}, err
			}
			return agent.Result{}, errors.New("failed after creating an artifact")
		case "overflow":
			return agent.Result{Output: fmt.Sprint(recurse(1, new([64]byte)))}, nil
		case "oom":
			// Small blocks, kept: the heap fills up slowly, and a garbage
			// collector works ever harder before memory runs out.
			var keep []*[64]byte
			for {
				b := new([64]byte)
				b[0] = 1
				keep = append(keep, b)
			}
		case "index":
			var xs []int
			return agent.Result{Output: fmt.Sprint(xs[len(s.Input)])}, nil
		case "bad-output":
			return agent.Result{AdditionalOutput: []int{1, 2, 3}}, nil
		case "log":
			agent.Log(agent.Debug, "a debug line")
			agent.Logf("an info line")
			agent.Log(agent.Warn, "a warning")
			fmt.Println("to stdout")
			fmt.Fprintln(os.Stderr, "to stderr")
			return agent.Result{Output: "logged"}, nil
		case "big-log":
			agent.Logf("%s", strings.Repeat("x", 100<<10))
			return agent.Result{Output: "logged a lot"}, nil
		}
		return agent.Result{Output: s.Input, AdditionalOutput: map[string]any{"echo": true}}, nil
	})
}

// recurse calls itself without end: a stack overflow. Each call's frame
// holds an array whose address the next call takes, so that the compiler
// can neither keep it out of memory nor turn the recursion into a loop.
func recurse(n int, prev *[64]byte) int {
	var pad [64]byte
	pad[n%64] = prev[(n+1)%64] + 1
	r := recurse(n+1, &pad)
	pad[(r+n)%64]++
	return r - int(pad[n%64])
}

func main() {}
