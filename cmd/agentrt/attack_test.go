package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/storage/disktest"
)

// The hostile suite by class: one test per class of attack a plugin that
// knows the ABI can make on the host's limits (docs/SECURITY.md, "Every
// bound"), each attacking as a plugin written for it would and asserting
// containment. Where the attack is on the host's memory, the server runs
// as its own process and its peak resident memory (VmHWM) is read from
// /proc; where it is on the disk, the data directory is measured; where it
// is on the shared writer, another client's latency is measured while the
// attack runs.

func attackerPlugin(t testing.TB) string { return goPlugin(t, "testdata/plugins/attacker") }

// procStatus reads a field of /proc/PID/status, in bytes (the kernel
// gives kB).
func procStatus(t *testing.T, pid int, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// peakSince resets the process's peak resident memory and returns a
// function that reports how far above the resident memory at the reset
// the peak went since.
func (p *process) peakSince(t *testing.T) func() uint64 {
	t.Helper()
	pid := p.cmd.Process.Pid
	// Writing 5 to clear_refs resets VmHWM to the current VmRSS.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident memory: %v", err)
	}
	base := procStatus(t, pid, "VmRSS")
	return func() uint64 {
		if peak := procStatus(t, pid, "VmHWM"); peak > base {
			return peak - base
		}
		return 0
	}
}

func (p *process) createTask(body string) string {
	p.t.Helper()
	var task protocol.Task
	p.do("POST", "/ap/v1/agent/tasks", "application/json", body).want(p.t, 200).decode(p.t, &task)
	return task.TaskID
}

func (p *process) step(taskID, input string) *response {
	p.t.Helper()
	body, _ := json.Marshal(map[string]string{"input": input})
	return p.do("POST", "/ap/v1/agent/tasks/"+taskID+"/steps", "application/json", string(body))
}

// output is a step response's output.
func output(t *testing.T, res *response) string {
	t.Helper()
	res.want(t, 200)
	var st protocol.Step
	res.decode(t, &st)
	if st.Output == nil {
		return ""
	}
	return *st.Output
}

const mib = 1 << 20

// 1. Tables escape --memory: each entry is 8 bytes of host heap, and
// table.grow was bounded only by 2^32 entries.
func TestTableGrowthStopsAtTheTableLimitNotAtTheHostsMemory(t *testing.T) {
	p := startProcess(t, watPlugin(t, "tables"), t.TempDir(), "--memory", "64MiB", "--max-table-entries", "100000")
	task := p.createTask(`{}`)
	peak := p.peakSince(t)
	// 1,000 more entries fit; 0xfffffff0 (32 GB of heap) and 2^27 (1 GiB)
	// do not, and cost nothing.
	for range 3 {
		if got := output(t, p.step(task, "grow")); got != "YNN" {
			t.Fatalf("table.grow by 1000, 0xfffffff0, 2^27: %q, want YNN", got)
		}
	}
	if grew := peak(); grew > 32*mib {
		t.Errorf("the server's peak resident memory grew by %d MiB while a plugin grew its table", grew/mib)
	}
	// A table declared over the limit is refused before it is made.
	out, err := runAgentrt(t, "run", watPlugin(t, "table_min"), "--data", t.TempDir(), "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(out, "4000000000") || !strings.Contains(out, "100000") {
		t.Errorf("a table of 4,000,000,000 entries: %v\n%s", err, out)
	}
}

// 2. An artifact handler that puts something in the way of an upload's
// rollback must not leave a data directory the server refuses to start
// on, whether the server lives on or is killed mid-way.
func TestAnArtifactHandlerCannotMakeTheDataDirectoryUnstartable(t *testing.T) {
	data := t.TempDir()
	p := startProcess(t, attackerPlugin(t), data)
	task := p.createTask(`{}`)
	upload := func(dir, name string) *response {
		ct, body := multipartBody(t, part{name: "relative_path", value: dir}, part{name: "file", fileName: name, value: "new"})
		return doRequest(t, p.url, "POST", "/ap/v1/agent/tasks/"+task+"/artifacts", ct, body)
	}
	for _, tc := range []struct{ dir, name, cause string }{
		{"", "block-dir.txt", "blocked with a directory"},
		{"d", "block-parent.txt", "blocked with a file"},
		{"e", "own-file.txt", "replaced with its own file"},
	} {
		path := strings.TrimPrefix(tc.dir+"/"+tc.name, "/")
		if got := output(t, p.step(task, "write "+path)); got != "written" {
			t.Fatalf("write %s: %s", path, got)
		}
		upload(tc.dir, tc.name).wantError(t, 502, tc.cause)
	}
	// Killed while a handler that blocked its rollback still runs.
	if got := output(t, p.step(task, "write h/block-dir-hang.txt")); got != "written" {
		t.Fatal(got)
	}
	hung := make(chan struct{})
	ct, body := multipartBody(t, part{name: "relative_path", value: "h"}, part{name: "file", fileName: "block-dir-hang.txt", value: "new"})
	go func() {
		defer close(hung)
		tryRequest(http.DefaultClient, p.url, "POST", "/ap/v1/agent/tasks/"+task+"/artifacts", ct, body)
	}()
	blocked := filepath.Join(data, "workspaces", task, "files", "h", "block-dir-hang.txt", "x", "f")
	eventually(t, 30*time.Second, "the handler's directory", func() bool { _, err := os.Stat(blocked); return err == nil })
	p.kill()
	<-hung

	p = startProcess(t, attackerPlugin(t), data)
	p.do("GET", "/ap/v1/agent/tasks/"+task, "", "").want(t, 200)
	if got := output(t, p.step(task, "quick")); got != "quick" {
		t.Errorf("after the restart a step answers %q", got)
	}
	// Every replaced file is kept aside with a note of where it was, and
	// was logged once with its task.
	notes, _ := filepath.Glob(filepath.Join(data, "workspaces", task, "quarantine", "*.json"))
	var paths []string
	for _, n := range notes {
		var note struct{ Path string }
		b, _ := os.ReadFile(n)
		json.Unmarshal(b, &note)
		paths = append(paths, note.Path)
		kept, err := os.ReadFile(strings.TrimSuffix(n, ".json"))
		if err != nil || string(kept) != "old" {
			t.Errorf("quarantined %s: %q %v", note.Path, kept, err)
		}
	}
	if want := "[block-dir.txt d/block-parent.txt e/own-file.txt h/block-dir-hang.txt]"; fmt.Sprint(sortedCopy(paths)) != want {
		t.Errorf("quarantined %v, want %s", sortedCopy(paths), want)
	}
	if n := strings.Count(p.log(), "kept aside"); n != 1 || !strings.Contains(p.log(), task) {
		t.Errorf("the restart logged %d quarantines, want the one the killed server left:\n%s", n, p.log())
	}
}

// 3. Host calls from a start section or _initialize (Go's init functions)
// had full effect in real calls.
func TestHostCallsWhileAPluginIsConstructedReachNothing(t *testing.T) {
	for _, tc := range []struct {
		name, plugin, input, want string
	}{
		{"wasm start section and _initialize", "wat", "", "6666666666"},
		{"Go init functions", "go", "", "[-6,-6,-6,-6,-6]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plugin := goPlugin(t, "testdata/plugins/construct")
			if tc.plugin == "wat" {
				plugin = watPlugin(t, "construct")
			}
			ts := serve(t, plugin)
			task := ts.createTask(`{}`)
			st := ts.step(task.TaskID, `{"input":"`+tc.input+`"}`)
			if st.Output == nil || *st.Output != tc.want {
				t.Errorf("what the host calls returned: %v, want %s", st.Output, tc.want)
			}
			if len(st.Artifacts) != 0 {
				t.Errorf("construction created artifacts: %+v", st.Artifacts)
			}
			ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", "", "").want(t, 200)
			logs := ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID+"/logs", "", "").want(t, 200)
			if strings.Contains(string(logs.body), "construct") {
				t.Errorf("construction logged: %s", logs.body)
			}
			files, _ := filepath.Glob(filepath.Join(ts.cfg.dataDir, "workspaces", task.TaskID, "files", "*"))
			if len(files) != 0 {
				t.Errorf("construction wrote %v", files)
			}
		})
	}
}

// strictJSON fails unless b is what a strict parser accepts
// (strictJSONProblem).
func strictJSON(t *testing.T, what string, b []byte) {
	t.Helper()
	if p := strictJSONProblem(b); p != "" {
		t.Errorf("%s is %s: %.300q", what, p, b)
	}
}

// everything fetches every answer that shows the server's tasks, steps
// and logs, and checks each with strictJSON.
func (ts *testServer) everythingIsStrictJSON(t *testing.T) {
	t.Helper()
	get := func(path string) []byte {
		res := ts.do("GET", path, "", "").want(t, 200)
		strictJSON(t, path, res.body)
		return res.body
	}
	var tasks protocol.TaskList
	json.Unmarshal(get("/ap/v1/agent/tasks?page_size=100"), &tasks)
	for _, task := range tasks.Tasks {
		base := "/ap/v1/agent/tasks/" + task.TaskID
		get(base)
		get(base + "/logs")
		get(base + "/artifacts?page_size=100")
		var steps protocol.StepList
		json.Unmarshal(get(base+"/steps?page_size=100"), &steps)
		for _, st := range steps.Steps {
			get(base + "/steps/" + st.StepID)
			get(base + "/steps/" + st.StepID + "/logs")
		}
	}
}

// 4. Invalid UTF-8 (and lone surrogates, and nesting) in any field a
// plugin hands over was stored, served and fed back to the next handler.
func TestAPluginsInvalidTextIsNeverStoredOrServed(t *testing.T) {
	ts := serve(t, attackerPlugin(t))
	task := ts.createTask(`{}`).TaskID
	for _, attack := range []string{"utf8-output", "utf8-name", "utf8-key", "utf8-value", "surrogate", "deep"} {
		res := ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", `{"input":"`+attack+`"}`)
		st := failedStep(t, ts, task, res, 502, "result is not valid JSON")
		logs := ts.do("GET", "/ap/v1/agent/tasks/"+task+"/steps/"+st.StepID+"/logs", "", "").want(t, 200)
		if !strings.Contains(string(logs.body), "set_result: -1") {
			t.Errorf("%s: set_result was not refused with -1 at once: %s", attack, logs.body)
		}
	}
	// Log lines and what the plugin prints are kept, their bad bytes
	// replaced.
	for _, attack := range []string{"utf8-log", "utf8-stdout"} {
		st := ts.step(task, `{"input":"`+attack+`"}`)
		logs := ts.do("GET", "/ap/v1/agent/tasks/"+task+"/steps/"+st.StepID+"/logs", "", "").want(t, 200)
		if !strings.Contains(string(logs.body), "bad \ufffd") {
			t.Errorf("%s: the log line did not keep its text with U+FFFD: %s", attack, logs.body)
		}
	}
	// A task handler's plan with bad text creates no task.
	ts.do("POST", "/ap/v1/agent/tasks", "", `{"input":"plan-utf8"}`).wantError(t, 502, "result is not valid JSON")
	ts.everythingIsStrictJSON(t)
}

// 5. A task handler answering hundreds of thousands of empty planned
// steps stalled the shared writer for seconds and took gigabytes.
func TestAPlannedStepFloodIsRefusedBeforeItCostsTheHost(t *testing.T) {
	p := startProcess(t, attackerPlugin(t), t.TempDir(), "--max-result", "4MiB")
	p.createTask(`{}`) // warm up
	for _, n := range []int{349521, 1000000} {
		peak := p.peakSince(t)
		// Another client creates tasks the whole time.
		stop := meanwhile(t, func() error {
			code, _, err := tryRequest(http.DefaultClient, p.url, "POST", "/ap/v1/agent/tasks", "", strings.NewReader(`{}`))
			if err == nil && code != 200 {
				err = fmt.Errorf("status %d", code)
			}
			return err
		})
		res := p.do("POST", "/ap/v1/agent/tasks", "", fmt.Sprintf(`{"input":"plan %d"}`, n))
		served, worst := stop()
		res.wantError(t, 502, "planned more than 256 steps")
		if grew := peak(); grew > 64*mib {
			t.Errorf("planning %d steps: the server's peak resident memory grew by %d MiB", n, grew/mib)
		}
		t.Logf("planning %d steps: another client's slowest create-task took %v (%d served)", n, worst, served)
		if worst > 2*time.Second {
			t.Errorf("another client waited %v for a create-task while %d steps were planned", worst, n)
		}
	}
	// The limit itself is honoured to the step.
	task := p.createTask(`{"input":"plan 256"}`)
	var steps protocol.StepList
	p.do("GET", "/ap/v1/agent/tasks/"+task+"/steps?page_size=1", "", "").want(t, 200).decode(t, &steps)
	if steps.Pagination.TotalItems != 256 {
		t.Errorf("a plan of 256 steps recorded %d", steps.Pagination.TotalItems)
	}
	p.do("POST", "/ap/v1/agent/tasks", "", `{"input":"plan 257"}`).wantError(t, 502, "planned more than 256 steps")
}

// 6. Plugin time was kept in milliseconds: calls of 0.3 ms counted nothing
// against the task's time budget.
func TestSubMillisecondCallsUseUpTheTaskTimeBudget(t *testing.T) {
	ts := serve(t, watPlugin(t, "hostile"), func(c *runConfig) { c.limits.MaxTaskTime = 50 * time.Millisecond })
	task := ts.createTask(`{}`).TaskID
	for i := 1; ; i++ {
		res := ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", `{"input":"fine"}`)
		if res.status == 504 {
			// The budget ran out during this call, which was stopped:
			// the next is refused.
			res.wantError(t, 504, "the task used up its plugin time budget of 50ms")
			res = ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", `{"input":"fine"}`)
		}
		if res.status == 429 {
			res.wantError(t, 429, "used up its plugin time budget of 50ms")
			t.Logf("refused after %d calls", i)
			return
		}
		res.want(t, 200)
		if i == 5000 {
			t.Fatal("5,000 calls of a task with a budget of 50 ms were never refused: their time was not counted")
		}
	}
}

// 7. The log limit counted message bytes only: empty records were free.
func TestEmptyLogRecordsCountAgainstTheLogLimit(t *testing.T) {
	ts := serve(t, attackerPlugin(t)) // --max-log 64KiB
	task := ts.createTask(`{}`).TaskID
	st := ts.step(task, `{"input":"empty-logs"}`)
	accepted, _ := strconv.Atoi(*st.Output)
	if want := (64 << 10) / protocol.LogRecordOverhead; accepted != want {
		t.Errorf("%d empty log records accepted, want %d (64 KiB at %d bytes a record)", accepted, want, protocol.LogRecordOverhead)
	}
	var logs struct{ Logs []protocol.LogRecord }
	res := ts.do("GET", "/ap/v1/agent/tasks/"+task+"/steps/"+st.StepID+"/logs", "", "").want(t, 200)
	res.decode(t, &logs)
	if len(logs.Logs) != accepted+1 || !strings.Contains(logs.Logs[len(logs.Logs)-1].Message, "log limit") {
		t.Errorf("the step's log holds %d records, want %d and a notice", len(logs.Logs), accepted)
	}
}

// 8. The task log was re-read, decoded, extended and re-written whole on
// every upload whose handler logged: each upload cost more than the last.
func TestUploadsAppendToTheTaskLogWithinItsLimit(t *testing.T) {
	ts := serve(t, attackerPlugin(t), func(c *runConfig) { c.limits.MaxTaskLogBytes = 1 << 20 })
	task := ts.createTask(`{}`).TaskID
	for i := range 40 { // each upload's handler logs 60 KiB
		ts.upload(task, part{name: "file", fileName: "log.txt", value: fmt.Sprint(i)}).want(t, 200)
	}
	var logs struct{ Logs []protocol.LogRecord }
	res := ts.do("GET", "/ap/v1/agent/tasks/"+task+"/logs", "", "").want(t, 200)
	res.decode(t, &logs)
	if size := protocol.LogSize(logs.Logs); size > 1<<20+256 {
		t.Errorf("the task's log holds %d bytes, over its limit of 1 MiB", size)
	}
	last := logs.Logs[len(logs.Logs)-1]
	if !strings.Contains(last.Message, "the task's log limit of 1048576 bytes was reached") {
		t.Errorf("the log does not end with the notice: %.100s", last.Message)
	}
	// One row per handler call that logged, none rewritten: 17 calls fit
	// (17 × 60 KiB) before the notice.
	if len(logs.Logs) != 18 {
		t.Errorf("%d records, want 17 and the notice", len(logs.Logs))
	}
}

// 9. The host copied whole guest buffers (log, artifact_create: 200 MiB
// each) before refusing them, and read workspace files through
// io.ReadAll's doubling.
func TestTheHostNeverCopiesAGuestBufferItRefuses(t *testing.T) {
	p := startProcess(t, attackerPlugin(t), t.TempDir(), "--memory", "256MiB", "--max-result", "1MiB")
	var tasks []string
	for range 3 {
		tasks = append(tasks, p.createTask(`{}`))
	}
	peak := p.peakSince(t)
	var wg sync.WaitGroup
	for _, task := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				for _, attack := range []string{"big-log", "big-meta", "big-result", "big-print"} {
					code, body, err := tryRequest(http.DefaultClient, p.url, "POST", "/ap/v1/agent/tasks/"+task+"/steps", "",
						strings.NewReader(`{"input":"`+attack+` 209715200"}`))
					// A refusal is a negative code; a print is taken whole
					// and its lines past the log limit dropped unread.
					refused := bytes.Contains(body, []byte(`"output":"-`)) || bytes.Contains(body, []byte(`"output":"209715200 \u003cnil\u003e"`)) ||
						bytes.Contains(body, []byte(`"output":"209715200 <nil>"`))
					if err != nil || code != 200 || !refused {
						t.Errorf("%s: %d %s %v", attack, code, body, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if grew := peak(); grew > 100*mib {
		t.Errorf("3 tasks × 40 calls with 200 MiB arguments: the server's peak resident memory grew by %d MiB", grew/mib)
	}

	// Files are read straight into the plugin's memory: what reading a
	// 100 MiB file costs is the plugin's own memory, within its limit.
	p.kill()
	p = startProcess(t, attackerPlugin(t), t.TempDir(), "--memory", "128MiB")
	tasks = nil
	for range 3 {
		task := p.createTask(`{}`)
		if got := output(t, p.step(task, fmt.Sprintf("write-big %d", 100*mib))); got != "written" {
			t.Fatal(got)
		}
		tasks = append(tasks, task)
	}
	peak = p.peakSince(t)
	for _, task := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body, err := tryRequest(http.DefaultClient, p.url, "POST", "/ap/v1/agent/tasks/"+task+"/steps", "",
				strings.NewReader(fmt.Sprintf(`{"input":"read-big %d"}`, 100*mib)))
			if err != nil || code != 200 || !bytes.Contains(body, []byte(fmt.Sprintf(`"output":"%d"`, 100*mib))) {
				t.Errorf("read-big: %d %.300s %v", code, body, err)
			}
		}()
	}
	wg.Wait()
	// docs/SECURITY.md: instances × --memory, and nothing of the host's.
	if grew, bound := peak(), uint64(3*128*mib+48*mib); grew > bound {
		t.Errorf("3 reads of 100 MiB files under --memory 128MiB: peak resident memory grew by %d MiB, over %d MiB", grew/mib, bound/mib)
	}
}

// 10. The workspace quota counted regular files only: a task limited to
// 300 files held 310,000 directories.
func TestDirectoriesCountAgainstTheWorkspaceQuota(t *testing.T) {
	ts := serve(t, attackerPlugin(t), func(c *runConfig) { c.limits.MaxWorkspaceFiles = 300 })
	task := ts.createTask(`{}`).TaskID
	out := *ts.step(task, `{"input":"dirs"}`).Output
	if !strings.Contains(out, "over its quota of 300 files and directories") {
		t.Errorf("the directory flood ended with %q", out)
	}
	entries := 0
	filepath.WalkDir(filepath.Join(ts.cfg.dataDir, "workspaces", task, "files"), func(path string, d fs.DirEntry, err error) error {
		if err == nil {
			entries++
		}
		return nil
	})
	if entries-1 > 300 { // the walk counts files/ itself
		t.Errorf("the workspace holds %d files and directories, over its quota of 300", entries-1)
	}
}

// 11. After big calls, the server's resident memory stayed gigabytes above
// its baseline: garbage waited for a collection, free pages for the
// scavenger.
//
// What may stay is what agentrt means to keep: heap up to reclaimThreshold
// above its floor, and the region SQLite's allocator keeps for reuse in the
// size class of the biggest record it built (the next power of two above
// the 60 MiB result: 64 MiB; docs/SECURITY.md), plus a little slack.
// Without the reclaimer, the three calls' garbage keeps it some 300 MiB
// above its baseline.
func TestFreedMemoryReturnsToTheSystemAfterBigCalls(t *testing.T) {
	const sqliteKeeps, slack = 64 * mib, 32 * mib
	p := startProcess(t, attackerPlugin(t), t.TempDir(), "--max-result", "64MiB", "--max-body", "1KiB")
	task := p.createTask(`{}`)
	p.step(task, "quick")
	base := procStatus(t, p.cmd.Process.Pid, "VmRSS")
	for range 3 {
		code, _, err := tryRequest(http.DefaultClient, p.url, "POST", "/ap/v1/agent/tasks/"+task+"/steps", "",
			strings.NewReader(fmt.Sprintf(`{"input":"valid-result %d"}`, 60*mib)))
		if err != nil || code != 200 {
			t.Fatalf("a 60 MiB result: %d %v", code, err)
		}
	}
	high := procStatus(t, p.cmd.Process.Pid, "VmRSS")
	start := time.Now()
	var now uint64
	eventually(t, 20*time.Second, fmt.Sprintf("resident memory back near its baseline of %d MiB (%d MiB after the calls)", base/mib, high/mib), func() bool {
		now = procStatus(t, p.cmd.Process.Pid, "VmRSS")
		return now < base+reclaimThreshold+sqliteKeeps+slack
	})
	t.Logf("resident memory: %d MiB before, %d MiB after three 60 MiB results, %d MiB %v later",
		base/mib, high/mib, procStatus(t, p.cmd.Process.Pid, "VmRSS")/mib, time.Since(start).Round(100*time.Millisecond))
}

// 12. No byte quota on a task's artifacts, no floor under the disk, and a
// plugin's failure message of any length in one server log line.
func TestArtifactBytesFailureMessagesAndTheDiskAreBounded(t *testing.T) {
	t.Run("artifact bytes", func(t *testing.T) {
		ts := serve(t, attackerPlugin(t), func(c *runConfig) { c.limits.MaxTaskArtifactBytes = 10 << 20 })
		task := ts.createTask(`{}`).TaskID
		out := *ts.step(task, `{"input":"artifact-bytes 3000000"}`).Output
		if !strings.HasPrefix(out, "3 artifacts -5") || !strings.Contains(out, "over their quota of 10485760 bytes") {
			t.Errorf("artifacts of 3 MB until refused: %q", out)
		}
		ts.upload(task, part{name: "file", fileName: "a.bin", value: strings.Repeat("x", 2<<20)}).
			wantError(t, 413, "quota of 10485760 bytes")
		ts.upload(task, part{name: "file", fileName: "a.bin", value: "fits"}).want(t, 200)
	})
	t.Run("failure messages", func(t *testing.T) {
		ts := serve(t, attackerPlugin(t))
		task := ts.createTask(`{}`).TaskID
		res := ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", `{"input":"big-error"}`)
		st := failedStep(t, ts, task, res, 502, "EEEE")
		if len(res.body) > 5000 || len(st.AdditionalOutput) > 5000 {
			t.Errorf("a 512 KiB failure message reached the client as %d bytes and was recorded as %d", len(res.body), len(st.AdditionalOutput))
		}
		for _, line := range strings.Split(ts.log.String(), "\n") {
			if strings.Contains(line, "step handler failed") && len(line) > 1024 {
				t.Errorf("a server log line of %d bytes", len(line))
			}
		}
	})
	t.Run("disk floor", func(t *testing.T) {
		disktest.Run(t, "size=64m", func(t *testing.T, mnt string) {
			ts := serve(t, attackerPlugin(t), func(c *runConfig) {
				c.dataDir = filepath.Join(mnt, "data")
				c.minFreeDisk = diskFloorFlag{n: 32 << 20}
			})
			task := ts.createTask(`{}`).TaskID
			res := ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", fmt.Sprintf(`{"input":"write-big %d"}`, 40<<20))
			failedStep(t, ts, task, res, 502, "keeps at least 33554432 free")
			ts.upload(task, part{name: "file", fileName: "big.bin", value: strings.Repeat("x", 40<<20)}).wantError(t, 507, "disk is full")
			if free := diskFree(t, mnt); free < 32<<20 {
				t.Errorf("%d bytes free, under the floor of 32 MiB", free)
			}
			ts.step(task, `{"input":"quick"}`) // small writes go on
			// Below the floor (something else filled the disk), steps are
			// refused (agentrt sees it within a second), and served again once
			// there is room.
			filler := filepath.Join(mnt, "filler")
			if err := os.WriteFile(filler, make([]byte, diskFree(t, mnt)-16<<20), 0o600); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "a step refused at the floor", func() bool {
				return ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", `{"input":"quick"}`).status == 507
			})
			os.Remove(filler)
			eventually(t, 10*time.Second, "a step served again", func() bool {
				return ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", `{"input":"quick"}`).status == 200
			})
		})
	})
}

// runAgentrt runs the agentrt binary to completion (a minute at most) and
// returns what it printed.
func runAgentrt(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(agentrtBinary(t), args...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
		return string(out), err
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("agentrt %v did not exit:\n%s", args, out)
		return "", nil
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// diskFree is the space free on dir's file system.
func diskFree(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// A task's steps, planned ones included, are rows: --max-task-steps
// bounds them.
func TestExecuteStepRefusesATaskThatHoldsItsMostSteps(t *testing.T) {
	ts := serve(t, attackerPlugin(t), func(c *runConfig) { c.limits.MaxTaskSteps = 5 })
	task := ts.createTask(`{"input":"plan 3"}`).TaskID // 3 planned steps
	for range 5 {                                      // 3 planned, then 2 new
		ts.step(task, `{"input":"quick"}`)
	}
	ts.do("POST", "/ap/v1/agent/tasks/"+task+"/steps", "", `{"input":"quick"}`).
		wantError(t, 429, "holds 5 steps, the most a task may hold")
	var steps protocol.StepList
	ts.do("GET", "/ap/v1/agent/tasks/"+task+"/steps", "", "").want(t, 200).decode(t, &steps)
	if steps.Pagination.TotalItems != 5 {
		t.Errorf("the task holds %d steps, want 5", steps.Pagination.TotalItems)
	}
	// A plan over the task's limit is refused whole.
	ts.do("POST", "/ap/v1/agent/tasks", "", `{"input":"plan 6"}`).wantError(t, 502, "planned more than 5 steps")
	ts.step(ts.createTask(`{}`).TaskID, `{"input":"quick"}`) // other tasks go on
}
