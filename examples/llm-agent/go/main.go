// Command llm-agent turns a task into chat-completions calls to an
// OpenAI-compatible endpoint and lets the model work in the task's
// workspace through tools: write a file, read one, list them, finish.
// What it writes is published as artifacts. Each step is one call of the
// model, and the tools it asked for; the step's additional_output records
// the tokens it used and an estimated cost. Clients watching the task's
// events see its progress: "calling the model (turn N)" before each call,
// "running tool NAME" before each tool, the first with what the model
// said, when it said something, as the step's output so far.
//
// Settings (agentrt run --config KEY=VALUE, or a manifest's settings):
//
//	base_url              the endpoint, default https://api.openai.com/v1
//	model                 default gpt-4o-mini
//	api_key_secret        the secret holding the key, default OPENAI_API_KEY
//	input_cost_per_mtok   dollars per million prompt tokens, default 0.15
//	output_cost_per_mtok  dollars per million completion tokens, default 0.60
//	max_steps             the steps a task may take, default 20
//
// The key is never the plugin's: it sends the placeholder of the secret,
// which agentrt fills in for the destinations the operator bound it to.
// The operator grants the endpoint and holds the key:
//
//	agentrt run llm-agent-go.wasm --allow-http https://api.openai.com/v1/ \
//	    --secret-env OPENAI_API_KEY@https://api.openai.com/v1/
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o llm-agent-go.wasm .
// (TinyGo builds the same source.)
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	agent "github.com/agentrt/agentrt/plugins/go"
	"github.com/agentrt/agentrt/plugins/go/http"
)

// conversationFile is where a task's conversation with the model is
// kept between steps; the model's tools never see it.
const (
	stateDir         = ".llm"
	conversationFile = stateDir + "/conversation.json"
)

const systemPrompt = `You are an agent that completes the user's task by calling tools in a workspace of files. ` +
	`Write each file the task asks for with write_file: the files you write are published to the user. ` +
	`When the task is done, call finish with a one-line summary.`

// tools are the functions the model may call, as the chat-completions API
// describes them.
const tools = `[
 {"type": "function", "function": {"name": "write_file", "description": "Create or replace a file of the workspace; it is published to the user.",
  "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "a relative path, such as notes/answer.txt"},
   "content": {"type": "string"}}, "required": ["path", "content"]}}},
 {"type": "function", "function": {"name": "read_file", "description": "Read a file of the workspace.",
  "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
 {"type": "function", "function": {"name": "list_files", "description": "List the files of the workspace, with their sizes.",
  "parameters": {"type": "object", "properties": {}}}},
 {"type": "function", "function": {"name": "finish", "description": "End the task.",
  "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}}}
]`

// message is a message of the conversation, as the API has it.
type message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// conversation is what a task keeps between steps.
type conversation struct {
	Steps    int       `json:"steps"`
	Messages []message `json:"messages"`
}

type completionRequest struct {
	Model    string          `json:"model"`
	Messages []message       `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
}

type completion struct {
	Choices []struct {
		Message message `json:"message"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

// usage is the tokens a completion took.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// settings are the operator's, with their defaults.
type settings struct {
	baseURL, model, keySecret string
	inputCost, outputCost     float64
	maxSteps                  int
}

func readSettings() (settings, error) {
	c, err := agent.Config()
	if err != nil {
		return settings{}, err
	}
	get := func(key, def string) string {
		if v := c[key]; v != "" {
			return v
		}
		return def
	}
	s := settings{baseURL: strings.TrimRight(get("base_url", "https://api.openai.com/v1"), "/"), model: get("model", "gpt-4o-mini"),
		keySecret: get("api_key_secret", "OPENAI_API_KEY")}
	if s.inputCost, err = strconv.ParseFloat(get("input_cost_per_mtok", "0.15"), 64); err != nil {
		return s, fmt.Errorf("setting input_cost_per_mtok: %v", err)
	}
	if s.outputCost, err = strconv.ParseFloat(get("output_cost_per_mtok", "0.60"), 64); err != nil {
		return s, fmt.Errorf("setting output_cost_per_mtok: %v", err)
	}
	if s.maxSteps, err = strconv.Atoi(get("max_steps", "20")); err != nil {
		return s, fmt.Errorf("setting max_steps: %v", err)
	}
	return s, nil
}

func init() {
	agent.HandleStep(step)
}

// step calls the model once and runs the tools it asks for.
func step(s *agent.Step) (agent.Result, error) {
	cfg, err := readSettings()
	if err != nil {
		return agent.Result{}, err
	}
	conv, err := load(s)
	if err != nil {
		return agent.Result{}, err
	}
	if conv.Steps >= cfg.maxSteps {
		return agent.Result{Output: fmt.Sprintf("stopped: the task took its %d steps", cfg.maxSteps), IsLast: true}, nil
	}
	conv.Steps++
	// Progress reports are for the clients watching the task's events; one
	// that is refused (past the log limit, say) changes nothing here.
	agent.Progress(fmt.Sprintf("calling the model (turn %d)", conv.Steps))
	reply, used, err := complete(cfg, conv.Messages)
	if err != nil {
		return agent.Result{}, err
	}
	conv.Messages = append(conv.Messages, reply)
	var said []string
	if reply.Content != nil && strings.TrimSpace(*reply.Content) != "" {
		said = append(said, strings.TrimSpace(*reply.Content))
	}
	done := len(reply.ToolCalls) == 0 // an answer without tools ends the task
	for i, call := range reply.ToolCalls {
		report := "running tool " + call.Function.Name
		if i == 0 && len(said) > 0 {
			// What the model said is the step's output so far.
			progressOutput(report, said[0])
		} else {
			agent.Progress(report)
		}
		result, finished := runTool(call)
		done = done || finished
		said = append(said, result)
		conv.Messages = append(conv.Messages, message{Role: "tool", ToolCallID: call.ID, Content: &result})
	}
	if err := save(conv); err != nil {
		return agent.Result{}, err
	}
	cost := float64(used.PromptTokens)*cfg.inputCost/1e6 + float64(used.CompletionTokens)*cfg.outputCost/1e6
	return agent.Result{
		Output: strings.Join(said, "\n"),
		IsLast: done,
		AdditionalOutput: json.RawMessage(fmt.Sprintf(`{"tokens":%d,"estimated_cost":"%.6f$","prompt_tokens":%d,"completion_tokens":%d,"model":%q}`,
			used.TotalTokens, cost, used.PromptTokens, used.CompletionTokens, cfg.model)),
	}, nil
}

// progressOutput reports progress with the step's output so far, or
// without it when it is refused (over its 16 KiB, or the log limit).
func progressOutput(message, output string) {
	if err := agent.ProgressOutput(message, output); errors.Is(err, agent.ErrLimit) {
		agent.Progress(message)
	}
}

// load reads the task's conversation, or starts one from its input.
func load(s *agent.Step) (*conversation, error) {
	conv := &conversation{}
	b, err := agent.ReadFile(conversationFile)
	switch {
	case errors.Is(err, agent.ErrNotFound):
		task := s.Task.Input
		if task == "" {
			task = s.Input
		}
		system := systemPrompt
		conv.Messages = []message{{Role: "system", Content: &system}, {Role: "user", Content: &task}}
		return conv, nil
	case err != nil:
		return nil, err
	}
	if err := json.Unmarshal(b, conv); err != nil {
		return nil, fmt.Errorf("%s: %v", conversationFile, err)
	}
	// A later step's input, when it says something new, is the user's.
	if in := strings.TrimSpace(s.Request.Input); in != "" && in != s.Task.Input {
		conv.Messages = append(conv.Messages, message{Role: "user", Content: &in})
	}
	return conv, nil
}

func save(conv *conversation) error {
	b, err := json.Marshal(conv)
	if err != nil {
		return err
	}
	return agent.WriteFile(conversationFile, b)
}

// complete asks the model for the next message of the conversation.
func complete(cfg settings, messages []message) (message, usage, error) {
	body, err := json.Marshal(completionRequest{Model: cfg.model, Messages: messages, Tools: json.RawMessage(tools)})
	if err != nil {
		return message{}, usage{}, err
	}
	req, err := http.NewRequest(http.MethodPost, cfg.baseURL+"/chat/completions", strings.NewReader(string(body)))
	if err != nil {
		return message{}, usage{}, err
	}
	req.Header.Set("Authorization", "Bearer "+http.Secret(cfg.keySecret))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return message{}, usage{}, fmt.Errorf("calling the model: %w", err)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return message{}, usage{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return message{}, usage{}, fmt.Errorf("the model's endpoint answered %s: %.500s", resp.Status, data)
	}
	var c completion
	if err := json.Unmarshal(data, &c); err != nil {
		return message{}, usage{}, fmt.Errorf("the model's answer is not a chat completion: %v", err)
	}
	if len(c.Choices) == 0 {
		return message{}, usage{}, errors.New("the model's answer has no choices")
	}
	reply := c.Choices[0].Message
	reply.Role = "assistant"
	return reply, c.Usage, nil
}

// runTool runs one tool call and returns what it tells the model, and
// whether it finished the task.
func runTool(call toolCall) (string, bool) {
	var args struct {
		Path    string `json:"path"`
		Content string `json:"content"`
		Summary string `json:"summary"`
	}
	if call.Function.Arguments != "" {
		if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
			return fmt.Sprintf("error: the arguments of %s are not a JSON object: %v", call.Function.Name, err), false
		}
	}
	switch call.Function.Name {
	case "write_file":
		p := path.Clean(strings.TrimPrefix(args.Path, "./"))
		if p == stateDir || strings.HasPrefix(p, stateDir+"/") {
			return "error: " + stateDir + "/ is the agent's own", false
		}
		if err := agent.WriteFile(p, []byte(args.Content)); err != nil {
			return "error: " + err.Error(), false
		}
		dir, name := path.Split(p)
		if _, err := agent.PublishFile(p, name, strings.TrimSuffix(dir, "/")); err != nil {
			return "error: " + err.Error(), false
		}
		agent.Logf("wrote %s (%d bytes)", p, len(args.Content))
		return fmt.Sprintf("wrote %s (%d bytes)", p, len(args.Content)), false
	case "read_file":
		b, err := agent.ReadFile(args.Path)
		if err != nil {
			return "error: " + err.Error(), false
		}
		return string(b), false
	case "list_files":
		files, err := agent.ListFiles("")
		if err != nil {
			return "error: " + err.Error(), false
		}
		var lines []string
		for _, f := range files {
			if !strings.HasPrefix(f.Path, stateDir+"/") {
				lines = append(lines, fmt.Sprintf("%s (%d bytes)", f.Path, f.Size))
			}
		}
		if len(lines) == 0 {
			return "the workspace is empty", false
		}
		return strings.Join(lines, "\n"), false
	case "finish":
		if args.Summary == "" {
			args.Summary = "done"
		}
		return args.Summary, true
	}
	return "error: no tool " + call.Function.Name, false
}

func main() {}
