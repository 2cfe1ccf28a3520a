package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// callAgentrt runs "agentrt call ARGS" in-process and returns what it
// printed and its error.
func callAgentrt(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append([]string{"call"}, append(args, "--cache", filepath.Join(buildDir, "cache"))...)
	err := runMain(context.Background(), args, &stdout, &stderr)
	return stdout.String() + stderr.String(), err
}

// mustCall is callAgentrt for a call that must succeed.
func mustCall(t *testing.T, args ...string) string {
	t.Helper()
	out, err := callAgentrt(t, args...)
	if err != nil {
		t.Fatalf("agentrt call %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("the output lacks %q:\n%s", l, out)
		}
	}
}

// Each example, in each language, runs its handlers one at a time under
// agentrt call, the planner's steps sharing one workspace directory.
func TestCallRunsEachExampleInEveryLanguage(t *testing.T) {
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			echo := mustCall(t, examplePlugin(t, "echo-"+lang), "step", "--input", "hello there")
			wantLines(t, echo, "step handler of ", ".wasm: ok in", "  output: hello there", "  is_last: false")

			washington := mustCall(t, examplePlugin(t, "washington-"+lang), "step", "--input", "Write the word 'Washington' to a .txt file")
			wantLines(t, washington, "  output: Wrote 'Washington' to output.txt", "  is_last: true",
				"artifacts:\n  output.txt (10 B): \"Washington\"", "info   wrote output.txt")

			planner := examplePlugin(t, "planner-"+lang)
			plan := mustCall(t, planner, "task", "--input", "the cat and the hat")
			wantLines(t, plan, "planned 3 steps", "  1. count words: Count the words", "  3. write report")
			ws := t.TempDir()
			out := t.TempDir()
			for _, step := range []string{"count words", "rank words", "write report"} {
				mustCall(t, planner, "step", "--step-name", step, "--task-input", "the cat and the hat", "--workspace", ws, "--artifacts", out)
			}
			report, err := os.ReadFile(filepath.Join(out, "report.md"))
			if err != nil || !bytes.Contains(report, []byte("the")) {
				t.Errorf("report.md = %q (%v), want the ranked words", report, err)
			}
			for _, f := range []string{"work/counts.tsv", "work/top.tsv", "report.md"} {
				if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
					t.Errorf("the workspace directory lacks %s: %v", f, err)
				}
			}
		})
	}
}

func TestCallRunsTheArtifactHandlerOnAFilePlacedInTheWorkspace(t *testing.T) {
	plugin := goPlugin(t, "testdata/plugins/faulty")
	dir := t.TempDir()
	for name, content := range map[string]string{"x.bad": "bad", "notes.txt": "fine"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(t.TempDir(), "ws")
	rejected := mustCall(t, plugin, "artifact", "--file", filepath.Join(dir, "x.bad"), "--relative-path", "in", "--workspace", ws)
	wantLines(t, rejected, "rejected the upload in/x.bad: no .bad files, please", "info   checking in/x.bad")
	if _, err := os.Stat(filepath.Join(ws, "in", "x.bad")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a rejected upload is in the workspace directory: %v", err)
	}
	accepted := mustCall(t, plugin, "artifact", "--file", filepath.Join(dir, "notes.txt"), "--relative-path", "in", "--workspace", ws)
	wantLines(t, accepted, "accepted the upload in/notes.txt (4 B)")
	if b, err := os.ReadFile(filepath.Join(ws, "in", "notes.txt")); string(b) != "fine" {
		t.Errorf("the accepted upload in the workspace: %q, %v", b, err)
	}
}

func TestCallFailsWithTheCauseAndTheLimitsOfRun(t *testing.T) {
	plugin := goPlugin(t, "testdata/plugins/faulty")
	for _, tc := range []struct {
		args  []string
		lines []string
	}{
		{[]string{"step", "--input", "panic"}, []string{"(plugin_failed):\n  step handler failed: panic: something impossible happened (at main.init.", "error  panic: something impossible happened"}},
		{[]string{"step", "--input", "loop", "--call-timeout", "500ms"}, []string{"(plugin_timeout):\n  step handler failed: the plugin ran past its time limit of 500ms"}},
		{[]string{"step", "--input", "oom", "--memory", "16MiB"}, []string{"ran out of memory: it asked for", "over its limit of 16 MiB"}},
		{[]string{"task", "--input", "fail-task"}, []string{"task handler failed: the plan failed", "stderr cannot plan this"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := callAgentrt(t, append([]string{plugin}, tc.args...)...)
			if !errors.Is(err, errCallFailed) || exitCode(err) != 1 {
				t.Errorf("err = %v (exit %d), want the handler's failure (exit 1)", err, exitCode(err))
			}
			wantLines(t, out, tc.lines...)
		})
	}
}

func TestCallPrintsJSONAndRefusesWhatIsNotForIt(t *testing.T) {
	plugin := goPlugin(t, "testdata/plugins/faulty")
	out := mustCall(t, plugin, "step", "--input", "hi", "--additional-input", `{"k":1}`, "--json")
	var got struct {
		OK   bool
		Step struct {
			Output           string          `json:"output"`
			AdditionalOutput json.RawMessage `json:"additional_output"`
		}
		Logs []any
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || !got.OK || got.Step.Output != "hi" || string(got.Step.AdditionalOutput) != `{"echo":true}` {
		t.Errorf("--json printed %s (%v)", out, err)
	}
	for _, args := range [][]string{
		{plugin, "step", "--addr", "127.0.0.1:1"},
		{plugin, "step", "--data", "x"},
		{plugin, "cook"},
		{plugin},
		{plugin, "artifact"},
		{plugin, "step", "--additional-input", "[1"},
	} {
		if _, err := callAgentrt(t, args...); exitCode(err) != 2 {
			t.Errorf("agentrt call %q: err = %v, want a usage error", args, err)
		}
	}
	// What the plugin wrote cannot drive the terminal.
	escaped := mustCall(t, plugin, "step", "--input", "red \x1b[31m\u009b2J")
	if strings.ContainsAny(escaped, "\x1b\u009b") || !strings.Contains(escaped, `output: red \x1b[31m\u009b2J`) {
		t.Errorf("control characters reached the terminal:\n%q", escaped)
	}
	if _, err := callAgentrt(t, examplePlugin(t, "echo-go"), "task"); err == nil || !strings.Contains(err.Error(), "defines no task handler") {
		t.Errorf("calling a handler the plugin lacks: %v", err)
	}
}
