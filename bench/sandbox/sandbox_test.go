// Package sandbox benchmarks what the sandbox costs a handler call: a fresh
// instance per call, how it starts (from a snapshot, or running the
// plugin's initialization), and the deadline check that lets a timeout
// stop guest code: agentrt's (runtime/interrupt.go), wazero's
// WithCloseOnContextDone (which agentrt used before it), or none.
//
//	make plugins && go test ./bench/sandbox -bench . -benchtime 2s
//
// Results are in bench/README.md.
package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrt/agentrt/bench/internal/echostep"
	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/plugin"
	"github.com/agentrt/agentrt/runtime/runtimetest"
)

func pluginPath(b *testing.B, name string) string { return runtimetest.Plugin(b, name) }

func watPath(b *testing.B, name string) string { return runtimetest.Fixture(b, name) }

// The deadline checks a plugin may be loaded with (see the package
// comment).
var checks = []struct {
	name string
	set  func(*runtime.Config)
}{
	{"agentrt", func(*runtime.Config) {}},
	{"wazero", func(c *runtime.Config) { c.WazeroDeadlineCheck = true }},
	{"none", func(c *runtime.Config) { c.NoDeadlineCheck = true }},
}

// load loads the plugin at path as agentrt does (runtime/plugin), with
// opts' changes to its runtime configuration.
func load(b *testing.B, path string, opts ...func(*runtime.Config)) *plugin.Plugin {
	cfg := runtime.Config{
		CacheDir:    filepath.Join(os.TempDir(), "agentrt-bench-cache"),
		CallTimeout: time.Minute,
	}
	for _, o := range opts {
		o(&cfg)
	}
	p, err := plugin.Load(context.Background(), path, plugin.Config{Runtime: cfg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func call(b *testing.B, p *plugin.Plugin) {
	if code, _, err := echostep.Call(context.Background(), p, echostep.Input); err != nil || code != 0 {
		b.Fatalf("step: %d %v", code, err)
	}
}

// BenchmarkEchoStep is one echo step handler call (instantiate, initialize,
// run, close) per iteration, with each deadline check.
func BenchmarkEchoStep(b *testing.B) {
	for _, lang := range []string{"go", "tinygo", "rust"} {
		for _, check := range checks {
			b.Run(fmt.Sprintf("%s/check=%s", lang, check.name), func(b *testing.B) {
				p := load(b, pluginPath(b, "echo-"+lang), check.set)
				call(b, p)
				b.ResetTimer()
				for range b.N {
					call(b, p)
				}
			})
		}
	}
}

// BenchmarkSpinStep is a step handler spinning a tight loop of 10 million
// iterations: each deadline check's cost on guest code itself.
func BenchmarkSpinStep(b *testing.B) {
	for _, check := range checks {
		b.Run("check="+check.name, func(b *testing.B) {
			p := load(b, watPath(b, "spin"), check.set)
			call(b, p)
			b.ResetTimer()
			for range b.N {
				call(b, p)
			}
		})
	}
}

// BenchmarkInstanceStart is one instance started, asked its ABI version
// and closed, per iteration: the start itself, in each language, three
// ways: from a snapshot; running the initialization (the path of a plugin
// that gets no snapshot); and as before snapshots (the module as it is,
// fresh memory for every instance, its initialization run).
func BenchmarkInstanceStart(b *testing.B) {
	paths := []struct {
		name string
		cfg  func(*runtime.Config)
	}{
		{"snapshot", func(*runtime.Config) {}},
		{"initialization", func(c *runtime.Config) { c.NoSnapshots = true }},
		{"before", func(c *runtime.Config) { c.AsBefore = true }},
	}
	for _, lang := range []string{"go", "tinygo", "rust"} {
		for _, path := range paths {
			b.Run(lang+"/"+path.name, func(b *testing.B) {
				p := load(b, pluginPath(b, "echo-"+lang), path.cfg)
				if s := p.Start(); s.Snapshot != (path.name == "snapshot") {
					b.Fatalf("instances start by %s", s)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, _, err := p.Runtime().Call(context.Background(), abi.VersionExport, runtime.Invocation{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
