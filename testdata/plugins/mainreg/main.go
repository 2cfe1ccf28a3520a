// Command mainreg is a test plugin that registers its step handler in
// main, which a plugin (-buildmode=c-shared) never runs: agentrt refuses it
// with a hint.
//
// Built by the tests, with Go and with TinyGo.
package main

import agent "github.com/agentrt/agentrt/plugins/go"

func main() {
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		return agent.Result{Output: s.Input}, nil
	})
}
