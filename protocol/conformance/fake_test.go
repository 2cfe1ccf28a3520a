package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// fakeServer is a small Agent Protocol server held in memory, with an
// agent like the official suite's (asked to write Washington to a file,
// it creates output.txt and marks the step is_last). As it is, it passes
// every check; each field of breaks breaks one behaviour, the way real
// servers do.
type fakeServer struct {
	breaks

	mu        sync.Mutex
	n         int // ids handed out
	tasks     []*fakeTask
	steps     map[string]*fakeStep     // every task's, by id
	artifacts map[string]*fakeArtifact // every task's, by id
}

// breaks are the behaviours a fakeServer can get wrong.
type breaks struct {
	unknownIDs500      bool // an unknown id is 500 {"error": …}, as the JS SDK answers
	bareArrays         bool // lists are bare arrays, without the envelope
	ignoreRelativePath bool // uploads ignore relative_path (and so accept any)
	globalIDs          bool // steps and artifacts are found by id alone, through any task
	plainRouteErrors   bool // unknown routes and wrong methods get net/http's plain text
	noEmptyBody        bool // create-task and execute-step need a body (415 without)
	compactJSONOnly    bool // a JSON body with a newline in it is 422
	lenientBodies      bool // mistyped fields and non-object additional_input are taken
	lenientText        bool // text that is not UTF-8, or a lone surrogate, is taken
	malformed400       bool // malformed JSON is 400, not 422
	dropAdditional     bool // additional_input is served as {}
	getOmitsAdditional bool // get-task leaves additional_input out
	getStepShape       bool // get-step leaves artifacts out
	slowPaging         bool // ?page_size=1&current_page=1, the official query, answers slowly
	refuseAfterLast    bool // execute-step after is_last is 409
	newestFirst        bool // lists are newest first
	floorPages         bool // total_pages = floor(total_items / page_size)
	defaultPageSize20  bool // page_size defaults to 20
	badPage500         bool // a bad current_page or page_size is 500 text
	refuseHugePage     bool // a page_size over 100 is 400
	uploadsNotInTask   bool // get-task lists only the agent's artifacts
	uploadsAgentMade   bool // uploads are served as agent_created
	keepClientDir      bool // an upload's file name keeps the client's directory
	noFile400          bool // an upload without a file is 400
	agentArtsUnlisted  bool // list-artifacts leaves out what the agent created
	agentArtsNo404     bool // what the agent created cannot be downloaded (404)
	textPlainDownload  bool // downloads are text/plain
	noDisposition      bool // downloads have no Content-Disposition
	noRange            bool // downloads ignore Range
	mangleBytes        bool // downloads turn bytes that are not UTF-8 into U+FFFD
	appendNewline      bool // downloads end with a newline added
	noArtifacts        bool // the agent creates no artifact
	neverLast          bool // the agent never marks a step is_last
	hang               bool // nothing is answered until the client gives up
	// agentrt's additions (fake_additions_test.go)
	noAdditions        bool // none: no Prefer, no cancel, no events
	asyncNoLocation    bool // a step in the background is answered without its Location
	cancelEnded200     bool // a step that ended is "cancelled": 200
	eventsIgnoreLastID bool // a stream replays every event, whatever Last-Event-ID says
	eventPageBare      bool // the events page is a bare array
	eventPageNoCounts  bool // the events page has events only: no trimmed, no last_event_id
}

type fakeTask struct {
	id         string
	input      *string
	additional json.RawMessage
	steps      []*fakeStep
	artifacts  []*fakeArtifact
	finished   bool
}

type fakeStep struct {
	taskID, id    string
	input, output *string
	additional    json.RawMessage
	artifacts     []*fakeArtifact
	isLast        bool
}

type fakeArtifact struct {
	taskID, id             string
	fileName, relativePath string
	agentCreated           bool
	data                   []byte
}

func newFakeServer(b breaks) *fakeServer {
	return &fakeServer{breaks: b, steps: map[string]*fakeStep{}, artifacts: map[string]*fakeArtifact{}}
}

func (f *fakeServer) newID() string {
	f.n++
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", f.n, f.n)
}

// fakeError is an error answer.
type fakeError struct {
	status int
	msg    string
}

func errorf(status int, format string, args ...any) *fakeError {
	return &fakeError{status, fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.hang {
		// The context ends when the client goes away, which net/http
		// notices once the body is read.
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.serve(w, r); err != nil {
		switch {
		case f.plainRouteErrors && (err.status == 404 || err.status == 405) && strings.HasPrefix(err.msg, "no route"):
			http.Error(w, err.msg, err.status)
		case f.unknownIDs500 && err.status == 404 && !strings.HasPrefix(err.msg, "no route"):
			writeJSON(w, 500, map[string]string{"error": err.msg})
		default:
			writeJSON(w, err.status, map[string]string{"message": err.msg})
		}
	}
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) *fakeError {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/ap/v1/agent/tasks")
	if !ok || (rest != "" && rest[0] != '/') {
		return errorf(404, "no route %s", r.URL.Path)
	}
	var segs []string
	if rest != "" {
		for _, s := range strings.Split(rest[1:], "/") {
			u, err := url.PathUnescape(s)
			if err != nil {
				return errorf(404, "no route %s", r.URL.Path)
			}
			segs = append(segs, u)
		}
	}
	allow := func(methods ...string) *fakeError {
		if slices.Contains(methods, r.Method) {
			return nil
		}
		if !f.plainRouteErrors {
			w.Header().Set("Allow", strings.Join(methods, ", "))
		}
		return errorf(405, "no route for %s here", r.Method)
	}
	if err, served := f.serveAdditions(w, r, segs); served {
		return err
	}
	switch {
	case len(segs) == 0:
		if err := allow("GET", "POST"); err != nil {
			return err
		}
		if r.Method == "POST" {
			return f.createTask(w, r)
		}
		return f.listTasks(w, r)
	case len(segs) == 1:
		if err := allow("GET"); err != nil {
			return err
		}
		return f.getTask(w, segs[0])
	case len(segs) == 2 && segs[1] == "steps":
		if err := allow("GET", "POST"); err != nil {
			return err
		}
		if r.Method == "POST" {
			return f.executeStep(w, r, segs[0])
		}
		return f.listSteps(w, r, segs[0])
	case len(segs) == 2 && segs[1] == "artifacts":
		if err := allow("GET", "POST"); err != nil {
			return err
		}
		if r.Method == "POST" {
			return f.upload(w, r, segs[0])
		}
		return f.listArtifacts(w, r, segs[0])
	case len(segs) == 3 && segs[1] == "steps":
		if err := allow("GET"); err != nil {
			return err
		}
		return f.getStep(w, segs[0], segs[2])
	case len(segs) == 3 && segs[1] == "artifacts":
		if err := allow("GET"); err != nil {
			return err
		}
		return f.download(w, r, segs[0], segs[2])
	}
	return errorf(404, "no route %s", r.URL.Path)
}

func (f *fakeServer) task(id string) (*fakeTask, *fakeError) {
	for _, t := range f.tasks {
		if t.id == id {
			return t, nil
		}
	}
	return nil, errorf(404, "no task %q", id)
}

// decodeBody reads create-task's or execute-step's body.
func (f *fakeServer) decodeBody(r *http.Request) (input *string, additional json.RawMessage, ferr *fakeError) {
	b, _ := io.ReadAll(r.Body)
	if f.compactJSONOnly && bytes.ContainsRune(b, '\n') {
		return nil, nil, errorf(422, "a newline in the body")
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		if f.noEmptyBody {
			return nil, nil, errorf(415, "unsupported media type")
		}
		return nil, json.RawMessage("{}"), nil
	}
	if !f.lenientText && (!utf8.Valid(b) || hasLoneSurrogate(b)) {
		return nil, nil, errorf(422, "the body is not UTF-8 text")
	}
	if !json.Valid(bytes.ToValidUTF8(b, []byte("\uFFFD"))) {
		if f.malformed400 {
			return nil, nil, errorf(400, "malformed JSON")
		}
		return nil, nil, errorf(422, "malformed JSON")
	}
	var body struct {
		Input           any             `json:"input"`
		AdditionalInput json.RawMessage `json:"additional_input"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		if !f.lenientBodies {
			return nil, nil, errorf(422, "the body must be an object")
		}
	}
	switch in := body.Input.(type) {
	case nil:
	case string:
		input = &in
	default:
		if !f.lenientBodies {
			return nil, nil, errorf(422, "input must be a string")
		}
	}
	additional = body.AdditionalInput
	if len(additional) == 0 || string(additional) == "null" {
		additional = json.RawMessage("{}")
	} else if additional[0] != '{' && !f.lenientBodies {
		return nil, nil, errorf(422, "additional_input must be an object")
	}
	return input, additional, nil
}

// hasLoneSurrogate says whether JSON text holds a \u escape of a
// surrogate that is not one of a pair.
func hasLoneSurrogate(b []byte) bool {
	escape := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := escape(i)
		if !ok {
			i++ // an escaped character
			continue
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if low, ok := escape(i + 6); !ok || low < 0xDC00 || low >= 0xE000 {
				return true
			}
			i += 11
		case r >= 0xDC00 && r < 0xE000:
			return true
		default:
			i += 5
		}
	}
	return false
}

func (f *fakeServer) taskJSON(t *fakeTask, omitAdditional bool) map[string]any {
	var arts []any
	for _, a := range t.artifacts {
		if f.uploadsNotInTask && !a.agentCreated {
			continue
		}
		arts = append(arts, f.artifactJSON(a))
	}
	additional := t.additional
	if f.dropAdditional {
		additional = json.RawMessage("{}")
	}
	m := map[string]any{"task_id": t.id, "input": t.input, "additional_input": additional, "artifacts": nonNil(arts)}
	if omitAdditional {
		delete(m, "additional_input")
	}
	return m
}

func (f *fakeServer) stepJSON(s *fakeStep) map[string]any {
	var arts []any
	for _, a := range s.artifacts {
		arts = append(arts, f.artifactJSON(a))
	}
	return map[string]any{"task_id": s.taskID, "step_id": s.id, "name": nil, "status": "completed",
		"input": s.input, "additional_input": s.additional, "output": s.output, "additional_output": nil,
		"artifacts": nonNil(arts), "is_last": s.isLast}
}

func (f *fakeServer) artifactJSON(a *fakeArtifact) map[string]any {
	var rel any = a.relativePath
	if f.ignoreRelativePath {
		rel = nil
	}
	return map[string]any{"artifact_id": a.id, "agent_created": a.agentCreated || f.uploadsAgentMade,
		"file_name": a.fileName, "relative_path": rel}
}

func nonNil(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

func (f *fakeServer) createTask(w http.ResponseWriter, r *http.Request) *fakeError {
	input, additional, err := f.decodeBody(r)
	if err != nil {
		return err
	}
	t := &fakeTask{id: f.newID(), input: input, additional: additional}
	f.tasks = append(f.tasks, t)
	writeJSON(w, 200, f.taskJSON(t, false))
	return nil
}

func (f *fakeServer) getTask(w http.ResponseWriter, id string) *fakeError {
	t, err := f.task(id)
	if err != nil {
		return err
	}
	writeJSON(w, 200, f.taskJSON(t, f.getOmitsAdditional))
	return nil
}

func (f *fakeServer) executeStep(w http.ResponseWriter, r *http.Request, taskID string) *fakeError {
	t, err := f.task(taskID)
	if err != nil {
		return err
	}
	input, additional, err := f.decodeBody(r)
	if err != nil {
		return err
	}
	if t.finished && f.refuseAfterLast {
		return errorf(409, "the task is finished")
	}
	s := &fakeStep{taskID: t.id, id: f.newID(), input: input, additional: additional}
	prompt := ""
	if input != nil {
		prompt = *input
	} else if t.input != nil {
		prompt = *t.input
	}
	out := "I only know how to write Washington to a file."
	if strings.Contains(strings.ToLower(prompt), "washington") {
		out = "Wrote Washington to output.txt"
		if !f.noArtifacts {
			a := &fakeArtifact{taskID: t.id, id: f.newID(), fileName: "output.txt", agentCreated: true, data: []byte("Washington")}
			f.artifacts[a.id] = a
			t.artifacts = append(t.artifacts, a)
			s.artifacts = append(s.artifacts, a)
		}
		s.isLast = !f.neverLast
		t.finished = t.finished || s.isLast
	}
	s.output = &out
	f.steps[s.id] = s
	t.steps = append(t.steps, s)
	writeJSON(w, 200, f.stepJSON(s))
	return nil
}

func (f *fakeServer) getStep(w http.ResponseWriter, taskID, stepID string) *fakeError {
	t, err := f.task(taskID)
	if err != nil {
		return err
	}
	s := f.steps[stepID]
	if s == nil || (s.taskID != t.id && !f.globalIDs) {
		return errorf(404, "no step %q in task %q", stepID, taskID)
	}
	m := f.stepJSON(s)
	if f.getStepShape {
		delete(m, "artifacts")
	}
	writeJSON(w, 200, m)
	return nil
}

// page reads current_page and page_size.
func (f *fakeServer) page(r *http.Request) (number, size int, ferr *fakeError) {
	if f.slowPaging && r.URL.RawQuery == "page_size=1&current_page=1" {
		time.Sleep(officialResponseTime + 50*time.Millisecond) // a slow server, not an ordering of events
	}
	number, size = 1, 10
	if f.defaultPageSize20 {
		size = 20
	}
	q := r.URL.Query()
	for _, p := range []struct {
		name string
		dst  *int
	}{{"current_page", &number}, {"page_size", &size}} {
		v, ok := q[p.name]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 {
			if f.badPage500 {
				return 0, 0, errorf(500, "internal error")
			}
			return 0, 0, errorf(400, "%s must be a positive integer", p.name)
		}
		*p.dst = n
	}
	if size > 100 {
		if f.refuseHugePage {
			return 0, 0, errorf(400, "page_size is at most 100")
		}
		size = 100
	}
	return number, size, nil
}

func (f *fakeServer) writeList(w http.ResponseWriter, r *http.Request, key string, items []any) *fakeError {
	number, size, err := f.page(r)
	if err != nil {
		if f.badPage500 && err.status == 500 {
			http.Error(w, err.msg, 500)
			return nil
		}
		return err
	}
	if f.newestFirst {
		slices.Reverse(items)
	}
	total := len(items)
	pages := (total + size - 1) / size
	if f.floorPages {
		pages = total / size
	}
	start := min((number-1)*size, total)
	items = items[start:min(start+size, total)]
	if f.bareArrays {
		writeJSON(w, 200, nonNil(items))
		return nil
	}
	writeJSON(w, 200, map[string]any{key: nonNil(items), "pagination": map[string]int{
		"total_items": total, "total_pages": pages, "current_page": number, "page_size": size}})
	return nil
}

func (f *fakeServer) listTasks(w http.ResponseWriter, r *http.Request) *fakeError {
	var items []any
	for _, t := range f.tasks {
		items = append(items, f.taskJSON(t, false))
	}
	return f.writeList(w, r, "tasks", items)
}

func (f *fakeServer) listSteps(w http.ResponseWriter, r *http.Request, taskID string) *fakeError {
	t, err := f.task(taskID)
	if err != nil {
		return err
	}
	var items []any
	for _, s := range t.steps {
		items = append(items, f.stepJSON(s))
	}
	return f.writeList(w, r, "steps", items)
}

func (f *fakeServer) listArtifacts(w http.ResponseWriter, r *http.Request, taskID string) *fakeError {
	t, err := f.task(taskID)
	if err != nil {
		return err
	}
	var items []any
	for _, a := range t.artifacts {
		if f.agentArtsUnlisted && a.agentCreated {
			continue
		}
		items = append(items, f.artifactJSON(a))
	}
	return f.writeList(w, r, "artifacts", items)
}

func (f *fakeServer) upload(w http.ResponseWriter, r *http.Request, taskID string) *fakeError {
	t, err := f.task(taskID)
	if err != nil {
		return err
	}
	mr, merr := r.MultipartReader()
	if merr != nil {
		if f.noFile400 {
			return errorf(400, "want a multipart/form-data body: %v", merr)
		}
		return errorf(422, "want a multipart/form-data body: %v", merr)
	}
	var (
		name, dir string
		data      []byte
		haveFile  bool
	)
	for {
		part, perr := mr.NextPart()
		if perr == io.EOF {
			break
		} else if perr != nil {
			return errorf(422, "malformed multipart body: %v", perr)
		}
		b, _ := io.ReadAll(part)
		switch part.FormName() {
		case "file":
			_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			name, data, haveFile = params["filename"], b, true
		case "relative_path":
			dir = string(b)
		}
	}
	if !haveFile {
		if f.noFile400 {
			return errorf(400, "no file part")
		}
		return errorf(422, "no file part")
	}
	if i := strings.LastIndexAny(name, `/\`); i >= 0 && !f.keepClientDir {
		name = name[i+1:]
	}
	if f.ignoreRelativePath {
		dir = ""
	} else if strings.HasPrefix(dir, "/") || strings.Contains(dir, `\`) || slices.Contains(strings.Split(dir, "/"), "..") {
		return errorf(422, "relative_path %q leaves the workspace", dir)
	}
	a := &fakeArtifact{taskID: t.id, id: f.newID(), fileName: name, relativePath: strings.Trim(dir, "/"), data: data}
	f.artifacts[a.id] = a
	t.artifacts = append(t.artifacts, a)
	writeJSON(w, 200, f.artifactJSON(a))
	return nil
}

func (f *fakeServer) download(w http.ResponseWriter, r *http.Request, taskID, artifactID string) *fakeError {
	t, err := f.task(taskID)
	if err != nil {
		return err
	}
	a := f.artifacts[artifactID]
	if a == nil || (a.taskID != t.id && !f.globalIDs) || (a.agentCreated && f.agentArtsNo404) {
		return errorf(404, "no artifact %q in task %q", artifactID, taskID)
	}
	data := a.data
	if f.mangleBytes {
		data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
	}
	if f.appendNewline {
		data = append(slices.Clip(data), '\n')
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	if f.textPlainDownload {
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	if !f.noDisposition {
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": a.fileName}))
	}
	if f.noRange {
		w.Write(data)
		return nil
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	return nil
}
