package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// The llm-agent example, in each of its builds, against an
// OpenAI-compatible mock on loopback: it completes the Washington task
// through tool calls, and the key the operator holds reaches the mock and
// nothing else.

// openAIMock is a chat-completions endpoint that writes the file the task
// names, then finishes; it reflects the key it is sent (in its answer's
// content and a header), as a careless server might.
type openAIMock struct {
	*loopbackServer
	mu    sync.Mutex
	keys  []string // the Authorization header of each request
	calls int
}

func startOpenAIMock(t *testing.T) *openAIMock {
	m := &openAIMock{}
	m.loopbackServer = startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		m.mu.Lock()
		m.keys = append(m.keys, auth)
		m.calls++
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Seen-Authorization", auth)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string  `json:"role"`
				Content *string `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if r.URL.Path != "/v1/chat/completions" || r.Method != "POST" || json.NewDecoder(r.Body).Decode(&req) != nil ||
			req.Model != "mock-model" || len(req.Tools) != 4 || len(req.Messages) < 2 {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error": {"message": "bad request: %s %s"}}`, r.Method, r.URL.Path)
			return
		}
		if !strings.HasPrefix(auth, "Bearer sk-") {
			w.WriteHeader(401)
			fmt.Fprintf(w, `{"error": {"message": "Incorrect API key provided: %s"}}`, auth)
			return
		}
		wrote := false
		for _, msg := range req.Messages {
			wrote = wrote || msg.Role == "tool"
		}
		call := `{"id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\": \"washington.txt\", \"content\": \"Washington\"}"}}`
		if wrote {
			call = `{"id": "call_2", "type": "function", "function": {"name": "finish", "arguments": "{\"summary\": \"Wrote Washington to washington.txt\"}"}}`
		}
		content, _ := json.Marshal("Calling a tool for the caller with " + auth)
		fmt.Fprintf(w, `{"id": "chatcmpl-1", "object": "chat.completion", "model": "mock-model",
			"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": %s, "tool_calls": [%s]}}],
			"usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}`, content, call)
	})
	return m
}

// serveLLMAgent serves the llm-agent build plugin against the mock model
// at base, its key (OPENAI_API_KEY) held by the host for base alone.
func serveLLMAgent(t *testing.T, plugin, base string) *testServer {
	t.Helper()
	return serve(t, examplePlugin(t, plugin), func(cfg *runConfig) {
		applyRunArgs(t, cfg, "--name", "llm-agent", "--allow-http", base+"/", "--allow-private-host", "api.test",
			"--secret-env", "OPENAI_API_KEY@"+base+"/", "--config", "base_url="+base, "--config", "model=mock-model")
		cfg.egress.resolver = testNames
	})
}

func TestTheLLMAgentWritesWashingtonThroughToolCallsAndItsKeyGoesNowhereElse(t *testing.T) {
	const key = "sk-test-9f3c1a7e5b2d4c6e8a0b"
	t.Setenv("OPENAI_API_KEY", key)
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			mock := startOpenAIMock(t)
			base := mock.at("api.test", "/v1")
			ts := serveLLMAgent(t, "llm-agent-"+lang, base)
			task := ts.createTask(`{"input": "Write the word 'Washington' to a .txt file"}`)
			var steps []map[string]any
			for len(steps) < 5 {
				var st map[string]any
				ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{}`).want(t, 200).decode(t, &st)
				steps = append(steps, st)
				if st["is_last"] == true {
					break
				}
			}
			if len(steps) != 2 {
				t.Fatalf("steps: %v", steps)
			}
			// What the plugin saw of the answer, the reflected key scrubbed.
			if want := "Calling a tool for the caller with Bearer {{secret:OPENAI_API_KEY}}\nWrote Washington to washington.txt"; steps[1]["output"] != want {
				t.Errorf("the last step's output is %q, want %q", steps[1]["output"], want)
			}
			extra, _ := steps[0]["additional_output"].(map[string]any)
			if extra["tokens"] != float64(1100) || extra["estimated_cost"] != "0.000210$" || extra["model"] != "mock-model" {
				t.Errorf("the first step's additional_output: %v", extra)
			}

			// The file, as an artifact of the step that wrote it.
			var list struct {
				Artifacts []struct {
					ArtifactID string `json:"artifact_id"`
					FileName   string `json:"file_name"`
					StepID     string `json:"step_id"`
				} `json:"artifacts"`
			}
			ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", "", "").want(t, 200).decode(t, &list)
			if len(list.Artifacts) != 1 || list.Artifacts[0].FileName != "washington.txt" || list.Artifacts[0].StepID != steps[0]["step_id"] {
				t.Fatalf("artifacts: %+v", list.Artifacts)
			}
			if b := ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts/"+list.Artifacts[0].ArtifactID, "", "").want(t, 200).body; string(b) != "Washington" {
				t.Errorf("washington.txt holds %q", b)
			}

			// The key reached the mock, with every request.
			mock.mu.Lock()
			keys := append([]string(nil), mock.keys...)
			mock.mu.Unlock()
			if len(keys) != 2 || keys[0] != "Bearer "+key || keys[1] != "Bearer "+key {
				t.Errorf("the mock got %q", keys)
			}
			// And nowhere else: not in what clients read, not in the log, not
			// in the data directory (database, its WAL, workspaces, artifacts).
			seen := keptEverywhere(t, ts, task.TaskID)
			wantSecretNowhere(t, seen, key)
			if steps := seen["/ap/v1/agent/tasks/"+task.TaskID+"/steps?page_size=100"]; !bytes.Contains(steps, []byte("{{secret:OPENAI_API_KEY}}")) {
				t.Errorf("the steps do not hold the reflected key as its placeholder: the search did not see what the plugin saw:\n%s", steps)
			}
		})
	}
}

func TestTheLLMAgentReportsAnEndpointThatRefusesItsKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "not-a-key-of-the-mock")
	mock := startOpenAIMock(t)
	base := mock.at("api.test", "/v1")
	ts := serveLLMAgent(t, "llm-agent-go", base)
	task := ts.createTask(`{"input": "Write the word 'Washington' to a .txt file"}`)
	msg := ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{}`).
		wantError(t, http.StatusBadGateway, "the model's endpoint answered 401 Unauthorized")
	if strings.Contains(msg, "not-a-key-of-the-mock") || !strings.Contains(msg, "Incorrect API key provided: Bearer {{secret:OPENAI_API_KEY}}") {
		t.Errorf("the failure: %s", msg)
	}
}

// applyRunArgs parses flags of agentrt run into cfg: those of outbound
// HTTP, -name and -config.
func applyRunArgs(t testing.TB, cfg *runConfig, args ...string) {
	t.Helper()
	fresh, err := parseRunFlags(append([]string{cfg.plugin}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.egress, cfg.name, cfg.pluginConfig = fresh.egress, fresh.name, fresh.pluginConfig
}
