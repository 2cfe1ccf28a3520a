package protocol_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// TestAPluginFailureReachesClientsCut pins what docs/SECURITY.md promises
// of a plugin's own text in a failure: a client, and the step it records,
// see at most 4 KiB of it with a note of how much was cut, cut at a
// character boundary, and the server's log line at most 512 bytes.
func TestAPluginFailureReachesClientsCut(t *testing.T) {
	// 3-byte characters, so that neither bound falls on a boundary.
	huge := strings.Repeat("€", 10_000)
	s := protocoltest.NewStore()
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: setResult(`{"error":"` + huge + `"}`)})
	var log bytes.Buffer
	a := protocol.NewAgent(s, &protocol.Build{Plugin: p, ID: "build-1", Limits: protocol.DefaultLimits},
		protocol.AgentConfig{Name: "test", Log: slog.New(slog.NewTextHandler(&log, nil))})
	task := mustCreateTask(t, a)

	_, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	wantCode(t, "a step failing with 30,000 bytes of text", err, protocol.EPLUGIN)
	var e *protocol.Error
	if !errors.As(err, &e) {
		t.Fatalf("the failure %v is not a *protocol.Error", err)
	}
	const prefix = "step handler failed: "
	kept := strings.TrimPrefix(e.Message, prefix)
	kept, note, found := strings.Cut(kept, "… (")
	if !found || !strings.HasSuffix(note, " more bytes)") {
		t.Fatalf("the client's message does not say it was cut: …%s", e.Message[max(0, len(e.Message)-60):])
	}
	if len(kept) > 4096 || len(kept) < 4096-3 || strings.Trim(kept, "€") != "" {
		t.Errorf("the client sees %d bytes of the plugin's text (whole characters: %v), want at most 4096 and no less than 4093",
			len(kept), strings.Trim(kept, "€") == "")
	}
	if want := strconv.Itoa(len(huge)-len(kept)) + " more bytes)"; note != want {
		t.Errorf("the note says %q, want %q", note, want)
	}

	st, err := s.GetStep(context.Background(), task.TaskID, e.StepID)
	if err != nil {
		t.Fatalf("the failed step was not recorded: %v", err)
	}
	var out struct {
		Error struct{ Message string } `json:"error"`
	}
	if err := json.Unmarshal(st.AdditionalOutput, &out); err != nil || out.Error.Message != e.Message {
		t.Errorf("the step records %d bytes of error (%v), want the client's %d", len(out.Error.Message), err, len(e.Message))
	}

	var line string
	for l := range strings.Lines(log.String()) {
		if strings.Contains(l, "step handler failed") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no log line of the failure in:\n%s", log.String())
	}
	if n := strings.Count(line, "€"); n == 0 || 3*n > 512 || !strings.Contains(line, "more bytes") {
		t.Errorf("the log line holds %d bytes of the plugin's text, want some and at most 512, with a note of the cut", 3*n)
	}
}
