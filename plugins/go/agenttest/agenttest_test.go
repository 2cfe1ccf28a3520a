package agenttest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	agent "github.com/agentrt/agentrt/plugins/go"
	"github.com/agentrt/agentrt/plugins/go/agenttest"
)

// register installs handlers for one test, as a plugin's init would.
func register(t *testing.T, step func(*agent.Step) (agent.Result, error), task func(*agent.Task) ([]agent.PlannedStep, error), artifact func(*agent.Task, *agent.Artifact) error) {
	t.Helper()
	agent.HandleStep(step)
	agent.HandleTask(task)
	agent.HandleArtifact(artifact)
	t.Cleanup(func() {
		agent.HandleStep(nil)
		agent.HandleTask(nil)
		agent.HandleArtifact(nil)
	})
}

func TestAStepRunsTheRegisteredHandlerAgainstTheTasksWorkspace(t *testing.T) {
	register(t, func(s *agent.Step) (agent.Result, error) {
		notes, err := agent.ReadFile("notes.txt")
		if err != nil {
			return agent.Result{}, err
		}
		if err := agent.WriteFile("out/answer.txt", append(notes, '!')); err != nil {
			return agent.Result{}, err
		}
		if _, err := agent.PublishFile("out/answer.txt", "answer.txt", "out"); err != nil {
			return agent.Result{}, err
		}
		agent.Logf("task %q, step %q", s.Task.Input, s.Input)
		return agent.Result{Output: "read " + string(notes), AdditionalOutput: map[string]int{"n": 1}, IsLast: true}, nil
	}, nil, nil)
	host := agenttest.New()
	task, err := host.CreateTask("the task")
	if err != nil {
		t.Fatal(err)
	}
	if err := task.WriteFile("notes.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	step, err := task.Step("the step")
	if err != nil {
		t.Fatal(err)
	}
	if step.Output != "read hello" || !step.IsLast || string(step.AdditionalOutput) != `{"n":1}` || step.Status != "completed" {
		t.Errorf("step = %+v", step)
	}
	if got, _ := task.ReadFile("out/answer.txt"); string(got) != "hello!" {
		t.Errorf("out/answer.txt holds %q", got)
	}
	if len(step.Artifacts) != 1 || step.Artifacts[0].Path() != "out/answer.txt" || string(step.Artifacts[0].Data) != "hello!" ||
		step.Artifacts[0].StepID != step.ID || !step.Artifacts[0].AgentCreated {
		t.Errorf("step artifacts = %+v", step.Artifacts)
	}
	if fmt.Sprint(step.Logs) != fmt.Sprint([]agenttest.Log{{Level: "info", Message: `task "the task", step "the step"`}}) {
		t.Errorf("logs = %+v", step.Logs)
	}
	if got := task.Files(); fmt.Sprint(got) != "[notes.txt out/answer.txt]" {
		t.Errorf("files = %v", got)
	}
}

func TestPlannedStepsRunFirstWithTheirOwnInput(t *testing.T) {
	register(t, func(s *agent.Step) (agent.Result, error) {
		return agent.Result{Output: fmt.Sprintf("%s|%s|%s|%v", s.Name, s.Input, s.Request.Input, s.Planned)}, nil
	}, func(task *agent.Task) ([]agent.PlannedStep, error) {
		agent.Logf("planning for %s", task.Input)
		return []agent.PlannedStep{{Name: "first", Input: "a"}, {Name: "second", Input: "b", AdditionalInput: map[string]int{"k": 2}}}, nil
	}, nil)
	task, err := agenttest.New().CreateTask("plan")
	if err != nil {
		t.Fatal(err)
	}
	if steps := task.Steps(); len(steps) != 2 || steps[0].Status != "created" || steps[1].Name != "second" ||
		string(steps[1].AdditionalInput) != `{"k":2}` {
		t.Fatalf("planned = %+v", steps)
	}
	if logs := task.Logs(); len(logs) != 1 || logs[0].Message != "planning for plan" {
		t.Errorf("task log = %+v", logs)
	}
	var outputs []string
	for _, in := range []string{"x", "y", "z"} {
		s, err := task.Step(in)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, s.Output)
	}
	if want := []string{"first|a|x|true", "second|b|y|true", "|z|z|false"}; fmt.Sprint(outputs) != fmt.Sprint(want) {
		t.Errorf("outputs = %q, want %q", outputs, want)
	}
}

func TestAFailedStepIsRecordedWithoutItsArtifacts(t *testing.T) {
	register(t, func(s *agent.Step) (agent.Result, error) {
		agent.Log(agent.Warn, "about to fail")
		if _, err := agent.CreateArtifact("partial.txt", "", []byte("half")); err != nil {
			return agent.Result{}, err
		}
		return agent.Result{}, errors.New("the agent gave up")
	}, nil, nil)
	task, _ := agenttest.New().CreateTask("")
	_, err := task.Step("go")
	var f *agenttest.Failure
	if !errors.As(err, &f) || f.Error() != "step handler failed: the agent gave up" || len(f.Logs) != 1 || f.Logs[0].Message != "about to fail" {
		t.Fatalf("err = %#v", err)
	}
	steps := task.Steps()
	var out struct{ Error struct{ Message string } }
	if len(steps) != 1 || json.Unmarshal(steps[0].AdditionalOutput, &out) != nil || out.Error.Message != f.Error() || len(steps[0].Artifacts) != 0 {
		t.Errorf("steps = %+v", steps)
	}
	if len(task.Artifacts()) != 0 {
		t.Errorf("a failed step left artifacts: %+v", task.Artifacts())
	}
}

// A result agentrt would refuse as not I-JSON fails the step here too.
func TestAResultThatIsNotIJSONFailsTheStep(t *testing.T) {
	for _, out := range []string{`{"k":1,"k":2}`, `{"n":1e400}`} {
		register(t, func(*agent.Step) (agent.Result, error) {
			return agent.Result{AdditionalOutput: json.RawMessage(out)}, nil
		}, nil, nil)
		task, _ := agenttest.New().CreateTask("")
		if _, err := task.Step(""); err == nil || !strings.Contains(err.Error(), "its result is not valid") {
			t.Errorf("additional output %s: err = %v, want the step failed", out, err)
		}
	}
}

func TestAResultThatIsNotAnObjectFailsTheStep(t *testing.T) {
	register(t, func(*agent.Step) (agent.Result, error) { return agent.Result{AdditionalOutput: []int{1}}, nil }, nil, nil)
	task, _ := agenttest.New().CreateTask("")
	if _, err := task.Step(""); err == nil || !strings.Contains(err.Error(), "additional_output is not a JSON object") {
		t.Errorf("err = %v", err)
	}
}

func TestAPanicFailsTheStepWithItsMessage(t *testing.T) {
	register(t, func(*agent.Step) (agent.Result, error) { panic("something impossible happened") }, nil, nil)
	task, _ := agenttest.New().CreateTask("")
	_, err := task.Step("")
	if err == nil || !strings.HasPrefix(err.Error(), "step handler failed: panic: something impossible happened") {
		t.Errorf("err = %v", err)
	}
}

func TestAFailedTaskHandlerCreatesNoTask(t *testing.T) {
	register(t, func(*agent.Step) (agent.Result, error) { return agent.Result{}, nil },
		func(*agent.Task) ([]agent.PlannedStep, error) {
			agent.Logf("looked at it")
			return nil, errors.New("cannot plan that")
		}, nil)
	task, err := agenttest.New().CreateTask("")
	var f *agenttest.Failure
	if task != nil || !errors.As(err, &f) || f.Handler != "task" || f.Message != "cannot plan that" || len(f.Logs) != 1 {
		t.Errorf("task %v, err %#v", task, err)
	}
}

func TestARejectedUploadIsTakenBackAndItsLogKept(t *testing.T) {
	register(t, func(*agent.Step) (agent.Result, error) { return agent.Result{}, nil }, nil,
		func(task *agent.Task, a *agent.Artifact) error {
			agent.Logf("checking %s", a.Path)
			if _, err := agent.CreateArtifact("summary.txt", "", []byte("s")); err != nil {
				return err
			}
			if !strings.HasSuffix(a.FileName, ".txt") {
				return agent.Reject("only .txt files, please")
			}
			return nil
		})
	task, _ := agenttest.New().CreateTask("")
	_, err := task.Upload("photo.png", "in", []byte("png"))
	var r *agent.Rejection
	if !errors.As(err, &r) || r.Reason != "only .txt files, please" {
		t.Fatalf("err = %#v", err)
	}
	if len(task.Files()) != 0 || len(task.Artifacts()) != 0 {
		t.Errorf("a rejected upload left files %v and artifacts %+v", task.Files(), task.Artifacts())
	}
	a, err := task.Upload("notes.txt", "in", []byte("n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Path() != "in/notes.txt" || a.AgentCreated || len(task.Artifacts()) != 2 || fmt.Sprint(task.Files()) != "[in/notes.txt]" {
		t.Errorf("upload %+v, artifacts %+v, files %v", a, task.Artifacts(), task.Files())
	}
	if logs := task.Logs(); len(logs) != 2 || logs[0].Message != "checking in/photo.png" {
		t.Errorf("task log = %+v, want both handler calls' lines", logs)
	}
}

func TestConfigIsTheHostsSettings(t *testing.T) {
	register(t, func(*agent.Step) (agent.Result, error) {
		c, err := agent.Config()
		return agent.Result{Output: c["greeting"]}, err
	}, nil, nil)
	host := agenttest.New()
	host.Config["greeting"] = "hello"
	task, _ := host.CreateTask("")
	if s, err := task.Step(""); err != nil || s.Output != "hello" {
		t.Errorf("step %+v, err %v", s, err)
	}
}

func TestPathsAreCheckedAsTheHostChecksThem(t *testing.T) {
	for _, p := range []string{"../x", "/etc/passwd", `a\b`, "a\x00b", "", "a/../../b", strings.Repeat("d/", 33) + "f"} {
		t.Run(p, func(t *testing.T) {
			register(t, func(*agent.Step) (agent.Result, error) { return agent.Result{}, agent.WriteFile(p, []byte("x")) }, nil, nil)
			task, _ := agenttest.New().CreateTask("")
			if _, err := task.Step(""); err == nil || !strings.Contains(err.Error(), "workspace_write") {
				t.Errorf("writing %q: err = %v, want workspace_write refused", p, err)
			}
			if len(task.Files()) != 0 {
				t.Errorf("files = %v", task.Files())
			}
		})
	}
	register(t, func(*agent.Step) (agent.Result, error) {
		_, err := agent.ReadFile("missing.txt")
		if !errors.Is(err, agent.ErrNotFound) {
			return agent.Result{}, fmt.Errorf("read a missing file: %v, want ErrNotFound", err)
		}
		return agent.Result{}, nil
	}, nil, nil)
	task, _ := agenttest.New().CreateTask("")
	if _, err := task.Step(""); err != nil {
		t.Error(err)
	}
}

func TestWithoutAStepHandlerTheHarnessSaysWhereToRegisterIt(t *testing.T) {
	register(t, nil, nil, nil)
	_, err := agenttest.New().CreateTask("")
	if err == nil || !strings.Contains(err.Error(), "init function") {
		t.Errorf("err = %v, want a hint to register in init", err)
	}
}

func TestURIUploadsAndDownloadsRunTheirHandlersAsAgentrtDoes(t *testing.T) {
	register(t, func(s *agent.Step) (agent.Result, error) {
		id, err := agent.CreateURIArtifact("s3://bucket/out/report.pdf", "", "links")
		return agent.Result{Output: id}, err
	}, nil, func(_ *agent.Task, a *agent.Artifact) error {
		switch {
		case strings.HasPrefix(a.URI, "http://"):
			return agent.ReplaceWithURI("https://" + strings.TrimPrefix(a.URI, "http://"))
		case strings.HasPrefix(a.URI, "memo:"):
			if err := agent.WriteFile("memos/"+a.FileName, []byte(strings.TrimPrefix(a.URI, "memo:"))); err != nil {
				return err
			}
			return agent.ReplaceWithFile("memos/" + a.FileName)
		case strings.Contains(a.URI, "reject"):
			return agent.Reject("not that one")
		}
		return nil
	})
	agent.HandleDownload(func(_ *agent.Task, a *agent.Artifact, w io.Writer) error {
		switch {
		case a.FileName == "report.pdf":
			errs := fmt.Sprint(agent.WriteFile("x", nil) != nil, agent.Remove("memos/note") != nil)
			_, err := fmt.Fprintf(w, "served %s by %s (%s)", a.URI, a.StepID, errs)
			return err
		case a.FileName == "bad":
			w.Write([]byte("half"))
			return errors.New("broke")
		}
		return agent.DefaultDownload()
	})
	t.Cleanup(func() { agent.HandleDownload(nil) })
	task, err := agenttest.New().CreateTask("uris")
	if err != nil {
		t.Fatal(err)
	}
	web, err := task.UploadURI("http://example.com/a.pdf", "", "")
	if err != nil || web.URI != "https://example.com/a.pdf" || web.FileName != "a.pdf" || web.Path() != "" {
		t.Fatalf("an http upload became %+v, %v", web, err)
	}
	memo, err := task.UploadURI("memo:remember", "note", "")
	if err != nil || memo.URI != "" || memo.Path() != "memos/note" || string(memo.Data) != "remember" {
		t.Fatalf("a memo became %+v, %v", memo, err)
	}
	var r *agent.Rejection
	if _, err := task.UploadURI("https://reject.example/x", "", ""); !errors.As(err, &r) {
		t.Errorf("a rejected URI: %v", err)
	}
	step, err := task.Step("make a link")
	if err != nil || len(step.Artifacts) != 1 || step.Artifacts[0].URI != "s3://bucket/out/report.pdf" || step.Artifacts[0].FileName != "report.pdf" {
		t.Fatalf("the step made %+v, %v", step, err)
	}
	d, err := task.Download(step.Artifacts[0].ID)
	if want := "served s3://bucket/out/report.pdf by " + step.ID + " (true true)"; err != nil || !d.Served || string(d.Data) != want {
		t.Errorf("the handler's download: %+v, %v; want %q", d, err, want)
	}
	if d, err := task.Download(memo.ID); err != nil || d.Served || string(d.Data) != "remember" {
		t.Errorf("a download left to the host: %+v, %v", d, err)
	}
	if d, err := task.Download(web.ID); err != nil || d.Served || d.URI != "https://example.com/a.pdf" {
		t.Errorf("a URI left to the host: %+v, %v", d, err)
	}
	bad, _ := task.UploadURI("https://example.com/bad", "bad", "")
	var f *agenttest.Failure
	if _, err := task.Download(bad.ID); !errors.As(err, &f) || f.Handler != "download" || f.Message != "broke" {
		t.Errorf("a failed download: %v", err)
	}
	if got, _ := task.ReadFile("memos/note"); string(got) != "remember" {
		t.Errorf("the download handler changed the workspace: %q", got)
	}
}
