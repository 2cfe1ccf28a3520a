package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentrt/agentrt/protocol"
)

// A bound of background steps or of the event log set to 0, less, or
// below its floor is refused before anything is served, naming the flag
// that set it or the field of the file (and the file): it never reads as
// no bound, nor as a default. The schema refuses what it can say.
func TestBackgroundAndEventBoundsOffOrTooSmallAreRefusedNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		flag, field string
		flagValue   string // as the flag takes it
		fileValue   string // as the file holds it
		shown       string // the value as the error shows it
		want        string
		bySchema    bool // the schema refuses it too
	}{
		{"step-timeout", "sandbox.step_timeout", "0s", `"0s"`, "0s", "want more than 0s", false},
		{"step-timeout", "sandbox.step_timeout", "-1m", `"-1m"`, "-1m0s", "want more than 0s", true},
		{"event-heartbeat", "http.event_heartbeat", "0s", `"0s"`, "0s", "want more than 0s", false},
		{"event-heartbeat", "http.event_heartbeat", "-5s", `"-5s"`, "-5s", "want more than 0s", true},
		{"event-write-timeout", "http.event_write_timeout", "0s", `"0s"`, "0s", "want more than 0s", false},
		{"event-write-timeout", "http.event_write_timeout", "-1ns", `"-1ns"`, "-1ns", "want more than 0s", true},
		{"max-background-steps", "limits.max_background_steps", "0", `0`, "0", "want 1 or more", true},
		{"max-background-steps", "limits.max_background_steps", "-1", `-1`, "-1", "want 1 or more", true},
		{"max-background-steps-total", "sandbox.max_background_steps_total", "0", `0`, "0", "want 1 or more", true},
		{"max-background-steps-total", "sandbox.max_background_steps_total", "-3", `-3`, "-3", "want 1 or more", true},
		{"max-task-events", "data.max_task_events", "0", `0`, "0", "want 1 or more", true},
		{"max-task-events", "data.max_task_events", "-1", `-1`, "-1", "want 1 or more", true},
		{"max-task-event-bytes", "data.max_task_event_bytes", "0", `0`, "0", "want at least 256KiB", true},
		{"max-task-event-bytes", "data.max_task_event_bytes", "262143", `262143`, "262143", "want at least 256KiB", true},
		{"max-task-event-bytes", "data.max_task_event_bytes", "255KiB", `"255KiB"`, "255KiB", "want at least 256KiB", false},
	} {
		t.Run(tc.flag+"="+tc.flagValue, func(t *testing.T) {
			_, err := parseServeFlags([]string{"--plugins", "dir", "--" + tc.flag + "=" + tc.flagValue}, io.Discard)
			if want := "bad -" + tc.flag + " " + tc.shown + ": " + tc.want; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("--%s %s: %v, want %q", tc.flag, tc.flagValue, err, want)
			}
			file := fileOf(t, tc.field, tc.fileValue)
			_, err = parseServeFlags([]string{"--plugins", "dir", "--server-config", file}, io.Discard)
			if want := "bad " + tc.field + " (" + file + ") " + tc.shown + ": " + tc.want; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %s: %v, want %q", tc.field, tc.fileValue, err, want)
			}
			if tc.bySchema && configSchemaTakes(t, file) {
				t.Errorf("the schema takes %s: %s, which agentrt refuses", tc.field, tc.fileValue)
			}
		})
	}
	// A negative size is no size at all.
	if _, err := parseServeFlags([]string{"--plugins", "dir", "--max-task-event-bytes", "-1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "want a size") {
		t.Errorf("--max-task-event-bytes -1: %v, want it refused as no size", err)
	}
	// Each floor itself is taken.
	cfg, err := parseServeFlags([]string{"--plugins", "dir", "--step-timeout", "1ns", "--event-heartbeat", "1ns", "--event-write-timeout", "1ns",
		"--max-background-steps", "1", "--max-background-steps-total", "1", "--max-task-events", "1", "--max-task-event-bytes", "256KiB"}, io.Discard)
	if err != nil {
		t.Fatalf("the floors: %v", err)
	}
	if cfg.eventBounds != (protocol.EventBounds{Count: 1, Bytes: 256 << 10}) || cfg.limits.MaxBackgroundSteps != 1 || cfg.maxBackgroundTotal != 1 {
		t.Errorf("the floors read as %+v, %d, %d", cfg.eventBounds, cfg.limits.MaxBackgroundSteps, cfg.maxBackgroundTotal)
	}
}

// configSchemaTakes reports whether config.schema.json takes the file.
func configSchemaTakes(t *testing.T, file string) bool {
	t.Helper()
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustRead(t, "config.schema.json")))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("config.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustRead(t, file)))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v) == nil
}

// Each knob of background steps and the event log, set in the file,
// reaches what it bounds (the fleet, each agent's limits, the store, the
// event streams) and is printed by agentrt config as the file set it.
func TestTheBackgroundAndEventKnobsOfTheFileReachWhatTheyBound(t *testing.T) {
	file := writeConfig(t, `{"http":{"cancel_on_disconnect":true,"event_heartbeat":"20s","event_write_timeout":"3s"},
		"data":{"max_task_events":10,"max_task_event_bytes":"512KiB"},
		"limits":{"max_background_steps":4},
		"sandbox":{"step_timeout":"90s","max_background_steps_total":9}}`)
	cfg, err := parseServeFlags([]string{"--plugins", "dir", "--server-config", file}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fc := cfg.fleetConfig(nil, nil)
	if fc.StepTimeout != 90*time.Second || fc.MaxBackgroundSteps != 9 || !fc.CancelOnDisconnect || fc.Limits.MaxBackgroundSteps != 4 {
		t.Errorf("the fleet is told step timeout %s, %d background steps in all, cancel on disconnect %v, %d per agent; want 1m30s, 9, true, 4",
			fc.StepTimeout, fc.MaxBackgroundSteps, fc.CancelOnDisconnect, fc.Limits.MaxBackgroundSteps)
	}
	if cfg.eventBounds != (protocol.EventBounds{Count: 10, Bytes: 512 << 10}) || cfg.eventHeartbeat != 20*time.Second || cfg.eventWriteTimeout != 3*time.Second {
		t.Errorf("the store and the streams are told %+v, heartbeat %s, write timeout %s", cfg.eventBounds, cfg.eventHeartbeat, cfg.eventWriteTimeout)
	}
	var out bytes.Buffer
	if err := runMain(t.Context(), []string{"config", "--server-config", file}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"cancel_on_disconnect": true`, `"event_heartbeat": "20s"`, `"event_write_timeout": "3s"`,
		`"max_task_events": 10`, `"max_task_event_bytes": "512KiB"`, `"max_background_steps": 4`, `"step_timeout": "1m30s"`,
		`"max_background_steps_total": 9`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("agentrt config printed no %s:\n%s", want, out.String())
		}
	}
}

// A server runs its event log and streams under the bounds it is given:
// past --max-task-events the oldest log events are trimmed, and a stream
// left silent gets a heartbeat every --event-heartbeat; /metrics counts
// the streams open.
func TestTheEventLogAndItsStreamsRunUnderTheirConfiguredBounds(t *testing.T) {
	cfg, err := parseRunFlags([]string{goPlugin(t, "testdata/plugins/faulty"), "--data", t.TempDir(),
		"--cache", filepath.Join(buildDir, "cache"), "--max-task-events", "2", "--event-heartbeat", "50ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cfg)
	task := ts.createTask(`{}`)
	ts.step(task.TaskID, `{"input":"log"}`) // five log lines

	var page protocol.EventPage
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/events", "", "").want(t, 200).decode(t, &page)
	logs := 0
	for _, e := range page.Events {
		if protocol.Trimmable(e.Type) {
			logs++
		}
	}
	if logs > 2 || page.Trimmed < 3 {
		t.Errorf("the task's log holds %d log events, %d trimmed; want at most 2 held and the rest trimmed", logs, page.Trimmed)
	}

	req, err := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/ap/v1/agent/tasks/"+task.TaskID+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	// The replay, then silence: a heartbeat comes, long before the
	// default's 15 seconds.
	beat := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), ":") {
				close(beat)
				return
			}
		}
	}()
	select {
	case <-beat:
	case <-time.After(5 * time.Second):
		t.Errorf("no heartbeat on a silent stream within 5s under --event-heartbeat 50ms")
	}
	// /metrics counts the stream held open.
	if got := ts.scrapeMetrics().get("agentrt_event_streams"); got != 1 {
		t.Errorf("agentrt_event_streams = %v with one stream open, want 1", got)
	}
}
