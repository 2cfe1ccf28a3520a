package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// request is a request a check sends.
type request struct {
	method string
	// path is under the API root ("/agent/tasks"), escaped, with any query.
	path        string
	contentType string
	body        []byte
	header      http.Header
	// describe, when set, stands for the body in reports (a multipart
	// upload, whose raw bytes would say little).
	describe string
}

func get(path string) *request { return &request{method: "GET", path: path} }

// postJSON is a POST with a JSON body.
func postJSON(path, body string) *request {
	return &request{method: "POST", path: path, contentType: "application/json", body: []byte(body)}
}

// withJSONBody sends body as a JSON body (a GET as the official suite
// sends them).
func (r *request) withJSONBody(body string) *request {
	r.contentType, r.body = "application/json", []byte(body)
	return r
}

func (r *request) withHeader(key, value string) *request {
	if r.header == nil {
		r.header = http.Header{}
	}
	r.header.Set(key, value)
	return r
}

// taskPath is the path of a task, or of what follows it (rest).
func taskPath(taskID string, rest ...string) string {
	p := "/agent/tasks/" + url.PathEscape(taskID)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// upload is a multipart upload of an artifact.
type upload struct {
	fileName string
	data     []byte
	// relativePath is sent as the relative_path field when set.
	relativePath *string
	// noFile leaves the "file" part out.
	noFile bool
}

// request builds the upload to the task, a multipart/form-data body with a
// "file" part and an optional "relative_path" field, as Go's
// mime/multipart writes them (a quote or a backslash in the file name
// escaped with a backslash).
func (u upload) request(taskID string) *request {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	var desc []string
	if !u.noFile {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, quoteEscaper.Replace(u.fileName)))
		h.Set("Content-Type", "application/octet-stream")
		part, _ := w.CreatePart(h) // writes to a bytes.Buffer: no error
		part.Write(u.data)
		desc = append(desc, fmt.Sprintf("file=%q (%d bytes)", u.fileName, len(u.data)))
	}
	if u.relativePath != nil {
		w.WriteField("relative_path", *u.relativePath)
		desc = append(desc, fmt.Sprintf("relative_path=%q", *u.relativePath))
	}
	w.Close()
	if len(desc) == 0 {
		desc = append(desc, "no parts")
	}
	return &request{method: "POST", path: taskPath(taskID, "artifacts"), contentType: w.FormDataContentType(),
		body: body.Bytes(), describe: "multipart/form-data: " + strings.Join(desc, ", ")}
}

var quoteEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

func ptr[T any](v T) *T { return &v }

// maxAnswerBytes is as much of an answer as a check reads.
const maxAnswerBytes = 16 << 20

// exchange is a request and what came back.
type exchange struct {
	req *request
	// path is the request's path on the server, API root included.
	path    string
	status  int
	header  http.Header
	body    []byte
	elapsed time.Duration
	// err says why no answer came; the rest is then empty.
	err error
}

// do sends a request and reads its answer. A request that gets no answer
// (a refused connection, a timeout) is a failure, and the session's end:
// the checks after it are not run.
func (s *session) do(r *request) (*exchange, error) {
	ex := &exchange{req: r, path: s.root.Path + r.path}
	s.last = ex
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(s.ctx, r.method, s.root.String()+r.path, body)
	if err != nil {
		return ex, &failure{want: fmt.Sprintf("%s %s: build the request: %v", r.method, ex.path, err)}
	}
	ex.path = req.URL.RequestURI()
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	req.Header.Set("User-Agent", "agentrt-check")
	if s.apiKey != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
	}
	start := time.Now()
	res, err := s.client.Do(req)
	if err == nil {
		ex.status, ex.header = res.StatusCode, res.Header
		ex.body, err = io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes))
		res.Body.Close()
	}
	ex.elapsed = time.Since(start)
	if err != nil {
		ex.err = describeNoAnswer(err, s.client.Timeout)
		if errors.Is(err, context.Canceled) && s.ctx.Err() != nil {
			ex.err = fmt.Errorf("the check was cancelled (%w)", s.ctx.Err())
		}
		s.gone = s.running
		return ex, &failure{ex: ex}
	}
	return ex, nil
}

// describeNoAnswer says why a request got no answer, in a user's terms.
func describeNoAnswer(err error, timeout time.Duration) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the method and URL are said already
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no answer within %s (%w)", timeout, err)
	}
	return err
}

// report is the exchange as a Result shows it.
func (ex *exchange) report() (*Request, *Response) {
	if ex == nil {
		return nil, nil
	}
	req := &Request{Method: ex.req.method, Path: ex.path, Body: ex.req.describe}
	if req.Body == "" && len(ex.req.body) > 0 {
		req.Body = cut(ex.req.body, 200)
	}
	if ex.err != nil {
		return req, &Response{Error: ex.err.Error()}
	}
	return req, &Response{Status: ex.status, ContentType: ex.header.Get("Content-Type"), Body: cut(ex.body, 300)}
}

// cut is b cut to at most n bytes at a character's start, as UTF-8 (a
// byte that is not UTF-8 turned into U+FFFD), and the full size said when
// it was cut.
func cut(b []byte, n int) string {
	if len(b) <= n {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	i := n
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(string(b[:i]), "\uFFFD"), len(b))
}

// got says what came back, in a line: status, content type and an
// excerpt of the body.
func (ex *exchange) got() string {
	if ex.err != nil {
		return "no answer: " + ex.err.Error()
	}
	s := strconv.Itoa(ex.status)
	if ct := ex.header.Get("Content-Type"); ct != "" {
		s += " " + ct
	}
	body := bytes.TrimSpace(ex.body)
	if len(body) == 0 {
		return s + " with an empty body"
	}
	return s + " " + excerpt(body, 200)
}

// excerpt is b cut to about n bytes, as printable text: control
// characters and bytes that are not UTF-8 escaped, and the full size said
// when it was cut.
func excerpt(b []byte, n int) string {
	var s strings.Builder
	cut := false
	for i := 0; i < len(b); {
		if s.Len() >= n {
			cut = true
			break
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&s, `\x%02x`, b[i])
		case r == '\n':
			s.WriteString(`\n`)
		case r == '\r':
			s.WriteString(`\r`)
		case r == '\t':
			s.WriteString(`\t`)
		case !unicode.IsPrint(r) && r != ' ':
			fmt.Fprintf(&s, `\u%04x`, r)
		default:
			s.WriteRune(r)
		}
		i += size
	}
	if cut {
		fmt.Fprintf(&s, "… (%d bytes)", len(b))
	}
	return s.String()
}

// failure ends a check that failed: the exchange that showed it (if any)
// and what was wanted of it.
type failure struct {
	ex   *exchange
	want string
}

func (f *failure) Error() string {
	if f.ex == nil {
		return f.want
	}
	head := f.ex.req.method + " " + f.ex.path
	if f.ex.err != nil {
		if f.want != "" {
			return fmt.Sprintf("%s: %s; got no answer: %v", head, f.want, f.ex.err)
		}
		return fmt.Sprintf("%s: no answer: %v", head, f.ex.err)
	}
	return fmt.Sprintf("%s: %s; got %s", head, f.want, f.ex.got())
}

// failf fails the check on this exchange: want says what was wanted.
func (ex *exchange) failf(format string, args ...any) error {
	return &failure{ex: ex, want: fmt.Sprintf(format, args...)}
}

// setup wraps the failure of a request a check only needed to get going,
// saying what it was for; an error that is not a failure passes as is.
func setup(err error, what string) error {
	var f *failure
	if errors.As(err, &f) && f.ex != nil && f.ex.err == nil {
		return &failure{ex: f.ex, want: "(to " + what + ") " + f.want}
	}
	return err
}

// isJSON says whether the answer says it is JSON.
func (ex *exchange) isJSON() bool {
	mt, _, err := mime.ParseMediaType(ex.header.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// value decodes the answer as JSON: it must say it is JSON, be UTF-8 and
// hold one JSON value. Numbers are kept as json.Number.
func (ex *exchange) value() (any, error) {
	if !ex.isJSON() {
		return nil, fmt.Errorf("Content-Type %q is not application/json", ex.header.Get("Content-Type"))
	}
	if !utf8.Valid(ex.body) {
		return nil, errors.New("the body is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(ex.body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the body is not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the body has more than one JSON value")
	}
	return v, nil
}

// object decodes the answer as a JSON object.
func (ex *exchange) object() (object, error) {
	v, err := ex.value()
	if err != nil {
		return nil, err
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the body is a JSON %s, not an object", kind(v))
	}
	return o, nil
}

// wantStatus fails unless the answer has the status.
func (ex *exchange) wantStatus(status int) error {
	if ex.status != status {
		return ex.failf("want %d", status)
	}
	return nil
}

// wantObject fails unless the answer is 200 with a JSON object; what
// names the object wanted ("a Task").
func (ex *exchange) wantObject(what string) (object, error) {
	if ex.status != http.StatusOK {
		return nil, ex.failf("want 200 with %s", what)
	}
	o, err := ex.object()
	if err != nil {
		return nil, ex.failf("want 200 with %s (%v)", what, err)
	}
	return o, nil
}

// wantNotFound fails unless the answer is the specification's NotFound:
// 404 with a JSON object whose message is a string.
func (ex *exchange) wantNotFound() error {
	return ex.wantError("404", func(s int) bool { return s == http.StatusNotFound })
}

// wantError fails unless the answer's status is one ok accepts (described
// by want: "422", "a 4xx") and its body a JSON object with a message.
func (ex *exchange) wantError(want string, ok func(status int) bool) error {
	w := fmt.Sprintf(`want %s with a JSON body {"message": …}`, want)
	if !ok(ex.status) {
		return ex.failf("%s", w)
	}
	o, err := ex.object()
	if err != nil {
		return ex.failf("%s (%v)", w, err)
	}
	if m, isString := o["message"].(string); !isString || m == "" {
		return ex.failf("%s (no message string)", w)
	}
	return nil
}

func is4xx(status int) bool { return status >= 400 && status < 500 }
