package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
	"github.com/agentrt/agentrt/protocol/wire"
)

// failingStep is a plugin whose step handler fails with failure.
type failingStep struct{ failure error }

func (failingStep) HasHandler(h protocol.Handler) bool { return h == protocol.HandlerStep }
func (failingStep) Codec() protocol.Codec              { return wire.V1 }
func (p failingStep) Run(context.Context, protocol.Handler, *protocol.Call) (int32, time.Duration, error) {
	return 0, time.Millisecond, p.failure
}

// A plugin's failure is answered with its code's status (502, or 504 for
// a timeout) and the error body every error has, naming the step it was
// recorded on, which shows the same code and message in its
// additional_output.
func TestAPluginFailureIsAnsweredWithItsStatusAndRecordedOnItsStep(t *testing.T) {
	for _, tc := range []struct {
		failure *protocol.PluginFailure
		status  int
		code    string
	}{
		{protocol.NewPluginFailure(protocol.CauseTrap, "the plugin trapped: wasm error: unreachable"), http.StatusBadGateway, "plugin_failed"},
		{protocol.NewPluginFailure(protocol.CauseHandlerError, "boom"), http.StatusBadGateway, "plugin_failed"},
		{protocol.NewPluginFailure(protocol.CauseTimeout, "the plugin ran past its time limit of 1s"), http.StatusGatewayTimeout, "plugin_timeout"},
	} {
		t.Run(tc.failure.Cause, func(t *testing.T) {
			a := protocol.NewAgent(protocoltest.NewStore(), &protocol.Build{Plugin: failingStep{tc.failure}, Limits: protocol.DefaultLimits}, protocol.AgentConfig{Name: "a"})
			srv := NewServer(agentsOf{a}, ServerConfig{})
			var task struct {
				TaskID string `json:"task_id"`
			}
			if w := serveRequest(srv, "POST", "/ap/v1/agent/tasks", `{}`); json.Unmarshal(w.Body.Bytes(), &task) != nil || task.TaskID == "" {
				t.Fatalf("create task: %d %s", w.Code, w.Body)
			}
			w := serveRequest(srv, "POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", `{}`)
			var body map[string]string
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("execute step: %d %s: %v", w.Code, w.Body, err)
			}
			message := "step handler failed: " + tc.failure.Message
			if w.Code != tc.status || len(body) != 3 || body["code"] != tc.code || body["message"] != message || body["step_id"] == "" || w.Header().Get("Retry-After") != "" {
				t.Fatalf("execute step: %d %s; want %d with code %s, message %q and the step's id", w.Code, w.Body, tc.status, tc.code, message)
			}
			w = serveRequest(srv, "GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+body["step_id"], "")
			var step struct {
				Status           string
				AdditionalOutput map[string]map[string]string `json:"additional_output"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &step); err != nil || w.Code != http.StatusOK {
				t.Fatalf("get the failed step: %d %s", w.Code, w.Body)
			}
			if got := step.AdditionalOutput["error"]; step.Status != "completed" || len(got) != 2 || got["code"] != tc.code || got["message"] != message {
				t.Errorf("the failed step: %s; want it completed, with the client's code and message", w.Body)
			}
		})
	}
}
