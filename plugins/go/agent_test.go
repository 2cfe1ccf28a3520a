//go:build !wasm

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Input messages as the host sends them (plugins/ABI.md, "Input").
const (
	taskJSON = `{"task_id":"t-1","input":"write a poem","additional_input":{"style":"haiku"},` +
		`"artifacts":[{"artifact_id":"a-1","agent_created":false,"file_name":"a.txt","relative_path":"docs","workspace_path":"docs/a.txt"},` +
		`{"artifact_id":"a-2","agent_created":true,"file_name":"out.md","relative_path":"","workspace_path":"out.md","step_id":"s-0"}]}`
	stepInput = `{"abi":1,"handler":"step","task":` + taskJSON + `,` +
		`"step":{"step_id":"s-1","name":"count words","input":"planned input","additional_input":{"n":2},"planned":true},` +
		`"request":{"input":"go on","additional_input":{"r":3}},"from_a_later_host":[1,2]}`
	taskInput     = `{"abi":1,"handler":"task","task":` + taskJSON + `}`
	artifactInput = `{"abi":1,"handler":"artifact","task":` + taskJSON + `,` +
		`"artifact":{"artifact_id":"a-1","agent_created":false,"file_name":"a.txt","relative_path":"docs","workspace_path":"docs/a.txt"}}`
	uriInput = `{"abi":1,"handler":"artifact","task":` + taskJSON + `,` +
		`"artifact":{"artifact_id":"a-3","agent_created":false,"file_name":"r.pdf","relative_path":"","uri":"s3://b/r.pdf"}}`
	downloadInput = `{"abi":1,"handler":"download","task":` + taskJSON + `,` +
		`"artifact":{"artifact_id":"a-2","agent_created":true,"file_name":"out.md","relative_path":"","workspace_path":"out.md","step_id":"s-0"}}`
	bareTask = `{"task_id":"t-2","input":null,"artifacts":[]}`
)

// theTask is taskJSON decoded.
var theTask = Task{
	ID: "t-1", Input: "write a poem", AdditionalInput: json.RawMessage(`{"style":"haiku"}`),
	Artifacts: []Artifact{
		{ID: "a-1", FileName: "a.txt", RelativePath: "docs", Path: "docs/a.txt"},
		{ID: "a-2", AgentCreated: true, FileName: "out.md", Path: "out.md", StepID: "s-0"},
	},
}

// resetHandlers unregisters every handler, now and when the test ends.
func resetHandlers(t *testing.T) {
	t.Helper()
	stepHandler, taskHandler, artifactHandler, downloadHandler = nil, nil, nil, nil
	t.Cleanup(func() { stepHandler, taskHandler, artifactHandler, downloadHandler = nil, nil, nil, nil })
}

func TestABIVersionExportIsOne(t *testing.T) {
	if v := exportABIVersion(); v != 1 {
		t.Errorf("agentrt_abi_version = %d, want 1", v)
	}
}

func TestHandlersExportIsTheBitSetOfRegisteredHandlers(t *testing.T) {
	step := func(*Step) (Result, error) { return Result{}, nil }
	task := func(*Task) ([]PlannedStep, error) { return nil, nil }
	artifact := func(*Task, *Artifact) error { return nil }
	download := func(*Task, *Artifact, io.Writer) error { return nil }
	tests := []struct {
		name     string
		register func()
		want     int32
	}{
		{"none", func() {}, 0},
		{"step", func() { HandleStep(step) }, 2},
		{"task", func() { HandleTask(task) }, 1},
		{"artifact", func() { HandleArtifact(artifact) }, 4},
		{"task and step", func() { HandleTask(task); HandleStep(step) }, 3},
		{"download", func() { HandleDownload(download) }, 8},
		{"all", func() { HandleTask(task); HandleStep(step); HandleArtifact(artifact); HandleDownload(download) }, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			tt.register()
			if got := exportHandlers(); got != tt.want {
				t.Errorf("agentrt_handlers = %03b, want %03b", got, tt.want)
			}
		})
	}
}

func TestEachExportRunsItsOwnHandler(t *testing.T) {
	tests := []struct {
		export string
		run    func() int32
		input  string
	}{
		{abi.StepExport, exportOnStep, stepInput},
		{abi.TaskExport, exportOnTask, taskInput},
		{abi.ArtifactExport, exportOnArtifact, artifactInput},
		{abi.DownloadExport, exportOnDownload, downloadInput},
	}
	for _, tt := range tests {
		t.Run(tt.export, func(t *testing.T) {
			resetHandlers(t)
			useHost(t, &fakeHost{in: []byte(tt.input)})
			var ran []string
			HandleStep(func(*Step) (Result, error) { ran = append(ran, abi.StepExport); return Result{}, nil })
			HandleTask(func(*Task) ([]PlannedStep, error) { ran = append(ran, abi.TaskExport); return nil, nil })
			HandleArtifact(func(*Task, *Artifact) error { ran = append(ran, abi.ArtifactExport); return nil })
			HandleDownload(func(*Task, *Artifact, io.Writer) error { ran = append(ran, abi.DownloadExport); return nil })
			if code := tt.run(); code != 0 {
				t.Errorf("returned %d, want 0", code)
			}
			if want := []string{tt.export}; !reflect.DeepEqual(ran, want) {
				t.Errorf("ran %v, want %v", ran, want)
			}
		})
	}
}

func TestStepHandlerSeesTheDecodedInput(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  Step
	}{
		{"a planned step", stepInput, Step{
			ID: "s-1", Task: theTask, Name: "count words", Input: "planned input",
			AdditionalInput: json.RawMessage(`{"n":2}`), Planned: true,
			Request: Request{Input: "go on", AdditionalInput: json.RawMessage(`{"r":3}`)},
		}},
		{"a new step: nulls are empty", `{"abi":1,"handler":"step","task":` + bareTask + `,` +
			`"step":{"step_id":"s-2","name":null,"input":null,"planned":false},"request":{"input":null}}`,
			Step{ID: "s-2", Task: Task{ID: "t-2"}}},
		{"no step or request", `{"abi":1,"handler":"step","task":` + bareTask + `}`,
			Step{Task: Task{ID: "t-2"}}},
		{"null step and request", `{"abi":1,"handler":"step","task":` + bareTask + `,"step":null,"request":null}`,
			Step{Task: Task{ID: "t-2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			useHost(t, &fakeHost{in: []byte(tt.input)})
			var got *Step
			HandleStep(func(s *Step) (Result, error) { got = s; return Result{}, nil })
			if code := exportOnStep(); code != 0 {
				t.Fatalf("returned %d, want 0", code)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("handler saw\n%+v\nwant\n%+v", *got, tt.want)
			}
		})
	}
}

func TestTaskHandlerSeesTheDecodedTask(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  Task
	}{
		{"with artifacts", taskInput, theTask},
		{"null input, no artifacts", `{"abi":1,"handler":"task","task":` + bareTask + `}`, Task{ID: "t-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			useHost(t, &fakeHost{in: []byte(tt.input)})
			var got *Task
			HandleTask(func(task *Task) ([]PlannedStep, error) { got = task; return nil, nil })
			if code := exportOnTask(); code != 0 {
				t.Fatalf("returned %d, want 0", code)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("handler saw\n%+v\nwant\n%+v", *got, tt.want)
			}
		})
	}
}

func TestArtifactHandlerSeesTheTaskAndTheUpload(t *testing.T) {
	resetHandlers(t)
	useHost(t, &fakeHost{in: []byte(artifactInput)})
	var task *Task
	var upload *Artifact
	HandleArtifact(func(t *Task, a *Artifact) error { task, upload = t, a; return nil })
	if code := exportOnArtifact(); code != 0 {
		t.Fatalf("returned %d, want 0", code)
	}
	if !reflect.DeepEqual(*task, theTask) {
		t.Errorf("task\n%+v\nwant\n%+v", *task, theTask)
	}
	if want := (Artifact{ID: "a-1", FileName: "a.txt", RelativePath: "docs", Path: "docs/a.txt"}); *upload != want {
		t.Errorf("upload %+v, want %+v", *upload, want)
	}
}

func TestArtifactHandlerSeesAURIUploadAndMayReplaceIt(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil accepts", nil, `{}`},
		{"another URI", ReplaceWithURI("https://b.example.com/r.pdf"), `{"replace":{"uri":"https://b.example.com/r.pdf"}}`},
		{"a workspace file", fmt.Errorf("fetched: %w", ReplaceWithFile("in/r.pdf")), `{"replace":{"workspace_path":"in/r.pdf"}}`},
		{"Reject refuses", Reject("no s3, please"), `{"reject":"no s3, please"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			h := useHost(t, &fakeHost{in: []byte(uriInput)})
			var upload *Artifact
			HandleArtifact(func(_ *Task, a *Artifact) error { upload = a; return tt.err })
			if code := exportOnArtifact(); code != 0 {
				t.Errorf("returned %d, want 0", code)
			}
			if want := (Artifact{ID: "a-3", FileName: "r.pdf", URI: "s3://b/r.pdf"}); *upload != want {
				t.Errorf("upload %+v, want %+v", *upload, want)
			}
			if got := h.result(); got != tt.want {
				t.Errorf("result %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDownloadHandlerWritesTheDownloadOrLeavesItToTheHost(t *testing.T) {
	tests := []struct {
		name    string
		handler func(*Task, *Artifact, io.Writer) error
		code    int32
		want    string
		written string
	}{
		{"writes", func(_ *Task, a *Artifact, w io.Writer) error {
			fmt.Fprintf(w, "# %s\n", a.FileName)
			_, err := w.Write([]byte("made by " + a.StepID))
			return err
		}, 0, `{}`, "# out.md\nmade by s-0"},
		{"writes nothing", func(*Task, *Artifact, io.Writer) error { return nil }, 0, `{}`, ""},
		{"leaves it to the host", func(*Task, *Artifact, io.Writer) error { return DefaultDownload() }, 0, `{"default":true}`, ""},
		{"fails", func(_ *Task, _ *Artifact, w io.Writer) error {
			w.Write([]byte("half"))
			return errors.New("renderer crashed")
		}, 1, `{"error":"renderer crashed"}`, "half"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			h := useHost(t, &fakeHost{in: []byte(downloadInput)})
			HandleDownload(tt.handler)
			if code := exportOnDownload(); code != tt.code {
				t.Errorf("returned %d, want %d", code, tt.code)
			}
			if got := h.result(); got != tt.want {
				t.Errorf("result %s, want %s", got, tt.want)
			}
			if string(h.downloaded) != tt.written {
				t.Errorf("wrote %q, want %q", h.downloaded, tt.written)
			}
		})
	}
	// A write the host refuses is the handler's error, with the host's words.
	resetHandlers(t)
	useHost(t, &fakeHost{in: []byte(downloadInput), fail: map[string]hostFailure{abi.FuncDownloadWrite: {abi.ErrIO, "the client is not taking the download"}}})
	var werr error
	HandleDownload(func(_ *Task, _ *Artifact, w io.Writer) error { _, werr = w.Write([]byte("x")); return werr })
	if code := exportOnDownload(); code != 1 || !errors.Is(werr, ErrIO) || !strings.Contains(werr.Error(), "download_write: the client is not taking the download") {
		t.Errorf("returned %d, write error %v; want 1 and the host's I/O error", code, werr)
	}
}

func TestCreateURIArtifactSendsTheURIWithNoBytes(t *testing.T) {
	h := useHost(t, &fakeHost{})
	if _, err := CreateURIArtifact("s3://b/r.pdf", "", "links"); err != nil {
		t.Fatal(err)
	}
	if a := h.artifacts[0]; a.meta != `{"file_name":"","relative_path":"links","uri":"s3://b/r.pdf"}` || len(a.data) != 0 {
		t.Errorf("sent meta %s and %q", a.meta, a.data)
	}
}

func TestAnInputLongerThanTheFirstBufferIsReadWhole(t *testing.T) {
	resetHandlers(t)
	long := strings.Repeat("word ", 4000)
	h := useHost(t, &fakeHost{in: []byte(`{"abi":1,"handler":"step","task":` + bareTask + `,"request":{"input":"` + long + `"}}`)})
	var got string
	HandleStep(func(s *Step) (Result, error) { got = s.Request.Input; return Result{}, nil })
	if code := exportOnStep(); code != 0 {
		t.Fatalf("returned %d (%s), want 0", code, h.result())
	}
	if got != long {
		t.Errorf("handler saw %d bytes of input, want %d", len(got), len(long))
	}
	if h.calls[abi.FuncInput] != 2 {
		t.Errorf("input called %d times, want 2 (once to learn the length)", h.calls[abi.FuncInput])
	}
}

func TestStepResultIsEncodedWithOnlyTheFieldsSet(t *testing.T) {
	type point struct {
		X int `json:"x"`
	}
	tests := []struct {
		name   string
		result Result
		want   string
	}{
		{"zero", Result{}, `{}`},
		{"output", Result{Output: "hello"}, `{"output":"hello"}`},
		{"name", Result{Name: "greet"}, `{"name":"greet"}`},
		{"is_last", Result{IsLast: true}, `{"is_last":true}`},
		{"all", Result{Output: "o", Name: "n", IsLast: true, AdditionalOutput: map[string]int{"words": 3}},
			`{"output":"o","additional_output":{"words":3},"name":"n","is_last":true}`},
		{"additional_output: a struct", Result{AdditionalOutput: point{X: 1}}, `{"additional_output":{"x":1}}`},
		{"additional_output: json.RawMessage as it is", Result{AdditionalOutput: json.RawMessage(`{ "a" : 1 }`)},
			`{"additional_output":{ "a" : 1 }}`},
		{"additional_output: []byte of JSON as it is", Result{AdditionalOutput: []byte(`{"b":[1, 2]}`)},
			`{"additional_output":{"b":[1, 2]}}`},
		{"additional_output: []byte not JSON is marshaled", Result{AdditionalOutput: []byte("hi")},
			`{"additional_output":"aGk="}`},
		{"output escaped", Result{Output: "a \"quote\"\n<b>"}, `{"output":"a \"quote\"\n<b>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			h := useHost(t, &fakeHost{in: []byte(stepInput)})
			HandleStep(func(*Step) (Result, error) { return tt.result, nil })
			if code := exportOnStep(); code != 0 {
				t.Errorf("returned %d, want 0", code)
			}
			if got := h.result(); got != tt.want {
				t.Errorf("result %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPlannedStepsAreEncodedInOrder(t *testing.T) {
	tests := []struct {
		name string
		plan []PlannedStep
		want string
	}{
		{"no plan", nil, `{}`},
		{"an empty plan", []PlannedStep{}, `{}`},
		{"name only", []PlannedStep{{Name: "read"}}, `{"steps":[{"name":"read"}]}`},
		{"in order, each with what it has",
			[]PlannedStep{
				{Name: "read", Input: "a.txt"},
				{Name: "count", AdditionalInput: map[string]bool{"fast": true}},
				{Name: "", Input: "x", AdditionalInput: json.RawMessage(`{"raw":1}`)},
			},
			`{"steps":[{"name":"read","input":"a.txt"},{"name":"count","additional_input":{"fast":true}},` +
				`{"name":"","input":"x","additional_input":{"raw":1}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			h := useHost(t, &fakeHost{in: []byte(taskInput)})
			HandleTask(func(*Task) ([]PlannedStep, error) { return tt.plan, nil })
			if code := exportOnTask(); code != 0 {
				t.Errorf("returned %d, want 0", code)
			}
			if got := h.result(); got != tt.want {
				t.Errorf("result %s, want %s", got, tt.want)
			}
		})
	}
}

func TestArtifactHandlerAcceptsRejectsOrFails(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code int32
		want string
	}{
		{"nil accepts", nil, 0, `{}`},
		{"Reject refuses with its reason", Reject("only %s files, please", ".txt"), 0, `{"reject":"only .txt files, please"}`},
		{"a wrapped Reject still refuses", fmt.Errorf("checking a.exe: %w", Reject("no executables")), 0, `{"reject":"no executables"}`},
		{"another error fails", errors.New("virus scanner unavailable"), 1, `{"error":"virus scanner unavailable"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			h := useHost(t, &fakeHost{in: []byte(artifactInput)})
			HandleArtifact(func(*Task, *Artifact) error { return tt.err })
			if code := exportOnArtifact(); code != tt.code {
				t.Errorf("returned %d, want %d", code, tt.code)
			}
			if got := h.result(); got != tt.want {
				t.Errorf("result %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRejectionReadsAsARefusedUpload(t *testing.T) {
	err := Reject("too big: %d bytes", 10)
	var r *Rejection
	if !errors.As(err, &r) || r.Reason != "too big: 10 bytes" {
		t.Fatalf("Reject gave %#v", err)
	}
	if got, want := err.Error(), "upload rejected: too big: 10 bytes"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestAHandlerErrorOrPanicBecomesTheResultsError(t *testing.T) {
	boom := errors.New("the model is down")
	tests := []struct {
		name  string
		input string
		run   func() int32
		set   func()
		want  string
	}{
		{"step error drops the output", stepInput, exportOnStep,
			func() {
				HandleStep(func(*Step) (Result, error) { return Result{Output: "half done", IsLast: true}, boom })
			},
			`{"error":"the model is down"}`},
		{"step panic", stepInput, exportOnStep,
			func() { HandleStep(func(*Step) (Result, error) { panic("index out of range") }) },
			`{"error":"panic: index out of range (at github.com/agentrt/agentrt/plugins/go.TestAHandlerErrorOrPanicBecomesTheResultsError.func2.1 go/agent_test.go:`},
		{"step panic with an error", stepInput, exportOnStep,
			func() { HandleStep(func(*Step) (Result, error) { panic(fmt.Errorf("wrapped: %w", boom)) }) },
			`{"error":"panic: wrapped: the model is down (at github.com/agentrt/agentrt/plugins/go.TestAHandlerErrorOrPanicBecomesTheResultsError.func3.1 go/agent_test.go:`},
		{"task error drops the plan", taskInput, exportOnTask,
			func() { HandleTask(func(*Task) ([]PlannedStep, error) { return []PlannedStep{{Name: "a"}}, boom }) },
			`{"error":"the model is down"}`},
		{"task panic", taskInput, exportOnTask,
			func() { HandleTask(func(*Task) ([]PlannedStep, error) { panic("nil map") }) },
			`{"error":"panic: nil map (at github.com/agentrt/agentrt/plugins/go.TestAHandlerErrorOrPanicBecomesTheResultsError.func5.1 go/agent_test.go:`},
		{"artifact panic", artifactInput, exportOnArtifact,
			func() { HandleArtifact(func(*Task, *Artifact) error { panic("bad zip") }) },
			`{"error":"panic: bad zip (at github.com/agentrt/agentrt/plugins/go.TestAHandlerErrorOrPanicBecomesTheResultsError.func6.1 go/agent_test.go:`},
		{"error text escaped", stepInput, exportOnStep,
			func() { HandleStep(func(*Step) (Result, error) { return Result{}, errors.New("line 1\n\"2\"") }) },
			`{"error":"line 1\n\"2\""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			h := useHost(t, &fakeHost{in: []byte(tt.input)})
			tt.set()
			if code := tt.run(); code != 1 {
				t.Errorf("returned %d, want 1", code)
			}
			// A panic's error names where it happened (the handler's
			// closure, in this file, its line aside), and its stack is logged.
			got := h.result()
			if strings.HasPrefix(tt.name, "step panic") || strings.HasSuffix(tt.name, " panic") {
				if !strings.HasPrefix(got, tt.want) || !strings.HasSuffix(got, `; the stack is in the log)"}`) {
					t.Errorf("result %s, want %s...", got, tt.want)
				}
				if len(h.logs) != 1 || h.logs[0].level != abi.LevelError || !strings.Contains(h.logs[0].text, "goroutine ") {
					t.Errorf("logs = %q, want the panic's stack at level error", h.logs)
				}
				return
			}
			if got != tt.want {
				t.Errorf("result %s, want %s", got, tt.want)
			}
		})
	}
}

func TestAResultThatCannotBeEncodedFailsTheHandler(t *testing.T) {
	tests := []struct {
		name  string
		input string
		run   func() int32
		set   func()
		want  string
	}{
		{"additional_output", stepInput, exportOnStep,
			func() {
				HandleStep(func(*Step) (Result, error) { return Result{Output: "o", AdditionalOutput: make(chan int)}, nil })
			},
			`{"error":"marshal additional output: json: unsupported type: chan int"}`},
		{"a planned step's additional_input", taskInput, exportOnTask,
			func() {
				HandleTask(func(*Task) ([]PlannedStep, error) {
					return []PlannedStep{{Name: "ok"}, {Name: "count", AdditionalInput: func() {}}}, nil
				})
			},
			`{"error":"marshal planned step \"count\": json: unsupported type: func()"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			h := useHost(t, &fakeHost{in: []byte(tt.input)})
			tt.set()
			if code := tt.run(); code != 1 {
				t.Errorf("returned %d, want 1", code)
			}
			if got := h.result(); got != tt.want {
				t.Errorf("result %s, want %s", got, tt.want)
			}
		})
	}
}

func TestAMissingHandlerFailsTheCallSayingSo(t *testing.T) {
	tests := []struct {
		name  string
		input string
		run   func() int32
		set   func()
		want  string
	}{
		{"step", stepInput, exportOnStep, func() {},
			`{"error":"no step handler is registered (call agent.HandleStep in an init function)"}`},
		{"task", taskInput, exportOnTask, func() {}, `{"error":"no task handler is registered"}`},
		{"artifact", artifactInput, exportOnArtifact, func() {}, `{"error":"no artifact handler is registered"}`},
		{"download", downloadInput, exportOnDownload, func() {}, `{"error":"no download handler is registered"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetHandlers(t)
			h := useHost(t, &fakeHost{in: []byte(tt.input)})
			tt.set()
			if code := tt.run(); code != 1 {
				t.Errorf("returned %d, want 1", code)
			}
			if got := h.result(); got != tt.want {
				t.Errorf("result %s, want %s", got, tt.want)
			}
		})
	}
}

func TestAnInputTheKitCannotReadFailsTheHandlerWithoutRunningIt(t *testing.T) {
	tests := []struct {
		name string
		host *fakeHost
		want string // the result's error, or its start
	}{
		{"the host refuses", &fakeHost{fail: map[string]hostFailure{abi.FuncInput: {abi.ErrNotAllowed, "not available while the instance is constructed"}}},
			"input: not available while the instance is constructed"},
		{"the input keeps changing", &fakeHost{in: []byte(stepInput), growInput: true}, "input: host I/O error"},
		{"not JSON", &fakeHost{in: []byte(`{"abi":1,"task":`)}, "decode the handler's input: "},
		{"a mistyped field", &fakeHost{in: []byte(`{"abi":1,"handler":"step","task":{"task_id":7}}`)}, "decode the handler's input: "},
	}
	exports := []struct {
		name string
		run  func() int32
	}{{"step", exportOnStep}, {"task", exportOnTask}, {"artifact", exportOnArtifact}, {"download", exportOnDownload}}
	for _, tt := range tests {
		for _, e := range exports {
			t.Run(tt.name+"/"+e.name, func(t *testing.T) {
				resetHandlers(t)
				host := *tt.host
				host.in = append([]byte(nil), tt.host.in...)
				h := useHost(t, &host)
				HandleStep(func(*Step) (Result, error) { panic("must not run") })
				HandleTask(func(*Task) ([]PlannedStep, error) { panic("must not run") })
				HandleArtifact(func(*Task, *Artifact) error { panic("must not run") })
				HandleDownload(func(*Task, *Artifact, io.Writer) error { panic("must not run") })
				if code := e.run(); code != 1 {
					t.Errorf("returned %d, want 1", code)
				}
				var res struct{ Error string }
				if err := json.Unmarshal([]byte(h.result()), &res); err != nil {
					t.Fatalf("result %q: %v", h.result(), err)
				}
				if !strings.HasPrefix(res.Error, tt.want) || strings.Contains(res.Error, "must not run") {
					t.Errorf("error %q, want %q", res.Error, tt.want)
				}
			})
		}
	}
}

func TestARefusedResultFailsTheCall(t *testing.T) {
	resetHandlers(t)
	h := useHost(t, &fakeHost{in: []byte(stepInput), fail: map[string]hostFailure{abi.FuncSetResult: {abi.ErrLimit, "the result is over 1 MiB"}}})
	HandleStep(func(*Step) (Result, error) { return Result{Output: "fine"}, nil })
	if code := exportOnStep(); code != 1 {
		t.Errorf("returned %d with its result refused, want 1", code)
	}
	if h.calls[abi.FuncSetResult] != 1 {
		t.Errorf("set_result called %d times, want 1", h.calls[abi.FuncSetResult])
	}
}

func TestTheArtifactHandlerDoesNotRunWithoutAnUpload(t *testing.T) {
	resetHandlers(t)
	h := useHost(t, &fakeHost{in: []byte(`{"abi":1,"handler":"artifact","task":` + bareTask + `,"artifact":null}`)})
	ran := false
	HandleArtifact(func(*Task, *Artifact) error { ran = true; return nil })
	if code := exportOnArtifact(); code != 1 {
		t.Errorf("returned %d, want 1", code)
	}
	if ran {
		t.Error("the artifact handler ran with no upload to handle")
	}
	if !strings.HasPrefix(h.result(), `{"error":"`) {
		t.Errorf("result %s, want an error", h.result())
	}
}
