package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/wire"
	"github.com/agentrt/agentrt/storage"
)

// noHandlers is a plugin that defines no handler: tasks are created, steps
// fail to run.
type noHandlers struct{}

func (noHandlers) HasHandler(protocol.Handler) bool { return false }
func (noHandlers) Codec() protocol.Codec            { return wire.V1 }
func (noHandlers) Run(context.Context, protocol.Handler, *protocol.Call) (int32, time.Duration, error) {
	return 0, 0, protocol.Errorf(protocol.EPLUGIN, "no handler")
}

func newTestServer(t *testing.T, cfg ServerConfig) *Server {
	t.Helper()
	s, err := storage.Open(context.Background(), t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return NewServer(protocol.NewAgent(s, noHandlers{}, protocol.AgentConfig{Limits: protocol.DefaultLimits}), cfg)
}

// An agent served under a base path answers there, with the whole
// protocol, and nowhere else.
func TestAnAgentIsServedUnderItsBasePath(t *testing.T) {
	srv := newTestServer(t, ServerConfig{BasePath: "/agents/echo"})
	do := func(method, path, body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		srv.ServeHTTP(w, r)
		return w
	}
	if w := do("POST", "/agents/echo/ap/v1/agent/tasks", `{"input":"x"}`); w.Code != http.StatusOK {
		t.Fatalf("create task under the base path: %d %s", w.Code, w.Body)
	}
	if w := do("GET", "/agents/echo/ap/v1/agent/tasks", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"total_items":1`) {
		t.Errorf("list tasks under the base path: %d %s", w.Code, w.Body)
	}
	for _, path := range []string{"/ap/v1/agent/tasks", "/agents/other/ap/v1/agent/tasks", "/agents/echo/agent/tasks"} {
		if w := do("GET", path, ""); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"code":"not_found"`) {
			t.Errorf("GET %s: %d %s, want a JSON 404", path, w.Code, w.Body)
		}
	}
}

func TestABasePathThatIsNotAPathIsRefused(t *testing.T) {
	for _, base := range []string{"agents/echo", "/agents/echo/", "/"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("base path %q was taken", base)
				}
			}()
			newTestServer(t, ServerConfig{BasePath: base})
		}()
	}
}
