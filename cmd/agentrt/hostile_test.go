package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"
)

// The hostile-plugin suite: plugins written to attack the host. For each
// attack: the step fails with a clear cause (or, where the attack is merely
// refused, succeeds saying so), another task served at the same time is
// unaffected, nothing outside the data directory changes, and the memory
// and goroutines of the server return to their baseline.

type attack struct {
	input  string
	status int
	cause  string // in the error message (or, for a 200, in the output)
	// Some attacks end one of two ways depending on the machine's speed
	// (out of memory, or out of time first).
	altStatus int
	altCause  string
}

// timedCallTimeout is the call timeout of the attacks that may end by
// time (a 504); their causes name it.
const timedCallTimeout = 5 * time.Second

// heapInUse is the server's (this process's) heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rss is the process's resident memory (VmRSS), for the record.
func rss() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb uint64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb << 10
		}
	}
	return 0
}

// listing names every file under dir, with its size.
func listing(t *testing.T, dir string, skip string) string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == skip {
			return filepath.SkipDir
		}
		fi, _ := d.Info()
		if fi != nil && !d.IsDir() {
			out = append(out, fmt.Sprintf("%s %d", p, fi.Size()))
		}
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// runHostileSuite runs the attacks against plugin served by one server
// for the attacks that may end by time and another for the rest: an
// attack that must end its own way (a trap, a limit) runs under a call
// timeout it never reaches, so that however slow the machine, time does
// not end it first.
func runHostileSuite(t *testing.T, plugin, benign string, attacks []attack, opts ...func(*runConfig)) {
	var timed, others []attack
	for _, a := range attacks {
		if a.status == 504 || a.altStatus == 504 {
			timed = append(timed, a)
		} else {
			others = append(others, a)
		}
	}
	if len(timed) > 0 {
		runAttacks(t, plugin, benign, timed, timedCallTimeout, opts...)
	}
	if len(others) > 0 {
		runAttacks(t, plugin, benign, others, 5*time.Minute, opts...)
	}
}

func runAttacks(t *testing.T, plugin, benign string, attacks []attack, callTimeout time.Duration, opts ...func(*runConfig)) {
	opts = append([]func(*runConfig){func(c *runConfig) {
		c.callTimeout = callTimeout
		c.memoryLimit = 64 << 20
		// The bystander steps as fast as it can through every attack: a
		// small plugin takes tens of thousands of steps in a minute.
		c.limits.MaxTaskSteps = 0 // no limit
	}}, opts...)
	ts := serve(t, plugin, opts...)
	// The suites attack calls that start from a snapshot: what a snapshot
	// shares between calls is under attack with the rest.
	if s := ts.srv.plugin.Start(); !s.Snapshot {
		t.Fatalf("the plugin's calls start by %s, not from a snapshot", s)
	}
	sandbox := filepath.Dir(ts.cfg.dataDir)
	cwd, _ := os.Getwd()
	outsideBefore := listing(t, sandbox, ts.cfg.dataDir) + listing(t, cwd, "")

	bystander := ts.createTask(`{}`)
	ts.step(bystander.TaskID, `{"input":"`+benign+`"}`) // warm up
	// The heap is measured without the test's own record of the server's
	// log, which grows with every step the bystander takes (and is
	// resident too).
	heapBefore, rssBefore, goroutinesBefore := heapInUse()-ts.log.held(), rss()-ts.log.held(), runtime.NumGoroutine()

	for _, a := range attacks {
		t.Run(a.input, func(t *testing.T) {
			victim := ts.createTask(`{}`)
			// Another task is served the whole time the attack runs.
			stop := meanwhile(t, func() error {
				code, body, err := tryRequest(http.DefaultClient, ts.URL, "POST", "/ap/v1/agent/tasks/"+bystander.TaskID+"/steps", "",
					strings.NewReader(`{"input":"`+benign+`"}`))
				if err == nil && (code != 200 || !strings.Contains(string(body), `"output":"`)) {
					err = fmt.Errorf("a step of another task: %d %s", code, body)
				}
				return err
			})
			res := ts.do("POST", "/ap/v1/agent/tasks/"+victim.TaskID+"/steps", "", `{"input":"`+a.input+`"}`)
			served, _ := stop()
			if served == 0 {
				t.Error("no step of the other task was served during the attack")
			}
			if a.status == 200 {
				res.want(t, 200)
				var st struct{ Output string }
				res.decode(t, &st)
				if !strings.Contains(st.Output, a.cause) {
					t.Errorf("output %.500q does not contain %q", st.Output, a.cause)
				}
				return
			}
			if a.altStatus != 0 && res.status == a.altStatus {
				failedStep(t, ts, victim.TaskID, res, a.altStatus, a.altCause)
				return
			}
			failedStep(t, ts, victim.TaskID, res, a.status, a.cause)
		})
	}

	// The same attacks again change nothing: whatever an attack took was
	// given back. (Attacks that only take time are not repeated.)
	for _, a := range attacks {
		if a.status == 504 {
			continue
		}
		ts.do("POST", "/ap/v1/agent/tasks/"+ts.createTask(`{}`).TaskID+"/steps", "", `{"input":"`+a.input+`"}`)
	}
	http.DefaultClient.CloseIdleConnections()
	ts.CloseClientConnections()
	heapAfter, rssAfter := heapInUse()-ts.log.held(), rss()-ts.log.held()
	t.Logf("heap in use: %.1f MiB before the attacks, %.1f MiB after two rounds, less the %.1f MiB of the log's record (resident: %.1f MiB, then %.1f MiB)",
		float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20), float64(ts.log.held())/(1<<20), float64(rssBefore)/(1<<20), float64(rssAfter)/(1<<20))
	if heapAfter > heapBefore+16<<20 {
		t.Errorf("heap grew from %d to %d bytes: attacks leaked memory", heapBefore, heapAfter)
	}
	// Plugin memory is mapped outside the Go heap: the process's resident
	// memory must come back too (the attacks used 64 MiB at a time).
	if raceDetector {
		t.Log("resident memory is not checked under the race detector")
	} else if rssAfter > rssBefore+32<<20 {
		t.Errorf("resident memory grew from %d to %d bytes: attacks' memory was not returned", rssBefore, rssAfter)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutinesBefore+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutinesBefore+2 {
		t.Errorf("%d goroutines after the attacks, %d before", n, goroutinesBefore)
	}
	if after := listing(t, sandbox, ts.cfg.dataDir) + listing(t, cwd, ""); after != outsideBefore {
		t.Errorf("files outside the data directory changed:\nbefore:\n%s\nafter:\n%s", outsideBefore, after)
	}
	if _, err := os.Stat("/tmp/agentrt-pwned"); err == nil {
		t.Error("a plugin wrote /tmp/agentrt-pwned")
	}
	// Stopped, its data directory changes no more: it is outside the
	// next server's.
	ts.stop()
}

func TestHostileWasmPlugin(t *testing.T) {
	runHostileSuite(t, watPlugin(t, "hostile"), "fine", []attack{
		{input: "!u", status: 502, cause: "the plugin trapped: wasm error: unreachable"},
		{input: "!s", status: 502, cause: "the plugin trapped: stack overflow",
			altStatus: 504, altCause: "ran past its time limit of 5s"},
		{input: "!g", status: 502, cause: "unreachable (it ran out of memory: it asked for 64.1 MiB, over its limit of 64 MiB)"},
		{input: "!l", status: 504, cause: "ran past its time limit of 5s"},
		{input: "!t", status: 504, cause: "ran past its time limit of 5s"},
		{input: "!o", status: 502, cause: "out of bounds memory access"},
		{input: "!d", status: 502, cause: "integer divide by zero"},
		{input: "!x", status: 502, cause: "exited with code 7"},
	})
}

func TestHostileGoPlugin(t *testing.T) {
	runHostileSuite(t, goPlugin(t, "testdata/plugins/hostile"), "fine", []attack{
		{input: "loop", status: 504, cause: "ran past its time limit of 5s"},
		{input: "sleep", status: 504, cause: "ran past its time limit of 5s"},
		{input: "grow", status: 502, cause: "over its limit of 64 MiB); what it wrote to stderr is in the step's log"},
		// Go grows its stack by copying it: out of memory, whether the
		// runtime then traps or spends the rest of its time looking for
		// memory; a timeout only on a machine too slow to reach the limit.
		{input: "stack", status: 502, cause: "ran out of memory: it asked for",
			altStatus: 504, altCause: "ran past its time limit of 5s"},
		{input: "output", status: 502, cause: "result of 4194317 bytes is over the limit of 1048576 bytes"},
		{input: "logflood", status: 502, cause: "more than 100000 host calls"},
		{input: "exit", status: 502, cause: "exited with code 7"},
		{input: "workspace-quota", status: 502, cause: "over its quota of 8388608 bytes"},
		{input: "artifact-quota", status: 502, cause: "a call may create at most 64 artifacts"},
		{input: "printflood", status: 200, cause: "printed 100 MB"},
		{input: "pointers", status: 200, cause: "workspace_delete"},
		{input: "escape", status: 200, cause: "read /etc/passwd"},
	}, func(c *runConfig) { c.limits.MaxWorkspaceBytes = 8 << 20 })
}

func TestHostilePointersAreAllRefused(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/hostile"))
	st := ts.step(ts.createTask(`{}`).TaskID, `{"input":"pointers"}`)
	var codes map[string][]int32
	if err := json.Unmarshal([]byte(*st.Output), &codes); err != nil || len(codes) != 11 {
		t.Fatalf("output %q: %v", *st.Output, err)
	}
	for fn, cs := range codes {
		for i, c := range cs {
			if c != -2 {
				t.Errorf("%s attack %d returned %d, want -2 (bad pointer)", fn, i, c)
			}
		}
	}
}

func TestHostileEscapeAttemptsReachNothing(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/hostile"))
	st := ts.step(ts.createTask(`{}`).TaskID, `{"input":"escape"}`)
	var found map[string]string
	if err := json.Unmarshal([]byte(*st.Output), &found); err != nil {
		t.Fatalf("output %q: %v", *st.Output, err)
	}
	for what, result := range found {
		switch what {
		case "environment", "arguments":
			if result != "0" {
				t.Errorf("the plugin sees %s host %s", result, what)
			}
		case "working directory":
			if cwd, _ := os.Getwd(); (result != "" && result != "/") || result == cwd {
				t.Errorf("the plugin's working directory is %q, want none", result)
			}
		default:
			if result != "refused" {
				t.Errorf("%s: %s", what, result)
			}
		}
	}
	if len(found) != 9 {
		t.Errorf("found = %v", found)
	}
}

func TestPrintFloodIsCappedInTheLog(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/hostile"), func(c *runConfig) { c.limits.MaxLogBytes = 10000 })
	task := ts.createTask(`{}`)
	st := ts.step(task.TaskID, `{"input":"printflood"}`)
	res := ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID+"/logs", "", "").want(t, 200)
	if len(res.body) > 20000 || !strings.Contains(string(res.body), "log limit of 10000 bytes reached") {
		t.Errorf("log of %d bytes: %.200s", len(res.body), res.body)
	}
}

func TestClocksAndRandomAreReal(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/hostile"))
	task := ts.createTask(`{}`)
	a := *ts.step(task.TaskID, `{"input":"entropy"}`).Output
	b := *ts.step(task.TaskID, `{"input":"entropy"}`).Output
	year := fmt.Sprint(time.Now().Year())
	if !strings.HasPrefix(a, year) || !strings.HasPrefix(b, year) {
		t.Errorf("the plugin's clock says %q and %q; want the real year %s", a, b, year)
	}
	if a == b {
		t.Errorf("two instances drew the same random bytes: %q", a)
	}
}

func TestExcessCallsWaitInABoundedQueueThenGet503(t *testing.T) {
	const callTimeout = 5 * time.Second
	ts := serve(t, goPlugin(t, "testdata/plugins/hostile"), func(c *runConfig) {
		// The first call holds the only instance until its timeout; a call
		// may wait for the instance longer than that.
		c.callTimeout = callTimeout
		c.maxInstances, c.maxQueue, c.queueWait = 1, 1, time.Minute
	})
	busy := ts.createTask(`{}`)
	other := ts.createTask(`{}`)
	third := ts.createTask(`{}`)
	stepsOf := func(task string) string { return "/ap/v1/agent/tasks/" + task + "/steps" }

	holder := ts.start("POST", stepsOf(busy.TaskID), "", `{"input":"sleep"}`)
	ts.waitLimiter("the first call to hold the only instance", 1, 0, holder)
	waiter := ts.start("POST", stepsOf(other.TaskID), "", `{"input":"hi"}`)
	ts.waitLimiter("a second call to wait for the instance", 1, 1, holder, waiter)

	// The instance and the queue are full: a further call is refused at
	// once (it would wait for the instance otherwise), and told when to
	// retry.
	full := ts.do("POST", stepsOf(third.TaskID), "", `{"input":"hi"}`)
	if full.status != 503 && holder.answered() {
		t.Fatalf("a call past a full queue was answered %d only once the call holding the instance had ended (its timeout is %v): "+
			"it waited instead of being refused (or this machine took that long to send it)", full.status, callTimeout)
	}
	full.wantError(t, 503, "the agent is busy")
	if full.header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After = %q", full.header.Get("Retry-After"))
	}

	// When the first call gives the instance back, the waiting call runs.
	holder.wait().wantError(t, 504, "time limit")
	var st struct{ Output string }
	waiter.wait().want(t, 200).decode(t, &st)
	if st.Output != "hi" {
		t.Errorf("the call that waited answered %q, want hi", st.Output)
	}

	// The refused call recorded no step; once the instance is free, calls run.
	var steps struct{ Steps []any }
	ts.do("GET", stepsOf(third.TaskID), "", "").want(t, 200).decode(t, &steps)
	if len(steps.Steps) != 0 {
		t.Errorf("a refused call left steps: %v", steps.Steps)
	}
	ts.step(third.TaskID, `{"input":"hi"}`)
}

func TestATaskThatUsedUpItsTimeBudgetIsRefused(t *testing.T) {
	ts := serve(t, goPlugin(t, "testdata/plugins/hostile"), func(c *runConfig) {
		c.callTimeout = 10 * time.Second
		c.limits.MaxTaskTime = time.Second
	})
	task := ts.createTask(`{}`)
	ts.step(task.TaskID, `{"input":"quick"}`)
	res := ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "", `{"input":"loop"}`)
	failedStep(t, ts, task.TaskID, res, 504, "the task used up its plugin time budget of 1s")
	ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "", `{"input":"quick"}`).
		wantError(t, 429, "has used up its plugin time budget of 1s")
	// The budget is per task and survives nothing: other tasks run.
	ts.step(ts.createTask(`{}`).TaskID, `{"input":"quick"}`)
	ts.stop()
	ts = startServer(t, ts.cfg)
	ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "", `{"input":"quick"}`).
		wantError(t, 429, "plugin time budget")
}

func TestClosingThePluginStopsCallsInFlightSafely(t *testing.T) {
	const n = 6
	const callTimeout = 2 * time.Minute // what closing would take, were calls not stopped
	ts := serve(t, watPlugin(t, "hostile"), func(c *runConfig) {
		c.callTimeout = callTimeout
		c.maxInstances = n
	})
	var calls []*pendingRequest
	var tasks []string
	for range n {
		task := ts.createTask(`{}`).TaskID
		tasks = append(tasks, task)
		calls = append(calls, ts.start("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", `{"input":"!m"}`))
	}
	// Each call has its instance, where the plugin scribbles on its memory.
	ts.waitLimiter("every call to run", n, 0, calls...)
	start := time.Now()
	if err := ts.srv.plugin.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > callTimeout/2 {
		t.Errorf("closing took %v: calls in flight were not stopped", d)
	}
	for _, c := range calls {
		c.wait().wantError(t, 503, "shutting down")
	}
	// Nothing was recorded for the stopped calls, and calls after the
	// close are refused the same way.
	for _, task := range tasks {
		var steps struct{ Steps []any }
		ts.do("GET", "/ap/v1/agent/tasks/"+task+"/steps", "", "").want(t, 200).decode(t, &steps)
		if len(steps.Steps) != 0 {
			t.Errorf("a call stopped by the shutdown left a step: %v", steps.Steps)
		}
	}
	ts.do("POST", "/ap/v1/agent/tasks/"+tasks[0]+"/steps", "", `{"input":"fine"}`).wantError(t, 503, "shutting down")
}
