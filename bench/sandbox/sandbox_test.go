// Package sandbox benchmarks what the sandbox costs a handler call: a fresh
// instance per call, how it starts (from a snapshot, or running the
// plugin's initialization), and the deadline check (wazero's
// WithCloseOnContextDone) that lets a timeout stop guest code.
//
//	make plugins && go test ./bench/sandbox -bench . -benchtime 2s
//
// Results are in bench/README.md.
package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrt/agentrt/hostapi"
	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime"
	"github.com/tetratelabs/wazero"
)

// host answers the host API for an echo step, keeping nothing.
type host struct{ input []byte }

func (h *host) Input() []byte            { return h.input }
func (h *host) SetResult([]byte) error   { return nil }
func (h *host) Log(string, []byte) error { return nil }
func (h *host) CreateArtifact(context.Context, protocol.ArtifactSpec, []byte) (string, error) {
	return "", nil
}
func (h *host) Config() []byte                                                     { return []byte("{}") }
func (h *host) WorkspaceReadInto(context.Context, string, []byte) (int64, error)   { return 0, nil }
func (h *host) WorkspaceWrite(context.Context, string, []byte) error               { return nil }
func (h *host) WorkspaceList(context.Context, string) ([]protocol.FileInfo, error) { return nil, nil }
func (h *host) WorkspaceStat(context.Context, string) (protocol.FileInfo, error) {
	return protocol.FileInfo{}, nil
}
func (h *host) WorkspaceDelete(context.Context, string) error { return nil }
func (h *host) DownloadWrite(context.Context, []byte) error   { return nil }
func (h *host) BeforeEffect(context.Context) error            { return nil }
func (h *host) FetchArtifact(context.Context, string, string, func(context.Context, string) ([]byte, error)) (int64, error) {
	return 0, nil
}

var stepInput = []byte(`{"abi":1,"handler":"step","task":{"task_id":"6bb1801a-fd80-45e8-899a-4dd723cc602e","input":"hi","additional_input":{},"artifacts":[]},` +
	`"step":{"step_id":"28ca533e-3904-4401-8a07-c49adf8891c2","name":null,"input":"hi","additional_input":{},"planned":false},"request":{"input":"hi","additional_input":{}}}`)

func pluginPath(b *testing.B, name string) string {
	dir := os.Getenv("AGENTRT_PLUGINS")
	if dir == "" {
		dir = filepath.Join("..", "..", "build", "plugins")
	}
	p := filepath.Join(dir, name+".wasm")
	if _, err := os.Stat(p); err != nil {
		b.Fatalf("%s is missing; run make plugins", p)
	}
	return p
}

func watPath(b *testing.B, name string) string {
	out := filepath.Join(b.TempDir(), name+".wasm")
	if o, err := exec.Command("wat2wasm", filepath.Join("..", "..", "testdata", "wat", name+".wat"), "-o", out).CombinedOutput(); err != nil {
		b.Fatalf("wat2wasm: %v\n%s", err, o)
	}
	return out
}

func load(b *testing.B, path string, closeOnDone bool, opts ...func(*runtime.Config)) *runtime.Plugin {
	cfg := runtime.Config{
		CacheDir:             filepath.Join(os.TempDir(), "agentrt-bench-cache"),
		CallTimeout:          time.Minute,
		NoCloseOnContextDone: !closeOnDone,
		HostModules: []runtime.HostModule{{Name: abi.ImportModule, Instantiate: func(ctx context.Context, r wazero.Runtime) error {
			return hostapi.Instantiate(ctx, r, hostapi.Config{})
		}, Construction: hostapi.WithConstruction}},
	}
	for _, o := range opts {
		o(&cfg)
	}
	p, err := runtime.Load(context.Background(), path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func call(b *testing.B, p *runtime.Plugin) {
	h := &host{input: stepInput}
	bind := func(ctx context.Context) context.Context { return hostapi.WithHost(ctx, h) }
	if code, _, err := p.Call(context.Background(), abi.StepExport, runtime.Invocation{Stdout: io.Discard, Stderr: io.Discard, Host: bind}); err != nil || code != 0 {
		b.Fatalf("step: %d %v", code, err)
	}
}

// BenchmarkEchoStep is one echo step handler call (instantiate, initialize,
// run, close) per iteration, with and without the deadline check.
func BenchmarkEchoStep(b *testing.B) {
	for _, lang := range []string{"go", "tinygo", "rust"} {
		for _, closeOnDone := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/closeOnDone=%v", lang, closeOnDone), func(b *testing.B) {
				p := load(b, pluginPath(b, "echo-"+lang), closeOnDone)
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
// iterations: the deadline check's cost on guest code itself.
func BenchmarkSpinStep(b *testing.B) {
	for _, closeOnDone := range []bool{true, false} {
		b.Run(fmt.Sprintf("closeOnDone=%v", closeOnDone), func(b *testing.B) {
			p := load(b, watPath(b, "spin"), closeOnDone)
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
				p := load(b, pluginPath(b, "echo-"+lang), true, path.cfg)
				if s := p.Start(); s.Snapshot != (path.name == "snapshot") {
					b.Fatalf("instances start by %s", s)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, _, err := p.Call(context.Background(), abi.VersionExport, runtime.Invocation{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
