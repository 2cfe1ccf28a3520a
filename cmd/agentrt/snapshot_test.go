package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// startPaths are the two ways a call's instance starts, for the tests
// that must hold on both.
var startPaths = []struct {
	name      string
	snapshots bool
}{{"snapshot", true}, {"initialization", false}}

// Every call, on either path, finds the plugin as its initialization left
// it: a global, a byte of memory the initialization wrote and one it did
// not, the memory's size and a page the previous call grew it by; and its
// log shows what the initialization printed. Calls run one after another
// and eight at a time, so that instances reuse the memory of closed ones.
func TestCallsFromOneSnapshotSeeNoTraceOfEachOther(t *testing.T) {
	for _, path := range startPaths {
		t.Run(path.name, func(t *testing.T) {
			ts := serve(t, watPlugin(t, "state"), func(c *runConfig) { c.snapshots = path.snapshots })
			if got := ts.srv.plugin.Start(); got.Snapshot != path.snapshots {
				t.Fatalf("calls start by %s", got)
			}
			task := ts.createTask(`{}`)
			const fresh = "g=7 m=7 u=0 n=1 z=0"
			for i := range 3 {
				st := ts.step(task.TaskID, `{}`)
				if st.Output == nil || *st.Output != fresh {
					t.Fatalf("call %d found %q, want %q", i+1, deref(st.Output), fresh)
				}
				logs := ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID+"/steps/"+st.StepID+"/logs", "", "").want(t, 200)
				if strings.Count(string(logs.body), `"message":"constructed"`) != 1 {
					t.Errorf("call %d's log does not show what the initialization printed, once: %s", i+1, logs.body)
				}
			}
			var wg sync.WaitGroup
			outputs := make(chan string, 32)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					task := ts.createTask(`{}`)
					for range 4 {
						res := ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "application/json", `{}`)
						var st struct{ Output *string }
						json.Unmarshal(res.body, &st)
						if st.Output == nil {
							outputs <- string(res.body)
						} else {
							outputs <- *st.Output
						}
					}
				}()
			}
			wg.Wait()
			close(outputs)
			for out := range outputs {
				if out != fresh {
					t.Errorf("a concurrent call found %q, want %q", out, fresh)
				}
			}
		})
	}
}

// randomDraws is what the random plugin answers.
type randomDraws struct {
	MathRand   string `json:"math_rand"`
	MathRandV2 string `json:"math_rand_v2"`
	CryptoRand string `json:"crypto_rand"`
	MapOrder   string `json:"map_order"`
	Init       string `json:"init"`
}

func drawRandom(t *testing.T, ts *testServer, taskID string) randomDraws {
	t.Helper()
	st := ts.step(taskID, `{}`)
	var d randomDraws
	if st.Output == nil || json.Unmarshal([]byte(*st.Output), &d) != nil {
		t.Fatalf("the random plugin answered %q", deref(st.Output))
	}
	return d
}

// What a handler draws at random differs between calls and between
// instances from different snapshots: the snapshot's generators are
// re-seeded in every instance. What the initialization drew is the same
// in every call from one snapshot (as in one process), and differs
// between snapshots, and between calls that run the initialization.
func TestRandomValuesDifferBetweenCallsAndInstances(t *testing.T) {
	for _, lang := range []string{"go", "tinygo"} {
		t.Run(lang, func(t *testing.T) {
			plugin := map[string]func(testing.TB, string) string{"go": goPlugin, "tinygo": tinygoPlugin}[lang](t, "testdata/plugins/random")
			var inits []string
			for i := range 2 {
				// Another memory limit: another snapshot (the compiled code
				// is shared).
				ts := serve(t, plugin, func(c *runConfig) { c.memoryLimit = size(64+i) << 20 })
				start := ts.srv.plugin.Start()
				if !start.Snapshot || len(start.Reseeded) == 0 {
					t.Fatalf("calls start by %s; want a snapshot with generators re-seeded", start)
				}
				task := ts.createTask(`{}`)
				seen := map[string]map[string]bool{}
				const calls = 6
				var first randomDraws
				for i := range calls {
					d := drawRandom(t, ts, task.TaskID)
					if i == 0 {
						first = d
					}
					for name, v := range map[string]string{"math/rand": d.MathRand, "math/rand/v2": d.MathRandV2,
						"crypto/rand": d.CryptoRand, "map order": d.MapOrder} {
						if seen[name] == nil {
							seen[name] = map[string]bool{}
						}
						seen[name][v] = true
					}
					if d.Init != first.Init {
						t.Errorf("what the initialization drew differs between calls from one snapshot: %s, %s", d.Init, first.Init)
					}
				}
				for name, values := range seen {
					// A map's order may repeat by chance (1 in 64 per pair),
					// never across all six calls.
					want := calls
					if name == "map order" {
						want = 2
					}
					if len(values) < want {
						t.Errorf("%s drew %d different values in %d calls from one snapshot: %v", name, len(values), calls, values)
					}
				}
				inits = append(inits, first.Init)
			}
			if inits[0] == inits[1] {
				t.Errorf("two snapshots' initializations drew the same value: %s", inits[0])
			}

			ts := serve(t, plugin, func(c *runConfig) { c.snapshots = false })
			task := ts.createTask(`{}`)
			if a, b := drawRandom(t, ts, task.TaskID), drawRandom(t, ts, task.TaskID); a.Init == b.Init || a.MathRand == b.MathRand {
				t.Errorf("calls that run the initialization drew the same: %+v, %+v", a, b)
			}
		})
	}
}

// A plugin whose initialization traps or never ends is refused, as it
// always was; one whose initialization calls the host (which answers "not
// allowed" there) runs its initialization in every call, and says why.
func TestAnInitializationThatTrapsLoopsOrCallsTheHostIsRefusedOrFallsBack(t *testing.T) {
	for _, tc := range []struct {
		plugin, refused, why string
	}{
		{"init_trap", "initialization failed: the plugin trapped: in _initialize: wasm error: unreachable", ""},
		{"init_loop", "initialization failed: the plugin ran past its time limit of 300ms", ""},
		{"construct", "", `its initialization calls agentrt_v1.set_result, which answers "not allowed" there`},
	} {
		t.Run(tc.plugin, func(t *testing.T) {
			cfg := testConfig(t, watPlugin(t, tc.plugin))
			cfg.callTimeout = 300 * time.Millisecond
			srv, err := open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					srv.Close()
					t.Fatalf("open: %v, want an error saying %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			if got := srv.plugin.Start(); got.Snapshot || got.Why != tc.why {
				t.Errorf("calls start by %s, want by initialization because %s", got, tc.why)
			}
		})
	}
}

// GET /agents and the start-up log say how each agent's calls start.
func TestAgentsAndTheLogSayHowCallsStart(t *testing.T) {
	dir := t.TempDir()
	for name, plugin := range map[string]string{"echo": examplePlugin(t, "echo-rust"), "construct": watPlugin(t, "construct")} {
		putFile(t, filepath.Join(dir, name+".wasm"), pluginBytes(t, plugin))
	}
	ts := serveDir(t, dir)
	var list struct{ Agents []protocol.AgentInfo }
	ts.do("GET", "/agents", "", "").want(t, 200).decode(t, &list)
	starts := map[string]*protocol.StartInfo{}
	for _, a := range list.Agents {
		starts[a.Name] = a.Start
	}
	if s := starts["echo"]; s == nil || s.From != "snapshot" || s.MemoryBytes == 0 {
		t.Errorf("echo starts %+v, want from a snapshot", s)
	}
	if s := starts["construct"]; s == nil || s.From != "initialization" || !strings.Contains(s.Why, "agentrt_v1.set_result") {
		t.Errorf("construct starts %+v, want by initialization, saying why", s)
	}
	log := ts.log.String()
	for _, want := range []string{`agent=echo file=echo.wasm`, `start="snapshot (1.1 MiB of memory`,
		`agent=construct`, `start="initialize (its initialization calls agentrt_v1.set_result`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
}

// A snapshot is cached beside the compiled code and used by the next
// start; one that is not whole (cut short, or changed) is not used, and a
// new one is taken.
func TestASnapshotIsCachedAndADamagedOneIsTakenAgain(t *testing.T) {
	cache := t.TempDir()
	plugin := examplePlugin(t, "echo-tinygo")
	withCache := func(c *runConfig) { c.cacheDir = cache }
	first := serve(t, plugin, withCache)
	if s := first.srv.plugin.Start(); !s.Snapshot || s.Cached {
		t.Fatalf("a first start %s; want a snapshot taken", s)
	}
	first.stop()
	files, _ := filepath.Glob(filepath.Join(cache, "agentrt-snapshots", "*.snap"))
	if len(files) != 1 {
		t.Fatalf("cached snapshots: %v", files)
	}
	second := serve(t, plugin, withCache)
	if s := second.srv.plugin.Start(); !s.Snapshot || !s.Cached {
		t.Fatalf("a second start %s; want the cached snapshot", s)
	}
	task := second.createTask(`{}`)
	if st := second.step(task.TaskID, `{"input":"from the cache"}`); st.Output == nil || *st.Output != "from the cache" {
		t.Errorf("a step from the cached snapshot answered %q", deref(st.Output))
	}
	second.stop()

	data, _ := os.ReadFile(files[0])
	for name, damaged := range map[string][]byte{
		"cut short": data[:len(data)/2],
		"changed":   append(append([]byte(nil), data[:len(data)/2]...), append([]byte{data[len(data)/2] ^ 1}, data[len(data)/2+1:]...)...),
	} {
		t.Run(name, func(t *testing.T) {
			putFile(t, files[0], damaged)
			ts := serve(t, plugin, withCache)
			if s := ts.srv.plugin.Start(); !s.Snapshot || s.Cached {
				t.Fatalf("a start with a damaged snapshot %s; want a snapshot taken again", s)
			}
			task := ts.createTask(`{}`)
			if st := ts.step(task.TaskID, `{"input":"again"}`); st.Output == nil || *st.Output != "again" {
				t.Errorf("a step answered %q", deref(st.Output))
			}
		})
	}
}

// The plugins the hostile suites attack with (hostile_test.go,
// attack_test.go, wasi_attack_test.go, client_attack_test.go) start their
// calls from a snapshot, so that the suites attack that path.
func TestTheHostileSuitesAttackCallsFromASnapshot(t *testing.T) {
	for name, plugin := range map[string]string{
		"attacker":    attackerPlugin(t),
		"hostile":     goPlugin(t, "testdata/plugins/hostile"),
		"hostile.wat": watPlugin(t, "hostile"),
		"probe":       probePlugin(t),
		"faulty":      goPlugin(t, "testdata/plugins/faulty"),
		"wasi_flood":  watPlugin(t, "wasi_flood"),
	} {
		t.Run(name, func(t *testing.T) {
			ts := serve(t, plugin)
			if s := ts.srv.plugin.Start(); !s.Snapshot {
				t.Errorf("calls start by %s, not from a snapshot", s)
			}
		})
	}
}
