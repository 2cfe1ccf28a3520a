package agenttest_test

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
	agent "github.com/agentrt/agentrt/plugins/go"
	"github.com/agentrt/agentrt/plugins/go/agenttest"
)

// reportErrors runs reports in the step handler and returns the error of
// each, nil for a report taken, as the handler saw them.
func reportErrors(t *testing.T, host *agenttest.Host, reports ...func() error) (*agenttest.Step, []error) {
	t.Helper()
	var errs []error
	register(t, func(*agent.Step) (agent.Result, error) {
		for _, r := range reports {
			errs = append(errs, r())
		}
		return agent.Result{Output: "done"}, nil
	}, nil, nil)
	task, err := host.CreateTask("")
	if err != nil {
		t.Fatal(err)
	}
	step, err := task.Step("")
	if err != nil {
		t.Fatal(err)
	}
	return step, errs
}

func TestProgressReportsAreRecordedOnTheStepInOrderAsUTF8(t *testing.T) {
	step, errs := reportErrors(t, agenttest.New(),
		func() error { return agent.Progress("calling the model (turn 1)") },
		func() error { return agent.ProgressOutput("running tool write_file", "Dear Sir,") },
		func() error { return agent.ProgressOutput("bad \xff bytes", "half \xe2\x82") },
		func() error { return agent.Progress("") },
	)
	for i, err := range errs {
		if err != nil {
			t.Errorf("report %d: %v", i, err)
		}
	}
	want := []agenttest.Progress{
		{Message: "calling the model (turn 1)"},
		{Message: "running tool write_file", Output: "Dear Sir,"},
		{Message: "bad \uFFFD bytes", Output: "half \uFFFD"},
		{Message: ""},
	}
	if !reflect.DeepEqual(step.Progress, want) {
		t.Errorf("progress = %q, want %q", step.Progress, want)
	}
}

func TestAFailedStepKeepsItsProgressReports(t *testing.T) {
	register(t, func(*agent.Step) (agent.Result, error) {
		agent.Progress("about to fail")
		return agent.Result{}, errors.New("broke")
	}, nil, nil)
	task, _ := agenttest.New().CreateTask("")
	if _, err := task.Step(""); err == nil {
		t.Fatal("the step did not fail")
	}
	if got := task.Steps()[0].Progress; len(got) != 1 || got[0].Message != "about to fail" {
		t.Errorf("the failed step's progress = %q", got)
	}
}

// Only the step handler reports progress: the task, artifact and
// download handlers are refused with ErrNotAllowed, as agentrt refuses
// them, and what they tried is recorded nowhere.
func TestOnlyTheStepHandlerReportsProgress(t *testing.T) {
	var got []string
	report := func(handler string) {
		err := agent.ProgressOutput("from the "+handler+" handler", "x")
		got = append(got, fmt.Sprintf("%s: %v", handler, errors.Is(err, agent.ErrNotAllowed)))
	}
	register(t, func(*agent.Step) (agent.Result, error) { return agent.Result{}, nil },
		func(*agent.Task) ([]agent.PlannedStep, error) { report("task"); return nil, nil },
		func(*agent.Task, *agent.Artifact) error { report("artifact"); return nil })
	agent.HandleDownload(func(*agent.Task, *agent.Artifact, io.Writer) error {
		report("download")
		return agent.DefaultDownload()
	})
	t.Cleanup(func() { agent.HandleDownload(nil) })
	task, err := agenttest.New().CreateTask("")
	if err != nil {
		t.Fatal(err)
	}
	a, err := task.Upload("a.txt", "", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Download(a.ID); err != nil {
		t.Fatal(err)
	}
	if want := []string{"task: true", "artifact: true", "download: true"}; !reflect.DeepEqual(got, want) {
		t.Errorf("refused with ErrNotAllowed: %q, want %q", got, want)
	}
}

// A message over 1 KiB and an output over 16 KiB are refused with
// ErrLimit, before anything else is looked at: outside the step handler
// too, as agentrt checks the sizes first.
func TestAProgressReportOverItsSizesIsRefusedWithErrLimit(t *testing.T) {
	long := func(n int) string { return strings.Repeat("m", n) }
	step, errs := reportErrors(t, agenttest.New(),
		func() error { return agent.Progress(long(abi.MaxProgressMessageBytes)) },
		func() error { return agent.Progress(long(abi.MaxProgressMessageBytes + 1)) },
		func() error { return agent.ProgressOutput("o", long(abi.MaxProgressOutputBytes)) },
		func() error { return agent.ProgressOutput("o", long(abi.MaxProgressOutputBytes+1)) },
	)
	want := []bool{false, true, false, true}
	for i, err := range errs {
		if refused := errors.Is(err, agent.ErrLimit); refused != want[i] {
			t.Errorf("report %d: %v, want refused with ErrLimit: %v", i, err, want[i])
		}
	}
	if len(step.Progress) != 2 || len(step.Progress[0].Message) != abi.MaxProgressMessageBytes || len(step.Progress[1].Output) != abi.MaxProgressOutputBytes {
		t.Errorf("recorded %d reports, want the 2 within the sizes", len(step.Progress))
	}

	var inTask error
	register(t, func(*agent.Step) (agent.Result, error) { return agent.Result{}, nil },
		func(*agent.Task) ([]agent.PlannedStep, error) {
			inTask = agent.Progress(long(abi.MaxProgressMessageBytes + 1))
			return nil, nil
		}, nil)
	if _, err := agenttest.New().CreateTask(""); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(inTask, agent.ErrLimit) || !strings.Contains(inTask.Error(), "progress message of 1025 bytes is over its limit of 1024 bytes") {
		t.Errorf("an oversized report in the task handler: %v, want ErrLimit naming the size", inTask)
	}
}

// With agentrt's default log limit, 64 KiB, three reports of a 16 KiB
// output fit and a fourth does not: each counts 64 bytes and its text.
func TestProgressCountsAgainstTheDefaultLogLimit(t *testing.T) {
	out := strings.Repeat("o", abi.MaxProgressOutputBytes)
	r := func() error { return agent.ProgressOutput("m", out) }
	step, errs := reportErrors(t, agenttest.New(), r, r, r, r, func() error { return agent.Progress("small") })
	for i, err := range errs {
		if refused := errors.Is(err, agent.ErrLimit); refused != (i == 3) {
			t.Errorf("report %d: %v", i, err)
		}
	}
	if len(step.Progress) != 4 || step.Progress[3].Message != "small" {
		t.Errorf("recorded %d reports, want 3 and the small one after the refused", len(step.Progress))
	}
}

// Log lines and progress reports share the call's log limit, each
// counted as agentrt counts a record (64 bytes and its text as stored):
// a report that does not fit is dropped and leaves the log as it was; a
// line that does not fit fills it, the log says so once, and every later
// line and report is refused.
func TestProgressAndLogShareTheCallsLogLimit(t *testing.T) {
	host := agenttest.New()
	host.MaxLog = 1000
	line := strings.Repeat("l", 261) // 325 bytes counted
	step, errs := reportErrors(t, host,
		func() error { return agent.ProgressOutput("m", `"quoted"`) }, // 64+1+10: 75
		func() error { agent.Log(agent.Info, line); return nil },      // 400
		func() error { agent.Log(agent.Info, line); return nil },      // 725
		// 64+1+106 would fit, but 106 quotes are stored as 212 bytes.
		func() error { return agent.ProgressOutput("m", strings.Repeat(`"`, 106)) },
		func() error { return agent.Progress(strings.Repeat("p", 211)) }, // 1000: fits exactly
		func() error { return agent.Progress("") },                       // 1064: dropped
		func() error { agent.Log(agent.Info, ""); return nil },           // 1064: fills the log
		func() error { return agent.Progress("") },                       // refused: the log is full
	)
	codes := make([]string, len(errs))
	for i, err := range errs {
		codes[i] = "ok"
		if err != nil {
			codes[i] = err.Error()
		}
	}
	want := []string{"ok", "ok", "ok",
		"progress: a progress report of 277 bytes would put the call over its log limit of 1000 bytes",
		"ok",
		"progress: a progress report of 64 bytes would put the call over its log limit of 1000 bytes",
		"ok",
		"progress: the log limit of 1000 bytes was reached"}
	if !reflect.DeepEqual(codes, want) {
		t.Errorf("reports answered\n%q\nwant\n%q", codes, want)
	}
	if len(step.Progress) != 2 || step.Progress[1].Message != strings.Repeat("p", 211) {
		t.Errorf("recorded %q", step.Progress)
	}
	wantLogs := []agenttest.Log{{Level: "info", Message: line}, {Level: "info", Message: line},
		{Level: "warn", Message: "log limit of 1000 bytes reached; later lines dropped"}}
	if !reflect.DeepEqual(step.Logs, wantLogs) {
		t.Errorf("logs = %q, want %q", step.Logs, wantLogs)
	}
}

// What a report counts is its text as agentrt stores it, escaped: a
// quote, a backslash and \n take 2 bytes, another control character 6,
// U+2028 6, a byte that is not UTF-8 3 (as U+FFFD).
func TestAProgressReportCountsItsTextAsStored(t *testing.T) {
	for _, tt := range []struct {
		text string
		size int // what it counts beyond 64 bytes
	}{
		{"plain", 5},
		{`"\` + "\n\r\t\b\f", 14},
		{"\x00\x1f", 12},
		{"\x7f<>&", 4},
		{"\u2028\u2029", 12},
		{"é€😀", 9},
		{"\xff\xfe", 6},
		{"a\xe2\x82b", 8},
	} {
		t.Run(fmt.Sprintf("%q", tt.text), func(t *testing.T) {
			host := agenttest.New()
			host.MaxLog = 64 + tt.size - 1
			_, errs := reportErrors(t, host, func() error { return agent.Progress(tt.text) })
			if !errors.Is(errs[0], agent.ErrLimit) {
				t.Errorf("a limit of %d took a report that counts %d: %v", host.MaxLog, 64+tt.size, errs[0])
			}
			host.MaxLog++
			step, errs := reportErrors(t, host, func() error { return agent.Progress(tt.text) })
			if errs[0] != nil || len(step.Progress) != 1 {
				t.Errorf("a limit of %d refused a report that counts %d: %v", host.MaxLog, 64+tt.size, errs[0])
			}
		})
	}
}
