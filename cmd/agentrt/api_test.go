package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

func TestCreateTaskAcceptsOptionalAndPartialBodies(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	for _, tc := range []struct {
		name, contentType, body string
		wantInput               any
		wantAddl                string
	}{
		{"full body", "application/json", `{"input":"hi","additional_input":{"k":[1,2]}}`, "hi", `{"k":[1,2]}`},
		{"no body", "", "", nil, `{}`},
		{"empty object", "application/json", `{}`, nil, `{}`},
		{"null body", "application/json", `null`, nil, `{}`},
		{"null fields", "application/json", `{"input":null,"additional_input":null}`, nil, `{}`},
		{"no content type", "", `{"input":"plain"}`, "plain", `{}`},
		{"text/plain content type", "text/plain", `{"input":"text"}`, "text", `{}`},
		{"unknown fields ignored", "application/json", `{"input":"x","eval_id":"7"}`, "x", `{}`},
		{"whitespace around", "application/json", " \n {\"input\":\"ws\"} \n", "ws", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ts.do("POST", "/ap/v1/agent/tasks", tc.contentType, tc.body).want(t, 200)
			if ct := res.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			v := res.json(t)
			if id, err := uuid.Parse(v["task_id"].(string)); err != nil || id.Version() != 7 {
				t.Errorf("task_id %v is not a UUIDv7", v["task_id"])
			}
			if v["input"] != tc.wantInput {
				t.Errorf("input = %#v, want %#v", v["input"], tc.wantInput)
			}
			var task protocol.Task
			res.decode(t, &task)
			if got := compactJSON(t, task.AdditionalInput); got != tc.wantAddl {
				t.Errorf("additional_input = %s, want %s", got, tc.wantAddl)
			}
			if arts, ok := v["artifacts"].([]any); !ok || len(arts) != 0 {
				t.Errorf("artifacts = %#v, want []", v["artifacts"])
			}
		})
	}
}

func TestMalformedBodiesAre422WithReason(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`)
	for _, path := range []string{"/ap/v1/agent/tasks", "/ap/v1/agent/tasks/" + task.TaskID + "/steps"} {
		for _, tc := range []struct{ body, reason string }{
			{`{`, "malformed JSON"},
			{`{"input": "a",}`, "malformed JSON"},
			{`[]`, "must be a JSON object"},
			{`"just a string"`, "must be a JSON object"},
			{`42`, "must be a JSON object"},
			{`{"input": 5}`, `"input" must be a string`},
			{`{"input": ["a"]}`, `"input" must be a string`},
			{`{"input": {"a": 1}}`, `"input" must be a string`},
			{`{"additional_input": "x"}`, "additional_input must be a JSON object"},
			{`{"additional_input": [1, 2]}`, "additional_input must be a JSON object"},
			{`{"additional_input": 3}`, "additional_input must be a JSON object"},
			{`{"input": "a"} {"input": "b"}`, "data after the JSON value"},
			{"{\"input\": \"\xff\"}", "invalid UTF-8 at byte 11"},
			{"{\"additional_input\": {\"k\": \"a\xffb\"}}", "invalid UTF-8 at byte 29"},
			{`{"additional_input": {"k": "\ud800"}}`, "lone surrogate"},
			{`{"additional_input": ` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `}`, "nested deeper than 100 levels"},
		} {
			t.Run(path+" "+tc.body, func(t *testing.T) {
				ts.do("POST", path, "application/json", tc.body).wantError(t, 422, tc.reason)
			})
		}
	}
	// Nothing was created by the refused requests.
	var list protocol.TaskList
	ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200).decode(t, &list)
	if list.Pagination.TotalItems != 1 {
		t.Errorf("total tasks = %d, want 1", list.Pagination.TotalItems)
	}
}

func TestOversizedJSONBodyIs413(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"), func(c *runConfig) { c.maxBody = 1024 })
	body := `{"input":"` + strings.Repeat("a", 2000) + `"}`
	ts.do("POST", "/ap/v1/agent/tasks", "application/json", body).wantError(t, 413, "larger than 1024 bytes")
}

func TestUnknownAndMalformedIDsAre404(t *testing.T) {
	ts := serve(t, examplePlugin(t, "washington-go"))
	a := ts.createTask(`{"input":"Write the word 'Washington' to a .txt file"}`)
	b := ts.createTask(`{}`)
	stepA := ts.step(a.TaskID, `{"input":"washington"}`)
	if len(stepA.Artifacts) != 1 {
		t.Fatalf("step artifacts = %v", stepA.Artifacts)
	}
	artA := stepA.Artifacts[0].ArtifactID
	unknown := uuid.NewString()
	malformed := []string{"nope", "123", "1d5a533e-3904-4401-8a07", strings.Repeat("a", 300),
		"{" + unknown + "}", "urn:uuid:" + unknown, url.PathEscape("../" + a.TaskID)}

	type route struct{ method, path, body string }
	var routes []route
	for _, bad := range append([]string{unknown}, malformed...) {
		routes = append(routes,
			route{"GET", "/ap/v1/agent/tasks/" + bad, ""},
			route{"GET", "/ap/v1/agent/tasks/" + bad + "/steps", ""},
			route{"POST", "/ap/v1/agent/tasks/" + bad + "/steps", `{"input":"x"}`},
			route{"GET", "/ap/v1/agent/tasks/" + bad + "/artifacts", ""},
			route{"GET", "/ap/v1/agent/tasks/" + bad + "/logs", ""},
			route{"GET", "/ap/v1/agent/tasks/" + bad + "/steps/" + stepA.StepID, ""},
			route{"GET", "/ap/v1/agent/tasks/" + bad + "/artifacts/" + artA, ""},
			route{"GET", "/ap/v1/agent/tasks/" + a.TaskID + "/steps/" + bad, ""},
			route{"GET", "/ap/v1/agent/tasks/" + a.TaskID + "/steps/" + bad + "/logs", ""},
			route{"GET", "/ap/v1/agent/tasks/" + a.TaskID + "/artifacts/" + bad, ""},
		)
	}
	// A step or an artifact is reachable only through its own task.
	routes = append(routes,
		route{"GET", "/ap/v1/agent/tasks/" + b.TaskID + "/steps/" + stepA.StepID, ""},
		route{"GET", "/ap/v1/agent/tasks/" + b.TaskID + "/steps/" + stepA.StepID + "/logs", ""},
		route{"GET", "/ap/v1/agent/tasks/" + b.TaskID + "/artifacts/" + artA, ""},
		// An artifact id is not a step id and the other way round.
		route{"GET", "/ap/v1/agent/tasks/" + a.TaskID + "/steps/" + artA, ""},
		route{"GET", "/ap/v1/agent/tasks/" + a.TaskID + "/artifacts/" + stepA.StepID, ""},
	)
	for _, r := range routes {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			want := "not found"
			if strings.Contains(r.path, "%2F") {
				want = "" // an encoded slash makes it another route, which does not exist either
			}
			ts.do(r.method, r.path, "application/json", r.body).wantError(t, 404, want)
		})
	}
	t.Run("upload to unknown task", func(t *testing.T) {
		ts.upload(unknown, part{name: "file", fileName: "a.txt", value: "x"}).wantError(t, 404, "not found")
	})
	t.Run("ids are case-insensitive", func(t *testing.T) {
		ts.do("GET", "/ap/v1/agent/tasks/"+strings.ToUpper(a.TaskID), "", "").want(t, 200)
	})
}

func TestUnknownRoutesAre404AndWrongMethods405(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`)
	for _, path := range []string{"/", "/ap/v1", "/ap/v1/agent", "/ap/v2/agent/tasks", "/ap/v1/agent/task",
		"/ap/v1/agent/tasks/" + task.TaskID + "/stepz", "/ap/v1/agent/tasks/" + task.TaskID + "/steps/a/b/c"} {
		ts.do("GET", path, "", "").wantError(t, 404, "no such route")
	}
	for _, tc := range []struct{ method, path, allow string }{
		{"DELETE", "/ap/v1/agent/tasks", "GET"},
		{"PUT", "/ap/v1/agent/tasks/" + task.TaskID, "GET"},
		{"PATCH", "/ap/v1/agent/tasks/" + task.TaskID + "/steps", "POST"},
		{"DELETE", "/ap/v1/agent/tasks/" + task.TaskID + "/artifacts", "POST"},
		{"POST", "/ap/v1/agent/tasks/" + task.TaskID + "/artifacts/" + uuid.NewString(), "GET"},
	} {
		res := ts.do(tc.method, tc.path, "", "")
		res.wantError(t, 405, "not allowed")
		if !strings.Contains(res.header.Get("Allow"), tc.allow) {
			t.Errorf("%s %s: Allow = %q, want it to contain %s", tc.method, tc.path, res.header.Get("Allow"), tc.allow)
		}
	}
}

func TestPagination(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	var ids []string
	for i := range 25 {
		ids = append(ids, ts.createTask(fmt.Sprintf(`{"input":"task %d"}`, i)).TaskID)
	}
	list := func(query string) protocol.TaskList {
		t.Helper()
		var l protocol.TaskList
		ts.do("GET", "/ap/v1/agent/tasks"+query, "", "").want(t, 200).decode(t, &l)
		return l
	}
	pageIDs := func(l protocol.TaskList) []string {
		var out []string
		for _, task := range l.Tasks {
			out = append(out, task.TaskID)
		}
		return out
	}
	for _, tc := range []struct {
		query      string
		want       protocol.Pagination
		start, end int // the slice of ids the page holds
	}{
		{"", protocol.Pagination{TotalItems: 25, TotalPages: 3, CurrentPage: 1, PageSize: 10}, 0, 10},
		{"?current_page=3", protocol.Pagination{TotalItems: 25, TotalPages: 3, CurrentPage: 3, PageSize: 10}, 20, 25},
		{"?current_page=4", protocol.Pagination{TotalItems: 25, TotalPages: 3, CurrentPage: 4, PageSize: 10}, 0, 0},
		{"?current_page=2147483647", protocol.Pagination{TotalItems: 25, TotalPages: 3, CurrentPage: 2147483647, PageSize: 10}, 0, 0},
		{"?page_size=1&current_page=1", protocol.Pagination{TotalItems: 25, TotalPages: 25, CurrentPage: 1, PageSize: 1}, 0, 1},
		{"?page_size=1&current_page=25", protocol.Pagination{TotalItems: 25, TotalPages: 25, CurrentPage: 25, PageSize: 1}, 24, 25},
		{"?page_size=7&current_page=4", protocol.Pagination{TotalItems: 25, TotalPages: 4, CurrentPage: 4, PageSize: 7}, 21, 25},
		{"?page_size=25", protocol.Pagination{TotalItems: 25, TotalPages: 1, CurrentPage: 1, PageSize: 25}, 0, 25},
		{"?page_size=1000", protocol.Pagination{TotalItems: 25, TotalPages: 1, CurrentPage: 1, PageSize: protocol.MaxPageSize}, 0, 25},
		{"?page_size=3&unknown=1", protocol.Pagination{TotalItems: 25, TotalPages: 9, CurrentPage: 1, PageSize: 3}, 0, 3},
	} {
		t.Run(tc.query, func(t *testing.T) {
			l := list(tc.query)
			if l.Pagination != tc.want {
				t.Errorf("pagination = %+v, want %+v", l.Pagination, tc.want)
			}
			if got, want := strings.Join(pageIDs(l), ","), strings.Join(ids[tc.start:tc.end], ","); got != want {
				t.Errorf("page holds %v, want ids[%d:%d] in creation order", pageIDs(l), tc.start, tc.end)
			}
			if l.Tasks == nil {
				t.Error("tasks is null, want a list")
			}
		})
	}
	t.Run("empty page is an empty list, not null", func(t *testing.T) {
		res := ts.do("GET", "/ap/v1/agent/tasks?current_page=9", "", "").want(t, 200)
		if !bytes.Contains(res.body, []byte(`"tasks":[]`)) {
			t.Errorf("body %s", res.body)
		}
	})
	for _, bad := range []string{"current_page=0", "current_page=-1", "current_page=abc", "current_page=1.5",
		"current_page=", "current_page=2147483648", "current_page=99999999999999999999",
		"page_size=0", "page_size=-5", "page_size=x", "page_size=1e3"} {
		t.Run("bad "+bad, func(t *testing.T) {
			for _, path := range []string{"/ap/v1/agent/tasks", "/ap/v1/agent/tasks/" + ids[0] + "/steps",
				"/ap/v1/agent/tasks/" + ids[0] + "/artifacts"} {
				ts.do("GET", path+"?"+bad, "", "").wantError(t, 400, strings.Split(bad, "=")[0])
			}
		})
	}
}

func TestStepsAndArtifactsListsPaginateInCreationOrder(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`)
	var stepIDs, artIDs []string
	for i := range 12 {
		stepIDs = append(stepIDs, ts.step(task.TaskID, fmt.Sprintf(`{"input":"step %d"}`, i)).StepID)
		var a protocol.Artifact
		ts.upload(task.TaskID, part{name: "file", fileName: fmt.Sprintf("f%d.txt", i), value: "x"}).want(t, 200).decode(t, &a)
		artIDs = append(artIDs, a.ArtifactID)
	}
	var steps protocol.StepList
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps?page_size=5&current_page=3", "", "").want(t, 200).decode(t, &steps)
	if want := (protocol.Pagination{TotalItems: 12, TotalPages: 3, CurrentPage: 3, PageSize: 5}); steps.Pagination != want {
		t.Errorf("steps pagination = %+v, want %+v", steps.Pagination, want)
	}
	if len(steps.Steps) != 2 || steps.Steps[0].StepID != stepIDs[10] || steps.Steps[1].StepID != stepIDs[11] {
		t.Errorf("last page of steps = %+v, want steps 10 and 11", steps.Steps)
	}
	var arts protocol.ArtifactList
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts?page_size=5&current_page=2", "", "").want(t, 200).decode(t, &arts)
	if want := (protocol.Pagination{TotalItems: 12, TotalPages: 3, CurrentPage: 2, PageSize: 5}); arts.Pagination != want {
		t.Errorf("artifacts pagination = %+v, want %+v", arts.Pagination, want)
	}
	for i, a := range arts.Artifacts {
		if a.ArtifactID != artIDs[5+i] {
			t.Errorf("artifact %d = %s, want %s", i, a.ArtifactID, artIDs[5+i])
		}
	}
	var empty protocol.StepList
	other := ts.createTask(`{}`)
	res := ts.do("GET", "/ap/v1/agent/tasks/"+other.TaskID+"/steps", "", "").want(t, 200)
	res.decode(t, &empty)
	if empty.Pagination.TotalItems != 0 || empty.Pagination.TotalPages != 0 || !bytes.Contains(res.body, []byte(`"steps":[]`)) {
		t.Errorf("steps of a new task = %s", res.body)
	}
}

func TestExecuteStepEchoesAndKeepsServingAfterLastStep(t *testing.T) {
	ts := serve(t, examplePlugin(t, "washington-go"))
	task := ts.createTask(`{"input":"Write the word 'Washington' to a .txt file","additional_input":{"test_run_id":"123"}}`)
	st := ts.step(task.TaskID, `{"input":"Write the word 'Washington' to a .txt file"}`)
	if st.Status != protocol.StatusCompleted || !st.IsLast || st.TaskID != task.TaskID {
		t.Fatalf("step = %+v", st)
	}
	if len(st.Artifacts) != 1 || st.Artifacts[0].FileName != "output.txt" || !st.Artifacts[0].AgentCreated {
		t.Fatalf("artifacts = %+v, want output.txt created by the agent", st.Artifacts)
	}
	dl := ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts/"+st.Artifacts[0].ArtifactID, "", "").want(t, 200)
	if string(dl.body) != "Washington" {
		t.Errorf("output.txt = %q", dl.body)
	}
	// The official suite executes one more step after the last one.
	after := ts.step(task.TaskID, `{"input":"y"}`)
	if after.StepID == st.StepID || after.Status != protocol.StatusCompleted {
		t.Errorf("step after the last = %+v", after)
	}
	var got protocol.Task
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID, "", "").want(t, 200).decode(t, &got)
	if len(got.Artifacts) != 1 || got.Artifacts[0].ArtifactID != st.Artifacts[0].ArtifactID {
		t.Errorf("task artifacts = %+v, want the step's artifact", got.Artifacts)
	}
	var gotStep protocol.Step
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID, "", "").want(t, 200).decode(t, &gotStep)
	if gotStep.Output == nil || *gotStep.Output != *st.Output || len(gotStep.Artifacts) != 1 {
		t.Errorf("GET step = %+v, want what execute returned", gotStep)
	}
	var logs struct{ Logs []protocol.LogRecord }
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID+"/logs", "", "").want(t, 200).decode(t, &logs)
	if len(logs.Logs) != 1 || logs.Logs[0].Message != "wrote output.txt" || logs.Logs[0].Level != "info" {
		t.Errorf("logs = %+v", logs.Logs)
	}
}

func TestStepWithoutBodyRunsWithNullInput(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`)
	res := ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "", "").want(t, 200)
	v := res.json(t)
	if v["input"] != nil || v["output"] != nil || v["status"] != "completed" {
		t.Errorf("step = %s", res.body)
	}
	for _, field := range []string{"task_id", "step_id", "name", "status", "input", "additional_input",
		"output", "additional_output", "artifacts", "is_last"} {
		if _, ok := v[field]; !ok {
			t.Errorf("step has no %q field: %s", field, res.body)
		}
	}
}

func TestUploadAndDownloadRoundTrip(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`)
	for _, tc := range []struct {
		name         string
		parts        []part
		wantName     string
		wantRelative string
	}{
		{"file only", []part{{name: "file", fileName: "a.txt", value: "alpha"}}, "a.txt", ""},
		{"relative_path after file", []part{{name: "file", fileName: "b.txt", value: "beta"}, {name: "relative_path", value: "docs/notes/"}}, "b.txt", "docs/notes"},
		{"relative_path before file", []part{{name: "relative_path", value: "./src//code"}, {name: "file", fileName: "c.py", value: "print(1)"}}, "c.py", "src/code"},
		{"relative_path dot", []part{{name: "relative_path", value: "."}, {name: "file", fileName: "d.txt", value: "delta"}}, "d.txt", ""},
		{"other fields ignored", []part{{name: "note", value: "ignored"}, {name: "file", fileName: "e.txt", value: "eps"}}, "e.txt", ""},
		{"client directory dropped from file name", []part{{name: "file", fileName: "../../../etc/passwd", value: "p"}}, "passwd", ""},
		{"windows client path", []part{{name: "file", header: `form-data; name="file"; filename="C:\\Users\\me\\report.txt"`, value: "r"}}, "report.txt", ""},
		{"empty file", []part{{name: "file", fileName: "empty.bin", value: ""}}, "empty.bin", ""},
		{"non-ASCII name", []part{{name: "file", fileName: "résumé 日本語.txt", value: "unicode"}}, "résumé 日本語.txt", ""},
		{"RFC 5987 name", []part{{name: "file", header: `form-data; name="file"; filename*=UTF-8''%E2%82%AC%20rates.txt`, value: "eur"}}, "€ rates.txt", ""},
		{"unicode look-alike dots stay a name", []part{{name: "relative_path", value: "\uff0e\uff0e/x"}, {name: "file", fileName: "\u2024\u2024", value: "l"}}, "\u2024\u2024", "\uff0e\uff0e/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want string
			for _, p := range tc.parts {
				if p.name == "file" {
					want = p.value
				}
			}
			res := ts.upload(task.TaskID, tc.parts...).want(t, 200)
			var a protocol.Artifact
			res.decode(t, &a)
			if a.FileName != tc.wantName || a.RelativePath != tc.wantRelative || a.AgentCreated {
				t.Fatalf("artifact = %+v, want name %q in %q, not agent-created", a, tc.wantName, tc.wantRelative)
			}
			dl := ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts/"+a.ArtifactID, "", "").want(t, 200)
			if string(dl.body) != want {
				t.Errorf("downloaded %q, want %q", dl.body, want)
			}
			if ct := dl.header.Get("Content-Type"); ct != "application/octet-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			_, params, err := mime.ParseMediaType(dl.header.Get("Content-Disposition"))
			if err != nil || params["filename"] != tc.wantName {
				t.Errorf("Content-Disposition %q parses to %v (%v), want filename %q",
					dl.header.Get("Content-Disposition"), params, err, tc.wantName)
			}
			if !strings.HasPrefix(dl.header.Get("Content-Disposition"), "attachment;") {
				t.Errorf("Content-Disposition %q is not an attachment", dl.header.Get("Content-Disposition"))
			}
		})
	}
	var got protocol.Task
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID, "", "").want(t, 200).decode(t, &got)
	if len(got.Artifacts) != 11 {
		t.Errorf("task lists %d artifacts, want 11", len(got.Artifacts))
	}
}

func TestUploadRefusesBadNamesAndPathsWithoutWritingAnything(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`)
	file := part{name: "file", fileName: "ok.txt", value: "x"}
	for _, tc := range []struct {
		name  string
		parts []part
		want  string
	}{
		{"parent traversal", []part{{name: "relative_path", value: "../outside"}, file}, "leaves the task's workspace"},
		{"deep traversal", []part{file, {name: "relative_path", value: "a/../../../../etc"}}, "leaves the task's workspace"},
		{"traversal after clean", []part{{name: "relative_path", value: "a/b/../../.."}, file}, "leaves the task's workspace"},
		{"absolute", []part{{name: "relative_path", value: "/etc/cron.d"}, file}, "absolute"},
		{"backslash", []part{{name: "relative_path", value: `..\..\windows`}, file}, "backslash"},
		{"NUL", []part{{name: "relative_path", value: "a\x00b"}, file}, "NUL"},
		{"control character", []part{{name: "relative_path", value: "a\nb"}, file}, "control character"},
		{"invalid UTF-8", []part{{name: "relative_path", value: "a\xffb"}, file}, "UTF-8"},
		{"very long path", []part{{name: "relative_path", value: strings.Repeat("abcdefgh/", 200)}, file}, "longer than"},
		{"very long name in path", []part{{name: "relative_path", value: strings.Repeat("n", 300)}, file}, "longer than 255"},
		{"too deep", []part{{name: "relative_path", value: strings.Repeat("d/", 40)}, file}, "deeper than"},
		{"file name ..", []part{{name: "file", fileName: "..", value: "x"}}, "not a usable name"},
		{"file name empty", []part{{name: "file", header: `form-data; name="file"`, value: "x"}}, "not a usable name"},
		{"file name ends in slash", []part{{name: "file", fileName: "dir/", value: "x"}}, "not a usable name"},
		{"file name very long", []part{{name: "file", fileName: strings.Repeat("f", 300), value: "x"}}, "longer than 255"},
		{"no file part", []part{{name: "relative_path", value: "a"}}, `no "file" part`},
		{"two file parts", []part{file, file}, `more than one "file"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.upload(task.TaskID, tc.parts...).wantError(t, 422, tc.want)
		})
	}
	t.Run("not multipart", func(t *testing.T) {
		ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", "application/json", `{"file":"x"}`).wantError(t, 422, "multipart/form-data")
	})
	t.Run("truncated multipart", func(t *testing.T) {
		ct, body := multipartBody(t, part{name: "file", fileName: "cut.txt", value: strings.Repeat("z", 10000)})
		doRequest(t, ts.URL, "POST", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", ct,
			bytes.NewReader(body.Bytes()[:body.Len()/2])).wantError(t, 422, "cut short")
	})
	var list protocol.ArtifactList
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", "", "").want(t, 200).decode(t, &list)
	if len(list.Artifacts) != 0 {
		t.Errorf("refused uploads left artifacts: %+v", list.Artifacts)
	}
	assertNoStrayFiles(t, ts.cfg.dataDir)
}

// assertNoStrayFiles checks that staging is empty and that nothing was
// written outside the data directory's known places.
func assertNoStrayFiles(t *testing.T, dataDir string) {
	t.Helper()
	staged, err := os.ReadDir(filepath.Join(dataDir, "staging"))
	if err != nil {
		t.Fatal(err)
	}
	if len(staged) != 0 {
		t.Errorf("staging holds %d files after refused or failed writes", len(staged))
	}
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"agentrt.db": true, "agentrt.db-wal": true, "agentrt.db-shm": true, "LOCK": true,
		"staging": true, "artifacts": true, "workspaces": true, "cache": true, "keys-changed": true}
	for _, e := range entries {
		if !known[e.Name()] {
			t.Errorf("unexpected %s in the data directory", e.Name())
		}
	}
}

func TestUploadOverLimitIs413AndLeavesNothing(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"), func(c *runConfig) { c.limits.MaxUploadBytes = 1 << 20 })
	task := ts.createTask(`{}`)
	ts.upload(task.TaskID, part{name: "file", fileName: "big.bin", value: strings.Repeat("b", 1<<20+1)}).
		wantError(t, 413, "upload limit")
	ts.upload(task.TaskID, part{name: "file", fileName: "fits.bin", value: strings.Repeat("b", 1<<20)}).want(t, 200)
	// A body far over the limit is cut off at the edge, not read to the end.
	ct, body := multipartBody(t, part{name: "note", value: strings.Repeat("n", 2<<20)}, part{name: "file", fileName: "x", value: "x"})
	doRequest(t, ts.URL, "POST", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", ct, body).wantError(t, 413, "limit")
	assertNoStrayFiles(t, ts.cfg.dataDir)
}

func TestLargeBinaryUploadRoundTripsExactly(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	task := ts.createTask(`{}`)
	data := make([]byte, 20<<20)
	rand.Read(data)
	ct, body := streamUpload("random.bin", data)
	res := doRequest(t, ts.URL, "POST", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", ct, body).want(t, 200)
	var a protocol.Artifact
	res.decode(t, &a)
	req, _ := http.NewRequest("GET", ts.URL+"/ap/v1/agent/tasks/"+task.TaskID+"/artifacts/"+a.ArtifactID, nil)
	dl, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, dl.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(data)) || !bytes.Equal(h.Sum(nil), sha256Of(data)) {
		t.Errorf("downloaded %d bytes with a different digest, want the exact %d bytes", n, len(data))
	}
	if dl.Header.Get("Content-Length") != fmt.Sprint(len(data)) {
		t.Errorf("Content-Length = %q", dl.Header.Get("Content-Length"))
	}
	// Range requests work on the same bytes.
	req.Header.Set("Range", "bytes=1000-1999")
	rr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(rr.Body)
	rr.Body.Close()
	if rr.StatusCode != 206 || !bytes.Equal(part, data[1000:2000]) {
		t.Errorf("range request: status %d, %d bytes", rr.StatusCode, len(part))
	}
}

func sha256Of(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

func compactJSON(t testing.TB, raw []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	return buf.String()
}
