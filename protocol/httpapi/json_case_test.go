package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// What a JavaScript or Python reader of a body sees is what agentrt
// takes, or agentrt refuses the body: a member named as a field in another
// case ("INPUT" beside "input", read as input by encoding/json and as
// another name by every other reader), a body that only Go's white space
// trimming makes JSON, two symbols of one field.

// caseServer is a test server with one task, for the doors that need one.
func caseServer(t *testing.T) (srv *Server, taskID string) {
	t.Helper()
	srv = newTestServer(t, ServerConfig{})
	w := serveRequest(srv, "POST", Prefix+"/agent/tasks", `{"input":"first","title":"kept"}`)
	var task struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &task); err != nil || task.TaskID == "" {
		t.Fatalf("create task: %d %s", w.Code, w.Body)
	}
	return srv, task.TaskID
}

// stored is what the server holds, as its lists and the task show it.
func stored(t *testing.T, srv *Server, taskID string) string {
	t.Helper()
	var out []string
	for _, path := range []string{"/agent/tasks", "/agent/tasks/" + taskID, "/agent/tasks/" + taskID + "/steps"} {
		w := serveRequest(srv, "GET", Prefix+path, "")
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		out = append(out, w.Body.String())
	}
	return strings.Join(out, "\n")
}

func TestClientBodiesNamingAFieldInAnotherCaseAre422NamingItAndStoreNothing(t *testing.T) {
	const rule = `: member names are case-sensitive; did you mean `
	for _, tc := range []struct {
		door, method, path, body, want string
	}{
		{"create task", "POST", "/agent/tasks", `{"input":"a","INPUT":"b"}`, `the request body is not valid: "INPUT"` + rule + `"input"?`},
		{"create task", "POST", "/agent/tasks", `{"INPUT":"b"}`, `"INPUT"` + rule + `"input"?`},
		{"create task", "POST", "/agent/tasks", `{"input":"a","Additional_Input":{"k":1}}`, `"Additional_Input"` + rule + `"additional_input"?`},
		{"create task", "POST", "/agent/tasks", `{"Title":"t"}`, `"Title"` + rule + `"title"?`},
		{"create task", "POST", "/agent/tasks", `{"deſcription":"d"}`, `"de\u017fcription"` + rule + `"description"?`},
		{"create task", "POST", "/agent/tasks", `{"VERSION":"1"}`, `"VERSION"` + rule + `"version"?`},
		{"create task", "POST", "/agent/tasks", `{"ſteps":["a"]}`, `"\u017fteps"` + rule + `"steps"?`},
		{"create task", "POST", "/agent/tasks", `{"steps":["a",{"name":"b","NAME":"c"}]}`, `"NAME" in steps[1]` + rule + `"name"?`},
		{"create task", "POST", "/agent/tasks", `{"steps":[{"name":"b","Input":"c"}]}`, `"Input" in steps[0]` + rule + `"input"?`},
		{"create task", "POST", "/agent/tasks", `{"steps":[{"name":"b","additional_inpuT":{}}]}`, `"additional_inpuT" in steps[0]` + rule + `"additional_input"?`},
		{"execute step", "POST", "/agent/tasks/TASK/steps", `{"input":"a","Input":"b"}`, `"Input"` + rule + `"input"?`},
		{"execute step", "POST", "/agent/tasks/TASK/steps", `{"ADDITIONAL_INPUT":{"k":1}}`, `"ADDITIONAL_INPUT"` + rule + `"additional_input"?`},
		{"update task", "PATCH", "/agent/tasks/TASK", `{"title":"a","TITLE":"b"}`, `"TITLE"` + rule + `"title"?`},
		{"update task", "PATCH", "/agent/tasks/TASK", `{"Description":"b"}`, `"Description"` + rule + `"description"?`},
		{"update task", "PATCH", "/agent/tasks/TASK", `{"verſion":"b"}`, `"ver\u017fion"` + rule + `"version"?`},
		// JSON's white space is four bytes; a no-break space or a line
		// separator before the body makes it no JSON to a strict parser.
		{"create task", "POST", "/agent/tasks", "\u00a0{\"input\":\"a\"}", "malformed JSON at byte 0: expected a value, found U+00A0"},
		{"execute step", "POST", "/agent/tasks/TASK/steps", "{\"input\":\"a\"}\u0085", "data after the JSON value at byte 13"},
		{"update task", "PATCH", "/agent/tasks/TASK", "\u2028{\"title\":\"a\"}", "malformed JSON at byte 0: expected a value, found U+2028"},
	} {
		srv, taskID := caseServer(t)
		before := stored(t, srv, taskID)
		w := serveRequest(srv, tc.method, Prefix+strings.ReplaceAll(tc.path, "TASK", taskID), tc.body)
		var e errorBody
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != http.StatusUnprocessableEntity || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s with %s: %d %s\nwant 422 with %s", tc.door, tc.body, w.Code, w.Body, tc.want)
		}
		if after := stored(t, srv, taskID); after != before {
			t.Errorf("%s with %s: the server holds\n%s\nwhere it held\n%s", tc.door, tc.body, after, before)
		}
	}
}

// Members that name no field are ignored, as before: a client may send
// more than agentrt reads; so are names within values kept as they are.
func TestClientBodiesWithNamesOfNoFieldAreTakenAsBefore(t *testing.T) {
	srv, taskID := caseServer(t)
	w := serveRequest(srv, "POST", Prefix+"/agent/tasks",
		"\t{\"input\":\"a\",\"inputs\":\"b\",\"\\u0074itle\":\"t\",\"additional_input\":{\"INPUT\":1,\"Steps\":[{\"NAME\":2}]},\"steps\":[\"s\"]}\r\n")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"additional_input":{"INPUT":1,"Steps":[{"NAME":2}]}`) ||
		!strings.Contains(w.Body.String(), `"title":"t"`) || strings.Contains(w.Body.String(), "inputs") {
		t.Errorf("create task: %d %s", w.Code, w.Body)
	}
	if w := serveRequest(srv, "PATCH", Prefix+"/agent/tasks/"+taskID, `{"titles":"x"}`); w.Code != http.StatusUnprocessableEntity ||
		!strings.Contains(w.Body.String(), `field \"titles\" cannot be changed`) {
		t.Errorf("a patch of a field that is not the task's: %d %s, want 422 as before", w.Code, w.Body)
	}
}

// Two symbols that normalise to one field are two members to every JSON
// reader; the symbolic form refuses them, naming both, rather than keep one.
func TestASymbolicBodyGivingAFieldTwiceIsRefusedNamingBothSymbols(t *testing.T) {
	for _, tc := range []struct {
		method, path, body, want string
	}{
		{"POST", "/agent/tasks", `{"🏷️":"with","🏷":"without"}`,
			`"🏷" (U+1F3F7) and "🏷️" (U+1F3F7 U+FE0F) both name title: give each field once`},
		{"POST", "/agent/tasks", `{"💬":"a","💬🏽":"b"}`,
			`"💬" (U+1F4AC) and "💬🏽" (U+1F4AC U+1F3FD) both name input: give each field once`},
		{"POST", "/agent/tasks", `{"🚶":[{"🏷️":"a"},{"💬":"a","💬\ufe0f\ufe0f\ufe0f\ufe0f\ufe0f\ufe0f\ufe0f\ufe0f\ufe0f":"b"}]}`,
			"🚶[1]: \"💬\" (U+1F4AC) and \"💬\ufe0f\ufe0f\ufe0f\ufe0f\ufe0f\ufe0f\ufe0f…\" (U+1F4AC U+FE0F U+FE0F U+FE0F U+FE0F U+FE0F U+FE0F U+FE0F …) both name input"},
		{"PATCH", "/agent/tasks/TASK", `{"📖":"a","📖\ufe0f":null}`,
			"\"📖\" (U+1F4D6) and \"📖\ufe0f\" (U+1F4D6 U+FE0F) both name description"},
	} {
		srv, taskID := caseServer(t)
		before := stored(t, srv, taskID)
		r := httptest.NewRequest(tc.method, Prefix+strings.ReplaceAll(tc.path, "TASK", taskID), strings.NewReader(tc.body))
		r.Header.Set("Content-Type", SymbolicType)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		var e errorBody
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != http.StatusUnprocessableEntity || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s %s: %d %s\nwant 422 with %s", tc.method, tc.body, w.Code, w.Body, tc.want)
		}
		if after := stored(t, srv, taskID); after != before {
			t.Errorf("%s %s: the server holds\n%s\nwhere it held\n%s", tc.method, tc.body, after, before)
		}
	}
	srv, _ := caseServer(t)
	r := httptest.NewRequest("POST", Prefix+"/agent/tasks", strings.NewReader(`{"🏷️":"t","💬":"i","🚶":[{"🏷":"s","💬":"x"}]}`))
	r.Header.Set("Content-Type", SymbolicType)
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"title":"t"`) {
		t.Errorf("a symbolic body giving each field once: %d %s", w.Code, w.Body)
	}
}
