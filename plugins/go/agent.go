// Package agent is the kit for writing agentrt plugins in Go or TinyGo.
//
// Register handlers in an init function; main stays empty:
//
//	package main
//
//	import agent "github.com/agentrt/agentrt/plugins/go"
//
//	func init() {
//		agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
//			return agent.Result{Output: "you said: " + s.Input, IsLast: true}, nil
//		})
//	}
//
//	func main() {}
//
// Build with Go:     GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o agent.wasm .
// Build with TinyGo: tinygo build -target=wasip1 -buildmode=c-shared -o agent.wasm .
//
// Each handler call runs in a fresh instance: package-level variables start
// from their initial values every time. Keep state in the task's workspace.
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Task is the task a handler works on.
type Task struct {
	ID string
	// Input is the task's prompt ("" when the client sent none).
	Input string
	// AdditionalInput is the task's additional_input, a JSON object.
	AdditionalInput json.RawMessage
	// Artifacts are the task's artifacts so far, uploaded or created.
	Artifacts []Artifact
}

// Step is the step being executed.
type Step struct {
	ID   string
	Task Task
	// Name is the step's name: the one given when it was planned, or "".
	Name string
	// Input is the step's input: for a planned step, the input it was
	// planned with; otherwise the execute-step request's input.
	Input           string
	AdditionalInput json.RawMessage
	// Planned is true when the task handler planned this step.
	Planned bool
	// Request is the execute-step request that runs this step.
	Request Request
}

// Request is an execute-step request body.
type Request struct {
	Input           string
	AdditionalInput json.RawMessage
}

// Artifact is a file of the task: uploaded by a client or created by the
// agent. It is bytes in the workspace at Path, or, when URI is set, a
// reference to bytes held elsewhere (which agentrt never fetches).
type Artifact struct {
	ID           string
	AgentCreated bool
	FileName     string
	// RelativePath is the artifact's directory in the workspace ("" for its
	// root).
	RelativePath string
	// Path is where the artifact sits in the task's workspace; "" for a URI
	// artifact.
	Path string
	// URI is what a URI artifact refers to; "" for bytes.
	URI string
	// StepID is the step that made the artifact; "" when none did.
	StepID string
}

// Result is what a step handler returns.
type Result struct {
	// Output is the step's output ("" leaves it null).
	Output string
	// AdditionalOutput, when not nil, is marshaled to the step's
	// additional_output; it must marshal to a JSON object.
	AdditionalOutput any
	// Name, when not "", replaces the step's name.
	Name string
	// IsLast marks the step as the task's last.
	IsLast bool
}

// PlannedStep is a step the task handler plans. Planned steps are listed
// with status "created" and run, oldest first, by the following
// execute-step requests.
type PlannedStep struct {
	Name            string
	Input           string
	AdditionalInput any
}

// Rejection is the error an artifact handler returns to refuse an upload;
// the client sees Reason. Build one with Reject.
type Rejection struct{ Reason string }

func (r *Rejection) Error() string { return "upload rejected: " + r.Reason }

// Reject returns the error that refuses an upload with a reason the client
// sees.
func Reject(format string, args ...any) error {
	return &Rejection{Reason: fmt.Sprintf(format, args...)}
}

// Replacement is the error an artifact handler returns to keep another
// artifact in place of a URI upload. Build one with ReplaceWithURI or
// ReplaceWithFile.
type Replacement struct {
	URI  string // another URI, of a scheme the agent accepts
	Path string // or a workspace file, whose bytes the artifact becomes
}

func (r *Replacement) Error() string {
	if r.URI != "" {
		return "upload replaced with " + r.URI
	}
	return "upload replaced with the workspace file " + r.Path
}

// ReplaceWithURI returns the error that keeps uri in place of the URI
// upload the artifact handler was given (the URI made canonical, say).
func ReplaceWithURI(uri string) error { return &Replacement{URI: uri} }

// ReplaceWithFile returns the error that makes the URI upload the artifact
// handler was given the workspace file at path: its bytes (a snapshot),
// named by its path.
func ReplaceWithFile(path string) error { return &Replacement{Path: path} }

// DefaultDownload returns the error a download handler returns to leave
// the download to agentrt, as if it had no download handler: the stored
// bytes, or a redirect to an http or https URI. The handler must not have
// written anything.
func DefaultDownload() error { return errDefaultDownload }

var errDefaultDownload = errors.New("the download is left to agentrt")

var (
	stepHandler     func(*Step) (Result, error)
	taskHandler     func(*Task) ([]PlannedStep, error)
	artifactHandler func(*Task, *Artifact) error
	downloadHandler func(*Task, *Artifact, io.Writer) error
	// downloadOut is where a download goes; set by HandleDownload, so that
	// a plugin without a download handler does not import download_write
	// (and loads on a host without it).
	downloadOut io.Writer
)

// HandleStep registers the step handler, which every plugin needs. It runs
// for every executed step. Call it from an init function.
func HandleStep(h func(s *Step) (Result, error)) { stepHandler = h }

// HandleTask registers the task handler, which runs once when a task is
// created and may plan steps. Call it from an init function.
func HandleTask(h func(t *Task) ([]PlannedStep, error)) { taskHandler = h }

// HandleArtifact registers the artifact handler, which runs when a client
// uploads a file to a task (already in the workspace at a.Path) or a URI
// (a.URI). Returning a Reject error refuses the upload (the client gets a
// 422 with the reason); for a URI, a ReplaceWithURI or ReplaceWithFile
// error keeps that instead; any other error fails it. Call it from an
// init function.
func HandleArtifact(h func(t *Task, a *Artifact) error) { artifactHandler = h }

// HandleDownload registers the download handler, which runs when a client
// downloads an artifact of a task: it serves the download by writing its
// bytes to w (they go to the client as they are written, within the
// artifact limit), or returns DefaultDownload(), having written nothing, to
// let agentrt serve it. It may read the workspace, not change it. An
// error after the first write cuts the download short (the client sees a
// body that ends early). Call it from an init function.
func HandleDownload(h func(t *Task, a *Artifact, w io.Writer) error) {
	downloadHandler, downloadOut = h, downloadWriter{}
}

// handlers is the bit set of registered handlers (abi.HandlersExport).
func handlers() int32 {
	var bits int32
	if taskHandler != nil {
		bits |= abi.HandlerBitTask
	}
	if stepHandler != nil {
		bits |= abi.HandlerBitStep
	}
	if artifactHandler != nil {
		bits |= abi.HandlerBitArtifact
	}
	if downloadHandler != nil {
		bits |= abi.HandlerBitDownload
	}
	return bits
}

// onStep runs the step handler (abi.StepExport).
func onStep() int32 {
	in, err := readInput()
	if err != nil || stepHandler == nil {
		return fail(err, "no step handler is registered (call agent.HandleStep in an init function)", &abi.StepResult{})
	}
	s := &Step{Task: taskOf(in.Task)}
	if in.Step != nil {
		s.ID, s.Name, s.Input = in.Step.StepID, str(in.Step.Name), str(in.Step.Input)
		s.AdditionalInput, s.Planned = in.Step.AdditionalInput, in.Step.Planned
	}
	if in.Request != nil {
		s.Request = Request{Input: str(in.Request.Input), AdditionalInput: in.Request.AdditionalInput}
	}
	var res Result
	err = guard(func() (err error) { res, err = stepHandler(s); return })
	if err != nil {
		return fail(err, "", &abi.StepResult{})
	}
	out := abi.StepResult{IsLast: res.IsLast}
	if res.Output != "" {
		out.Output = &res.Output
	}
	if res.Name != "" {
		out.Name = &res.Name
	}
	if res.AdditionalOutput != nil {
		b, err := marshal(res.AdditionalOutput)
		if err != nil {
			return fail(fmt.Errorf("marshal additional output: %w", err), "", &abi.StepResult{})
		}
		out.AdditionalOutput = b
	}
	return succeed(&out)
}

// onTask runs the task handler (abi.TaskExport).
func onTask() int32 {
	in, err := readInput()
	if err != nil || taskHandler == nil {
		return fail(err, "no task handler is registered", &abi.TaskResult{})
	}
	t := taskOf(in.Task)
	var plan []PlannedStep
	if err := guard(func() (err error) { plan, err = taskHandler(&t); return }); err != nil {
		return fail(err, "", &abi.TaskResult{})
	}
	out := abi.TaskResult{}
	for _, p := range plan {
		ps := abi.PlannedStep{Name: p.Name}
		if p.Input != "" {
			input := p.Input
			ps.Input = &input
		}
		if p.AdditionalInput != nil {
			b, err := marshal(p.AdditionalInput)
			if err != nil {
				return fail(fmt.Errorf("marshal planned step %q: %w", p.Name, err), "", &abi.TaskResult{})
			}
			ps.AdditionalInput = b
		}
		out.Steps = append(out.Steps, ps)
	}
	return succeed(&out)
}

// onArtifact runs the artifact handler (abi.ArtifactExport).
func onArtifact() int32 {
	in, err := readInput()
	if err != nil || artifactHandler == nil || in.Artifact == nil {
		return fail(err, "no artifact handler is registered", &abi.ArtifactResult{})
	}
	t := taskOf(in.Task)
	a := artifactOf(*in.Artifact)
	err = guard(func() error { return artifactHandler(&t, &a) })
	// A rejection wrapped by the handler ("checking %s: %w") still refuses.
	var r *Rejection
	var rp *Replacement
	switch {
	case errors.As(err, &r):
		return succeed(&abi.ArtifactResult{Reject: r.Reason})
	case errors.As(err, &rp):
		return succeed(&abi.ArtifactResult{Replace: &abi.ArtifactReplace{URI: rp.URI, WorkspacePath: rp.Path}})
	case err != nil:
		return fail(err, "", &abi.ArtifactResult{})
	}
	return succeed(&abi.ArtifactResult{})
}

// onDownload runs the download handler (abi.DownloadExport).
func onDownload() int32 {
	in, err := readInput()
	if err != nil || downloadHandler == nil || in.Artifact == nil {
		return fail(err, "no download handler is registered", &abi.DownloadResult{})
	}
	t := taskOf(in.Task)
	a := artifactOf(*in.Artifact)
	err = guard(func() error { return downloadHandler(&t, &a, downloadOut) })
	switch {
	case errors.Is(err, errDefaultDownload):
		return succeed(&abi.DownloadResult{Default: true})
	case err != nil:
		return fail(err, "", &abi.DownloadResult{})
	}
	return succeed(&abi.DownloadResult{})
}

// readInput reads and decodes the call's input message.
func readInput() (*abi.Input, error) {
	b, err := sizedRead(func(buf []byte) int32 { return hostInput(ptr(buf), uint32(len(buf))) })
	if err != nil {
		return nil, hostError(abi.FuncInput, int32FromErr(err))
	}
	in, err := abi.DecodeInput(b)
	if err != nil {
		return nil, fmt.Errorf("decode the handler's input: %w", err)
	}
	return in, nil
}

// marshal encodes a free-form value; JSON text passes through as it is.
func marshal(v any) ([]byte, error) {
	switch v := v.(type) {
	case json.RawMessage:
		return v, nil
	case []byte:
		if json.Valid(v) {
			return v, nil
		}
	}
	return json.Marshal(v)
}

// guard runs fn, turning a panic into an error so that the client learns
// what went wrong and where (panic.go).
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r, stack())
		}
	}()
	return fn()
}

// result is a handler's result message.
type result interface{ AppendJSON([]byte) []byte }

// fail reports err (or msg when err is nil) as the handler's error.
func fail(err error, msg string, res result) int32 {
	if err != nil {
		msg = err.Error()
	}
	switch r := res.(type) {
	case *abi.StepResult:
		r.Error = msg
	case *abi.TaskResult:
		r.Error = msg
	case *abi.ArtifactResult:
		r.Error = msg
	case *abi.DownloadResult:
		r.Error = msg
	}
	succeed(res)
	return 1
}

// succeed sets res as the handler's result.
func succeed(res result) int32 {
	b := res.AppendJSON(nil)
	if code := hostSetResult(ptr(b), uint32(len(b))); code < 0 {
		return 1
	}
	return 0
}

func taskOf(t abi.Task) Task {
	task := Task{ID: t.TaskID, Input: str(t.Input), AdditionalInput: t.AdditionalInput}
	for _, a := range t.Artifacts {
		task.Artifacts = append(task.Artifacts, artifactOf(a))
	}
	return task
}

func artifactOf(a abi.Artifact) Artifact {
	return Artifact{ID: a.ArtifactID, AgentCreated: a.AgentCreated, FileName: a.FileName,
		RelativePath: a.RelativePath, Path: a.WorkspacePath, URI: a.URI, StepID: a.StepID}
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
