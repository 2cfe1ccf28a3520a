package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// The example matrix: every example, built in every language, is driven
// through the same requests and must give the same responses and
// artifacts, whether its calls start from a snapshot of its initialized
// state or run its initialization. Needs "make plugins" for the TinyGo and
// Rust builds.

var languages = []string{"go", "tinygo", "rust"}

// transcript records a scenario's responses, normalized: ids are numbered
// in order of appearance, times dropped, JSON re-encoded with sorted keys.
type transcript struct {
	t     *testing.T
	ts    *testServer
	ids   map[string]string
	lines []string
}

var (
	uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timePattern = regexp.MustCompile(`"time":"[^"]*"`)
	// Each language's build is its own: a step names the one that ran it.
	buildPattern = regexp.MustCompile(`"build":\{"agent":"[^"]*","sha256":"[0-9a-f]{64}"\}`)
)

func (tr *transcript) normalize(s string) string {
	s = uuidPattern.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := tr.ids[id]; !ok {
			tr.ids[id] = fmt.Sprintf("<id%d>", len(tr.ids)+1)
		}
		return tr.ids[id]
	})
	s = buildPattern.ReplaceAllString(s, `"build":"<build>"`)
	return timePattern.ReplaceAllString(s, `"time":"<t>"`)
}

// do sends a request and records the normalized response; it returns the
// decoded JSON body (nil for a non-JSON one).
func (tr *transcript) do(method, path, contentType, body string) any {
	tr.t.Helper()
	return tr.record(method+" "+path, tr.ts.do(method, path, contentType, body))
}

func (tr *transcript) upload(taskID string, parts ...part) any {
	tr.t.Helper()
	return tr.record("UPLOAD", tr.ts.upload(taskID, parts...))
}

func (tr *transcript) record(what string, res *response) any {
	tr.t.Helper()
	var v any
	body := string(res.body)
	if strings.HasPrefix(res.header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(res.body, &v); err != nil {
			tr.t.Fatalf("%s: %v", what, err)
		}
		b, _ := json.Marshal(v)
		body = string(b)
	}
	tr.lines = append(tr.lines, fmt.Sprintf("%s -> %d %s", tr.normalize(what), res.status, tr.normalize(body)))
	return v
}

// field digs a string out of decoded JSON: field(v, "artifacts", 0, "artifact_id").
func field(v any, path ...any) string {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return ""
			}
			v = a[k]
		}
	}
	s, _ := v.(string)
	return s
}

var scenarios = map[string]func(tr *transcript){
	"echo": func(tr *transcript) {
		task := tr.do("POST", "/ap/v1/agent/tasks", "application/json", `{"input":"hi","additional_input":{"k":1}}`)
		id := field(task, "task_id")
		tr.do("POST", "/ap/v1/agent/tasks/"+id+"/steps", "application/json", `{"input":"héllo \"quoted\" \\ back\nslash\t€ 日本"}`)
		tr.do("POST", "/ap/v1/agent/tasks/"+id+"/steps", "", "")
		tr.do("POST", "/ap/v1/agent/tasks/"+id+"/steps", "application/json", `{"input":"`+strings.Repeat("long ", 2000)+`","additional_input":{"x":[1,2]}}`)
		tr.do("GET", "/ap/v1/agent/tasks/"+id+"/steps", "", "")
	},
	"washington": func(tr *transcript) {
		task := tr.do("POST", "/ap/v1/agent/tasks", "application/json", `{"input":"Write the word 'Washington' to a .txt file"}`)
		id := field(task, "task_id")
		tr.do("POST", "/ap/v1/agent/tasks/"+id+"/steps", "application/json", `{"input":"hello"}`)
		step := tr.do("POST", "/ap/v1/agent/tasks/"+id+"/steps", "application/json", `{"input":"Write the word 'Washington' to a .txt file"}`)
		tr.do("POST", "/ap/v1/agent/tasks/"+id+"/steps", "application/json", `{"input":"y"}`)
		tr.do("GET", "/ap/v1/agent/tasks/"+id, "", "")
		tr.do("GET", "/ap/v1/agent/tasks/"+id+"/artifacts/"+field(step, "artifacts", 0, "artifact_id"), "", "")
		tr.do("GET", "/ap/v1/agent/tasks/"+id+"/steps/"+field(step, "step_id")+"/logs", "", "")
	},
	"planner": func(tr *transcript) {
		task := tr.do("POST", "/ap/v1/agent/tasks", "application/json", `{"input":"the quick brown fox"}`)
		id := field(task, "task_id")
		tr.do("GET", "/ap/v1/agent/tasks/"+id+"/steps", "", "")
		tr.upload(id, part{name: "relative_path", value: "in"},
			part{name: "file", fileName: "story.txt", value: "The cat and the dog.\r\nThe END, the end!\tDog's 2nd life: İstanbul, KELVIN \u212a.\n"})
		tr.upload(id, part{name: "file", fileName: "more.md", value: "# More\nthe cat, again; 42 cats.\n"})
		var report string
		for range 4 {
			step := tr.do("POST", "/ap/v1/agent/tasks/"+id+"/steps", "", "")
			if a := field(step, "artifacts", 0, "artifact_id"); a != "" {
				report = a
			}
			tr.do("GET", "/ap/v1/agent/tasks/"+id+"/steps/"+field(step, "step_id")+"/logs", "", "")
		}
		tr.do("GET", "/ap/v1/agent/tasks/"+id+"/logs", "", "")
		tr.do("GET", "/ap/v1/agent/tasks/"+id+"/artifacts/"+report, "", "")
		tr.do("GET", "/ap/v1/agent/tasks/"+id+"/artifacts", "", "")

		// Without uploads, the task's input is counted.
		task = tr.do("POST", "/ap/v1/agent/tasks", "application/json", `{"input":"to be or not to be"}`)
		id = field(task, "task_id")
		for range 3 {
			tr.do("POST", "/ap/v1/agent/tasks/"+id+"/steps", "", "")
		}
	},
}

// expectations pin what the Go build must answer, so that the matrix does
// not merely check that all languages are equally wrong.
var expectations = map[string][]string{
	"echo": {
		`"output":"héllo \"quoted\" \\ back\nslash\t€ 日本"`,
		`"input":null,"is_last":false,"name":null,"output":null`,
	},
	"washington": {
		`"output":"I only know how to write the word 'Washington' to a .txt file."`,
		`"output":"Wrote 'Washington' to output.txt"`,
		`-> 200 Washington`,
		`"level":"info","message":"wrote output.txt"`,
	},
	"planner": {
		`"name":"count words","output":null,"status":"created"`,
		`"output":"Counted 22 words (15 distinct) in 2 files"`,
		`"additional_output":{"distinct":15,"files":2,"words":22}`,
		`"output":"The most frequent word is 'the' (5 times)"`,
		`"is_last":true,"name":"write report","output":"Wrote report.md"`,
		`"output":"The report is done; nothing left to do."`,
		"Sources: in/story.txt, more.md",
		"| 1 | the | 5 |\n| 2 | cat | 2 |\n| 3 | dog | 2 |\n| 4 | end | 2 |\n| 5 | 2nd | 1 |\n| 6 | 42 | 1 |",
		"| 10 | istanbul | 1 |\n",
		`"message":"counted 22 words in in/story.txt, more.md"`,
		`"message":"planned 3 steps"`,
		`"file_name":"report.md","relative_path":""`,
		`"output":"Counted 6 words (4 distinct) in 1 files"`,
		`"output":"The most frequent word is 'be' (2 times)"`,
	},
}

func TestExampleMatrix(t *testing.T) {
	for _, example := range []string{"echo", "washington", "planner"} {
		t.Run(example, func(t *testing.T) {
			var golden []string
			for _, lang := range languages {
				for _, snapshots := range []bool{true, false} {
					path := map[bool]string{true: "snapshot", false: "initialize"}[snapshots]
					t.Run(lang+"/"+path, func(t *testing.T) {
						ts := serve(t, examplePlugin(t, example+"-"+lang), func(c *runConfig) { c.snapshots = snapshots })
						if got := ts.srv.plugin.Start(); got.Snapshot != snapshots {
							t.Fatalf("the calls start by %s, not by %s", got, path)
						}
						tr := &transcript{t: t, ts: ts, ids: map[string]string{}}
						scenarios[example](tr)
						got := strings.Join(tr.lines, "\n")
						if golden == nil {
							if lang != "go" {
								t.Fatal("no Go transcript to compare with")
							}
							golden = tr.lines
							for _, want := range expectations[example] {
								if !strings.Contains(got, want) {
									t.Errorf("the Go build's transcript lacks %s:\n%s", want, got)
								}
							}
							return
						}
						for i := range max(len(golden), len(tr.lines)) {
							var g, w string
							if i < len(tr.lines) {
								g = tr.lines[i]
							}
							if i < len(golden) {
								w = golden[i]
							}
							if g != w {
								t.Errorf("response %d differs from the Go build's from a snapshot:\n%s: %s\ngo: %s", i, lang+"/"+path, g, w)
							}
						}
					})
				}
			}
		})
	}
}
