package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
	"github.com/agentrt/agentrt/protocol/wire"
)

// noHandlers is a plugin that defines no handler: tasks are created, steps
// fail to run.
type noHandlers struct{}

func (noHandlers) HasHandler(protocol.Handler) bool { return false }
func (noHandlers) Codec() protocol.Codec            { return wire.V1 }
func (noHandlers) Run(context.Context, protocol.Handler, *protocol.Call) (int32, time.Duration, error) {
	return 0, 0, protocol.Errorf(protocol.EPLUGIN, "no handler")
}

// agentsOf serves agents by name, the first also as the default.
type agentsOf []*protocol.Agent

func (as agentsOf) Agent(name string) (*protocol.Agent, error) {
	for _, a := range as {
		if a.Name() == name || name == "" {
			return a, nil
		}
	}
	return nil, protocol.Errorf(protocol.ENOTFOUND, "no agent %q", name)
}

func (as agentsOf) List(ctx context.Context) ([]AgentInfo, error) {
	var list []AgentInfo
	for _, a := range as {
		list = append(list, AgentInfo{Name: a.Name(), State: "ready"})
	}
	return list, nil
}

func (as agentsOf) Info(ctx context.Context, name string) (*AgentInfo, error) {
	a, err := as.Agent(name)
	if err != nil || name == "" {
		return nil, protocol.Errorf(protocol.ENOTFOUND, "no agent %q", name)
	}
	return &AgentInfo{Name: a.Name(), State: "ready"}, nil
}

// newTestServer serves agents of the given names from one store, the first
// as the default.
func newTestServer(t *testing.T, cfg ServerConfig, names ...string) *Server {
	t.Helper()
	if len(names) == 0 {
		names = []string{"echo"}
	}
	var agents agentsOf
	for _, name := range names {
		agents = append(agents, protocol.NewAgent(protocoltest.NewStore(), &protocol.Build{Plugin: noHandlers{}, Limits: protocol.DefaultLimits},
			protocol.AgentConfig{Name: name}))
	}
	return NewServer(agents, cfg)
}

func serveRequest(srv http.Handler, method, path, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	srv.ServeHTTP(w, r)
	return w
}

// Each agent is served with the whole protocol under /agents/NAME, the
// default one at the root too, and sees only its own tasks.
func TestEachAgentIsServedUnderItsNameAndTheDefaultAtTheRoot(t *testing.T) {
	srv := newTestServer(t, ServerConfig{}, "echo", "other")
	var task struct {
		TaskID string `json:"task_id"`
	}
	w := serveRequest(srv, "POST", "/agents/echo/ap/v1/agent/tasks", `{"input":"x"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("create task under /agents/echo: %d %s", w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &task); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/agents/echo/ap/v1/agent/tasks", "/ap/v1/agent/tasks"} {
		if w := serveRequest(srv, "GET", path, ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"total_items":1`) {
			t.Errorf("GET %s: %d %s, want the task", path, w.Code, w.Body)
		}
	}
	if w := serveRequest(srv, "GET", "/agents/other/ap/v1/agent/tasks", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"total_items":0`) {
		t.Errorf("another agent lists: %d %s, want none of echo's tasks", w.Code, w.Body)
	}
	for _, path := range []string{"/agents/other/ap/v1/agent/tasks/" + task.TaskID, "/agents/other/ap/v1/agent/tasks/" + task.TaskID + "/steps",
		"/agents/nobody/ap/v1/agent/tasks", "/agents/echo/agent/tasks", "/agents/nobody"} {
		if w := serveRequest(srv, "GET", path, ""); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"code":"not_found"`) {
			t.Errorf("GET %s: %d %s, want a JSON 404", path, w.Code, w.Body)
		}
	}
	w = serveRequest(srv, "GET", "/agents", "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"name":"echo"`) || !strings.Contains(w.Body.String(), `"name":"other"`) {
		t.Errorf("GET /agents: %d %s", w.Code, w.Body)
	}
	if w := serveRequest(srv, "GET", "/agents/other", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"name":"other"`) {
		t.Errorf("GET /agents/other: %d %s", w.Code, w.Body)
	}
}

// An agent whose plugin was removed answers 409 to new work.
func TestAGoneAgentAnswersConflict(t *testing.T) {
	a := protocol.NewAgent(protocoltest.NewStore(), &protocol.Build{Plugin: noHandlers{}, Limits: protocol.DefaultLimits}, protocol.AgentConfig{Name: "gone"})
	srv := NewServer(agentsOf{a}, ServerConfig{})
	w := serveRequest(srv, "POST", "/agents/gone/ap/v1/agent/tasks", `{}`)
	var task struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &task); err != nil || task.TaskID == "" {
		t.Fatalf("create task: %d %s", w.Code, w.Body)
	}
	<-a.Serve(nil)
	w = serveRequest(srv, "POST", "/agents/gone/ap/v1/agent/tasks/"+task.TaskID+"/steps", `{}`)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), `"code":"conflict"`) {
		t.Errorf("execute step on a gone agent: %d %s, want 409", w.Code, w.Body)
	}
	if w := serveRequest(srv, "GET", "/agents/gone/ap/v1/agent/tasks/"+task.TaskID, ""); w.Code != http.StatusOK {
		t.Errorf("get task of a gone agent: %d %s, want 200", w.Code, w.Body)
	}
}
