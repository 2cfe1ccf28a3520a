package plugin_test

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/plugin"
	"github.com/agentrt/agentrt/runtime/runtimetest"
	"github.com/agentrt/agentrt/storage/disktest"
)

// A loaded plugin is the protocol.Plugin an agent runs: each handler call
// reaches the host API, bound to that call (its input, its result), and
// its result is read with ABI v1's codec.
func TestALoadedPluginRunsAnAgentsHandlersThroughTheHostAPI(t *testing.T) {
	for _, lang := range []string{"rust", "tinygo"} {
		t.Run(lang, func(t *testing.T) {
			p, err := plugin.Load(t.Context(), runtimetest.Plugin(t, "echo-"+lang), plugin.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(t.Context())
			if !p.HasHandler(protocol.HandlerStep) || p.HasHandler(protocol.HandlerTask) {
				t.Errorf("handlers: step %v, task %v; want the step handler only", p.HasHandler(protocol.HandlerStep), p.HasHandler(protocol.HandlerTask))
			}
			agent := protocol.NewAgent(protocoltest.NewStore(), &protocol.Build{Plugin: p, ID: p.SHA256(), Limits: protocol.DefaultLimits},
				protocol.AgentConfig{Name: "echo"})
			task, err := agent.CreateTask(t.Context(), protocol.TaskRequestBody{})
			if err != nil {
				t.Fatal(err)
			}
			in := "hello"
			st, err := agent.ExecuteStep(t.Context(), task.TaskID, protocol.StepRequestBody{Input: &in})
			if err != nil {
				t.Fatal(err)
			}
			if st.Output == nil || *st.Output != in {
				t.Errorf("the step's output: %v, want its input echoed", st.Output)
			}
		})
	}
}

// A compiled-code cache on a full disk does not keep a plugin from
// loading: it is compiled without the cache, and the log says so.
func TestAPluginLoadsWhenItsCacheDiskIsFull(t *testing.T) {
	disktest.Run(t, "size=8m", func(t *testing.T, mnt string) {
		disktest.Fill(t, mnt)
		var log bytes.Buffer
		p, err := plugin.Load(t.Context(), runtimetest.Plugin(t, "echo-rust"), plugin.Config{
			Runtime: runtime.Config{CacheDir: filepath.Join(mnt, "cache")},
			Log:     slog.New(slog.NewTextHandler(&log, nil)),
		})
		if err != nil {
			t.Fatalf("a full cache disk kept the plugin from loading: %v", err)
		}
		defer p.Close(t.Context())
		if p.Cache() != runtime.CacheOff {
			t.Errorf("the plugin's compilation: cache %s, want %s", p.Cache(), runtime.CacheOff)
		}
		if !strings.Contains(log.String(), "the compiled-code cache's disk is full") {
			t.Errorf("the log does not say the cache's disk is full:\n%s", log.String())
		}
	})
}
