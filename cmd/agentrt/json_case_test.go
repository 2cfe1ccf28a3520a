package main

import (
	"encoding/json"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// JSON that different parsers read differently is refused at every door,
// end to end. encoding/json matches a member to a field ignoring case, in
// Unicode ("ſ" is "s"): {"input":"a","INPUT":"b"} is I-JSON, agentrt
// would store input "b", and a JavaScript or Python reader of the same
// body (a proxy, an audit log, the client's own code) reads "a". A body
// behind a no-break space is JSON to Go's trimming only. Two symbols of
// one field in the symbolic form are two members to every reader.

const caseRule = `: member names are case-sensitive; did you mean `

func TestClientBodiesNamingAFieldInAnotherCaseAre422AndStoreNothing(t *testing.T) {
	ts := serve(t, attackerPlugin(t))
	task := ts.createTask(`{"input":"kept","title":"kept"}`)
	first := ts.step(task.TaskID, `{"input":"first"}`)
	for _, tc := range []struct {
		name, method, path, contentType, body, want string
	}{
		{"create task", "POST", "/ap/v1/agent/tasks", "application/json", `{"input":"a","INPUT":"b"}`,
			`the request body is not valid: "INPUT"` + caseRule + `"input"?`},
		{"create task, in Unicode", "POST", "/ap/v1/agent/tasks", "application/json", `{"ſteps":["a"],"input":"x"}`,
			`"\u017fteps"` + caseRule + `"steps"?`},
		{"create task, metadata", "POST", "/ap/v1/agent/tasks", "application/json", `{"Title":"t"}`, `"Title"` + caseRule + `"title"?`},
		{"create task, a planned step", "POST", "/ap/v1/agent/tasks", "application/json", `{"steps":["a",{"name":"b","NAME":"c"}]}`,
			`"NAME" in steps[1]` + caseRule + `"name"?`},
		{"execute step", "POST", "/ap/v1/agent/tasks/" + task.TaskID + "/steps", "application/json", `{"input":"a","Input":"b"}`,
			`"Input"` + caseRule + `"input"?`},
		{"execute step, additional_input", "POST", "/ap/v1/agent/tasks/" + task.TaskID + "/steps", "application/json", `{"ADDITIONAL_INPUT":{}}`,
			`"ADDITIONAL_INPUT"` + caseRule + `"additional_input"?`},
		{"update task", "PATCH", "/ap/v1/agent/tasks/" + task.TaskID, "application/json", `{"title":"a","TITLE":"b"}`,
			`"TITLE"` + caseRule + `"title"?`},
		{"create task behind a no-break space", "POST", "/ap/v1/agent/tasks", "application/json", "\u00a0{\"input\":\"a\"}",
			"expected a value, found U+00A0"},
		{"execute step before a next line", "POST", "/ap/v1/agent/tasks/" + task.TaskID + "/steps", "application/json", "{}\u0085",
			"data after the JSON value at byte 2"},
		{"symbolic create task, a field twice", "POST", "/ap/v1/agent/tasks", "application/vnd.agentrt.symbolic+json",
			`{"🏷️":"with","🏷":"without"}`, `"🏷" (U+1F3F7) and "🏷️" (U+1F3F7 U+FE0F) both name title: give each field once`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.do(tc.method, tc.path, tc.contentType, tc.body).wantError(t, 422, tc.want)
		})
	}
	// Nothing refused was stored: one task, untouched, and its one step.
	var tasks protocol.TaskList
	ts.do("GET", "/ap/v1/agent/tasks?page_size=100", "", "").want(t, 200).decode(t, &tasks)
	if len(tasks.Tasks) != 1 || *tasks.Tasks[0].Input != "kept" || *tasks.Tasks[0].Title != "kept" {
		t.Errorf("tasks = %+v, want only the first, as it was created", tasks.Tasks)
	}
	var steps protocol.StepList
	ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "", "").want(t, 200).decode(t, &steps)
	if len(steps.Steps) != 1 || steps.Steps[0].StepID != first.StepID {
		t.Errorf("steps = %+v, want only the first", steps.Steps)
	}
	// Members of no field are still ignored, and names in additional_input
	// are the client's.
	got := ts.createTask(`{"input":"x","inputs":"y","additional_input":{"INPUT":1}}`)
	if *got.Input != "x" || string(got.AdditionalInput) != `{"INPUT":1}` {
		t.Errorf("a body with a member of no field: %+v", got)
	}
}

// A plugin's result naming a field in another case fails the call as any
// result that is not valid does: 502, recorded on the step with the member
// and the field it would have been read as; a plan so named creates no task.
func TestAPluginsResultNamingAFieldInAnotherCaseFailsTheStep(t *testing.T) {
	ts := serve(t, attackerPlugin(t))
	task := ts.createTask(`{}`).TaskID
	for _, tc := range []struct{ result, want string }{
		{`{"output":"a","OUTPUT":"b"}`, `its result is not valid: "OUTPUT"` + caseRule + `"output"?`},
		{`{"Output":"b","is_last":true}`, `"Output"` + caseRule + `"output"?`},
		{`{"output":"ok","iſ_last":true}`, `"i\u017f_last"` + caseRule + `"is_last"?`},
		{`{"output":"ok","Error":"boom"}`, `"Error"` + caseRule + `"error"?`},
	} {
		input, _ := json.Marshal("raw " + tc.result)
		res := ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", `{"input":`+string(input)+`}`)
		failedStep(t, ts, task, res, 502, tc.want)
	}
	// A name of no field is ignored, as the ABI says.
	ok, _ := json.Marshal(`raw {"output":"ok","outputs":"no","additional_output":{"OUTPUT":1}}`)
	if st := ts.step(task, `{"input":`+string(ok)+`}`); *st.Output != "ok" || string(st.AdditionalOutput) != `{"OUTPUT":1}` {
		t.Errorf("a result with a member of no field: output %q, additional_output %s", *st.Output, st.AdditionalOutput)
	}

	for _, tc := range []struct{ plan, want string }{
		{`{"Steps":[{"name":"s"}]}`, `"Steps"` + caseRule + `"steps"?`},
		{`{"steps":[{"name":"a"},{"NAME":"s"}]}`, `"NAME" in steps[1]` + caseRule + `"name"?`},
	} {
		plan, _ := json.Marshal("raw " + tc.plan)
		ts.do("POST", "/ap/v1/agent/tasks", "", `{"input":`+string(plan)+`}`).wantError(t, 502, tc.want)
	}
	var tasks protocol.TaskList
	ts.do("GET", "/ap/v1/agent/tasks?page_size=100", "", "").want(t, 200).decode(t, &tasks)
	if len(tasks.Tasks) != 1 {
		t.Errorf("a plan naming a field in another case left tasks: %+v", tasks.Tasks)
	}
}
