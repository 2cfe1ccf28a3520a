package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/httpapi"
)

func TestDeletingATaskRemovesItEverywhereAndItsBytesFromDisk(t *testing.T) {
	ts := twoAgents(t)
	for _, base := range []string{"", "/agents/beta"} {
		t.Run("at "+base+"/ap/v1", func(t *testing.T) {
			taskID, stepID, artifactID := ts.seedTask(base, nil)
			kept, _, keptArtifact := ts.seedTask(base, nil)
			// The task's bytes are on disk: its artifact and its workspace.
			dirs := []string{filepath.Join(ts.cfg.dataDir, "artifacts", taskID), filepath.Join(ts.cfg.dataDir, "workspaces", taskID)}
			for _, d := range dirs {
				if _, err := os.Stat(d); err != nil {
					t.Fatalf("before the delete: %v", err)
				}
			}
			task := base + "/ap/v1/agent/tasks/" + taskID
			res := ts.do("DELETE", task, "", "")
			if res.status != http.StatusNoContent || len(res.body) != 0 {
				t.Fatalf("DELETE: %d %q, want 204 with no body", res.status, res.body)
			}
			for _, path := range []string{task, task + "/steps", task + "/steps/" + stepID, task + "/steps/" + stepID + "/logs",
				task + "/artifacts", task + "/artifacts/" + artifactID, task + "/logs"} {
				ts.do("GET", path, "", "").wantError(t, 404, "not found")
			}
			ts.do("DELETE", task, "", "").wantError(t, 404, "not found")
			ts.do("POST", task+"/steps", "application/json", `{}`).wantError(t, 404, "not found")
			ts.do("PATCH", task, "application/json", `{"title":"x"}`).wantError(t, 404, "not found")
			for _, d := range dirs {
				if _, err := os.Stat(d); !os.IsNotExist(err) {
					t.Errorf("%s is still on disk: %v", d, err)
				}
			}
			var list protocol.TaskList
			ts.do("GET", base+"/ap/v1/agent/tasks?page_size=100", "", "").want(t, 200).decode(t, &list)
			for _, tk := range list.Tasks {
				if tk.TaskID == taskID {
					t.Errorf("the deleted task is listed")
				}
			}
			// The other task is whole.
			ts.do("GET", base+"/ap/v1/agent/tasks/"+kept+"/artifacts/"+keptArtifact, "", "").want(t, 200)
		})
	}
	// A task is deleted only through its own agent.
	taskID, _, _ := ts.seedTask("/agents/beta", nil)
	ts.do("DELETE", "/agents/alpha/ap/v1/agent/tasks/"+taskID, "", "").wantError(t, 404, "not found")
	ts.do("DELETE", "/ap/v1/agent/tasks/"+taskID, "", "").wantError(t, 404, "not found")
	ts.do("GET", "/agents/beta/ap/v1/agent/tasks/"+taskID, "", "").want(t, 200)
}

// A download under way when its task is deleted ends cleanly: with the
// bytes it started with, whole. A download that starts after is 404.
func TestADownloadUnderWayWhenItsTaskIsDeletedEndsCleanly(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`)
	data := make([]byte, 8<<20) // more than the connection's buffers hold
	rand.Read(data)
	var art protocol.Artifact
	ct, body := streamUpload("big.bin", data)
	doRequest(t, ts.URL, "POST", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", ct, body).want(t, 200).decode(t, &art)
	path := "/ap/v1/agent/tasks/" + task.TaskID + "/artifacts/" + art.ArtifactID

	res, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := bufio.NewReader(res.Body)
	first := make([]byte, 64<<10)
	if _, err := io.ReadFull(r, first); err != nil { // the download has begun
		t.Fatal(err)
	}
	ts.do("DELETE", "/ap/v1/agent/tasks/"+task.TaskID, "", "").want(t, 204)
	ts.do("GET", path, "", "").wantError(t, 404, "not found")
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("the download under way broke off: %v", err)
	}
	if got := append(first, rest...); !bytes.Equal(got, data) {
		t.Errorf("the download under way ended with %d bytes, not the %d it started with", len(got), len(data))
	}
	if _, err := os.Stat(filepath.Join(ts.cfg.dataDir, "artifacts", task.TaskID)); !os.IsNotExist(err) {
		t.Errorf("the deleted artifact's bytes are still on disk: %v", err)
	}
}

// A step running when its task is deleted is stopped; its client is
// answered 404, and the task is gone.
func TestDeletingATaskStopsItsRunningStep(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/faulty"), func(c *runConfig) { c.callTimeout = time.Minute })
	task := ts.createTask(`{}`)
	step := ts.start("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{"input":"sleep:60000"}`)
	ts.waitLimiter("the long step running", 1, 0, step)
	ts.do("DELETE", "/ap/v1/agent/tasks/"+task.TaskID, "", "").want(t, 204)
	step.wait().wantError(t, 404, "deleted")
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID, "", "").want(t, 404)
}

func TestTaskMetadataRoundTripsExactly(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	title, desc, version := "  Prime Ticker 🏷️ \"quoted\" <b>&</b> ", "Execute prime model...\n\tline two\r\n", "v0.3+β"
	body, _ := json.Marshal(map[string]any{"input": "go", "title": title, "description": desc, "version": version})
	created := ts.createTask(string(body))
	get := func() protocol.Task {
		var tk protocol.Task
		ts.do("GET", "/ap/v1/agent/tasks/"+created.TaskID, "", "").want(t, 200).decode(t, &tk)
		return tk
	}
	for what, tk := range map[string]protocol.Task{"created": created, "read back": get()} {
		if tk.Title == nil || *tk.Title != title || tk.Description == nil || *tk.Description != desc || tk.Version == nil || *tk.Version != version {
			t.Errorf("%s: %q %q %q", what, deref(tk.Title), deref(tk.Description), deref(tk.Version))
		}
	}
	var list protocol.TaskList
	ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200).decode(t, &list)
	if len(list.Tasks) != 1 || deref(list.Tasks[0].Title) != title {
		t.Errorf("the list shows %+v", list.Tasks)
	}
	// A task without metadata answers as the specification's Task does.
	plain := ts.do("POST", "/ap/v1/agent/tasks", "application/json", `{"input":"x"}`).want(t, 200)
	for _, field := range []string{"title", "description", "version"} {
		if _, ok := plain.json(t)[field]; ok {
			t.Errorf("a task without metadata answers %q: %s", field, plain.body)
		}
	}

	// PATCH: a merge patch of the metadata.
	var patched protocol.Task
	ts.do("PATCH", "/ap/v1/agent/tasks/"+created.TaskID, "application/merge-patch+json", `{"title":"new","version":null}`).want(t, 200).decode(t, &patched)
	if deref(patched.Title) != "new" || deref(patched.Description) != desc || patched.Version != nil || deref(patched.Input) != "go" {
		t.Errorf("after PATCH: %+v", patched)
	}
	if tk := get(); deref(tk.Title) != "new" || tk.Version != nil {
		t.Errorf("PATCH was not kept: %+v", tk)
	}
	for body, want := range map[string]string{
		`{"input":"changed"}`: `"input" cannot be changed`,
		`{"title":["a"]}`:     `must be a string or null`,
		`{"title":"a\nb"}`:    `control character`,
		`[1]`:                 `must be a JSON object`,
		`{"task_id":"x"}`:     `cannot be changed`,
		`{"description":` + "\"" + strings.Repeat("d", protocol.MaxDescriptionBytes+1) + `"}`: "over the limit",
	} {
		ts.do("PATCH", "/ap/v1/agent/tasks/"+created.TaskID, "application/json", body).wantError(t, 422, want)
	}
	ts.do("PATCH", "/ap/v1/agent/tasks/"+created.TaskID, "application/json", `{}`).want(t, 200) // changes nothing
}

// symbolicReq sends a request in the symbolic form and asks for it back.
func (ts *testServer) symbolicReq(method, path, body string) *response {
	ts.t.Helper()
	h := http.Header{"Accept": {httpapi.SymbolicType}}
	ct := ""
	if body != "" {
		ct = httpapi.SymbolicType
	}
	res := ts.doWith(method, path, h, ct, []byte(body))
	if got := res.header.Get("Content-Type"); res.status != http.StatusNoContent && got != httpapi.SymbolicType {
		ts.t.Fatalf("%s %s answered %s, not the symbolic form: %s", method, path, got, res.body)
	}
	return res
}

// The Introspector notes' own example, the "..." that stands for more
// steps left out: it creates a task whose steps are planned.
const notesExample = `{
  "🏷️": "Prime Ticker",
  "📖": "Execute prime model...",

  "🚶♂️": [
    "🛠️ Setup ",
    "🦾 Fetch model",
    "⚙️ Run model"
  ]
}`

func TestTheNotesExampleCreatesATaskWithPlannedSteps(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	var created map[string]map[string]any
	ts.symbolicReq("POST", "/ap/v1/agent/tasks", notesExample).want(t, 200).decode(t, &created)
	task, ok := created["✅"]
	if !ok {
		t.Fatalf("the answer is no ✅ outcome: %v", created)
	}
	id, _ := task["🆔"].(string)
	if task["🏷️"] != "Prime Ticker" || task["📖"] != "Execute prime model..." {
		t.Errorf("the task's title and description: %v", task)
	}
	if got := fmt.Sprint(task["🚶"]); got != "[🛠️ Setup  🦾 Fetch model ⚙️ Run model]" {
		t.Errorf("🚶 = %s, want the three steps planned", got)
	}

	// The same task in plain JSON: its metadata, and its steps planned.
	var plain protocol.Task
	ts.do("GET", "/ap/v1/agent/tasks/"+id, "", "").want(t, 200).decode(t, &plain)
	if deref(plain.Title) != "Prime Ticker" || deref(plain.Description) != "Execute prime model..." {
		t.Errorf("in plain JSON: %+v", plain)
	}
	var steps protocol.StepList
	ts.do("GET", "/ap/v1/agent/tasks/"+id+"/steps", "", "").want(t, 200).decode(t, &steps)
	var names []string
	for _, s := range steps.Steps {
		names = append(names, deref(s.Name)+"/"+string(s.Status))
	}
	if strings.Join(names, "|") != "🛠️ Setup /created|🦾 Fetch model/created|⚙️ Run model/created" {
		t.Errorf("the steps in plain JSON: %q", names)
	}
	// Executing runs them in order; the symbolic task counts what ran.
	st := ts.step(id, `{"input":"go"}`)
	if deref(st.Name) != "🛠️ Setup " {
		t.Errorf("the first step run is %q", deref(st.Name))
	}
	var after map[string]map[string]any
	ts.symbolicReq("GET", "/ap/v1/agent/tasks/"+id, "").want(t, 200).decode(t, &after)
	if got := fmt.Sprint(after["✅"]["🚶"], " done ", after["✅"]["🏁"], " failed ", after["✅"]["💥"]); got != "[🦾 Fetch model ⚙️ Run model] done 1 failed 0" {
		t.Errorf("after one step: %s", got)
	}
}

func TestTheSymbolicFormRoundTripsAndMapsToPlainJSON(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/faulty"))
	// Created plain, read symbolic; created symbolic, read plain.
	plain := ts.createTask(`{"input":"in","additional_input":{"k":[1,2]},"title":"T","version":"1"}`)
	var sym map[string]map[string]any
	ts.symbolicReq("GET", "/ap/v1/agent/tasks/"+plain.TaskID, "").want(t, 200).decode(t, &sym)
	got := sym["✅"]
	if got["🆔"] != plain.TaskID || got["🏷️"] != "T" || got["🔄"] != "1" || got["💬"] != "in" || fmt.Sprint(got["🧩"]) != "map[k:[1 2]]" {
		t.Errorf("a plain task read symbolic: %v", got)
	}
	if _, ok := got["📖"]; ok {
		t.Errorf("an unset description is shown: %v", got)
	}

	// Update, fail a step, upload, list and delete, all symbolic.
	var patched map[string]map[string]any
	ts.symbolicReq("PATCH", "/ap/v1/agent/tasks/"+plain.TaskID, `{"📖":"D","🔄":null}`).want(t, 200).decode(t, &patched)
	if p := patched["✅"]; p["📖"] != "D" || p["🔄"] != nil || p["🏷️"] != "T" {
		t.Errorf("after a symbolic PATCH: %v", p)
	}
	ts.do("POST", "/ap/v1/agent/tasks/"+plain.TaskID+"/steps", "application/json", `{"input":"error"}`).want(t, 502)
	ts.step(plain.TaskID, `{"input":"fine"}`)
	ts.upload(plain.TaskID, part{name: "file", fileName: "a.txt", value: "x"}).want(t, 200)
	var list map[string]map[string]any
	ts.symbolicReq("GET", "/ap/v1/agent/tasks?page_size=5", "").want(t, 200).decode(t, &list)
	tasks, _ := list["✅"]["📋"].([]any)
	page, _ := list["✅"]["📑"].(map[string]any)
	if len(tasks) != 1 || page["🔢"] != 1.0 || page["📏"] != 5.0 {
		t.Fatalf("the symbolic list: %v", list)
	}
	one := tasks[0].(map[string]any)
	arts, _ := one["📦"].([]any)
	if one["🏁"] != 1.0 || one["💥"] != 1.0 || len(arts) != 1 || arts[0].(map[string]any)["📄"] != "a.txt" {
		t.Errorf("the listed task: %v", one)
	}

	// Plain JSON stays the default, and what a client prefers wins.
	for accept, symbolic := range map[string]bool{
		"":                   false,
		"application/json":   false,
		"*/*":                false,
		httpapi.SymbolicType: true,
		httpapi.SymbolicType + ";q=0.5, application/json": false,
		"application/json;q=0.1, " + httpapi.SymbolicType: true,
	} {
		res := ts.doWith("GET", "/ap/v1/agent/tasks/"+plain.TaskID, http.Header{"Accept": {accept}}, "", nil).want(t, 200)
		if got := strings.HasPrefix(res.header.Get("Content-Type"), httpapi.SymbolicType); got != symbolic {
			t.Errorf("Accept %q answered %s", accept, res.header.Get("Content-Type"))
		}
	}

	// Errors are ❌ outcomes; a body with a field that is not a symbol is
	// refused, saying which.
	var failed map[string]map[string]any
	ts.symbolicReq("GET", "/ap/v1/agent/tasks/0190d8a6-0000-7000-8000-000000000000", "").want(t, 404).decode(t, &failed)
	if failed["❌"]["🔖"] != "not_found" || !strings.Contains(fmt.Sprint(failed["❌"]["💬"]), "not found") {
		t.Errorf("a symbolic 404: %v", failed)
	}
	for body, want := range map[string]string{
		`{"title":"plain key"}`: `is not a symbol of a task`,
		`{"🆔":"x"}`:             "the server's to say",
		`{"🚶":"not a list"}`:    "must be a list",
		`{"🚶":[{"❓":"x"}]}`:     "not a symbol of a step",
		`{"🏷️":7}`:              "must be a string",
	} {
		ts.symbolicReq("POST", "/ap/v1/agent/tasks", body).want(t, 422)
		res := ts.symbolicReq("POST", "/ap/v1/agent/tasks", body)
		if !strings.Contains(string(res.body), want) {
			t.Errorf("%s: %s, want %q", body, res.body, want)
		}
	}

	// Delete.
	var deleted map[string]map[string]any
	ts.symbolicReq("DELETE", "/ap/v1/agent/tasks/"+plain.TaskID, "").want(t, 200).decode(t, &deleted)
	if deleted["✅"]["🆔"] != plain.TaskID {
		t.Errorf("a symbolic delete: %v", deleted)
	}
	ts.do("GET", "/ap/v1/agent/tasks/"+plain.TaskID, "", "").want(t, 404)
}
