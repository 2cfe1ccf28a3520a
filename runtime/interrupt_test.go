package runtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/tetratelabs/wazero"
)

// stepModule is a plugin whose step handler runs body, with funcs and
// whatever else the module needs beside it.
func stepModule(t testing.TB, funcs, body string) []byte {
	return watModule(t, `(module (memory (export "memory") 1)
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  `+funcs+`
  (func (export "agentrt_on_step") (result i32) `+body+`))`)
}

// tree calls itself twice, n deep: 2^n calls, and not one loop.
const tree = `(func $tree (param i32) (result i32)
    (if (result i32) (i32.eqz (local.get 0))
      (then (i32.const 1))
      (else (i32.add (call $tree (i32.sub (local.get 0) (i32.const 1)))
                     (call $tree (i32.sub (local.get 0) (i32.const 1)))))))`

// A call's time limit stops guest code however it keeps running: a loop,
// and functions entered without end, which wazero's own deadline check
// (at loop heads only) let run for good.
func TestGuestCodeStopsAtItsTimeLimitHoweverItRuns(t *testing.T) {
	if inChild(t) {
		return
	}
	for _, tc := range []struct{ name, funcs, body string }{
		{"a loop", ``, `(loop $l (br $l)) (i32.const 0)`},
		{"a recursion without a loop", tree, `(call $tree (i32.const 60))`},
		{"a recursion through its table", `(type $t (func (param i32) (result i32)))
  (table 1 funcref) (elem (i32.const 0) $tree)
  (func $tree (param i32) (result i32)
    (if (result i32) (i32.eqz (local.get 0))
      (then (i32.const 1))
      (else (i32.add (call_indirect (type $t) (i32.sub (local.get 0) (i32.const 1)) (i32.const 0))
                     (call_indirect (type $t) (i32.sub (local.get 0) (i32.const 1)) (i32.const 0))))))`,
			`(call $tree (i32.const 60))`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(context.Background(), "x", stepModule(t, tc.funcs, tc.body), Config{CallTimeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())
			_, _, err = p.Call(context.Background(), "agentrt_on_step", Invocation{})
			var perr *protocol.Error
			if !errors.As(err, &perr) || perr.Code != protocol.ETIMEOUT || !strings.Contains(err.Error(), "time limit of 100ms") {
				t.Errorf("Call: %v; want the time limit", err)
			}
		})
	}
}

// A caller's deadline sooner than the call timeout (a task's time
// budget) stops the call just the same, when it passes.
func TestACallStopsAtItsCallersDeadline(t *testing.T) {
	if inChild(t) {
		return
	}
	p, err := Compile(context.Background(), "x", spinner(t, "loop"), Config{CallTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	deadline := time.Now().Add(50 * time.Millisecond)
	_, _, err = p.Call(context.Background(), "agentrt_on_step", Invocation{Stdout: io.Discard, Stderr: io.Discard, Deadline: deadline})
	if e, ok := errors.AsType[*protocol.Error](err); !ok || e.Code != protocol.ETIMEOUT {
		t.Fatalf("Call: %v; want %s", err, protocol.ETIMEOUT)
	}
	if time.Now().Before(deadline) {
		t.Errorf("the call was stopped before its deadline")
	}
}

// An initialization that never ends is stopped too, wherever it runs: in
// a start section or _initialize, in a module instrumented for snapshots
// or one that is not (it exports a name instrument reserves).
func TestAnInitializationThatNeverEndsIsStopped(t *testing.T) {
	if inChild(t) {
		return
	}
	for _, tc := range []struct{ name, funcs string }{
		{"start", tree + `(func $s (drop (call $tree (i32.const 60)))) (start $s)`},
		{"start, not instrumented", tree + `(func $s (drop (call $tree (i32.const 60)))) (start $s)
  (func (export "agentrt.snapshot.x"))`},
		{"_initialize", tree + `(func (export "_initialize") (drop (call $tree (i32.const 60))))`},
		{"_initialize, not instrumented", tree + `(func (export "_initialize") (drop (call $tree (i32.const 60))))
  (func (export "agentrt.snapshot.x"))`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(context.Background(), "x", stepModule(t, tc.funcs, `(i32.const 0)`), Config{CallTimeout: 100 * time.Millisecond})
			if err == nil || !strings.Contains(err.Error(), "ran past its time limit of 100ms") {
				t.Errorf("Compile: %v; want the initialization stopped at the time limit", err)
			}
		})
	}
}

// A call whose context is cancelled (a server shutting down, a client
// gone) is stopped as cancelled, not as timed out or trapped.
func TestACancelledCallIsStoppedAsCancelled(t *testing.T) {
	p, err := Compile(context.Background(), "x", stepModule(t, ``, `(loop $l (br $l)) (i32.const 0)`), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = p.Call(ctx, "agentrt_on_step", Invocation{})
	var perr *protocol.PluginFailure
	if !errors.As(err, &perr) || perr.Cause != protocol.CauseCancelled {
		t.Errorf("Call: %v; want it cancelled", err)
	}
}

// A module whose code names a global, function or type it does not have
// is invalid; what interruptible adds would make it one that can reach
// its budget, flag or yield. It is refused, and so is one that exports
// such a global or function, or a name the rewrite uses.
func TestInterruptibleRefusesWhatWouldReachWhatItAdds(t *testing.T) {
	valid := watModule(t, `(module (type $t (func (result i32))) (global (mut i32) (i32.const 7)) (table 1 funcref)
  (func $f (export "f") (result i32)
    (global.set 0 (i32.const 1))
    (drop (global.get 0))
    (drop (call_indirect (type $t) (i32.const 0)))
    (call $f)))`)
	if _, err := interruptible(valid); err != nil {
		t.Fatalf("interruptible refuses a valid module: %v", err)
	}
	for _, tc := range []struct {
		name     string
		old, new []byte
		want     string
	}{
		{"global.get", []byte{0x23, 0x00}, []byte{0x23, 0x01}, "names global 1, and the module has 1"},
		{"global.set", []byte{0x24, 0x00}, []byte{0x24, 0x01}, "names global 1, and the module has 1"},
		{"call", []byte{0x10, 0x00, 0x0b}, []byte{0x10, 0x01, 0x0b}, "names function 1, and the module has 1"},
		{"call_indirect", []byte{0x11, 0x00, 0x00}, []byte{0x11, 0x01, 0x00}, "names type 1, and the module has 1"},
		{"an exported function", []byte{'f', 0x00, 0x00}, []byte{'f', 0x00, 0x01}, "exports function 1, and the module has 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := interruptible(patchOnce(t, valid, tc.old, tc.new))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("interruptible: %v; want %q", err, tc.want)
			}
		})
	}
	exported := watModule(t, `(module (global (export "g") (mut i32) (i32.const 7)))`)
	_, err := interruptible(patchOnce(t, exported, []byte{'g', 0x03, 0x00}, []byte{'g', 0x03, 0x01}))
	if err == nil || !strings.Contains(err.Error(), "exports global 1, and the module has 1") {
		t.Errorf("interruptible, a module exporting a global it lacks: %v", err)
	}
	for _, name := range []string{interruptExport, startExport} {
		_, err := interruptible(watModule(t, `(module (func (export "`+name+`")))`))
		if err == nil || !strings.Contains(err.Error(), "a name agentrt reserves") {
			t.Errorf("interruptible, a module exporting %q: %v", name, err)
		}
	}
}

// charges returns the sizes charged in code, a module interruptible
// rewrote, in the order they appear.
func charges(t *testing.T, code []byte) []int64 {
	t.Helper()
	m, err := parseSections(code)
	if err != nil {
		t.Fatal(err)
	}
	budget, _ := m.countOf(sectionGlobal)
	budget -= 2 // the two globals added: budget, then flag
	var sizes []int64
	c := m.cursor(sectionCode)
	for i, n := uint32(0), c.u32(); i < n; i++ {
		fc, _, ok := c.functionBody()
		if !ok {
			t.Fatal("a body could not be read")
		}
		prev := []instruction{}
		eachInstruction(&fc, func(in instruction) string {
			// global.get budget; i32.const size; i32.sub
			if in.op == 0x6b && len(prev) >= 2 && prev[len(prev)-1].op == 0x41 && prev[len(prev)-2].op == 0x23 {
				g := cursor{b: fc.b, off: prev[len(prev)-2].at + 1, end: fc.end}
				k := cursor{b: fc.b, off: prev[len(prev)-1].at + 1, end: fc.end}
				if g.u32() == budget {
					sizes = append(sizes, readSLEB(&k))
				}
			}
			prev = append(prev, in)
			return ""
		})
	}
	return sizes
}

// A function is charged its body's bytes when it is entered, and a loop
// its body's at every turn, nested loops included: whatever an instance
// runs has been charged for first.
func TestEveryFunctionAndLoopIsChargedItsBytes(t *testing.T) {
	nops := strings.Repeat("nop ", 1000)
	out, err := interruptible(watModule(t, `(module (memory 1)
  (func (loop $outer `+nops+` (loop $inner `+nops+` (br_if $inner (i32.const 0))) (br_if $outer (i32.const 0)))))`))
	if err != nil {
		t.Fatal(err)
	}
	got := charges(t, out)
	if len(got) != 3 {
		t.Fatalf("charges %v; want three: the function, the outer loop, the inner loop", got)
	}
	if got[0] < 2000 || got[1] < 2000 || got[2] < 1000 || got[2] >= 2000 {
		t.Errorf("charges %v; want at least 2000, 2000 and 1000 bytes (the inner loop less than 2000)", got)
	}
}

// interruptibleSeeds are modules of every shape the rewrite meets: with
// and without globals, exports, a start section, imports of each kind,
// custom sections between the others.
var interruptibleSeeds = []string{
	`(module (func (export "f") (loop $l (br_if $l (i32.const 0)))))`,
	`(module (func $s) (start $s))`,
	`(module (import "m" "g" (global i32)) (import "m" "t" (table 1 funcref)) (import "m" "mem" (memory 1))
  (import "m" "f" (func)) (global (mut i64) (i64.const 1)) (func (export "f") (result i32) (global.get 0)))`,
	`(module (memory 1) (data (i32.const 0) "x") (func (loop (result i32) (i32.const 1))  drop))`,
	`(module (type (func (param i32) (result i32))) (func (param i32) (result i32)
  (local.get 0) (loop (param i32) (result i32) (i32.const 1) (i32.add))))`,
}

// FuzzInterruptible: a module wazero compiles compiles once rewritten,
// and has the global, unless it has an instruction agentrt does not know
// or exports a name it reserves; the rewrite never changes its input.
func FuzzInterruptible(f *testing.F) {
	for _, src := range interruptibleSeeds {
		code := watModule(f, src)
		f.Add(code)
		// A custom section before every other.
		f.Add(append(append(bytes.Clone(code[:8]), 0x00, 0x02, 0x01, 'c'), code[8:]...))
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	f.Cleanup(func() { r.Close(ctx) })
	f.Fuzz(func(t *testing.T, code []byte) {
		code, err := prepareModule(code, pluginLimits)
		if err != nil {
			return
		}
		in := bytes.Clone(code)
		out, err := interruptible(code)
		if !bytes.Equal(code, in) {
			t.Fatal("interruptible modified its input")
		}
		compiled, cerr := r.CompileModule(ctx, code)
		if cerr != nil {
			return
		}
		compiled.Close(ctx)
		if err != nil {
			if !strings.Contains(err.Error(), "agentrt does not know") && !strings.Contains(err.Error(), "agentrt reserves") {
				t.Fatalf("interruptible refuses a module wazero compiles: %v", err)
			}
			return
		}
		compiled, err = r.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("wazero compiles the module but not its rewrite: %v", err)
		}
		defer compiled.Close(ctx)
		if !exportsGlobal(out, interruptExport) {
			t.Fatalf("the rewrite does not export the global %s", interruptExport)
		}
	})
}

// exportsGlobal reports whether the module code exports a global named
// name.
func exportsGlobal(code []byte, name string) bool {
	m, err := parseSections(code)
	if err != nil {
		return false
	}
	c := m.cursor(sectionExport)
	for i, n := uint32(0), c.u32(); i < n && c.err == nil; i++ {
		got := string(c.name("an export name"))
		if kind := c.u8(); got == name && kind == 0x03 && c.err == nil {
			return true
		}
		c.u32()
	}
	return false
}

// Every seed compiles once rewritten, and runs: a start section moved to
// an export is called by the host, and nothing else changes.
func TestInterruptibleKeepsEveryShapeOfModuleValid(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	for _, src := range interruptibleSeeds {
		out, err := interruptible(watModule(t, src))
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		compiled, err := r.CompileModule(ctx, out)
		if err != nil {
			t.Errorf("%s: the rewrite does not compile: %v", src, err)
			continue
		}
		_, hasStart := compiled.ExportedFunctions()[startExport]
		if want := strings.Contains(src, "(start"); hasStart != want {
			t.Errorf("%s: exports %s: %v, want %v", src, startExport, hasStart, want)
		}
		compiled.Close(ctx)
	}
}

// spinner prints "x" to its standard output, then runs without end:
// runForever's kind of it ("loop" or "tree").
func spinner(t testing.TB, kind string) []byte {
	run := `(loop $l (br $l))`
	if kind == "tree" {
		run = `(drop (call $tree (i32.const 60)))`
	}
	return watModule(t, `(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\10\00\00\00\01\00\00\00x")
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  `+tree+`
  (func (export "agentrt_on_step") (result i32)
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 32)))
    `+run+`
    (i32.const 0)))`)
}

// signalWriter closes its channel at its first write.
type signalWriter struct {
	once sync.Once
	ch   chan struct{}
}

func (w *signalWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(b), nil
}

// The Go runtime stops every goroutine for parts of a garbage collection,
// and it can stop one only where it runs Go code: guest code must leave
// for Go often enough, however it runs, or a collection waits for it, and
// everything with it (the timer that would stop it included), for good.
// A collection while guest code spins must end.
func TestACollectionDoesNotWaitForGuestCode(t *testing.T) {
	if inChild(t) {
		return
	}
	for _, kind := range []string{"loop", "tree"} {
		t.Run(kind, func(t *testing.T) {
			p, err := Compile(context.Background(), "x", spinner(t, kind), Config{CallTimeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())
			running := &signalWriter{ch: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, _, err := p.Call(ctx, "agentrt_on_step", Invocation{Stdout: running, Stderr: io.Discard})
				done <- err
			}()
			<-running.ch
			for range 3 {
				goruntime.GC()
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the spinning call ended without an error")
			}
		})
	}
}

// inChild runs the test in a process of its own, and reports how it went,
// unless this is that process: guest code that never stops can freeze
// the whole process it runs in (a collection waits for it), the test's
// own timeout included. A test that calls it returns when it says so.
func inChild(t *testing.T) bool {
	if os.Getenv("AGENTRT_TEST_CHILD") == t.Name() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "AGENTRT_TEST_CHILD="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Errorf("in a process of its own: %v\n%s", err, out)
	}
	return true
}
