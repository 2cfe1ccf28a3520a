package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// Every door where JSON comes in takes I-JSON (RFC 7493) only: no two
// members of an object of one name, no number longer than 100 bytes or
// beyond an IEEE 754 double. Otherwise one client (or plugin) could store
// values that break other clients' reads of every list that shows them: a
// 100,000-digit integer that Python's json module refuses, 1e400 that
// JavaScript reads as Infinity and encoding/json refuses, or {"a":1,"a":2},
// which parsers read as 1, as 2, or refuse.

// ijsonServed checks that every answer showing the server's tasks, steps and
// logs is I-JSON, as protocol.CheckJSON decides it.
func ijsonServed(t *testing.T, ts *testServer) {
	t.Helper()
	get := func(path string) []byte {
		res := ts.do("GET", path, "", "").want(t, 200)
		if err := protocol.CheckJSON(res.body, protocol.MaxJSONDepth*2); err != nil {
			t.Errorf("GET %s is not I-JSON: %v", path, err)
		}
		return res.body
	}
	var tasks protocol.TaskList
	json.Unmarshal(get("/ap/v1/agent/tasks?page_size=100"), &tasks)
	for _, task := range tasks.Tasks {
		base := "/ap/v1/agent/tasks/" + task.TaskID
		get(base)
		get(base + "/logs")
		var steps protocol.StepList
		json.Unmarshal(get(base+"/steps?page_size=100"), &steps)
		for _, st := range steps.Steps {
			get(base + "/steps/" + st.StepID)
		}
	}
}

func TestClientBodiesThatAreNotIJSONAre422NamingTheFieldAndStoreNothing(t *testing.T) {
	ts := serve(t, attackerPlugin(t))
	// What I-JSON allows is taken and served back as it was sent: the largest
	// double, one that underflows, an integer past 2^53, the same name in
	// different objects, names that differ in case.
	const addl = `{"max":1.7976931348623157e308,"tiny":1e-400,"ns":1732000000123456789,"o":{"a":1},"p":{"a":1},"A":1,"a":2}`
	good := ts.createTask(`{"input":"ok","additional_input":` + addl + `}`)
	if string(good.AdditionalInput) != addl {
		t.Errorf("additional_input served as %s, want %s as it was sent", good.AdditionalInput, addl)
	}
	goodStep := ts.step(good.TaskID, `{"input":"ok","additional_input":`+addl+`}`)

	huge := strings.Repeat("7", 100000)
	for _, tc := range []struct{ name, body, want string }{
		{"1e400", `{"input":"x","additional_input":{"a":{"b":[0,1e400]}}}`, "number out of range at additional_input.a.b[1]"},
		{"-1.8e308", `{"additional_input":{"t":-1.8e308}}`, "number out of range at additional_input.t"},
		{"an exponent past any integer", `{"additional_input":{"t":1e99999999999}}`, "number out of range at additional_input.t"},
		{"100,000 digits", `{"additional_input":{"n":` + huge + `}}`, "number too long at additional_input.n (byte 25): 100000 bytes"},
		{"401 digits", `{"additional_input":{"n":[0.` + huge[:399] + `]}}`, "number too long at additional_input.n[0]"},
		{"309 digits, past the largest double", `{"additional_input":{"n":` + huge[:309] + `}}`, "number out of range at additional_input.n"},
		{"a duplicate name", `{"additional_input":{"a":1,"a":2}}`, "duplicate member name at additional_input.a"},
		{"a duplicate name, escaped", `{"additional_input":{"k":[{"a":1,"\u0061":2}]}}`, "duplicate member name at additional_input.k[0].a"},
		{"a duplicate field", `{"input":"a","input":"b"}`, "duplicate member name at input"},
		{"a duplicate additional_input", `{"additional_input":{"a":1},"additional_input":{"b":2}}`, "duplicate member name at additional_input"},
		{"a duplicate in an unknown field", `{"input":"x","other":{"z":0,"z":0}}`, "duplicate member name at other.z"},
	} {
		for _, route := range []struct{ name, method, path string }{
			{"create task", "POST", "/ap/v1/agent/tasks"},
			{"execute step", "POST", "/ap/v1/agent/tasks/" + good.TaskID + "/steps"},
		} {
			t.Run(route.name+"/"+tc.name, func(t *testing.T) {
				msg := ts.do(route.method, route.path, "application/json", tc.body).wantError(t, 422, tc.want)
				if strings.Contains(msg, "7777") || len(msg) > 400 {
					t.Errorf("the message echoes the value, or is long: %.500s", msg)
				}
			})
		}
	}
	// The steps a client plans and a metadata patch are read from the same
	// bodies.
	ts.do("POST", "/ap/v1/agent/tasks", "application/json", `{"steps":[{"name":"a","name":"b"}]}`).
		wantError(t, 422, "duplicate member name at steps[0].name")
	ts.do("POST", "/ap/v1/agent/tasks", "application/json", `{"steps":[{"name":"a","additional_input":{"n":1E400}}]}`).
		wantError(t, 422, "number out of range at steps[0].additional_input.n")
	ts.do("PATCH", "/ap/v1/agent/tasks/"+good.TaskID, "application/json", `{"title":"a","title":"b"}`).
		wantError(t, 422, "duplicate member name at title")

	// Nothing refused was stored.
	var tasks protocol.TaskList
	ts.do("GET", "/ap/v1/agent/tasks?page_size=100", "", "").want(t, 200).decode(t, &tasks)
	if len(tasks.Tasks) != 1 || tasks.Tasks[0].TaskID != good.TaskID || tasks.Tasks[0].Title != nil {
		t.Errorf("tasks = %+v, want only the one created with I-JSON, untitled", tasks.Tasks)
	}
	var steps protocol.StepList
	ts.do("GET", "/ap/v1/agent/tasks/"+good.TaskID+"/steps?page_size=100", "", "").want(t, 200).decode(t, &steps)
	if len(steps.Steps) != 1 || steps.Steps[0].StepID != goodStep.StepID {
		t.Errorf("steps = %+v, want only the one executed with I-JSON", steps.Steps)
	}
	ijsonServed(t, ts)
}

// A plugin's result that is not I-JSON is refused by set_result (-1, with
// the rule and where in last_error), and the call fails: 502, recorded on
// the step; a task handler's plan that is not creates no task.
func TestAPluginsResultThatIsNotIJSONFailsTheStep(t *testing.T) {
	ts := serve(t, attackerPlugin(t))
	task := ts.createTask(`{}`).TaskID
	for _, tc := range []struct{ result, want string }{
		{`{"output":"ok","additional_output":{"a":[1,2,1e400]}}`, "number out of range at additional_output.a[2]"},
		{`{"output":"ok","additional_output":{"n":` + strings.Repeat("1", 5000) + `}}`, "number too long at additional_output.n"},
		{`{"output":"ok","additional_output":{"k":{"a":1,"\u0061":2}}}`, "duplicate member name at additional_output.k.a"},
		{`{"output":"a","output":"b"}`, "duplicate member name at output"},
		{`{"output":"ok","is_last":false,"is_last":true}`, "duplicate member name at is_last"},
	} {
		input, _ := json.Marshal("raw " + tc.result)
		res := ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", `{"input":`+string(input)+`}`)
		st := failedStep(t, ts, task, res, 502, tc.want)
		logs := ts.do("GET", "/ap/v1/agent/tasks/"+task+"/steps/"+st.StepID+"/logs", "", "").want(t, 200)
		if !strings.Contains(string(logs.body), "set_result: -1") || !strings.Contains(string(logs.body), tc.want) {
			t.Errorf("set_result of %.60s was not refused with -1 and %q at once: %.500s", tc.result, tc.want, logs.body)
		}
	}
	// The same result, I-JSON, is taken.
	ok, _ := json.Marshal(`raw {"output":"ok","additional_output":{"a":[1,2,1.7976931348623157e308],"b":{"a":1}}}`)
	if st := ts.step(task, `{"input":`+string(ok)+`}`); string(st.AdditionalOutput) != `{"a":[1,2,1.7976931348623157e308],"b":{"a":1}}` {
		t.Errorf("an I-JSON result's additional_output was stored as %s", st.AdditionalOutput)
	}

	plan, _ := json.Marshal(`raw {"steps":[{"name":"s","additional_input":{"k":1,"k":2}}]}`)
	ts.do("POST", "/ap/v1/agent/tasks", "", `{"input":`+string(plan)+`}`).
		wantError(t, 502, "duplicate member name at steps[0].additional_input.k")
	var tasks protocol.TaskList
	ts.do("GET", "/ap/v1/agent/tasks?page_size=100", "", "").want(t, 200).decode(t, &tasks)
	if len(tasks.Tasks) != 1 {
		t.Errorf("a plan that is not I-JSON left tasks: %+v", tasks.Tasks)
	}
	ijsonServed(t, ts)
}

// A manifest that is not I-JSON fails its agent, naming the file and the
// field; so does the plugin's configuration file, at start.
func TestAManifestOrConfigFileThatIsNotIJSONIsRefusedNamingTheField(t *testing.T) {
	dir := t.TempDir()
	plugin := pluginBytes(t, examplePlugin(t, "echo-go"))
	bad := map[string]struct{ manifest, want string }{
		"range":     {`{"limits":{"max_task_steps":1e400}}`, "limits.max_task_steps: number 1e400 is out of range"},
		"long":      {`{"limits":{"memory":0.` + strings.Repeat("6", 500) + `}}`, "limits.memory: number 0.66666666666666666666666666666666666666… is too long: 502 bytes"},
		"duplicate": {`{"settings":{"k":"a","\u006b":"b"}}`, `duplicate field "settings.k"`},
	}
	putFile(t, filepath.Join(dir, "good.wasm"), plugin)
	putFile(t, filepath.Join(dir, "good.json"), []byte(`{"limits":{"max_task_steps":1e3},"settings":{"k":"a","K":"b"}}`))
	for name, tc := range bad {
		putFile(t, filepath.Join(dir, name+".wasm"), plugin)
		putFile(t, filepath.Join(dir, name+".json"), []byte(tc.manifest))
	}
	ts := serveDir(t, dir)
	if info := ts.agentInfo("good"); info == nil || info.State != "ready" {
		t.Fatalf("good: %+v, want ready", info)
	}
	for name, tc := range bad {
		info := ts.agentInfo(name)
		if info == nil || info.State != "failed" || !strings.Contains(info.Error, name+".json") || !strings.Contains(info.Error, tc.want) {
			t.Errorf("%s: %+v, want failed naming %s.json and %q", name, info, name, tc.want)
		}
	}

	config := filepath.Join(t.TempDir(), "config.json")
	for _, tc := range []struct{ file, want string }{
		{`{"greeting":"hi","greeting":"bye"}`, "duplicate member name at greeting"},
		{`{"greeting":"hi","gr\u0065eting":"bye"}`, "duplicate member name at greeting"},
	} {
		if err := os.WriteFile(config, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := parseRunFlags([]string{examplePlugin(t, "echo-go"), "--config-file", config}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), config) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config file %s: %v, want an error naming the file and %q", tc.file, err, tc.want)
		}
	}

	// The egress policy file: a secret or a grant written twice would be
	// read as its last by agentrt and as its first by a reviewer's tool.
	policy := filepath.Join(t.TempDir(), "policy.json")
	for _, tc := range []struct{ file, want string }{
		{`{"agents":{"echo-go":{"http":["https://a.example/"]},"echo-go":{"http":"all"}}}`, "duplicate member name at agents.echo-go"},
		{`{"secrets":{"K":{"value":"aaaaaaaaaa","agents":["*"],"destinations":["https://a.example/"],"destinations":["https://b.example/"]}}}`, "duplicate member name at secrets.K.destinations"},
	} {
		if err := os.WriteFile(policy, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := parseRunFlags([]string{examplePlugin(t, "echo-go"), "--http-policy", policy}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), policy) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("policy file %s: %v, want an error naming the file and %q", tc.file, err, tc.want)
		}
	}
}
