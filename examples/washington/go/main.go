// Command washington is the agent the Agent Protocol's compliance suite
// expects: asked to write the word "Washington" to a .txt file, it creates
// the artifact output.txt containing Washington and finishes the task.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o washington-go.wasm .
package main

import (
	"strings"

	agent "github.com/agentrt/agentrt/plugins/go"
)

func init() {
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		prompt := s.Input
		if prompt == "" {
			prompt = s.Task.Input
		}
		if !strings.Contains(strings.ToLower(prompt), "washington") {
			return agent.Result{Output: "I only know how to write the word 'Washington' to a .txt file."}, nil
		}
		if _, err := agent.CreateArtifact("output.txt", "", []byte("Washington")); err != nil {
			return agent.Result{}, err
		}
		agent.Logf("wrote output.txt")
		return agent.Result{Output: "Wrote 'Washington' to output.txt", IsLast: true}, nil
	})
}

func main() {}
