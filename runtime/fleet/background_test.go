package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime/runtimetest"
)

// loopWAT is a plugin whose step handler loops until it is stopped.
const loopWAT = `(module
  (memory (export "memory") 1)
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32)
    (loop $forever (br $forever))
    (i32.const 0)))`

// loopFleet opens a fleet serving the looping plugin as each of agents,
// under cfg (its Dir set here), whose steps are interrupted when the test
// ends.
func loopFleet(t *testing.T, cfg Config, agents ...string) *Fleet {
	t.Helper()
	dir := t.TempDir()
	code := runtimetest.Assemble(t, loopWAT)
	for _, name := range agents {
		if err := os.WriteFile(filepath.Join(dir, name+PluginExt), code, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Dir = dir
	f := openFleet(t, cfg)
	// Before the fleet closes (cleanups run last first): a step left
	// looping by a failed test would hold Close.
	t.Cleanup(func() { f.Interrupt("the test ended") })
	return f
}

// startLoop starts a step of a new task of agent name in the background.
func startLoop(t *testing.T, f *Fleet, name string) (*protocol.Agent, *protocol.Step, error) {
	t.Helper()
	a, err := f.Agent(name)
	if err != nil {
		t.Fatal(err)
	}
	task, err := a.CreateTask(t.Context(), protocol.TaskRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := a.ExecuteStepAsync(t.Context(), task.TaskID, protocol.StepRequestBody{})
	return a, st, err
}

// failureCode is the code of a step's recorded failure.
func failureCode(t *testing.T, a *protocol.Agent, st *protocol.Step) string {
	t.Helper()
	got, err := a.GetStep(t.Context(), st.TaskID, st.StepID)
	if err != nil {
		t.Fatal(err)
	}
	code, _ := protocol.FailureCode(got.AdditionalOutput)
	return code
}

// Every agent's background steps share the fleet's bound: with room for
// one, a second agent's is refused naming the server's bound. Wait waits
// for them (a step that never ends holds it until its context does);
// Interrupt stops them, recorded as interrupted, and frees the bound.
func TestTheFleetBoundsEveryAgentsBackgroundStepsTogetherAndWaitsForThem(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.MaxBackgroundSteps = 1
	f := loopFleet(t, cfg, "a", "b")

	a, st, err := startLoop(t, f, "a")
	if err != nil {
		t.Fatalf("the first background step: %v", err)
	}
	_, _, err = startLoop(t, f, "b")
	if perr, ok := errors.AsType[*protocol.Error](err); !ok || perr.Code != protocol.EUNAVAILABLE || perr.RetryAfter < 1 ||
		!strings.Contains(perr.Message, "the server runs 1 steps in the background") {
		t.Fatalf("another agent's background step past the fleet's bound: %v, want EUNAVAILABLE naming the server's bound", err)
	}
	if by, max := f.BackgroundSteps(); by["a"] != 1 || by["b"] != 0 || max != 1 {
		t.Errorf("background steps %v of at most %d, want a: 1, b: 0 of 1", by, max)
	}

	// The step loops: Wait holds until its context ends.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := f.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a step looping: %v, want its context's end", err)
	}
	f.Interrupt("the fleet is stopping")
	if err := f.Wait(t.Context()); err != nil {
		t.Fatalf("Wait after Interrupt: %v", err)
	}
	if code := failureCode(t, a, st); code != protocol.EINTERRUPTED {
		t.Errorf("the interrupted step failed with %q, want %q", code, protocol.EINTERRUPTED)
	}
	if by, _ := f.BackgroundSteps(); by["a"] != 0 {
		t.Errorf("background steps %v once stopped, want none", by)
	}
}

// A background step runs under the fleet's StepTimeout, not the call
// timeout a waiting client gets, and is recorded as timed out.
func TestABackgroundStepRunsUnderTheFleetsStepTimeout(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.Limits.CallTimeout = time.Hour
	cfg.StepTimeout = 200 * time.Millisecond
	f := loopFleet(t, cfg, "a")
	a, st, err := startLoop(t, f, "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := f.Wait(ctx); err != nil {
		t.Fatalf("the step did not end within a minute under a step timeout of %s: %v", cfg.StepTimeout, err)
	}
	got, err := a.GetStep(t.Context(), st.TaskID, st.StepID)
	if err != nil {
		t.Fatal(err)
	}
	code, _ := protocol.FailureCode(got.AdditionalOutput)
	if code != protocol.ETIMEOUT || !strings.Contains(string(got.AdditionalOutput), "200ms") {
		t.Errorf("the step reads %s, want %s naming its limit of 200ms", got.AdditionalOutput, protocol.ETIMEOUT)
	}
}
