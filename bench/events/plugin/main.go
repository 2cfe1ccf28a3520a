// Command plugin is the agent bench/events measures the fan-out of
// progress with: its step handler reports progress K times, each
// report's message the guest's wall clock in nanoseconds (Unix time:
// agentrt gives plugins the host's real clock), pausing between reports,
// and answers with its input. The input is "K PAUSE": "50 20ms" reports
// 50 times, 20 ms apart; anything else reports once.
//
// Build (make build/plugins/bench-progress-go.wasm):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bench-progress-go.wasm ./bench/events/plugin
package main

import (
	"strconv"
	"strings"
	"time"

	agent "github.com/agentrt/agentrt/plugins/go"
)

func init() {
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		reports, pause := parseInput(s.Input)
		for i := range reports {
			if i > 0 {
				time.Sleep(pause)
			}
			// A report over the log limit is refused; the bench counts
			// the reports it receives, so it sees one missing.
			_ = agent.Progress(strconv.FormatInt(time.Now().UnixNano(), 10))
		}
		return agent.Result{Output: s.Input}, nil
	})
}

// parseInput reads "K PAUSE"; one report and no pause when it cannot.
func parseInput(input string) (int, time.Duration) {
	k, p, _ := strings.Cut(strings.TrimSpace(input), " ")
	n, err := strconv.Atoi(k)
	if err != nil || n < 1 {
		return 1, 0
	}
	pause, err := time.ParseDuration(strings.TrimSpace(p))
	if err != nil || pause < 0 {
		pause = 0
	}
	return n, pause
}

func main() {}
