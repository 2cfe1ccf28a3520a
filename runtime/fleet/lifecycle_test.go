package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/hostapi"
	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/plugin"
	"github.com/agentrt/agentrt/runtime/runtimetest"
	"github.com/agentrt/agentrt/storage"
)

// The fleet's lifecycle without HTTP: a fleet over a real store, fed real
// plugins, whose loads the tests start themselves (syncFile, the
// watcher's callback) rather than wait for the watcher. What the watcher
// adds, and the whole over HTTP, cmd/agentrt's tests pin.

// builtPlugin returns the bytes of the example plugin NAME (echo-rust,
// say) that "make plugins" built.
func builtPlugin(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(runtimetest.Plugin(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// testStore is the data directory's store as cmd/agentrt hands it to a
// fleet.
type testStore struct{ *storage.Store }

func (s testStore) Agent(name string) AgentStore { return s.Store.Agent(name) }

// compiles counts the plugins a fleet compiled, as its Metrics.
type compiles struct {
	mu sync.Mutex
	n  int
}

func (c *compiles) PluginCompiled(string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
}

func (c *compiles) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (*compiles) HandlerDone(string, protocol.Handler, time.Duration, string) {}

// testConfig is a fleet's configuration with the defaults cmd/agentrt's
// flags have, over the plugin directory dir.
func testConfig(t testing.TB, dir string) Config {
	return Config{
		Limits: Limits{Limits: protocol.DefaultLimits, CallTimeout: 5 * time.Second,
			Memory: runtime.DefaultMemoryLimitPages * 64 << 10, MaxHostCalls: hostapi.DefaultMaxCalls,
			MaxTableEntries: runtime.DefaultMaxTableEntries, Egress: egress.DefaultLimits},
		MaxInstances: 8, MaxQueue: 16, QueueWait: time.Minute,
		Dir:      dir,
		CacheDir: filepath.Join(os.TempDir(), "agentrt-fleet-test-cache"),
		Metrics:  &compiles{},
	}
}

// openFleet opens a fleet of cfg's plugin directory over a fresh store,
// closed when the test ends.
func openFleet(t testing.TB, cfg Config) *Fleet {
	t.Helper()
	store, err := storage.Open(t.Context(), t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := New(testStore{store}, cfg)
	if err := f.OpenDir(t.Context()); err != nil {
		store.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		store.Close()
	})
	return f
}

// info is the description of agent name; nil when there is none.
func info(t testing.TB, f *Fleet, name string) *protocol.AgentInfo {
	t.Helper()
	i, err := f.Info(t.Context(), name)
	var perr *protocol.Error
	if errors.As(err, &perr) && perr.Code == protocol.ENOTFOUND {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// step executes a step of task and returns the sha256 of the build that
// ran it.
func step(t testing.TB, a *protocol.Agent, task string) string {
	t.Helper()
	in := "x"
	st, err := a.ExecuteStep(t.Context(), task, protocol.StepRequestBody{Input: &in})
	if err != nil {
		t.Fatal(err)
	}
	if st.Output == nil || *st.Output != in || st.Build == nil {
		t.Fatalf("step: %+v, want its input echoed and its build", st)
	}
	return st.Build.SHA256
}

// closed reports whether p was closed: a closed plugin runs nothing, and
// says that it is going.
func closed(p *plugin.Plugin) bool {
	_, _, err := p.Runtime().Call(context.Background(), abi.VersionExport, runtime.Invocation{})
	var perr *protocol.Error
	return errors.As(err, &perr) && perr.Code == protocol.EUNAVAILABLE
}

// A plugin added to the directory becomes an agent; replaced, the agent
// serves the new build and the old one is closed; a build that fails to
// load leaves the previous one serving and says why; files that did not
// change are not compiled again; removed, the agent serves reads of its
// tasks only; and Close closes the build still serving.
func TestAnAgentIsAddedReplacedAndRetiredAsItsPluginIs(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	f := openFleet(t, cfg)
	compiled := cfg.Metrics.(*compiles)
	ctx := t.Context()
	if list, err := f.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("an empty directory lists %+v, %v", list, err)
	}
	path := filepath.Join(dir, "agent.wasm")
	first, second := builtPlugin(t, "echo-rust"), builtPlugin(t, "echo-tinygo")

	// Added.
	if err := os.WriteFile(path, first, 0o644); err != nil {
		t.Fatal(err)
	}
	f.syncFile(ctx, "agent")
	i := info(t, f, "agent")
	if i == nil || i.State != "ready" || i.SHA256 != sha256Hex(first) || i.File != "agent.wasm" || !i.Default ||
		!slices.Equal(i.Handlers, []string{"step"}) || i.LoadedAt == nil || i.Start == nil {
		t.Fatalf("the added agent: %+v", i)
	}
	a, err := f.Agent("agent")
	if err != nil {
		t.Fatal(err)
	}
	if root, err := f.Agent(""); err != nil || root != a {
		t.Errorf("the only agent is not the default: %v", err)
	}
	task, err := a.CreateTask(ctx, protocol.TaskRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	if got := step(t, a, task.TaskID); got != sha256Hex(first) {
		t.Fatalf("a step ran on %s, want the added build", got)
	}
	firstPlugin := f.Plugin("agent")

	// Replaced: the agent, and its tasks, are the same; the build is new.
	if err := os.WriteFile(path, second, 0o644); err != nil {
		t.Fatal(err)
	}
	f.syncFile(ctx, "agent")
	if i := info(t, f, "agent"); i.State != "ready" || i.SHA256 != sha256Hex(second) || i.Error != "" {
		t.Fatalf("the replaced agent: %+v", i)
	}
	if again, _ := f.Agent("agent"); again != a {
		t.Errorf("a new build made a new agent")
	}
	if got := step(t, a, task.TaskID); got != sha256Hex(second) {
		t.Errorf("a step after the replacement ran on %s, want the new build", got)
	}
	f.retiring.Wait()
	if !closed(firstPlugin) {
		t.Errorf("the replaced build is still open once no call uses it")
	}

	// Unchanged: nothing is compiled again.
	before := compiled.count()
	f.syncFile(ctx, "agent")
	if n := compiled.count() - before; n != 0 {
		t.Errorf("files that did not change were compiled again (%d)", n)
	}

	// Corrupt: the previous build keeps serving, and the failure shows.
	if err := os.WriteFile(path, []byte("\x00asm\x01\x00\x00\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.syncFile(ctx, "agent")
	if i := info(t, f, "agent"); i.State != "ready" || i.SHA256 != sha256Hex(second) || i.Error == "" {
		t.Errorf("after a corrupt build: %+v, want the previous build ready and the failure shown", i)
	}
	if got := step(t, a, task.TaskID); got != sha256Hex(second) {
		t.Errorf("a step after a corrupt build ran on %s, want the previous build", got)
	}
	secondPlugin := f.Plugin("agent")

	// Removed: its tasks stay readable; new work is refused.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	f.syncFile(ctx, "agent")
	if i := info(t, f, "agent"); i == nil || i.State != "removed" || i.Tasks != 1 || i.SHA256 != "" {
		t.Fatalf("the removed agent: %+v, want it listed removed while it has a task", i)
	}
	in := "x"
	_, err = a.ExecuteStep(ctx, task.TaskID, protocol.StepRequestBody{Input: &in})
	if perr := (*protocol.Error)(nil); !errors.As(err, &perr) || perr.Code != protocol.ECONFLICT {
		t.Errorf("a step of a removed agent: %v, want ECONFLICT", err)
	}
	if _, err := a.GetTask(ctx, task.TaskID); err != nil {
		t.Errorf("a removed agent's task: %v", err)
	}
	f.retiring.Wait()
	if !closed(secondPlugin) {
		t.Errorf("the removed plugin's build is still open")
	}

	// Added again, then the fleet closed: the build serving is closed.
	if err := os.WriteFile(path, first, 0o644); err != nil {
		t.Fatal(err)
	}
	f.syncFile(ctx, "agent")
	last := f.Plugin("agent")
	if last == nil || last.SHA256() != sha256Hex(first) {
		t.Fatalf("the plugin added again does not serve")
	}
	f.Close()
	if !closed(last) {
		t.Errorf("Close left the serving build open")
	}
}

// A replaced build is closed only once the operations that started on it
// have ended: an upload in progress keeps it open, and it is closed as
// soon as the upload ends. (A fleet that closed it at once, or never,
// fails here; one that closed it soon, on a goroutine, without waiting,
// may not: TestAReloadWhileRequestsRunFailsNone in cmd/agentrt, with 50
// requests running across a reload, is what catches that.)
func TestAReplacedBuildIsClosedOnlyOnceItsLastOperationEnds(t *testing.T) {
	dir := t.TempDir()
	f := openFleet(t, testConfig(t, dir))
	ctx := t.Context()
	path := filepath.Join(dir, "agent.wasm")
	if err := os.WriteFile(path, builtPlugin(t, "echo-rust"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.syncFile(ctx, "agent")
	a, err := f.Agent("agent")
	if err != nil {
		t.Fatal(err)
	}
	task, err := a.CreateTask(ctx, protocol.TaskRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	old := f.Plugin("agent")
	upload, err := a.NewUpload(ctx, task.TaskID) // holds the build it started on
	if err != nil {
		t.Fatal(err)
	}
	// Before the fleet's Close, which waits for the upload: a test that
	// stops early fails rather than hangs.
	t.Cleanup(upload.Discard)

	if err := os.WriteFile(path, builtPlugin(t, "echo-tinygo"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.syncFile(ctx, "agent")
	if f.Plugin("agent") == old {
		t.Fatal("the new build does not serve")
	}
	if closed(old) {
		t.Fatal("the replaced build was closed under an upload in progress")
	}
	upload.Discard()
	f.retiring.Wait()
	if !closed(old) {
		t.Error("the replaced build is still open after its last operation ended")
	}
}

// Two plugin files claiming one agent name: the first in file name order
// serves it, the second fails naming the other; once the first is gone,
// the second serves the name.
func TestTheSecondFileClaimingAnAgentsNameFailsUntilTheFirstIsGone(t *testing.T) {
	dir := t.TempDir()
	code := builtPlugin(t, "echo-rust")
	for _, name := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), code, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(`{"name":"shared"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := openFleet(t, testConfig(t, dir))
	if i := info(t, f, "shared"); i == nil || i.State != "ready" || i.File != "a.wasm" {
		t.Fatalf("shared: %+v, want it served from a.wasm", i)
	}
	if i := info(t, f, "b"); i == nil || i.State != "failed" || i.Error != `agent name "shared" is already served from a.wasm` {
		t.Errorf("b: %+v, want it failed, naming the name and the file that has it", i)
	}
	if err := os.Remove(filepath.Join(dir, "a.wasm")); err != nil {
		t.Fatal(err)
	}
	f.syncFile(t.Context(), "a") // and b, which it loads again, on a goroutine of its own
	f.loads.Wait()
	if i := info(t, f, "shared"); i == nil || i.State != "ready" || i.File != "b.wasm" {
		t.Errorf("shared once a.wasm is gone: %+v, want it served from b.wasm", i)
	}
}
