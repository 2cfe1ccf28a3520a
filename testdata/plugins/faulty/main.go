// Command faulty is a test plugin that fails on request: the step input
// names the failure; "sleep:MS" sleeps MS milliseconds, a long step.
// Anything else is echoed, like examples/echo.
//
// Built by the tests (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared).
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

func main() {}
