package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// devServer serves plugin as "agentrt run --dev" does, from a copy of it
// in a directory of its own, and returns the server and the copy's path.
func devServer(t *testing.T, plugin string, args ...string) (*testServer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.wasm")
	putFile(t, path, pluginBytes(t, plugin))
	cfg, err := parseRunFlags(append([]string{path, "--dev", "--data", t.TempDir(), "--cache", filepath.Join(buildDir, "cache")}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.egress.resolver = testNames
	if !cfg.dev || cfg.logLevel != slog.LevelDebug {
		t.Fatalf("--dev gave dev %v and log level %v, want the debug level", cfg.dev, cfg.logLevel)
	}
	cfg.settle = 50 * time.Millisecond
	return startServer(t, cfg), path
}

// A rebuilt plugin is served as soon as its file settles; one that does not
// load leaves the previous build serving. The server log has a line per
// request and the plugin's log lines.
func TestDevModeReloadsARebuiltPlugin(t *testing.T) {
	ts, path := devServer(t, examplePlugin(t, "echo-rust"))
	task := ts.createTask(`{"input":"Write the word 'Washington' to a .txt file"}`)
	if st := ts.step(task.TaskID, `{"input":"hello"}`); st.Output == nil || *st.Output != "hello" {
		t.Fatalf("the first build answered %+v", st)
	}

	putFile(t, path, pluginBytes(t, examplePlugin(t, "washington-rust")))
	var st protocol.Step
	eventually(t, reloadWithin, "the rebuilt plugin to serve", func() bool {
		ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{}`).want(t, 200).decode(t, &st)
		return st.Output != nil && strings.HasPrefix(*st.Output, "Wrote 'Washington'")
	})
	if st.Build == nil || st.Build.SHA256 != sha256Hex(pluginBytes(t, path)) {
		t.Errorf("the step names build %+v, want the rebuilt one", st.Build)
	}
	log := ts.log.String()
	for _, want := range []string{
		"msg=\"plugin reloaded\"",
		"msg=request method=POST path=/ap/v1/agent/tasks/" + task.TaskID + "/steps status=200",
		"msg=\"plugin log\" handler=step level=info message=\"wrote output.txt\"",
		"msg=\"handler ran\" handler=step elapsed=",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the server log lacks %s:\n%s", want, log)
		}
	}

	putFile(t, path, []byte("\x00asm not really"))
	eventually(t, reloadWithin, "the broken build to be refused", func() bool {
		return strings.Contains(ts.log.String(), "the rebuilt plugin failed to load; the previous build keeps serving")
	})
	if st := ts.step(task.TaskID, `{}`); st.Output == nil || !strings.HasPrefix(*st.Output, "Wrote 'Washington'") {
		t.Errorf("after a broken build the agent answered %+v, want the previous build's answer", st)
	}
}

func TestDevModeWantsAPluginFileNamedDotWasm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.bin")
	putFile(t, path, pluginBytes(t, examplePlugin(t, "echo-rust")))
	cfg, err := parseRunFlags([]string{path, "--name", "agent", "--dev", "--data", t.TempDir()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		srv.Close()
		t.Fatal("dev mode served a plugin file it cannot watch")
	}
	if !strings.Contains(err.Error(), "NAME.wasm") {
		t.Errorf("err = %v", err)
	}
}

// The console log is a line a record, and what a plugin wrote cannot
// drive the terminal.
func TestTheConsoleLogEscapesWhatThePluginWrote(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(newConsoleHandler(&out, slog.LevelDebug))
	log.Info("request", "method", "POST", "path", "/ap/v1/agent/tasks", "status", 201, "bytes", 120, "ms", 3.25, "remote", "127.0.0.1:5000", "request_id", "r1")
	log.Debug("plugin log", "handler", "step", "level", "info", "message", "red \x1b[31mtext\x1b[0m\nsecond line")
	log.Warn("step handler failed", "task_id", "t1", "err", "panic: \x07boom")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		"POST /ap/v1/agent/tasks 201 3.25ms",
		`  │ info   red \x1b[31mtext\x1b[0m`,
		"             " + "  │        second line",
		`WARN step handler failed  task_id=t1 err=panic: \abo`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
		}
	}
	if bytes.ContainsAny(out.Bytes(), "\x1b\x07") {
		t.Errorf("the console log holds raw control characters: %q", out.String())
	}
}

// reloadWithin bounds the wait for dev mode to load a rebuilt plugin: a
// Go plugin's load (compiling, rewriting and snapshotting it) took 2.5 s
// here, and 27 s under the race detector, which slows the host's Go code
// tenfold.
const reloadWithin = 3 * time.Minute

// A rebuilt plugin calls out under the grants the first build had.
func TestDevModeReloadKeepsTheAgentsOutboundHTTP(t *testing.T) {
	srv := startLoopback(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached") })
	ts, path := devServer(t, examplePlugin(t, "echo-go"), "--allow-http", srv.at("api.test", "/"), "--allow-private-host", "api.test")
	putFile(t, path, pluginBytes(t, callerPlugin(t)))
	eventually(t, reloadWithin, "the rebuilt plugin to serve", func() bool {
		return strings.Contains(ts.log.String(), "msg=\"plugin reloaded\"")
	})
	if o := ts.call(map[string]any{"url": srv.at("api.test", "/")}); o.Body != "reached" {
		t.Errorf("the reloaded build's request: %+v", o)
	}
	wantRefused(t, ts.call(map[string]any{"url": srv.at("other.test", "/")}), "not_allowed", "is not a destination granted")
}
