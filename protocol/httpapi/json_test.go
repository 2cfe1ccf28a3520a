package httpapi

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// Answers were written with json.Marshal, which escapes <, > and & for
// HTML in 6 bytes each: a task of 10,000 artifacts named "<" answered 77.6
// MB where its names took 2.6 MB. Every answer now takes its text's bytes
// (twice them at most: a quote is \", U+2028 \u2028), and stays JSON
// that strict parsers read back.
func TestAnswersAreNotEscapedForHTML(t *testing.T) {
	srv := newTestServer(t, ServerConfig{})
	w := serveRequest(srv, "POST", "/ap/v1/agent/tasks", `{"input":"<b>&amp;</b>"}`)
	var task struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &task); err != nil {
		t.Fatalf("create task: %d %s", w.Code, w.Body)
	}
	if !strings.Contains(w.Body.String(), `"input":"<b>&amp;</b>"`) {
		t.Errorf("the task is answered as %s", w.Body)
	}
	// The longest names, of the character HTML escaping made 6 bytes.
	name := strings.Repeat("<", protocol.MaxNameBytes)
	dir := strings.Join([]string{name, name, name, strings.Repeat("&", protocol.MaxPathBytes-3*protocol.MaxNameBytes-4)}, "/")
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	mw.WriteField("relative_path", dir)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write([]byte("x"))
	mw.Close()
	r := httptest.NewRequest("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", &form)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	w = httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("upload: %d %s", w.Code, w.Body)
	}
	// An artifact: its id, its names and about 130 bytes of framing.
	perArtifact := 36 + len(name) + len(dir) + 140
	for path, most := range map[string]int{
		"/artifacts": perArtifact + 100, // and the pagination
		"":           perArtifact + 150, // and the task's own fields
	} {
		w := serveRequest(srv, "GET", "/ap/v1/agent/tasks/"+task.TaskID+path, "")
		body := w.Body.Bytes()
		if w.Code != http.StatusOK || !json.Valid(body) || !bytes.Contains(body, []byte(`"file_name":"`+name+`"`)) {
			t.Errorf("GET task%s: %d %.200s", path, w.Code, body)
		}
		if len(body) > most {
			t.Errorf("GET task%s answers %d bytes for an artifact whose names take %d: over %d", path, len(body), len(name)+len(dir), most)
		}
	}
	// A URI artifact adds its URI, which needs no escaping.
	uri := "https://example.com/" + strings.Repeat("%26", (protocol.MaxURIBytes-20)/3)
	form.Reset()
	mw = multipart.NewWriter(&form)
	mw.WriteField("relative_path", dir)
	mw.WriteField("file_name", name)
	mw.WriteField("uri", uri)
	mw.Close()
	r = httptest.NewRequest("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", &form)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	w = httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("upload a URI: %d %s", w.Code, w.Body)
	}
	w = serveRequest(srv, "GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts?page_size=1&current_page=2", "")
	if most := perArtifact + len(uri) + 100; w.Code != http.StatusOK || w.Body.Len() > most || !strings.Contains(w.Body.String(), `"uri":"`+uri+`"`) {
		t.Errorf("GET a URI artifact: %d, %d bytes for an artifact whose names and URI take %d: over %d", w.Code, w.Body.Len(), len(name)+len(dir)+len(uri), most)
	}
	// What encoding/json escapes for JavaScript it still escapes: the
	// answer is JSON every parser reads as the same text.
	rec := httptest.NewRecorder()
	(&Server{}).writeJSON(rec, http.StatusOK, map[string]string{"s": "<>&\u2028\u2029\"\\\x01"})
	if got, want := rec.Body.String(), `{"s":"<>&\u2028\u2029\"\\\u0001"}`+"\n"; got != want {
		t.Errorf("writeJSON writes %q, want %q", got, want)
	}
}
