package main

import (
	"bufio"
	"bytes"
	"fmt"
	"github.com/agentrt/agentrt/runtime/runtimetest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Attacks through what wazero does for a plugin outside the ABI: the WASI
// functions it serves (host functions, which the call timeout cannot
// interrupt) and the names and exports it walks at load and at every trap
// (docs/SECURITY.md, "One handler call" and "At load"). The WASI attacks
// are testdata/wat/wasi_flood.wat's.

// flood runs the wasi_flood step marker in task and returns the response
// and how long it took.
func flood(ts *testServer, task, marker string) (*response, time.Duration) {
	ts.t.Helper()
	start := time.Now()
	res := ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "application/json", `{"input":"`+marker+`"}`)
	return res, time.Since(start)
}

// quickSteps is a meanwhile request: a step of another task, which must
// be served while an attack runs.
func quickSteps(ts *testServer) func() error {
	other := ts.createTask(`{}`).TaskID
	return func() error {
		res, err := sendRequest(ts.URL, "POST", "/ap/v1/agent/tasks/"+other+"/steps", "application/json", strings.NewReader(`{"input":"quick"}`))
		if err == nil && res.status != 200 {
			err = fmt.Errorf("a quick step: %d %s", res.status, res.body)
		}
		return err
	}
}

// 1. fd_write and fd_read took any number of iovecs (16 M empty ones: 1.4 s
// in one host call), and fd_write handed each whole to the writer in one
// call the timeout could not interrupt (50 iovecs of the same 100 MiB of
// newlines: 177 s under a 5 s timeout).
func TestWASIIovecFloodsAreRefusedOrEndAtTheCallTimeout(t *testing.T) {
	const callTimeout = 5 * time.Second
	ts := serve(t, watPlugin(t, "wasi_flood"), func(c *runConfig) { c.callTimeout = callTimeout })
	task := ts.createTask(`{}`).TaskID
	stop := meanwhile(t, quickSteps(ts))
	for _, marker := range []string{"!v", "!z", "!i"} {
		res, took := flood(ts, task, marker)
		if got := output(t, res); got != "errno 28" {
			t.Errorf("%s: %q after %v, want EINVAL (errno 28): over %d iovecs", marker, got, took, 1024)
		}
	}
	// 100 GiB of newlines: the log takes what it may and drops the rest,
	// or the call ends at its timeout; either way, soon.
	res, took := flood(ts, task, "!w")
	switch {
	case res.status == 200:
		if got := output(t, res); got != "errno 0" {
			t.Errorf("!w: %q", got)
		}
	default:
		res.wantError(t, 504, "time limit")
	}
	if took > callTimeout+10*time.Second {
		t.Errorf("a 100 GiB fd_write took %v under a call timeout of %v", took, callTimeout)
	}
	if calls, slowest := stop(); calls == 0 {
		t.Error("no other step was served during the attacks")
	} else {
		t.Logf("%d other steps during the attacks, the slowest %v; the 100 GiB fd_write took %v", calls, slowest, took)
	}
}

// 2. random_get filled its whole buffer in one read the timeout could not
// interrupt: 200 MiB, 3.5 s.
func TestRandomGetEndsAtTheCallTimeout(t *testing.T) {
	const callTimeout = 500 * time.Millisecond
	ts := serve(t, watPlugin(t, "wasi_flood"), func(c *runConfig) {
		c.callTimeout = callTimeout
		c.memoryLimit = 1 << 30
	})
	task := ts.createTask(`{}`).TaskID
	// 960 MiB of crypto/rand takes seconds; the call may have 500 ms.
	res, took := flood(ts, task, "!r")
	res.wantError(t, 504, "time limit of 500ms")
	if took > 3*time.Second {
		t.Errorf("random_get of 960 MiB under a call timeout of %v took %v", callTimeout, took)
	}
	ts.step(task, `{"input":"quick"}`) // the task stays usable
}

// 3. A path_* function copied its path, twice, before finding that its fd
// was no directory: a path of 200 MiB cost 480 MB of host heap and 8 s.
func TestAPathOfHundredsOfMiBCostsTheHostNothing(t *testing.T) {
	p := startProcess(t, watPlugin(t, "wasi_flood"), t.TempDir())
	task := p.createTask(`{}`)
	p.step(task, "quick")
	peak := p.peakSince(t)
	for range 3 {
		start := time.Now()
		if got := output(t, p.step(task, "!p")); got != "errno 8" {
			t.Fatalf("path_filestat_get on fd 3: %q after %v, want EBADF (errno 8)", got, time.Since(start))
		}
	}
	// The path lies in memory the plugin never touched: it costs the
	// server nothing unless it is copied.
	grew := peak()
	t.Logf("3 path_filestat_get calls with a 200 MiB path: peak resident memory +%d MiB", grew/mib)
	if grew > 64*mib {
		t.Errorf("3 path_filestat_get calls with a 200 MiB path: the server's peak resident memory grew by %d MiB", grew/mib)
	}
}

// 4 and 5. Module and function names, locals' names and exports of any
// number and length: wazero copies the module name into every function's
// name at load (1 MiB × 1,000 functions: 1.84 GB; 4 MiB × 8,000: out of
// memory), names up to 30 frames at every trap (a 16 MiB module name, 40
// calls deep: 1.9 GB and 31 s in one step), and scans every export and
// every function's local names for every function (80,000 functions, all
// exported: 39 s to start). Each is refused at load, in one line naming
// the limit.
func TestHostileNamesAndExportsAreRefusedAtLoad(t *testing.T) {
	minimal, err := os.ReadFile(watPlugin(t, "minimal"))
	if err != nil {
		t.Fatal(err)
	}
	// functions is a plugin of n functions more than minimal's three
	// (set_result and two exports), the first exports of them exported
	// (besides its memory and two functions).
	functions := func(n, exports int) []byte {
		var b strings.Builder
		b.WriteString(`(module
  (import "agentrt_v1" "set_result" (func $set_result (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32) (i32.const 0))
`)
		for i := range n {
			if i < exports {
				fmt.Fprintf(&b, "  (func (export \"e%x\"))\n", i)
			} else {
				b.WriteString("  (func)\n")
			}
		}
		b.WriteString(")\n")
		return assemble(t, b.String())
	}
	for _, tc := range []struct {
		name string
		code []byte
		want string
	}{
		{"a module name of 16 MiB", withNames(minimal, moduleNameSub(16<<20)), "has a module name of 16777216 bytes"},
		{"a module name over 256 bytes", withNames(minimal, moduleNameSub(257)), "at most 256 are allowed"},
		{"a module name of 1 MiB in 1,000 functions", withNames(functions(1000, 0), moduleNameSub(1<<20)), "at most 256 are allowed"},
		{"a module name of 256 bytes in 20,000 functions", withNames(functions(20_000, 0), moduleNameSub(256)),
			"which would be copied into the name of each of its 20003 functions: 5000 KiB in all; at most 4096 KiB are allowed"},
		{"a function name over 16 KiB", withNames(minimal, functionNameSub(1, 16<<10+1)), "names function 1 with 16385 bytes"},
		{"the locals of 1,001 functions named", withNames(functions(1000, 0), localNamesSub(1001)),
			"names the locals of 1001 functions in its \"name\" section; at most 1000 are allowed"},
		{"1,001 exports", functions(1001-3, 1001-3), "declares 1001 exports; at most 1000 are allowed"},
		{"80,000 functions, all exported", functions(80_000, 80_000), "declares 80003 exports; at most 1000 are allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plugin := filepath.Join(t.TempDir(), "hostile.wasm")
			if err := os.WriteFile(plugin, tc.code, 0o644); err != nil {
				t.Fatal(err)
			}
			msg, took := refusedAtLoad(t, plugin)
			if !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") != 1 {
				t.Errorf("refused with %q, want one line containing %q", msg, tc.want)
			}
			if took > 10*time.Second {
				t.Errorf("refused after %v", took)
			}
		})
	}
}

// refusedAtLoad runs "agentrt run plugin" and returns what it printed when
// it exited, and when; it fails the test if agentrt serves the plugin.
func refusedAtLoad(t *testing.T, plugin string) (string, time.Duration) {
	t.Helper()
	cmd := exec.Command(agentrtBinary(t), "run", plugin, "--data", t.TempDir(), "--addr", "127.0.0.1:0",
		"--cache", filepath.Join(buildDir, "cache"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var out bytes.Buffer
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if urlLine.MatchString(sc.Text()) {
			t.Fatalf("agentrt served the plugin after %v:\n%s", time.Since(start), out.String())
		}
	}
	cmd.Wait()
	took := time.Since(start)
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1:\n%s", code, out.String())
	}
	return out.String(), took
}

// assemble is the module wat2wasm makes of the text src.
func assemble(t *testing.T, src string) []byte { return runtimetest.Assemble(t, src) }

// withNames is code with a "name" section of the given subsections
// appended (a custom section may come last).
func withNames(code []byte, subsections ...[]byte) []byte {
	content := lebBytes([]byte("name"))
	for _, s := range subsections {
		content = append(content, s...)
	}
	out := append(bytes.Clone(code), 0)
	return append(appendLEB(out, uint64(len(content))), content...)
}

// nameSub is the "name" subsection id holding content.
func nameSub(id byte, content []byte) []byte {
	return append(appendLEB([]byte{id}, uint64(len(content))), content...)
}

// moduleNameSub names the module with n bytes.
func moduleNameSub(n int) []byte { return nameSub(0, lebBytes(bytes.Repeat([]byte("m"), n))) }

// functionNameSub names function fn with n bytes.
func functionNameSub(fn uint64, n int) []byte {
	return nameSub(1, append(appendLEB(appendLEB(nil, 1), fn), lebBytes(bytes.Repeat([]byte("f"), n))...))
}

// localNamesSub names local 0 of functions 0 to n-1.
func localNamesSub(n int) []byte {
	b := appendLEB(nil, uint64(n))
	for fn := range n {
		b = appendLEB(b, uint64(fn))
		b = append(appendLEB(appendLEB(b, 1), 0), lebBytes([]byte("x"))...)
	}
	return nameSub(2, b)
}

// lebBytes is b after its length: a name or a byte vector.
func lebBytes(b []byte) []byte { return append(appendLEB(nil, uint64(len(b))), b...) }

func appendLEB(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
