package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// countingReader counts what is read of a body.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// Go's multipart reader lets one part's header reach 10 MiB, parsed in
// memory, part after part. An upload's part header may take
// maxPartHeaderBytes: past it the upload is refused (413) having read
// little more than that of the body.
func TestAnUploadPartsHeaderIsBounded(t *testing.T) {
	srv := newTestServer(t, ServerConfig{})
	w := serveRequest(srv, "POST", "/ap/v1/agent/tasks", `{}`)
	var task struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &task); err != nil {
		t.Fatalf("create task: %d %s", w.Code, w.Body)
	}
	const boundary = "b0undary"
	upload := func(header string) (*httptest.ResponseRecorder, int) {
		body := "--" + boundary + "\r\n" +
			`Content-Disposition: form-data; name="file"; filename="a.txt"` + "\r\n" +
			header + "\r\n" +
			"data\r\n--" + boundary + "--\r\n"
		c := &countingReader{r: strings.NewReader(body)}
		r := httptest.NewRequest("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", c)
		r.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w, c.n
	}
	// What a client sends: its header is taken.
	if w, _ := upload("Content-Type: text/plain\r\n"); w.Code != http.StatusOK {
		t.Fatalf("an upload with an ordinary part header: %d %s", w.Code, w.Body)
	}
	for name, header := range map[string]string{
		"one long line":   "X-Pad: " + strings.Repeat("a", 1<<20) + "\r\n",
		"many lines":      strings.Repeat("X-Pad: a\r\n", 100000),
		"a long filename": `Content-Type: text/plain; name="` + strings.Repeat("n", 1<<20) + `"` + "\r\n",
	} {
		w, read := upload(header)
		if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), fmt.Sprintf("header larger than %d bytes", maxPartHeaderBytes)) {
			t.Errorf("%s: a part header of %d bytes: %d %s; want 413", name, len(header), w.Code, w.Body)
		}
		if most := maxPartHeaderBytes + 2*multipartReadAhead; read > most {
			t.Errorf("%s: %d bytes of the body were read to refuse it, over %d", name, read, most)
		}
	}
}
