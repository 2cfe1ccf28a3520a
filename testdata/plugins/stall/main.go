// Command stall is a test plugin whose step never ends on its own, in
// the way its input names, so that a test can stop it:
//
//   - "loop": a tight loop in the guest's own code, no host call;
//   - "http URL": an outbound GET of URL (a server that never answers),
//     blocked in the host's http_request;
//   - "sleep": time.Sleep for an hour, blocked in WASI's poll_oneoff;
//
// and anything else answers "ok" at once. Before it blocks, it logs
// "stalling: MODE", which the test waits for as the task's step.log event.
//
// Built by the tests (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared).
package main

import (
	"strings"
	"time"

	agent "github.com/agentrt/agentrt/plugins/go"
	"github.com/agentrt/agentrt/plugins/go/http"
)

func init() {
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		mode, arg, _ := strings.Cut(s.Input, " ")
		switch mode {
		case "loop", "http", "sleep":
			agent.Logf("stalling: %s", mode)
		default:
			return agent.Result{Output: "ok"}, nil
		}
		switch mode {
		case "loop":
			//lint:ignore SA5002 the spin is the point: no call, no allocation
			for {
			}
		case "http":
			resp, err := http.Get(arg)
			if err != nil {
				return agent.Result{}, err
			}
			return agent.Result{Output: "answered " + http.StatusText(resp.StatusCode)}, nil
		}
		time.Sleep(time.Hour) // "sleep"
		return agent.Result{Output: "slept an hour"}, nil
	})
}

func main() {}
