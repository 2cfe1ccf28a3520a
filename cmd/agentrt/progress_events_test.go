package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/tetratelabs/wazero"
)

// The llm-agent example, in each language, run as a step in the
// background and watched over the task's event stream: its progress
// reports (each model call, each tool call) arrive live as step.progress
// events, in order, before the step's end, and the log replays them.
func TestProgressFromAPluginInEachLanguageIsStreamedLive(t *testing.T) {
	const key = "sk-test-2b4d6f8a0c1e3a5c7e9b"
	t.Setenv("OPENAI_API_KEY", key)
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			mock := startOpenAIMock(t)
			base := mock.at("api.test", "/v1")
			ts := serveLLMAgent(t, "llm-agent-"+lang, base)
			task := ts.createTask(`{"input": "Write the word 'Washington' to a .txt file"}`)

			// The stream first, so that what follows is live.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/ap/v1/agent/tasks/"+task.TaskID+"/events", nil)
			req.Header.Set("Accept", "text/event-stream")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()

			req2, _ := http.NewRequest("POST", ts.URL+"/ap/v1/agent/tasks/"+task.TaskID+"/steps", strings.NewReader(`{}`))
			req2.Header.Set("Content-Type", "application/json")
			req2.Header.Set("Prefer", "respond-async")
			res2, err := http.DefaultClient.Do(req2)
			if err != nil {
				t.Fatal(err)
			}
			var step protocol.Step
			json.NewDecoder(res2.Body).Decode(&step)
			res2.Body.Close()
			if res2.StatusCode != http.StatusAccepted {
				t.Fatalf("async step: %d", res2.StatusCode)
			}

			var live []string
			r := bufio.NewReader(res.Body)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Fatalf("the stream ended before the step did: %v (events %q)", err, live)
				}
				data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: ")
				if !ok {
					continue
				}
				var ev protocol.Event
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatalf("event %s: %v", data, err)
				}
				if ev.StepID != step.StepID {
					continue
				}
				if ev.Type == protocol.EventStepProgress {
					var p struct{ Message string }
					json.Unmarshal(ev.Data, &p)
					live = append(live, p.Message)
				}
				if ev.Type == protocol.EventStepCompleted || ev.Type == protocol.EventStepFailed {
					if ev.Type != protocol.EventStepCompleted {
						t.Fatalf("the step ended %s: %s", ev.Type, ev.Data)
					}
					break
				}
			}
			want := []string{"calling the model (turn 1)", "running tool write_file"}
			if len(live) < 2 || live[0] != want[0] || live[1] != want[1] {
				t.Fatalf("progress seen live: %q, want it to begin %q", live, want)
			}

			// Replayed from the log, the same, in the same order.
			var page protocol.EventPage
			ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/events", "", "").want(t, 200).decode(t, &page)
			var replayed []string
			for _, ev := range page.Events {
				if ev.Type == protocol.EventStepProgress {
					var p struct{ Message string }
					json.Unmarshal(ev.Data, &p)
					replayed = append(replayed, p.Message)
				}
			}
			if strings.Join(replayed, "|") != strings.Join(live, "|") {
				t.Errorf("replayed %q, seen live %q", replayed, live)
			}
			wantSecretNowhere(t, map[string][]byte{"events": ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/events", "", "").body}, key)
		})
	}
}

// The kits import progress only into a plugin that reports progress, so
// that one that does not loads on a host without it (plugins/ABI.md,
// "Within version 1").
func TestOnlyAPluginThatReportsProgressImportsProgress(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	for _, lang := range languages {
		for name, want := range map[string]bool{"echo-" + lang: false, "llm-agent-" + lang: true} {
			m, err := r.CompileModule(ctx, pluginBytes(t, examplePlugin(t, name)))
			if err != nil {
				t.Fatal(err)
			}
			got := false
			for _, f := range m.ImportedFunctions() {
				if mod, fn, _ := f.Import(); mod == abi.ImportModule && fn == abi.FuncProgress {
					got = true
				}
			}
			if got != want {
				t.Errorf("%s imports progress: %v, want %v", name, got, want)
			}
		}
	}
}
