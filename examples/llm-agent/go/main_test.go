package main

import (
	"encoding/json"
	"fmt"
	nethttp "net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/go/agenttest"
)

// model is a chat-completions endpoint that writes the file the task
// names, saying so (said, JSON text), then finishes without a word.
func model(t *testing.T, said string) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer sk-test-0123456789" {
			t.Errorf("the model got Authorization %q", got)
		}
		var req struct {
			Messages []message `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("the request: %v", err)
		}
		wrote := false
		for _, m := range req.Messages {
			wrote = wrote || m.Role == "tool"
		}
		content, name, args := said, "write_file", `{"path": "washington.txt", "content": "Washington"}`
		if wrote {
			content, name, args = "null", "finish", `{"summary": "Wrote Washington to washington.txt"}`
		}
		a, _ := json.Marshal(args)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices": [{"message": {"role": "assistant", "content": %s,
			"tool_calls": [{"id": "call_%d", "type": "function", "function": {"name": %q, "arguments": %s}}]}}],
			"usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}`, content, len(req.Messages), name, a)
	})
}

// newHost is a host granting the model's endpoint and holding its key.
func newHost(t *testing.T, said string) *agenttest.Host {
	host := agenttest.New()
	host.HTTP = model(t, said)
	host.Allow = []string{"https://api.openai.com/v1/"}
	host.Secrets = map[string]agenttest.Secret{
		"OPENAI_API_KEY": {Value: "sk-test-0123456789", Destinations: []string{"https://api.openai.com/v1/"}},
	}
	return host
}

func TestWritesWashingtonThroughToolCallsReportingEachCallAsProgress(t *testing.T) {
	task, err := newHost(t, `"I will write the file."`).CreateTask("Write the word 'Washington' to a .txt file")
	if err != nil {
		t.Fatal(err)
	}
	first, err := task.Step("")
	if err != nil {
		t.Fatal(err)
	}
	if first.IsLast || first.Output != "I will write the file.\nwrote washington.txt (10 bytes)" {
		t.Errorf("the first step: %q, is_last %v", first.Output, first.IsLast)
	}
	want := []agenttest.Progress{
		{Message: "calling the model (turn 1)"},
		{Message: "running tool write_file", Output: "I will write the file."},
	}
	if !reflect.DeepEqual(first.Progress, want) {
		t.Errorf("the first step's progress: %q, want %q", first.Progress, want)
	}
	second, err := task.Step("")
	if err != nil {
		t.Fatal(err)
	}
	if !second.IsLast || second.Output != "Wrote Washington to washington.txt" {
		t.Errorf("the second step: %q, is_last %v", second.Output, second.IsLast)
	}
	want = []agenttest.Progress{{Message: "calling the model (turn 2)"}, {Message: "running tool finish"}}
	if !reflect.DeepEqual(second.Progress, want) {
		t.Errorf("the second step's progress: %q, want %q", second.Progress, want)
	}
	if b, err := task.ReadFile("washington.txt"); err != nil || string(b) != "Washington" {
		t.Errorf("washington.txt: %q, %v", b, err)
	}
	if len(first.Artifacts) != 1 || first.Artifacts[0].FileName != "washington.txt" {
		t.Errorf("the first step's artifacts: %+v", first.Artifacts)
	}
}

// What the model said is reported as the step's output so far only within
// the 16 KiB a report's output may have; past it, the report goes without.
func TestAnAnswerTooLongForAReportIsLeftOutOfIt(t *testing.T) {
	long := strings.Repeat("x", 16<<10+1)
	task, err := newHost(t, `"`+long+`"`).CreateTask("Write the word 'Washington' to a .txt file")
	if err != nil {
		t.Fatal(err)
	}
	step, err := task.Step("")
	if err != nil {
		t.Fatal(err)
	}
	want := []agenttest.Progress{{Message: "calling the model (turn 1)"}, {Message: "running tool write_file"}}
	if !reflect.DeepEqual(step.Progress, want) {
		t.Errorf("progress: %.200q, want %q", step.Progress, want)
	}
}
