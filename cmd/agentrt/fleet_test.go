package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// serveDir serves the plugin directory dir in-process, as "agentrt serve"
// does, until the test ends.
func serveDir(t testing.TB, dir string, opts ...func(*runConfig)) *testServer {
	t.Helper()
	cfg, err := parseServeFlags([]string{"--plugins", dir, "--data", t.TempDir(), "--call-timeout", "5s",
		"--cache", filepath.Join(buildDir, "cache")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.settle = 50 * time.Millisecond
	for _, o := range opts {
		o(cfg)
	}
	return startServer(t, cfg)
}

// putFile writes data to path as a copy-then-rename does: the file is
// never seen half-written.
func putFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func pluginBytes(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// agentInfo is GET /agents/NAME, or nil on 404.
func (ts *testServer) agentInfo(name string) *protocol.AgentInfo {
	ts.t.Helper()
	r := ts.do("GET", "/agents/"+name, "", "")
	if r.status == http.StatusNotFound {
		return nil
	}
	var info protocol.AgentInfo
	r.want(ts.t, 200).decode(ts.t, &info)
	return &info
}

// agentList is GET /agents.
func (ts *testServer) agentList() []protocol.AgentInfo {
	ts.t.Helper()
	var list struct {
		Agents []protocol.AgentInfo `json:"agents"`
	}
	ts.do("GET", "/agents", "", "").want(ts.t, 200).decode(ts.t, &list)
	return list.Agents
}

// waitAgent waits until the agent's description satisfies ok.
func (ts *testServer) waitAgent(name, what string, ok func(*protocol.AgentInfo) bool) *protocol.AgentInfo {
	ts.t.Helper()
	var info *protocol.AgentInfo
	eventually(ts.t, 20*time.Second, what, func() bool {
		info = ts.agentInfo(name)
		return info != nil && ok(info)
	})
	return info
}

// agentTask creates a task of an agent and returns its id.
func (ts *testServer) agentTask(agent, body string) string {
	ts.t.Helper()
	var task protocol.Task
	ts.do("POST", "/agents/"+agent+"/ap/v1/agent/tasks", "application/json", body).want(ts.t, 200).decode(ts.t, &task)
	return task.TaskID
}

// agentStep executes a step of an agent's task.
func (ts *testServer) agentStep(agent, taskID, body string) *response {
	ts.t.Helper()
	return ts.do("POST", "/agents/"+agent+"/ap/v1/agent/tasks/"+taskID+"/steps", "application/json", body)
}

func TestServeServesEveryPluginOfTheDirectoryUnderItsName(t *testing.T) {
	dir := t.TempDir()
	echo, washington := pluginBytes(t, examplePlugin(t, "echo-rust")), pluginBytes(t, examplePlugin(t, "washington-tinygo"))
	putFile(t, filepath.Join(dir, "echo.wasm"), echo)
	putFile(t, filepath.Join(dir, "washington.wasm"), washington)
	putFile(t, filepath.Join(dir, "washington.json"), []byte(`{"version":"1.2.0","description":"writes a word","settings":{"k":"v"}}`))
	ts := serveDir(t, dir)

	list := ts.agentList()
	if len(list) != 2 || list[0].Name != "echo" || list[1].Name != "washington" {
		t.Fatalf("GET /agents: %+v, want echo and washington", list)
	}
	w := list[1]
	if w.State != "ready" || w.SHA256 != sha256Hex(washington) || w.Version != "1.2.0" || w.Description != "writes a word" ||
		w.ABIVersion != 1 || w.File != "washington.wasm" || w.LoadedAt == nil || w.Default {
		t.Errorf("washington: %+v", w)
	}
	if strings.Join(list[0].Handlers, ",") != "step" || list[0].Limits["call_timeout"] != "5s" {
		t.Errorf("echo: handlers %v, limits %v", list[0].Handlers, list[0].Limits)
	}

	// Each agent has the whole protocol under its name; its tasks are its own.
	task := ts.agentTask("echo", `{"input":"hi"}`)
	var st protocol.Step
	ts.agentStep("echo", task, `{"input":"hello"}`).want(t, 200).decode(t, &st)
	if st.Output == nil || *st.Output != "hello" || st.Build == nil || *st.Build != (protocol.StepBuild{Agent: "echo", SHA256: sha256Hex(echo)}) {
		t.Errorf("a step of echo: %+v, want its output and its build", st)
	}
	for _, path := range []string{"/agents/washington/ap/v1/agent/tasks/" + task, "/agents/washington/ap/v1/agent/tasks/" + task + "/steps"} {
		ts.do("GET", path, "", "").wantError(t, 404, "not found")
	}
	if info := ts.agentInfo("echo"); info.Tasks != 1 {
		t.Errorf("echo's task count: %d, want 1", info.Tasks)
	}
	// With two agents and no -default, nothing is served at the root.
	ts.do("GET", "/ap/v1/agent/tasks", "", "").wantError(t, 404, "no default agent")
	ts.do("GET", "/agents/nobody/ap/v1/agent/tasks", "", "").wantError(t, 404, "no agent")
}

func TestTheDefaultAgentIsServedAtTheRootToo(t *testing.T) {
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "echo.wasm"), pluginBytes(t, examplePlugin(t, "echo-rust")))
	putFile(t, filepath.Join(dir, "planner.wasm"), pluginBytes(t, examplePlugin(t, "planner-rust")))
	ts := serveDir(t, dir, func(c *runConfig) { c.defaultAgent = "planner" })
	if !ts.agentInfo("planner").Default || ts.agentInfo("echo").Default {
		t.Errorf("planner should be the default")
	}
	var task protocol.Task
	ts.do("POST", "/ap/v1/agent/tasks", "application/json", `{"input":"x"}`).want(t, 200).decode(t, &task)
	ts.do("GET", "/agents/planner/ap/v1/agent/tasks/"+task.TaskID, "", "").want(t, 200)

	// A directory holding one plugin serves it at the root without -default.
	one := t.TempDir()
	putFile(t, filepath.Join(one, "echo.wasm"), pluginBytes(t, examplePlugin(t, "echo-rust")))
	ts = serveDir(t, one)
	ts.do("POST", "/ap/v1/agent/tasks", "application/json", `{}`).want(t, 200)
}

// Plugins added, replaced and removed are picked up without a restart; a
// build that fails to load (corrupt, half-written) leaves the previous
// one serving and says why.
func TestPluginsAreAddedReplacedAndRemovedWithoutARestart(t *testing.T) {
	dir := t.TempDir()
	ts := serveDir(t, dir)
	if list := ts.agentList(); len(list) != 0 {
		t.Fatalf("an empty directory serves %+v", list)
	}
	path := filepath.Join(dir, "agent.wasm")
	first, second := pluginBytes(t, examplePlugin(t, "echo-rust")), pluginBytes(t, examplePlugin(t, "echo-tinygo"))

	// Added.
	putFile(t, path, first)
	ts.waitAgent("agent", "the added plugin served", func(i *protocol.AgentInfo) bool { return i.State == "ready" })
	task := ts.agentTask("agent", `{}`)
	stepBuild := func() string {
		t.Helper()
		var st protocol.Step
		ts.agentStep("agent", task, `{"input":"x"}`).want(t, 200).decode(t, &st)
		return st.Build.SHA256
	}
	if got := stepBuild(); got != sha256Hex(first) {
		t.Fatalf("a step ran on %s, want the added build", got)
	}

	// Replaced in place (written, not renamed).
	if err := os.WriteFile(path, second, 0o644); err != nil {
		t.Fatal(err)
	}
	ts.waitAgent("agent", "the replaced build served", func(i *protocol.AgentInfo) bool { return i.SHA256 == sha256Hex(second) })
	if got := stepBuild(); got != sha256Hex(second) {
		t.Fatalf("a step after the replacement ran on %s, want the new build", got)
	}

	// Corrupt: the previous build keeps serving, and the failure shows.
	putFile(t, path, []byte("\x00asm\x01\x00\x00\x00garbage"))
	info := ts.waitAgent("agent", "the corrupt build's failure shown", func(i *protocol.AgentInfo) bool { return i.Error != "" })
	if info.State != "ready" || info.SHA256 != sha256Hex(second) {
		t.Errorf("after a corrupt build: %+v, want the previous build ready", info)
	}
	if got := stepBuild(); got != sha256Hex(second) {
		t.Errorf("a step after a corrupt build ran on %s, want the previous build", got)
	}

	// Half-written, then finished: the half fails like a corrupt build, the
	// whole file is served once it is there.
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	half := len(first) / 2
	if _, err := f.Write(first[:half]); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	ts.waitAgent("agent", "the half-written build's failure shown", func(i *protocol.AgentInfo) bool {
		return i.Error != "" && i.SHA256 == sha256Hex(second)
	})
	if _, err := f.Write(first[half:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ts.waitAgent("agent", "the finished build served", func(i *protocol.AgentInfo) bool {
		return i.SHA256 == sha256Hex(first) && i.Error == ""
	})

	// Removed: its tasks stay readable, new work is refused with 409.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	ts.waitAgent("agent", "the removed plugin's agent shown removed", func(i *protocol.AgentInfo) bool { return i.State == "removed" })
	ts.agentStep("agent", task, `{}`).wantError(t, http.StatusConflict, "agent")
	ts.do("GET", "/agents/agent/ap/v1/agent/tasks/"+task, "", "").want(t, 200)
	var steps protocol.StepList
	ts.do("GET", "/agents/agent/ap/v1/agent/tasks/"+task+"/steps", "", "").want(t, 200).decode(t, &steps)
	if len(steps.Steps) != 3 || steps.Steps[0].Build.SHA256 != sha256Hex(first) || steps.Steps[1].Build.SHA256 != sha256Hex(second) {
		t.Errorf("the task's steps should show each build that ran them: %+v", steps.Steps)
	}
}

func TestTwoFilesClaimingOneAgentNameServeOne(t *testing.T) {
	dir := t.TempDir()
	plugin := pluginBytes(t, examplePlugin(t, "echo-rust"))
	for _, f := range []string{"a", "b"} {
		putFile(t, filepath.Join(dir, f+".wasm"), plugin)
		putFile(t, filepath.Join(dir, f+".json"), []byte(`{"name":"shared"}`))
	}
	ts := serveDir(t, dir)
	if info := ts.agentInfo("shared"); info == nil || info.State != "ready" || info.File != "a.wasm" {
		t.Fatalf("shared: %+v, want it served from a.wasm", info)
	}
	b := ts.agentInfo("b")
	if b == nil || b.State != "failed" || !strings.Contains(b.Error, `"shared"`) || !strings.Contains(b.Error, "a.wasm") {
		t.Errorf("b: %+v, want it failed, naming the name and the file that has it", b)
	}
	// Once a.wasm is gone, b.wasm has the name.
	if err := os.Remove(filepath.Join(dir, "a.wasm")); err != nil {
		t.Fatal(err)
	}
	ts.waitAgent("shared", "b.wasm serving the name a.wasm left", func(i *protocol.AgentInfo) bool {
		return i.State == "ready" && i.File == "b.wasm"
	})
}

// A bad manifest fails its agent only, with a message naming the file and
// the field.
func TestABadManifestFailsItsAgentOnly(t *testing.T) {
	dir := t.TempDir()
	plugin := pluginBytes(t, examplePlugin(t, "echo-rust"))
	bad := map[string]struct{ manifest, want string }{
		"unknown":  {`{"limts":{}}`, `unknown field "limts"`},
		"mistyped": {`{"limits":{"memory":"lots"}}`, `limits.memory`},
		"badname":  {`{"name":"no/slash"}`, `name`},
		"notjson":  {`{"version":`, `bad.json`},
	}
	putFile(t, filepath.Join(dir, "good.wasm"), plugin)
	for name, tc := range bad {
		putFile(t, filepath.Join(dir, name+".wasm"), plugin)
		putFile(t, filepath.Join(dir, name+".json"), []byte(tc.manifest))
	}
	ts := serveDir(t, dir)
	if info := ts.agentInfo("good"); info == nil || info.State != "ready" {
		t.Fatalf("good: %+v, want ready", info)
	}
	for name, tc := range bad {
		want := strings.ReplaceAll(tc.want, "bad.json", name+".json")
		info := ts.agentInfo(name)
		if info == nil || info.State != "failed" || !strings.Contains(info.Error, name+".json") || !strings.Contains(info.Error, want) {
			t.Errorf("%s: %+v, want failed naming %s.json and %q", name, info, name, want)
		}
	}
}

// Each agent runs under its own limits: a manifest's tighter call timeout
// stops its loop while another agent, with the operator's, is served; a
// manifest asking for more than the operator allows gets the operator's.
func TestEachAgentRunsUnderItsManifestsLimits(t *testing.T) {
	dir := t.TempDir()
	hostile := pluginBytes(t, goPlugin(t, "testdata/plugins/hostile"))
	putFile(t, filepath.Join(dir, "tight.wasm"), hostile)
	putFile(t, filepath.Join(dir, "tight.json"), []byte(`{"limits":{"call_timeout":"1s","memory":"64MiB"}}`))
	putFile(t, filepath.Join(dir, "loose.wasm"), hostile)
	putFile(t, filepath.Join(dir, "loose.json"), []byte(`{"limits":{"memory":"4GiB"}}`))
	ts := serveDir(t, dir, func(c *runConfig) { c.callTimeout = 5 * time.Minute })

	tight, loose := ts.agentInfo("tight"), ts.agentInfo("loose")
	if tight.Limits["call_timeout"] != "1s" || tight.Limits["memory"] != float64(64<<20) {
		t.Errorf("tight's limits: %v", tight.Limits)
	}
	if loose.Limits["call_timeout"] != "5m0s" || loose.Limits["memory"] != float64(256<<20) {
		t.Errorf("loose's limits: %v, want the operator's where the manifest asks for more", loose.Limits)
	}
	looping := ts.start("POST", "/agents/tight/ap/v1/agent/tasks/"+ts.agentTask("tight", `{}`)+"/steps", "application/json", `{"input":"loop"}`)
	// The other agent is served while the loop runs, on its own terms.
	other := ts.agentTask("loose", `{}`)
	var st protocol.Step
	ts.agentStep("loose", other, `{"input":"still here"}`).want(t, 200).decode(t, &st)
	if st.Output == nil || *st.Output != "still here" {
		t.Errorf("loose answered %+v", st)
	}
	r := looping.wait()
	if r.status != http.StatusGatewayTimeout {
		t.Errorf("tight's loop: %d %s, want 504 from its 1s call timeout", r.status, r.body)
	}
}

// A plugin replaced while 50 requests run: none fails, each step records
// the build that ran it, and steps after the replacement run the new one.
func TestAReloadWhileRequestsRunFailsNone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "echo.wasm")
	first, second := pluginBytes(t, examplePlugin(t, "echo-rust")), pluginBytes(t, examplePlugin(t, "echo-tinygo"))
	putFile(t, path, first)
	ts := serveDir(t, dir)
	tasks := make([]string, 50)
	for i := range tasks {
		tasks[i] = ts.agentTask("echo", `{}`)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(tasks)*4)
	builds := sync.Map{}
	start := make(chan struct{})
	for _, task := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range 4 {
				res, err := sendRequest(ts.URL, "POST", "/agents/echo/ap/v1/agent/tasks/"+task+"/steps", "application/json",
					strings.NewReader(fmt.Sprintf(`{"input":"%d"}`, i)))
				if err != nil {
					errs <- err
					return
				}
				if res.status != 200 {
					errs <- fmt.Errorf("step: %d %s", res.status, res.body)
					return
				}
				var st protocol.Step
				if err := json.Unmarshal(res.body, &st); err != nil || st.Build == nil {
					errs <- fmt.Errorf("step without its build: %s", res.body)
					return
				}
				builds.Store(st.Build.SHA256, true)
			}
		}()
	}
	close(start)
	putFile(t, path, second)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	builds.Range(func(k, _ any) bool {
		if k != sha256Hex(first) && k != sha256Hex(second) {
			t.Errorf("a step recorded build %s, which is neither", k)
		}
		return true
	})
	ts.waitAgent("echo", "the new build served", func(i *protocol.AgentInfo) bool { return i.SHA256 == sha256Hex(second) })
	var st protocol.Step
	ts.agentStep("echo", tasks[0], `{}`).want(t, 200).decode(t, &st)
	if st.Build.SHA256 != sha256Hex(second) {
		t.Errorf("a step after the reload ran %s, want the new build", st.Build.SHA256)
	}
}

// A restart serves the same agents and their tasks, with the compiled-code
// cache warm or gone.
func TestARestartServesTheSameAgentsWithTheCacheWarmOrCold(t *testing.T) {
	dir, data, cache := t.TempDir(), t.TempDir(), t.TempDir()
	for _, p := range []string{"echo-rust", "washington-tinygo", "planner-rust"} {
		putFile(t, filepath.Join(dir, p+".wasm"), pluginBytes(t, examplePlugin(t, p)))
	}
	withDirs := func(c *runConfig) { c.dataDir, c.cacheDir = data, cache }
	ts := serveDir(t, dir, withDirs)
	task := ts.agentTask("planner-rust", `{"input":"plan"}`)
	ts.stop()
	for _, warm := range []bool{true, false} {
		if !warm {
			if err := os.RemoveAll(cache); err != nil {
				t.Fatal(err)
			}
		}
		ts := serveDir(t, dir, withDirs)
		for _, a := range ts.agentList() {
			if a.State != "ready" {
				t.Errorf("warm %v: %s is %s (%s)", warm, a.Name, a.State, a.Error)
			}
		}
		ts.do("GET", "/agents/planner-rust/ap/v1/agent/tasks/"+task, "", "").want(t, 200)
		ts.agentStep("planner-rust", task, `{}`).want(t, 200)
		ts.stop()
	}
}

// A plugin over --max-plugin-size fails alone, refused before it is read
// whole.
func TestAPluginOverTheSizeLimitFailsItsAgentOnly(t *testing.T) {
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "small.wasm"), pluginBytes(t, examplePlugin(t, "echo-rust")))
	putFile(t, filepath.Join(dir, "big.wasm"), pluginBytes(t, examplePlugin(t, "echo-tinygo")))
	ts := serveDir(t, dir, func(c *runConfig) { c.maxPluginSize = 100 << 10 })
	if info := ts.agentInfo("small"); info == nil || info.State != "ready" {
		t.Fatalf("small: %+v, want ready", info)
	}
	if info := ts.agentInfo("big"); info == nil || info.State != "failed" || !strings.Contains(info.Error, "over the limit of 102400 bytes") {
		t.Errorf("big: %+v, want failed, over the size limit", info)
	}
}
