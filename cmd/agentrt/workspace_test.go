package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
)

// probeResult is the output of a probe command: ok, or a host error.
type probeResult struct {
	OK   any    `json:"ok"`
	Code int32  `json:"code"`
	Err  string `json:"err"`
}

// probe runs one host API command in a step of the probe plugin.
func (ts *testServer) probe(taskID string, cmd map[string]string) probeResult {
	ts.t.Helper()
	b, _ := json.Marshal(cmd)
	in, _ := json.Marshal(string(b))
	st := ts.step(taskID, `{"input":`+string(in)+`}`)
	var r probeResult
	if st.Output == nil || json.Unmarshal([]byte(*st.Output), &r) != nil {
		ts.t.Fatalf("probe %v: output %v", cmd, st.Output)
	}
	return r
}

func (r probeResult) wantOK(t testing.TB) any {
	t.Helper()
	if r.Code != 0 || r.Err != "" {
		t.Fatalf("host call failed: %d %s", r.Code, r.Err)
	}
	return r.OK
}

func (r probeResult) wantCode(t testing.TB, code int32, msg string) {
	t.Helper()
	if r.Code != code || !strings.Contains(r.Err, msg) {
		t.Errorf("host call returned %d %q, want %d (%s) with %q", r.Code, r.Err, code, abi.ErrorName(code), msg)
	}
}

func probePlugin(t testing.TB) string { return goPlugin(t, "testdata/plugins/probe") }

func TestWorkspaceFilesPersistAcrossStepsAndRestarts(t *testing.T) {
	cfg := testConfig(t, probePlugin(t))
	ts := startServer(t, cfg)
	task := ts.createTask(`{}`)
	id := task.TaskID
	ts.probe(id, map[string]string{"op": "write", "path": "notes/today.md", "data": "# hello"}).wantOK(t)
	ts.probe(id, map[string]string{"op": "write", "path": "./notes//b.txt", "data": "bee"}).wantOK(t)
	ts.probe(id, map[string]string{"op": "write", "path": "top.txt", "data": ""}).wantOK(t)
	if got := ts.probe(id, map[string]string{"op": "read", "path": "notes/today.md"}).wantOK(t); got != "# hello" {
		t.Errorf("read = %v", got)
	}
	if got := fmt.Sprint(ts.probe(id, map[string]string{"op": "list"}).wantOK(t)); got != "[notes/b.txt:3 notes/today.md:7 top.txt:0]" {
		t.Errorf("list = %s", got)
	}
	if got := fmt.Sprint(ts.probe(id, map[string]string{"op": "list", "prefix": "notes/t"}).wantOK(t)); got != "[notes/today.md:7]" {
		t.Errorf("list with prefix = %s", got)
	}
	if got := ts.probe(id, map[string]string{"op": "stat", "path": "notes/b.txt"}).wantOK(t); got != "notes/b.txt:3:true" {
		t.Errorf("stat = %v", got)
	}
	ts.probe(id, map[string]string{"op": "write", "path": "notes/b.txt", "data": "replaced"}).wantOK(t)
	ts.probe(id, map[string]string{"op": "delete", "path": "top.txt"}).wantOK(t)
	ts.probe(id, map[string]string{"op": "read", "path": "top.txt"}).wantCode(t, abi.ErrNotFound, `no file "top.txt"`)
	ts.probe(id, map[string]string{"op": "stat", "path": "nope"}).wantCode(t, abi.ErrNotFound, "no file")
	ts.probe(id, map[string]string{"op": "delete", "path": "nope"}).wantCode(t, abi.ErrNotFound, "no file")
	ts.probe(id, map[string]string{"op": "read", "path": "notes"}).wantCode(t, abi.ErrBadPath, "is a directory")
	ts.probe(id, map[string]string{"op": "write", "path": "notes", "data": "x"}).wantCode(t, abi.ErrBadPath, "is a directory")
	ts.probe(id, map[string]string{"op": "write", "path": "notes/b.txt/deeper", "data": "x"}).wantCode(t, abi.ErrBadPath, "is a file")
	// Workspaces are per task.
	other := ts.createTask(`{}`)
	ts.probe(other.TaskID, map[string]string{"op": "read", "path": "notes/today.md"}).wantCode(t, abi.ErrNotFound, "no file")

	ts.stop()
	ts = startServer(t, cfg)
	if got := ts.probe(id, map[string]string{"op": "read", "path": "notes/b.txt"}).wantOK(t); got != "replaced" {
		t.Errorf("after a restart, read = %v", got)
	}
	if got := fmt.Sprint(ts.probe(id, map[string]string{"op": "list"}).wantOK(t)); got != "[notes/b.txt:8 notes/today.md:7]" {
		t.Errorf("after a restart, list = %s", got)
	}
}

// pathAttacks are paths a plugin might use to leave its workspace.
var pathAttacks = []string{
	"..", "../x", "../../../../etc/passwd", "a/../../x", "a/b/../../../x", "/etc/passwd", "/",
	`..\x`, `a\..\..\x`, "a\x00b", "x\x00/../../y", "a\nb", "", ".", "./", "a/./../..",
	strings.Repeat("a/", 600) + "x", strings.Repeat("n", 300), strings.Repeat("d/", 40) + "x",
	"C:\\Windows\\System32",
}

func TestWorkspacePathAttacksAreRefused(t *testing.T) {
	ts := serve(t, probePlugin(t))
	task := ts.createTask(`{}`)
	ts.probe(task.TaskID, map[string]string{"op": "write", "path": "inside.txt", "data": "mine"}).wantOK(t)
	for _, p := range pathAttacks {
		t.Run(fmt.Sprintf("%q", p), func(t *testing.T) {
			for _, op := range []string{"write", "read", "stat", "delete", "publish"} {
				ts.probe(task.TaskID, map[string]string{"op": op, "path": p, "data": "pwned", "name": "x.txt"}).
					wantCode(t, abi.ErrBadPath, "")
			}
		})
	}
	// Look-alikes of dots and slashes are ordinary names that stay inside.
	for _, p := range []string{"\uff0e\uff0e/x", "\u2024\u2024", "\u2215etc\u2215passwd", "..\u200b/x", "...", "a..b"} {
		ts.probe(task.TaskID, map[string]string{"op": "write", "path": p, "data": "look-alike"}).wantOK(t)
		if _, err := os.Stat(filepath.Join(ts.cfg.dataDir, "workspaces", task.TaskID, "files", p)); err != nil {
			t.Errorf("%q was not written inside the workspace: %v", p, err)
		}
	}
	// A prefix only filters the list; it cannot reach anything.
	if got := fmt.Sprint(ts.probe(task.TaskID, map[string]string{"op": "list", "prefix": "../"}).wantOK(t)); got != "<nil>" {
		t.Errorf("list ../ = %s", got)
	}
	assertOnlyKnownFiles(t, ts.cfg.dataDir)
}

// assertOnlyKnownFiles checks that no file was written where none should
// be: nothing named pwned anywhere in the data directory's parent.
func assertOnlyKnownFiles(t *testing.T, dataDir string) {
	t.Helper()
	filepath.WalkDir(filepath.Dir(dataDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); string(b) == "pwned" {
				t.Errorf("an attack wrote %s", p)
			}
		}
		return nil
	})
}

func TestATaskHoldsAtMostMaxTaskArtifacts(t *testing.T) {
	ts := serve(t, probePlugin(t), func(c *runConfig) { c.limits.MaxTaskArtifacts = 3 })
	id := ts.createTask(`{}`).TaskID
	ts.probe(id, map[string]string{"op": "create", "name": "one.txt", "data": "1"}).wantOK(t)
	ts.upload(id, part{name: "file", fileName: "two.txt", value: "2"}).want(t, 200)
	ts.probe(id, map[string]string{"op": "create", "name": "three.txt", "data": "3"}).wantOK(t)
	// Full: a plugin's artifact and an upload are refused alike.
	ts.probe(id, map[string]string{"op": "create", "name": "four.txt", "data": "4"}).wantCode(t, abi.ErrLimit, "holds 3 artifacts")
	ts.upload(id, part{name: "file", fileName: "five.txt", value: "5"}).wantError(t, 413, "the task holds 3 artifacts")
	ts.probe(id, map[string]string{"op": "stat", "path": "five.txt"}).wantCode(t, abi.ErrNotFound, "")
	var list protocol.ArtifactList
	ts.do("GET", "/ap/v1/agent/tasks/"+id+"/artifacts?page_size=100", "", "").want(t, 200).decode(t, &list)
	if len(list.Artifacts) != 3 {
		t.Errorf("the task holds %d artifacts, want 3", len(list.Artifacts))
	}
	// Another task has its own count.
	other := ts.createTask(`{}`).TaskID
	ts.upload(other, part{name: "file", fileName: "one.txt", value: "1"}).want(t, 200)
}

func TestWorkspaceQuota(t *testing.T) {
	ts := serve(t, probePlugin(t), func(c *runConfig) {
		c.limits.MaxWorkspaceBytes = 100
		c.limits.MaxWorkspaceFiles = 3
	})
	id := ts.createTask(`{}`).TaskID
	ts.probe(id, map[string]string{"op": "write", "path": "a", "data": strings.Repeat("a", 60)}).wantOK(t)
	ts.probe(id, map[string]string{"op": "write", "path": "b", "data": strings.Repeat("b", 41)}).wantCode(t, abi.ErrLimit, "quota of 100 bytes")
	ts.probe(id, map[string]string{"op": "write", "path": "b", "data": strings.Repeat("b", 40)}).wantOK(t)
	// Replacing a file counts its new size, not both.
	ts.probe(id, map[string]string{"op": "write", "path": "a", "data": strings.Repeat("a", 59)}).wantOK(t)
	ts.probe(id, map[string]string{"op": "write", "path": "c", "data": "c"}).wantOK(t)
	ts.probe(id, map[string]string{"op": "write", "path": "d", "data": ""}).wantCode(t, abi.ErrLimit, "quota of 3 files")
	ts.probe(id, map[string]string{"op": "delete", "path": "c"}).wantOK(t)
	ts.probe(id, map[string]string{"op": "write", "path": "d", "data": "d"}).wantOK(t)
	// Uploads count too.
	ts.upload(id, part{name: "file", fileName: "up.bin", value: ""}).wantError(t, 413, "quota of 3 files")
	ts.upload(id, part{name: "file", fileName: "a", value: strings.Repeat("x", 70)}).wantError(t, 413, "quota of 100 bytes")
	ts.upload(id, part{name: "file", fileName: "a", value: "small"}).want(t, 200)
	assertNoStrayFiles(t, ts.cfg.dataDir)
}

func TestUploadsAppearInTheWorkspaceAndArtifactsKeepTheirBytes(t *testing.T) {
	ts := serve(t, probePlugin(t))
	id := ts.createTask(`{}`).TaskID
	var first, second protocol.Artifact
	ts.upload(id, part{name: "relative_path", value: "in/docs/"}, part{name: "file", fileName: "a.txt", value: "first"}).want(t, 200).decode(t, &first)
	if got := ts.probe(id, map[string]string{"op": "read", "path": "in/docs/a.txt"}).wantOK(t); got != "first" {
		t.Errorf("the upload reads back from the workspace as %v", got)
	}
	ts.upload(id, part{name: "relative_path", value: "in/docs"}, part{name: "file", fileName: "a.txt", value: "second"}).want(t, 200).decode(t, &second)
	if got := ts.probe(id, map[string]string{"op": "read", "path": "in/docs/a.txt"}).wantOK(t); got != "second" {
		t.Errorf("a second upload to the same path reads back as %v", got)
	}
	// The plugin overwrites and deletes its copy; the artifacts keep theirs.
	ts.probe(id, map[string]string{"op": "write", "path": "in/docs/a.txt", "data": "plugin"}).wantOK(t)
	for a, want := range map[string]string{first.ArtifactID: "first", second.ArtifactID: "second"} {
		if got := string(ts.do("GET", "/ap/v1/agent/tasks/"+id+"/artifacts/"+a, "", "").want(t, 200).body); got != want {
			t.Errorf("artifact %s = %q, want %q", a, got, want)
		}
	}
	ts.probe(id, map[string]string{"op": "delete", "path": "in/docs/a.txt"}).wantOK(t)
	if got := string(ts.do("GET", "/ap/v1/agent/tasks/"+id+"/artifacts/"+second.ArtifactID, "", "").want(t, 200).body); got != "second" {
		t.Errorf("after the workspace copy was deleted the artifact reads %q", got)
	}
}

func TestPublishedWorkspaceFileIsASnapshot(t *testing.T) {
	ts := serve(t, probePlugin(t), func(c *runConfig) { c.limits.MaxArtifactBytes = 10 })
	id := ts.createTask(`{}`).TaskID
	ts.probe(id, map[string]string{"op": "write", "path": "out/report.md", "data": "v1"}).wantOK(t)
	artID, _ := ts.probe(id, map[string]string{"op": "publish", "path": "out/report.md", "name": "report.md", "dir": "reports"}).wantOK(t).(string)
	ts.probe(id, map[string]string{"op": "write", "path": "out/report.md", "data": "v2"}).wantOK(t)
	if got := string(ts.do("GET", "/ap/v1/agent/tasks/"+id+"/artifacts/"+artID, "", "").want(t, 200).body); got != "v1" {
		t.Errorf("published artifact = %q, want the bytes at publication", got)
	}
	var a protocol.Artifact
	for _, x := range ts.do("GET", "/ap/v1/agent/tasks/"+id, "", "").json(t)["artifacts"].([]any) {
		m := x.(map[string]any)
		if m["artifact_id"] == artID {
			a = protocol.Artifact{FileName: m["file_name"].(string), RelativePath: m["relative_path"].(string), AgentCreated: m["agent_created"].(bool)}
		}
	}
	if a.FileName != "report.md" || a.RelativePath != "reports" || !a.AgentCreated {
		t.Errorf("published artifact listed as %+v", a)
	}
	ts.probe(id, map[string]string{"op": "publish", "path": "missing.md", "name": "m.md"}).wantCode(t, abi.ErrNotFound, "no file")
	ts.probe(id, map[string]string{"op": "publish", "path": "out", "name": "m.md"}).wantCode(t, abi.ErrBadPath, "is a directory")
	ts.probe(id, map[string]string{"op": "write", "path": "big", "data": strings.Repeat("b", 11)}).wantOK(t)
	ts.probe(id, map[string]string{"op": "publish", "path": "big", "name": "big"}).wantCode(t, abi.ErrLimit, "over the limit of 10 bytes")
	ts.probe(id, map[string]string{"op": "create", "name": "big", "data": strings.Repeat("b", 11)}).wantCode(t, abi.ErrLimit, "over the limit of 10 bytes")
	ts.probe(id, map[string]string{"op": "create", "name": "a/b", "data": "x"}).wantCode(t, abi.ErrBadPath, "not a plain name")
	ts.probe(id, map[string]string{"op": "create", "name": "ok", "dir": "../up", "data": "x"}).wantCode(t, abi.ErrBadPath, "leaves the task's workspace")
	assertNoStrayFiles(t, ts.cfg.dataDir)
}

func TestPlannedStepsRunOldestFirstThenNewSteps(t *testing.T) {
	ts := serve(t, probePlugin(t))
	task := ts.createTask(`{"input":"plan:one,two,last"}`)
	var list protocol.StepList
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "", "").want(t, 200).decode(t, &list)
	if len(list.Steps) != 3 {
		t.Fatalf("planned steps listed: %+v", list.Steps)
	}
	for i, name := range []string{"one", "two", "last"} {
		s := list.Steps[i]
		if s.Name == nil || *s.Name != name || s.Status != protocol.StatusCreated || *s.Input != "input of "+name || s.Output != nil {
			t.Errorf("planned step %d = %+v", i, s)
		}
		if got := compactJSON(t, s.AdditionalInput); got != fmt.Sprintf(`{"n":%d}`, i) {
			t.Errorf("planned step %d additional_input = %s", i, got)
		}
	}
	for i, name := range []string{"one", "two", "last"} {
		st := ts.step(task.TaskID, fmt.Sprintf(`{"input":"go %d"}`, i))
		if st.StepID != list.Steps[i].StepID {
			t.Errorf("execute %d ran step %s, want the oldest planned, %s", i, st.StepID, list.Steps[i].StepID)
		}
		want := fmt.Sprintf("ran %s planned with input of %s, request go %d", name, name, i)
		if st.Output == nil || *st.Output != want || st.Status != protocol.StatusCompleted || st.IsLast != (name == "last") {
			t.Errorf("execute %d = %+v (output %v), want %q", i, st, deref(st.Output), want)
		}
		if got := compactJSON(t, st.AdditionalOutput); got != fmt.Sprintf(`{"planned_additional_input":{"n":%d}}`, i) {
			t.Errorf("execute %d additional_output = %s", i, got)
		}
	}
	// With the plan done, execute-step runs a new step with the request's input.
	extra := ts.step(task.TaskID, `{"input":"not a command"}`)
	if extra.Name != nil || *extra.Input != "not a command" || *extra.Output != "not a command: not a command" {
		t.Errorf("step after the plan = %+v", extra)
	}
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "", "").want(t, 200).decode(t, &list)
	if len(list.Steps) != 4 || list.Steps[3].StepID != extra.StepID {
		t.Errorf("steps in creation order: %+v", list.Steps)
	}
	for _, s := range list.Steps {
		if s.Status != protocol.StatusCompleted {
			t.Errorf("step %s is %s", s.StepID, s.Status)
		}
	}
	var logs struct{ Logs []protocol.LogRecord }
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/logs", "", "").want(t, 200).decode(t, &logs)
	if len(logs.Logs) != 1 || logs.Logs[0].Message != "planned 3 steps" {
		t.Errorf("task logs = %+v", logs.Logs)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestFailingTaskHandlerCreatesNothing(t *testing.T) {
	ts := serve(t, probePlugin(t))
	ts.do("POST", "/ap/v1/agent/tasks", "", `{"input":"fail"}`).wantError(t, 502, "task handler failed: cannot plan this")
	ts.do("POST", "/ap/v1/agent/tasks", "", `{"input":"write-then-fail"}`).wantError(t, 502, "failed after writing")
	var list protocol.TaskList
	ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200).decode(t, &list)
	if list.Pagination.TotalItems != 0 {
		t.Errorf("failed creations left %d tasks", list.Pagination.TotalItems)
	}
	if entries, _ := os.ReadDir(filepath.Join(ts.cfg.dataDir, "workspaces")); len(entries) != 0 {
		t.Errorf("failed creations left %d workspaces", len(entries))
	}
}

func TestArtifactHandlerAcceptsRejectsAndProcessesUploads(t *testing.T) {
	ts := serve(t, probePlugin(t))
	id := ts.createTask(`{}`).TaskID
	t.Run("reject", func(t *testing.T) {
		ts.upload(id, part{name: "file", fileName: "virus.exe", value: "MZ"}).wantError(t, 422, "the agent rejected the upload: executables are not accepted")
		ts.probe(id, map[string]string{"op": "read", "path": "virus.exe"}).wantCode(t, abi.ErrNotFound, "no file")
	})
	t.Run("fail", func(t *testing.T) {
		ts.upload(id, part{name: "file", fileName: "data.fail", value: "x"}).wantError(t, 502, "artifact handler failed: could not process data.fail")
	})
	t.Run("reject restores the file it would have replaced", func(t *testing.T) {
		ts.probe(id, map[string]string{"op": "write", "path": "keep.exe", "data": "precious"}).wantOK(t)
		ts.upload(id, part{name: "file", fileName: "keep.exe", value: "replacement"}).wantError(t, 422, "rejected")
		if got := ts.probe(id, map[string]string{"op": "read", "path": "keep.exe"}).wantOK(t); got != "precious" {
			t.Errorf("after a rejected upload the workspace file reads %v", got)
		}
	})
	t.Run("process", func(t *testing.T) {
		var a protocol.Artifact
		ts.upload(id, part{name: "file", fileName: "shout.upper", value: "quiet words"}).want(t, 200).decode(t, &a)
		var task protocol.Task
		ts.do("GET", "/ap/v1/agent/tasks/"+id, "", "").want(t, 200).decode(t, &task)
		var processed *protocol.Artifact
		for i, x := range task.Artifacts {
			if x.FileName == "shout.upper.txt" {
				processed = &task.Artifacts[i]
			}
		}
		if processed == nil || !processed.AgentCreated || processed.RelativePath != "processed" {
			t.Fatalf("task artifacts = %+v, want the processed copy", task.Artifacts)
		}
		if got := string(ts.do("GET", "/ap/v1/agent/tasks/"+id+"/artifacts/"+processed.ArtifactID, "", "").want(t, 200).body); got != "QUIET WORDS" {
			t.Errorf("processed artifact = %q", got)
		}
	})
	var arts protocol.ArtifactList
	ts.do("GET", "/ap/v1/agent/tasks/"+id+"/artifacts", "", "").want(t, 200).decode(t, &arts)
	var names []string
	for _, a := range arts.Artifacts {
		names = append(names, a.FileName)
	}
	if strings.Join(names, ",") != "shout.upper,shout.upper.txt" {
		t.Errorf("artifacts kept: %v, want only the accepted upload and what the handler made", names)
	}
	var logs struct{ Logs []protocol.LogRecord }
	ts.do("GET", "/ap/v1/agent/tasks/"+id+"/logs", "", "").want(t, 200).decode(t, &logs)
	// Every handler call's lines are kept, a refused upload's too.
	var got []string
	for _, l := range logs.Logs {
		got = append(got, l.Message)
	}
	if want := "received virus.exe,received data.fail,received keep.exe,received shout.upper"; strings.Join(got, ",") != want {
		t.Errorf("task logs = %q, want every upload's handler log, %s", got, want)
	}
	assertNoStrayFiles(t, ts.cfg.dataDir)
}

func TestConfigReachesThePlugin(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "conf.json")
	os.WriteFile(file, []byte(`{"model":"from-file","region":"eu"}`), 0o644)
	cfg, err := parseRunFlags([]string{probePlugin(t), "--data", dir + "/data", "--config-file", file,
		"--config", "model=small", "--config", "empty=", "--cache", filepath.Join(buildDir, "cache")}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cfg)
	got := ts.probe(ts.createTask(`{}`).TaskID, map[string]string{"op": "config"}).wantOK(t)
	b, _ := json.Marshal(got)
	if string(b) != `{"empty":"","model":"small","region":"eu"}` {
		t.Errorf("config = %s", b)
	}
	if _, err := parseRunFlags([]string{"p.wasm", "--config", "novalue"}, io.Discard); err == nil {
		t.Error("--config without = was accepted")
	}
	os.WriteFile(file, []byte(`{"n": 1}`), 0o644)
	if _, err := parseRunFlags([]string{"p.wasm", "--config-file", file}, io.Discard); err == nil || !strings.Contains(err.Error(), "JSON object of strings") {
		t.Errorf("a config file with a number: %v", err)
	}
}
