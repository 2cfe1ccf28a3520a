// Package agenttest runs a plugin's handlers in the test process, on the
// build machine, against an in-memory host: each task has a workspace, its
// artifacts and its log, and the host has the operator's settings.
//
// A plugin's test registers nothing of its own: the handlers its init
// function registered with the kit are the ones run.
//
//	func TestAnswers(t *testing.T) {
//		host := agenttest.New()
//		task, err := host.CreateTask("write a haiku")
//		if err != nil {
//			t.Fatal(err)
//		}
//		step, err := task.Step("go on")
//		if err != nil {
//			t.Fatal(err)
//		}
//		if step.Output != "..." || !step.IsLast {
//			t.Errorf("step = %+v", step)
//		}
//		data, err := task.ReadFile("poem.txt")
//		...
//	}
//
// The host follows agentrt's rules where a plugin can tell: a task handler
// runs when the task is created and may plan steps; a step runs the oldest
// planned step, else a new one; a failed call's artifacts are dropped and
// its failure is recorded on the step; an upload is placed in the
// workspace before the artifact handler runs and taken back when the
// handler rejects it, and a URI upload is handed to it as it is; a
// download runs the download handler, or is the stored bytes or the URI;
// paths are checked as the host checks them; progress reports are the
// step handler's, within their sizes, recorded on the step
// (Step.Progress); log lines and progress reports count against the
// call's log limit (Host.MaxLog) as agentrt counts them; an outbound
// request goes to Host.HTTP only for a destination in Host.Allow, with
// the headers and secrets agentrt would send, redirects followed and
// checked, and the secrets scrubbed from what comes back.
//
// It refuses what agentrt refuses, so that a test cannot pass and the
// plugin then fail on a server: a result that is not I-JSON, not an
// object, or names a field in another case; a request to a destination
// not granted, or whose URL, headers, body or message agentrt would not
// send; a secret filled in, or its value carried in any form, where it
// is not bound; a secret agentrt would not start with; more than 32
// requests in a call, each redirect counted (plugins/README.md lists
// each rule). It does not check URIs against an agent's schemes, nor
// addresses (a test's server is its own), and it does not hold a
// handler to agentrt's other limits (time, memory, host calls, the sizes
// and counts of results and artifacts, and what a handler prints, which
// goes to the test's output rather than its log): "agentrt call" runs
// one handler in the real sandbox, under them.
//
// The handlers run in this process, not in WebAssembly: what they print
// goes to the test's output, a panic is reported as the kit reports it,
// and os.Exit ends the test binary. Handler calls are serialized, across
// Hosts too: the kit has one host at a time.
package agenttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
	agent "github.com/agentrt/agentrt/plugins/go"
	"github.com/agentrt/agentrt/plugins/go/internal/harness"
)

// Host is an in-memory agentrt host for one agent's tasks.
type Host struct {
	// Config is what agent.Config returns: the operator's settings.
	Config map[string]string
	// HTTP serves the plugin's outbound requests (package
	// plugins/go/http, agent.RoundTrip, agent.FetchArtifact), in this
	// process, to the destinations in Allow, with secrets filled in from
	// Secrets (http.go). Nil refuses every request.
	HTTP http.Handler
	// Allow are the destinations the operator grants the plugin
	// ("https://api.example.com/v1", "https://*.example.com").
	Allow []string
	// Secrets are the secrets the host holds for the plugin, by name.
	Secrets map[string]Secret
	// MaxLog is what one handler call may log, in bytes, as agentrt's
	// --max-log (or a manifest's limits.max_log) bounds it: log lines and
	// progress reports, each counted as agentrt counts it (progress.go).
	// 0 is agentrt's default, 64 KiB. What a handler prints is not
	// counted here: it goes to the test's output.
	MaxLog int

	mu     sync.Mutex
	nextID int
}

// New returns a host with no tasks and no settings.
func New() *Host { return &Host{Config: map[string]string{}} }

// Request is a create-task or execute-step request: an input, and an
// additional input that marshals to a JSON object (nil: {}).
type Request struct {
	Input           string
	AdditionalInput any
}

// Task is a task of the host.
type Task struct {
	ID              string
	Input           string
	AdditionalInput json.RawMessage

	host      *Host
	files     map[string]file
	artifacts []Artifact
	steps     []*Step
	logs      []Log
}

// Step is a step of a task: planned (Status "created") or run
// ("completed").
type Step struct {
	ID string
	// Name is the name it was planned with, or the one its handler gave.
	Name            string
	Status          string
	Input           string
	AdditionalInput json.RawMessage
	// Planned is true for a step the task handler planned.
	Planned bool
	// Output is the step's output ("" when the handler left it null).
	Output string
	// AdditionalOutput is the step's additional_output (nil for null); a
	// failed step's is {"error": {"code": ..., "message": ...}}.
	AdditionalOutput json.RawMessage
	IsLast           bool
	// Artifacts are the artifacts the step created.
	Artifacts []Artifact
	// Logs is what the step's handler logged.
	Logs []Log
	// Progress are the progress reports of the step's handler, in the
	// order it made them (agent.Progress, agent.ProgressOutput); a failed
	// step keeps those it made.
	Progress []Progress
}

// Artifact is an artifact of a task, with its bytes; or a URI artifact,
// with its URI and no bytes.
type Artifact struct {
	ID           string
	AgentCreated bool
	FileName     string
	// RelativePath is its directory in the workspace ("" for the root).
	RelativePath string
	// StepID is the step that created it ("" for none).
	StepID string
	Data   []byte
	// URI is what a URI artifact refers to ("" for bytes).
	URI string
}

// Path is where the artifact sits in the task's workspace; "" for a URI
// artifact, which is not there.
func (a Artifact) Path() string {
	switch {
	case a.URI != "":
		return ""
	case a.RelativePath == "":
		return a.FileName
	}
	return a.RelativePath + "/" + a.FileName
}

// Download is what downloading an artifact gives a client: what the
// download handler wrote (Served), or, when the plugin has none or it left
// the download to agentrt, the artifact's bytes, or its URI.
type Download struct {
	Served bool
	Data   []byte
	// URI is a URI artifact's, which agentrt redirects an http or https
	// download to; Data is then empty.
	URI string
}

// Log is one line a handler logged.
type Log struct {
	// Level is "debug", "info", "warn" or "error".
	Level   string
	Message string
}

// Failure is a handler's failure, as agentrt reports it to the client.
type Failure struct {
	// Handler is "task", "step", "artifact" or "download".
	Handler string
	// Message is why it failed: the handler's error, or the kit's account
	// of a panic.
	Message string
	// Logs is what the handler logged before it failed.
	Logs []Log
}

func (f *Failure) Error() string { return f.Handler + " handler failed: " + f.Message }

// CreateTask creates a task with input, running the task handler if the
// plugin registered one. When the handler fails, no task is created and
// the error is a *Failure.
func (h *Host) CreateTask(input string) (*Task, error) {
	return h.CreateTaskWith(Request{Input: input})
}

// CreateTaskWith is CreateTask with an additional input.
func (h *Host) CreateTaskWith(req Request) (*Task, error) {
	addl, err := object(req.AdditionalInput)
	if err != nil {
		return nil, fmt.Errorf("additional input: %w", err)
	}
	h.mu.Lock()
	h.nextID++
	t := &Task{ID: id(h.nextID), Input: req.Input, AdditionalInput: addl, host: h, files: map[string]file{}}
	h.mu.Unlock()
	k, err := kit()
	if err != nil {
		return nil, err
	}
	if k.Handlers()&abi.HandlerBitTask == 0 {
		return t, nil
	}
	c := t.call(abi.Input{ABI: abi.Version, Handler: abi.HandlerTask, Task: t.message()}, "")
	code := c.run(k.OnTask)
	var res abi.TaskResult
	if msg := c.result(code, &res); msg != "" {
		return nil, &Failure{Handler: abi.HandlerTask, Message: msg, Logs: c.logs}
	}
	for i, p := range res.Steps {
		addl, err := object(p.AdditionalInput)
		if err != nil {
			return nil, &Failure{Handler: abi.HandlerTask, Message: fmt.Sprintf("planned a step with a bad value: steps[%d].additional_input: %v", i, err), Logs: c.logs}
		}
		t.steps = append(t.steps, &Step{ID: t.newID(), Name: p.Name, Status: "created", Input: deref(p.Input),
			AdditionalInput: addl, Planned: true})
	}
	t.logs = append(t.logs, c.logs...)
	t.artifacts = append(t.artifacts, c.artifacts...)
	return t, nil
}

// Step executes the task's next step with input: its oldest planned step,
// else a new one. When the handler fails, the step is recorded with the
// failure in its AdditionalOutput, and the error is a *Failure.
func (t *Task) Step(input string) (*Step, error) {
	return t.StepWith(Request{Input: input})
}

// StepWith is Step with an additional input.
func (t *Task) StepWith(req Request) (*Step, error) {
	addl, err := object(req.AdditionalInput)
	if err != nil {
		return nil, fmt.Errorf("additional input: %w", err)
	}
	k, err := kit()
	if err != nil {
		return nil, err
	}
	var s *Step
	for _, st := range t.steps {
		if st.Status == "created" {
			s = st
			break
		}
	}
	if s == nil {
		s = &Step{ID: t.newID(), Status: "created", Input: req.Input, AdditionalInput: addl}
		t.steps = append(t.steps, s)
	}
	in := abi.Input{ABI: abi.Version, Handler: abi.HandlerStep, Task: t.message(),
		Step:    &abi.Step{StepID: s.ID, Input: &s.Input, AdditionalInput: s.AdditionalInput, Planned: s.Planned},
		Request: &abi.Request{Input: &req.Input, AdditionalInput: addl}}
	if s.Name != "" {
		in.Step.Name = &s.Name
	}
	c := t.call(in, s.ID)
	code := c.run(k.OnStep)
	var res abi.StepResult
	msg := c.result(code, &res)
	if msg == "" && len(res.AdditionalOutput) > 0 && !bytes.Equal(res.AdditionalOutput, []byte("null")) {
		if o, err := object(res.AdditionalOutput); err != nil || !bytes.Equal(o, res.AdditionalOutput) {
			msg = "the result's additional_output is not a JSON object"
		}
	}
	s.Status, s.Logs, s.Progress = "completed", c.logs, c.progress
	if msg != "" {
		f := &Failure{Handler: abi.HandlerStep, Message: msg, Logs: c.logs}
		s.AdditionalOutput, _ = json.Marshal(map[string]any{"error": map[string]string{"code": "plugin_failed", "message": f.Error()}})
		return nil, f
	}
	s.Output, s.AdditionalOutput, s.IsLast, s.Artifacts = deref(res.Output), res.AdditionalOutput, res.IsLast, c.artifacts
	if res.Name != nil {
		s.Name = *res.Name
	}
	t.artifacts = append(t.artifacts, c.artifacts...)
	return s, nil
}

// Upload uploads a file to the task, as a client does: it is placed in
// the workspace at relativePath/fileName, and the artifact handler, if
// the plugin registered one, runs. A rejected upload is an
// *agent.Rejection, a failed one a *Failure; either way the file is taken
// back out of the workspace, the handler's artifacts are dropped and its
// log is kept in the task's.
func (t *Task) Upload(fileName, relativePath string, data []byte) (*Artifact, error) {
	name, dir, err := cleanArtifactName(fileName, relativePath)
	if err != nil {
		return nil, err
	}
	k, err := kit()
	if err != nil {
		return nil, err
	}
	a := Artifact{ID: t.newID(), FileName: name, RelativePath: dir, Data: append([]byte(nil), data...)}
	before, existed := t.files[a.Path()]
	t.files[a.Path()] = file{data: a.Data, modTime: time.Now()}
	if k.Handlers()&abi.HandlerBitArtifact == 0 {
		t.artifacts = append(t.artifacts, a)
		return &a, nil
	}
	c := t.call(abi.Input{ABI: abi.Version, Handler: abi.HandlerArtifact, Task: t.message(),
		Artifact: &abi.Artifact{ArtifactID: a.ID, FileName: a.FileName, RelativePath: a.RelativePath, WorkspacePath: a.Path()}}, "")
	code := c.run(k.OnArtifact)
	var res abi.ArtifactResult
	msg := c.result(code, &res)
	t.logs = append(t.logs, c.logs...)
	if msg != "" || res.Reject != "" {
		if existed {
			t.files[a.Path()] = before
		} else {
			delete(t.files, a.Path())
		}
		if msg != "" {
			return nil, &Failure{Handler: abi.HandlerArtifact, Message: msg, Logs: c.logs}
		}
		return nil, &agent.Rejection{Reason: res.Reject}
	}
	t.artifacts = append(t.artifacts, a)
	t.artifacts = append(t.artifacts, c.artifacts...)
	return &a, nil
}

// UploadURI uploads a URI artifact to the task, as a client does: the
// artifact handler, if the plugin registered one, gets it and may accept,
// reject (an *agent.Rejection) or replace it (with another URI, or a
// workspace file's bytes); a failure is a *Failure. fileName "" names it
// after the URI's last path segment.
func (t *Task) UploadURI(uri, fileName, relativePath string) (*Artifact, error) {
	if fileName == "" {
		fileName = uriFileName(uri)
	}
	name, dir, err := cleanArtifactName(fileName, relativePath)
	if err != nil {
		return nil, err
	}
	if uri == "" {
		return nil, errors.New("the URI is empty")
	}
	k, err := kit()
	if err != nil {
		return nil, err
	}
	a := Artifact{ID: t.newID(), FileName: name, RelativePath: dir, URI: uri}
	if k.Handlers()&abi.HandlerBitArtifact == 0 {
		t.artifacts = append(t.artifacts, a)
		return &a, nil
	}
	c := t.call(abi.Input{ABI: abi.Version, Handler: abi.HandlerArtifact, Task: t.message(), Artifact: view(a)}, "")
	code := c.run(k.OnArtifact)
	var res abi.ArtifactResult
	msg := c.result(code, &res)
	t.logs = append(t.logs, c.logs...)
	if msg == "" && res.Reject == "" && res.Replace != nil {
		switch r := res.Replace; {
		case (r.URI == "") == (r.WorkspacePath == ""):
			msg = "its replacement names neither or both of uri and workspace_path"
		case r.URI != "":
			a.URI = r.URI
		default:
			p, err := cleanFilePath(r.WorkspacePath)
			f, ok := t.files[p]
			switch {
			case err != nil:
				msg = fmt.Sprintf("it replaced the upload with a workspace path that is refused: %v", err)
			case !ok:
				msg = fmt.Sprintf("it replaced the upload with the workspace file %q: no such file", p)
			default:
				a.URI, a.Data = "", append([]byte(nil), f.data...)
				a.RelativePath, a.FileName = "", p
				if i := strings.LastIndexByte(p, '/'); i >= 0 {
					a.RelativePath, a.FileName = p[:i], p[i+1:]
				}
			}
		}
	}
	switch {
	case msg != "":
		return nil, &Failure{Handler: abi.HandlerArtifact, Message: msg, Logs: c.logs}
	case res.Reject != "":
		return nil, &agent.Rejection{Reason: res.Reject}
	}
	t.artifacts = append(t.artifacts, a)
	t.artifacts = append(t.artifacts, c.artifacts...)
	return &a, nil
}

// Download downloads an artifact of the task, as a client does: through
// the download handler, if the plugin registered one, else as agentrt
// serves it. A failed download handler is a *Failure, and what it wrote
// is not returned (a client reads a download cut short). The download
// handler changes nothing: its workspace writes and artifacts are
// refused, as agentrt refuses them.
func (t *Task) Download(artifactID string) (*Download, error) {
	var a *Artifact
	for i := range t.artifacts {
		if t.artifacts[i].ID == artifactID {
			a = &t.artifacts[i]
		}
	}
	if a == nil {
		return nil, fmt.Errorf("task %s has no artifact %s", t.ID, artifactID)
	}
	k, err := kit()
	if err != nil {
		return nil, err
	}
	if k.Handlers()&abi.HandlerBitDownload != 0 {
		c := t.call(abi.Input{ABI: abi.Version, Handler: abi.HandlerDownload, Task: t.message(), Artifact: view(*a)}, "")
		c.download = true
		code := c.run(k.OnDownload)
		var res abi.DownloadResult
		msg := c.result(code, &res)
		t.logs = append(t.logs, c.logs...)
		if msg == "" && res.Default && len(c.downloaded) > 0 {
			msg = fmt.Sprintf("it wrote %d bytes of the download, then left the download to the host", len(c.downloaded))
		}
		if msg != "" {
			return nil, &Failure{Handler: abi.HandlerDownload, Message: msg, Logs: c.logs}
		}
		if !res.Default {
			return &Download{Served: true, Data: c.downloaded}, nil
		}
	}
	return &Download{Data: append([]byte(nil), a.Data...), URI: a.URI}, nil
}

// Steps lists the task's steps in creation order, planned ones included.
func (t *Task) Steps() []Step {
	steps := make([]Step, len(t.steps))
	for i, s := range t.steps {
		steps[i] = *s
	}
	return steps
}

// Artifacts lists the task's artifacts in creation order, uploaded and
// created.
func (t *Task) Artifacts() []Artifact { return append([]Artifact(nil), t.artifacts...) }

// Logs is the task's log: what its task handler and artifact handlers
// logged.
func (t *Task) Logs() []Log { return append([]Log(nil), t.logs...) }

// kit returns what the kit lent the harness.
func kit() (*harness.Kit, error) {
	k := harness.Bound()
	if k == nil {
		return nil, errors.New("agenttest runs handlers on the build machine, not in WebAssembly: run go test without GOOS=wasip1")
	}
	if k.Handlers()&abi.HandlerBitStep == 0 {
		return nil, errors.New("no step handler is registered: call agent.HandleStep in an init function (a plugin's main never runs)")
	}
	return k, nil
}

// message is the task as a handler reads it.
func (t *Task) message() abi.Task {
	m := abi.Task{TaskID: t.ID, Input: &t.Input, AdditionalInput: t.AdditionalInput, Artifacts: []abi.Artifact{}}
	for _, a := range t.artifacts {
		m.Artifacts = append(m.Artifacts, *view(a))
	}
	return m
}

// view is an artifact as a handler reads it.
func view(a Artifact) *abi.Artifact {
	return &abi.Artifact{ArtifactID: a.ID, AgentCreated: a.AgentCreated, FileName: a.FileName,
		RelativePath: a.RelativePath, WorkspacePath: a.Path(), URI: a.URI, StepID: a.StepID}
}

// uriFileName is the last segment of a URI's path, or "artifact".
func uriFileName(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		if p := strings.TrimRight(u.Path, "/"); p != "" {
			return path.Base(p)
		}
		if u.Hostname() != "" {
			return u.Hostname()
		}
	}
	return "artifact"
}

func (t *Task) newID() string {
	t.host.mu.Lock()
	defer t.host.mu.Unlock()
	t.host.nextID++
	return id(t.host.nextID)
}

// id is the n-th id a host hands out, shaped as agentrt's.
func id(n int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012d", n) }

// object is v as a JSON object: JSON text as it is, anything else
// marshaled; nil (or no text) is {}.
func object(v any) (json.RawMessage, error) {
	var b []byte
	switch v := v.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		if len(v) == 0 {
			return json.RawMessage("{}"), nil
		}
		b = v
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s is not a JSON object", b)
	}
	return json.RawMessage(b), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
