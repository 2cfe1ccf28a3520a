// Command echo is the smallest agent: each step answers with its own input.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o echo-go.wasm .
package main

import agent "github.com/agentrt/agentrt/plugins/go"

func init() {
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		return agent.Result{Output: s.Input}, nil
	})
}

func main() {}
