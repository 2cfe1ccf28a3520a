// Package runtime runs plugins with wazero: it compiles a plugin once
// (through an on-disk compilation cache), validates it against the ABI, and
// runs every handler call in a fresh instance under a time limit and a
// memory limit.
//
// What a call costs: instantiation (about 0.1 ms for TinyGo and Rust
// plugins; 3-8 ms and 2-3 MiB for Go plugins, whose runtime initializes in
// _initialize) plus the handler itself. An instance is never reused, so a
// trap, a timeout or a corrupted heap cannot leak into the next call.
package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// HostModule instantiates, in r, a module of host functions plugins may
// import (hostapi.Instantiate is one).
type HostModule struct {
	Name        string
	Instantiate func(ctx context.Context, r wazero.Runtime) error
	// Construction, if set, returns the context a plugin's initialization
	// runs under while a snapshot is taken, under which the module's
	// functions, answering as they do outside a handler call, also tell
	// called the name of each one the plugin calls (hostapi.WithConstruction).
	// A plugin that calls one while it initializes gets no snapshot.
	Construction func(ctx context.Context, called func(name string)) context.Context
}

// Config sets how plugins are compiled and run.
type Config struct {
	// CacheDir holds compiled code across restarts; "" disables the cache.
	CacheDir string
	// MemoryLimitPages caps a plugin instance's memory, in 64 KiB pages.
	MemoryLimitPages uint32
	// MaxTableEntries caps the entries of an instance's tables together
	// (each takes 8 bytes of host heap, outside MemoryLimitPages): tables
	// declared larger are refused at load, and tables are given a maximum
	// that table.grow cannot pass.
	MaxTableEntries uint32
	// MaxPluginBytes caps the plugin file. What compiling a module costs
	// the host grows with its size (up to about a hundred bytes of heap per
	// byte of module, for a module of nothing but imports).
	MaxPluginBytes int64
	// CallTimeout caps one handler call, instantiation included.
	CallTimeout time.Duration
	// NoDeadlineCheck leaves the plugin's code as it is (interruptible),
	// which lets guest code run past its deadline and hold up the Go
	// runtime's garbage collection. It exists only to measure what the
	// check costs; never set it when serving.
	NoDeadlineCheck bool
	// WazeroDeadlineCheck stops guest code the way agentrt did before
	// interruptible, with wazero's WithCloseOnContextDone, which a
	// recursion without a loop escapes. It exists only to measure the
	// two side by side; never set it when serving.
	WazeroDeadlineCheck bool
	// HostModules are the modules of host functions, besides WASI.
	HostModules []HostModule
	// Limiters bound the instances running at once: a call takes a slot
	// of each, in order, before it instantiates. One Limiter may be shared
	// by several plugins (all the instances of a fleet), another be this
	// plugin's own. None: no bound.
	Limiters []*Limiter
	// NoSnapshots makes every instance run the plugin's initialization,
	// never starting from a snapshot (see snapshot).
	NoSnapshots bool
	// AsBefore exists only to measure what snapshots save: every instance
	// is instantiated from the module as it is (not instrumented), in a
	// fresh memory (no memoryPool), and runs the initialization, as agentrt
	// did before them. Never set it when serving.
	AsBefore bool
	// Version is agentrt's version: snapshots cached in CacheDir are
	// kept apart by it.
	Version string
}

// Defaults for Config.
const (
	DefaultMemoryLimitPages = 4096 // 256 MiB
	DefaultCallTimeout      = 30 * time.Second
	// DefaultMaxTableEntries is 800 KB of host memory per instance. Go's
	// plugins have one table of about 6,200 entries (an echo agent), TinyGo's
	// and Rust's under a hundred.
	DefaultMaxTableEntries = 100_000
	// DefaultMaxPluginBytes is ten times a Go plugin with a few
	// dependencies; TinyGo and Rust plugins are a hundred times smaller.
	DefaultMaxPluginBytes = 64 << 20
)

// maxLocals caps the locals one function of a plugin declares: wazero
// allocates for them when it compiles the function. 50,000 is the limit
// of the web's engines (V8, SpiderMonkey) too.
const maxLocals = 50_000

// maxInstanceBytes caps the host heap an instance holds for the plugin's
// tables, globals, segments and imported functions
// (moduleLimits.MaxInstanceBytes): 16 MiB. A Go plugin of 3 MiB declares
// some 36,000 data segments (under 1 MiB) and imports about 20 functions;
// TinyGo's and Rust's a few dozen of each.
const maxInstanceBytes = 16 << 20

// Plugin is a compiled, validated plugin ready to run handler calls. Its
// methods are safe for concurrent use.
type Plugin struct {
	path     string
	sha256   string
	cache    string // CacheHit, CacheMiss or CacheOff
	cfg      Config
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	exports  map[string]bool
	// modCfg makes an instance that runs the initialization: the
	// exports starts, called in order (newInstance).
	modCfg wazero.ModuleConfig
	starts []string

	// inst is the module as instrumented (nil: compiled as it is), snap
	// the snapshot instances start from (nil: none, for the reason in
	// startWhy), and snapCfg how they start from it.
	inst     *instrumented
	snap     *snapshot
	startWhy string
	snapCfg  wazero.ModuleConfig
	// pool holds the memories of closed instances for the next ones.
	pool *memoryPool

	// Calls in flight. Close stops them (closing, which cancels their
	// contexts) and waits for them before it frees the runtime: an
	// instance's memory is unmapped with it, under guest code still
	// running otherwise.
	mu       sync.RWMutex
	closed   bool
	closing  context.Context
	stop     context.CancelFunc
	inFlight sync.WaitGroup
}

// Load reads, compiles and validates the plugin at path, and instantiates it
// once to run its initialization and check its ABI version. Every error is
// one line that says what is wrong with the plugin.
func Load(ctx context.Context, path string, cfg Config) (*Plugin, error) {
	code, err := readPlugin(path, cfg.maxPluginBytes())
	if err != nil {
		return nil, err
	}
	return Compile(ctx, path, code, cfg)
}

func (cfg Config) maxPluginBytes() int64 {
	if cfg.MaxPluginBytes <= 0 {
		return DefaultMaxPluginBytes
	}
	return cfg.MaxPluginBytes
}

// Compile is Load of the plugin whose code a caller has read already (its
// SHA256 is that code's); name names it in errors.
func Compile(ctx context.Context, name string, code []byte, cfg Config) (*Plugin, error) {
	path := name
	if cfg.MemoryLimitPages == 0 {
		cfg.MemoryLimitPages = DefaultMemoryLimitPages
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.MaxTableEntries == 0 {
		cfg.MaxTableEntries = DefaultMaxTableEntries
	}
	cfg.MaxPluginBytes = cfg.maxPluginBytes()
	if n := int64(len(code)); n > cfg.MaxPluginBytes {
		return nil, fmt.Errorf("plugin %s is %d bytes, over the limit of %d bytes for a plugin", path, n, cfg.MaxPluginBytes)
	}
	sum := sha256.Sum256(code) // of the bytes compiled: the file may change meanwhile
	var err error
	if !bytes.HasPrefix(code, []byte("\x00asm")) {
		return nil, fmt.Errorf("plugin %s is not a WebAssembly module (no \\0asm header)", path)
	}
	// Before wazero decodes it: counts it would allocate from, tables.
	lim := moduleLimits{MaxTableEntries: cfg.MaxTableEntries, MaxLocals: maxLocals, MaxInstanceBytes: maxInstanceBytes, MaxMemoryPages: cfg.MemoryLimitPages}
	if code, err = prepareModule(code, lim); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", path, err)
	}
	inst, err := instrument(code)
	var notInstrumented *errNotInstrumented
	switch {
	case cfg.AsBefore:
		inst, notInstrumented = nil, &errNotInstrumented{"as before snapshots"}
	case errors.As(err, &notInstrumented):
	case err != nil:
		return nil, fmt.Errorf("plugin %s: %w", path, err)
	default:
		inst.code, _ = lazyTable(inst.code)
		code = inst.code
	}
	// Guest code stops when its call ends (interruptible), but in the
	// measurements that ask otherwise.
	if !cfg.AsBefore && !cfg.NoDeadlineCheck && !cfg.WazeroDeadlineCheck {
		if code, err = interruptible(code); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", path, err)
		}
		if inst != nil {
			inst.code = code
		}
	}

	// wazero's memory limit stays at wasm32's 4 GiB: instanceMemory holds
	// each instance to cfg.MemoryLimitPages, and sees the grows it refuses.
	rc := wazero.NewRuntimeConfig().
		// As agentrt stopped guest code before interruptible.
		WithCloseOnContextDone((cfg.AsBefore || cfg.WazeroDeadlineCheck) && !cfg.NoDeadlineCheck).
		// The plugin's DWARF sections would be parsed by the host at
		// compile time and again at every trap; agentrt reports a trap by
		// its first line only.
		WithDebugInfoEnabled(false)
	// Each module's compiled code is cached in a directory of its own,
	// named for the code compiled: whether compiling it wrote an entry
	// there tells a hit (nothing new) from a miss, which wazero does not
	// say.
	var cacheDir string
	var cachedBefore int
	if cfg.CacheDir != "" {
		prepared := sha256.Sum256(code)
		cacheDir = filepath.Join(cfg.CacheDir, "modules", hex.EncodeToString(prepared[:16]))
		cachedBefore = cacheEntries(cacheDir)
		cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache %s: %w", cfg.CacheDir, err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	p := &Plugin{path: path, sha256: hex.EncodeToString(sum[:]), cfg: cfg, cache: CacheOff, runtime: wazero.NewRuntimeWithConfig(ctx, rc), inst: inst}
	if notInstrumented != nil {
		p.startWhy = notInstrumented.why
	}
	p.closing, p.stop = context.WithCancel(context.Background())
	if err := p.load(ctx, code); err != nil {
		p.runtime.Close(ctx)
		p.snap.close()
		return nil, fmt.Errorf("plugin %s: %w", path, err)
	}
	if cacheDir != "" {
		p.cache = CacheMiss
		if cachedBefore > 0 && cacheEntries(cacheDir) == cachedBefore {
			p.cache = CacheHit
		}
	}
	return p, nil
}

// How a plugin's compiled code was had (Plugin.Cache).
const (
	CacheOff  = "off"  // no compilation cache
	CacheHit  = "hit"  // read from the cache
	CacheMiss = "miss" // compiled, and written to the cache
)

// Cache says how the plugin's compiled code was had: CacheHit, CacheMiss
// or CacheOff.
func (p *Plugin) Cache() string { return p.cache }

// cacheEntries counts the compiled modules under a module's cache
// directory (files, but wazero's temporary ones).
func cacheEntries(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".tmp") {
			n++
		}
		return nil
	})
	return n
}

// readPlugin reads the plugin file, refusing one over max bytes before
// reading it.
func readPlugin(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read plugin: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read plugin: %w", err)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("plugin %s is %d bytes, over the limit of %d bytes for a plugin", path, fi.Size(), max)
	}
	code := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, code); err != nil {
		return nil, fmt.Errorf("read plugin %s: %w", path, err)
	}
	return code, nil
}

func (p *Plugin) load(ctx context.Context, code []byte) error {
	if err := instantiateWASI(ctx, p.runtime); err != nil {
		return fmt.Errorf("instantiate WASI: %w", err)
	}
	for _, m := range p.cfg.HostModules {
		if err := m.Instantiate(ctx, p.runtime); err != nil {
			return fmt.Errorf("instantiate host module %s: %w", m.Name, err)
		}
	}
	compiled, err := compileModule(ctx, p.runtime, code)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		// The compiled code did not fit in the cache (Config.CacheDir):
		// the caller may compile without it.
		return fmt.Errorf("the compiled-code cache's disk is full: %w", err)
	} else if err != nil {
		return fmt.Errorf("does not compile: %v", firstLine(err))
	}
	p.compiled = compiled
	if err := p.checkImports(); err != nil {
		return err
	}
	if err := p.checkExports(); err != nil {
		return err
	}
	p.starts = []string{startExport, abi.InitializeExport}
	if p.inst != nil {
		p.starts = []string{instantiateExport, abi.InitializeExport}
	}
	p.modCfg = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // newInstance calls p.starts
		WithSysWalltime().
		WithSysNanotime()
	if !p.cfg.AsBefore {
		p.modCfg = p.modCfg.WithRandSource(rand.Reader)
	}
	// random_get and fd_write are agentrt's own (instantiateWASI): they
	// take no random source or writers from this configuration. Without a
	// source, wazero seeds a math/rand generator for every instance (7% of
	// a Go instance's start).

	// The plugin's initialization, which must neither trap nor loop, runs
	// to take a snapshot, or in the first instance below.
	if err := p.useSnapshot(ctx); err != nil {
		return fmt.Errorf("initialization failed: %s", protocol.ErrorMessage(err))
	}
	switch {
	case p.cfg.AsBefore:
	case p.snap != nil:
		p.pool = newMemoryPool(p.snap.image)
	default:
		p.pool = newMemoryPool(nil)
	}

	// A first instance tells the ABI version.
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	in, err := p.instantiate(ctx) // what it prints goes nowhere
	if err != nil {
		return fmt.Errorf("initialization failed: %s", protocol.ErrorMessage(err))
	}
	defer in.close()
	res, err := in.it.call(ctx, ctx, in.ExportedFunction(abi.VersionExport))
	if err != nil {
		return fmt.Errorf("%s failed: %s", abi.VersionExport, protocol.ErrorMessage(p.failure(ctx, err)))
	}
	if v := int32(res[0]); v != abi.Version {
		return fmt.Errorf("it is built for ABI version %d; this agentrt serves ABI version %d", v, abi.Version)
	}
	if fn := in.ExportedFunction(abi.HandlersExport); fn != nil {
		res, err := in.it.call(ctx, ctx, fn)
		if err != nil {
			return fmt.Errorf("%s failed: %s", abi.HandlersExport, protocol.ErrorMessage(p.failure(ctx, err)))
		}
		bits := int32(res[0])
		for name, bit := range map[string]int32{
			abi.TaskExport: abi.HandlerBitTask, abi.StepExport: abi.HandlerBitStep, abi.ArtifactExport: abi.HandlerBitArtifact,
			abi.DownloadExport: abi.HandlerBitDownload,
		} {
			if bits&bit == 0 {
				delete(p.exports, name)
			}
		}
		if !p.exports[abi.StepExport] {
			return errors.New(noStepHandler)
		}
	}
	return nil
}

// checkImports refuses imports the host does not provide, naming them, rather
// than letting instantiation fail later with wazero's words.
func (p *Plugin) checkImports() error {
	// Each host module's functions, listed once: a listing costs about
	// 12 µs, and a module may import hundreds of thousands of functions.
	hostFuncs := map[string]map[string]api.FunctionDefinition{}
	for _, f := range p.compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		host := p.runtime.Module(mod)
		if host == nil {
			return fmt.Errorf("imports %s.%s, but the host provides no module %q (it provides %s and %s)",
				mod, name, mod, wasi_snapshot_preview1.ModuleName, abi.ImportModule)
		}
		if hostFuncs[mod] == nil {
			hostFuncs[mod] = host.ExportedFunctionDefinitions()
		}
		def := hostFuncs[mod][name]
		if def == nil {
			return fmt.Errorf("imports %s.%s, which the host does not provide", mod, name)
		}
		if !sameSignature(def, f) {
			return fmt.Errorf("imports %s.%s with signature %s, but the host's is %s",
				mod, name, signature(f), signature(def))
		}
	}
	for _, m := range p.compiled.ImportedMemories() {
		mod, name, _ := m.Import()
		return fmt.Errorf("imports memory %s.%s; the host provides none (a plugin exports its memory)", mod, name)
	}
	return nil
}

// checkExports requires the ABI's exports with their signatures and records
// which optional handlers exist.
func (p *Plugin) checkExports() error {
	fns := p.compiled.ExportedFunctions()
	if _, ok := p.compiled.ExportedMemories()["memory"]; !ok {
		return errors.New(`exports no memory named "memory"`)
	}
	if fns[abi.InitializeExport] == nil && fns["_start"] != nil {
		return errors.New("is a command module (it exports _start, not _initialize); build it as a reactor, e.g. with -buildmode=c-shared")
	}
	p.exports = map[string]bool{}
	for _, name := range []string{abi.VersionExport, abi.HandlersExport, abi.StepExport, abi.TaskExport, abi.ArtifactExport, abi.DownloadExport} {
		def := fns[name]
		if def == nil {
			continue
		}
		if len(def.ParamTypes()) != 0 || len(def.ResultTypes()) != 1 || def.ResultTypes()[0] != api.ValueTypeI32 {
			return fmt.Errorf("exports %s with signature %s; want () -> i32", name, signature(def))
		}
		p.exports[name] = true
	}
	for _, name := range []string{abi.VersionExport, abi.StepExport} {
		if !p.exports[name] {
			return fmt.Errorf("does not export %s, which every plugin must (see plugins/ABI.md)", name)
		}
	}
	return nil
}

// HasExport reports whether the plugin exports the handler function name.
func (p *Plugin) HasExport(name string) bool { return p.exports[name] }

// SHA256 is the sha256 of the plugin's code, in hex: the bytes Load read
// and compiled, whatever the file holds now.
func (p *Plugin) SHA256() string { return p.sha256 }

// Invocation is what one handler call hands the plugin besides its code.
type Invocation struct {
	// Stdout and Stderr receive what the plugin writes to its standard
	// output and error, from its initialization on.
	Stdout, Stderr io.Writer
	// Host returns the context host functions run under while the handler
	// runs (hostapi.WithHost, say). The instance's initialization (a start
	// section, _initialize, Go's init functions) runs before it is bound:
	// a host function called there finds no handler call and answers "not
	// allowed", so what a plugin does while it constructs itself is the
	// same for every call and reaches nothing. nil binds nothing.
	Host func(context.Context) context.Context
	// Deadline, when not zero and sooner than the call timeout, is when
	// the call is stopped (ETIMEOUT), or its wait for an instance slot
	// ends (EUNAVAILABLE): a time budget of the caller's.
	Deadline time.Time
	// Timeout, when not zero, is the call's time limit in place of the
	// call timeout (Config.CallTimeout): a step run in the background is
	// given minutes, where a client waiting for its answer is given
	// seconds.
	Timeout time.Duration
}

// Call runs the exported function name in a fresh instance and returns its
// i32 result and how long the plugin ran (waiting for an instance slot,
// see Config.Limiters, is not counted, and not limited by the call
// timeout). The plugin's failure is a *protocol.PluginFailure naming its
// cause: a timeout past the call timeout (ETIMEOUT), a trap, an exit or a
// host-imposed stop (EPLUGIN). EUNAVAILABLE is when no instance could be
// had or the plugin is closing.
func (p *Plugin) Call(ctx context.Context, name string, inv Invocation) (int32, time.Duration, error) {
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return 0, 0, shuttingDown()
	}
	p.inFlight.Add(1)
	p.mu.RUnlock()
	defer p.inFlight.Done()

	for _, l := range p.cfg.Limiters {
		if err := l.acquire(ctx, inv.Deadline); err != nil {
			return 0, 0, err
		}
		defer l.release()
	}
	start := time.Now()
	limit := p.cfg.CallTimeout
	if inv.Timeout > 0 {
		limit = inv.Timeout
	}
	ctx = context.WithValue(ctx, callLimitKey{}, limit)
	deadline := start.Add(limit)
	if !inv.Deadline.IsZero() && inv.Deadline.Before(deadline) {
		deadline = inv.Deadline
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	defer context.AfterFunc(p.closing, cancel)()
	code, err := p.call(ctx, name, inv)
	return code, time.Since(start), err
}

func (p *Plugin) call(ctx context.Context, name string, inv Invocation) (int32, error) {
	// What the plugin prints, from its initialization on, goes to inv's
	// writers (see withStdio).
	ctx = withStdio(ctx, inv.Stdout, inv.Stderr)
	in, err := p.instantiate(ctx)
	if err != nil {
		return 0, err
	}
	defer in.close()
	if p.snap != nil {
		p.snap.replay(ctx)
	}
	fn := in.ExportedFunction(name)
	if fn == nil {
		return 0, protocol.NewPluginFailure(protocol.CauseOther, "the plugin does not export %s", name)
	}
	callCtx := ctx
	if inv.Host != nil {
		callCtx = inv.Host(ctx)
	}
	res, err := in.it.call(ctx, callCtx, fn)
	if err != nil {
		// A plugin out of memory traps soon after a refused memory.grow,
		// in words of its own language's runtime (failure.go).
		return 0, nameCause(p.failure(ctx, err), err, in.mem)
	}
	return int32(res[0]), nil
}

// callLimitKey is the context key of a call's time limit, for the
// failure that names it.
type callLimitKey struct{}

// callLimit is the time limit of the call ctx is a context of.
func (p *Plugin) callLimit(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(callLimitKey{}).(time.Duration); ok {
		return d
	}
	return p.cfg.CallTimeout
}

func shuttingDown() *protocol.Error {
	return &protocol.Error{Code: protocol.EUNAVAILABLE, Message: "the server is shutting down; retry shortly", RetryAfter: 1}
}

// instantiate makes a fresh instance: from the snapshot, or running its
// initialization. Its sleeps (WASI's poll_oneoff, see instantiateWASI) are
// real, and end when ctx does; so does its code (arm).
func (p *Plugin) instantiate(ctx context.Context) (*instance, error) {
	mem := &instanceMemory{limit: uint64(p.cfg.MemoryLimitPages) * 65536, pool: p.pool}
	if p.snap != nil {
		return p.instantiateSnapshot(ctx, mem)
	}
	in, err := p.newInstance(ctx, p.modCfg, mem, true)
	if err != nil {
		return nil, p.failure(ctx, err)
	}
	return in, nil
}

// An instance is an instance of the plugin's module, in its memory, armed
// to stop when the context it was made for ends.
type instance struct {
	api.Module
	mem *instanceMemory
	it  *interrupter
}

func (in *instance) close() {
	in.it.disarm()
	in.Close(context.Background())
}

// newInstance instantiates the plugin's module with cfg in mem and arms
// it with ctx; with initialize, it then runs the plugin's initialization
// (p.starts, those the module exports, in order) as wazero runs start
// functions, with its errors in wazero's words. An error is wazero's or
// the guest's, for the caller to explain (failure).
func (p *Plugin) newInstance(ctx context.Context, cfg wazero.ModuleConfig, mem *instanceMemory, initialize bool) (*instance, error) {
	mod, err := p.runtime.InstantiateModule(experimental.WithMemoryAllocator(ctx, mem), p.compiled, cfg)
	if err != nil {
		return nil, err
	}
	in := &instance{Module: mod, mem: mem, it: arm(ctx, mod)}
	if !initialize {
		return in, nil
	}
	for _, name := range p.starts {
		fn := mod.ExportedFunction(name)
		if fn == nil {
			continue
		}
		if _, err := in.it.call(ctx, ctx, fn); err != nil {
			in.close()
			var exit *sys.ExitError
			if errors.As(err, &exit) {
				if exit.ExitCode() == 0 {
					return in, nil // closed, as wazero leaves it
				}
				return nil, err
			}
			return nil, fmt.Errorf("module[] function[%s] failed: %w", name, err)
		}
	}
	return in, nil
}

// byteSize is n bytes as a person reads it: whole MiB or KiB where n is
// one, else MiB with a decimal.
func byteSize(n uint64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n < 1<<20 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// failure explains why guest code stopped, in a client's terms: a
// *protocol.PluginFailure, or EUNAVAILABLE when the plugin is closing.
func (p *Plugin) failure(ctx context.Context, err error) error {
	var failed *protocol.PluginFailure
	var exit *sys.ExitError
	switch {
	case errors.As(err, &failed):
		return failed // stopped by a host function
	case errors.As(err, &exit):
		switch code := exit.ExitCode(); {
		case code == sys.ExitCodeDeadlineExceeded || errors.Is(ctx.Err(), context.DeadlineExceeded):
			return protocol.NewPluginFailure(protocol.CauseTimeout, "the plugin ran past its time limit of %s", p.callLimit(ctx))
		case code == sys.ExitCodeContextCanceled && p.closing.Err() != nil:
			return shuttingDown() // nothing the plugin did: not its failure
		case code == sys.ExitCodeContextCanceled:
			return protocol.NewPluginFailure(protocol.CauseCancelled, "the plugin call was cancelled")
		default:
			return protocol.NewPluginFailure(protocol.CauseExit, "the plugin exited with code %d", code)
		}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return protocol.NewPluginFailure(protocol.CauseTimeout, "the plugin ran past its time limit of %s", p.callLimit(ctx))
	}
	return protocol.NewPluginFailure(protocol.CauseTrap, "the plugin trapped: %s", firstLine(err))
}

// Close releases the plugin's compiled code and runtime.
//
// Calls in flight are stopped (they fail with EUNAVAILABLE, which records
// nothing) and waited for; calls after Close fail the same way.
func (p *Plugin) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.stop()
	p.inFlight.Wait()
	err := p.runtime.Close(ctx)
	p.pool.close()
	p.snap.close()
	return err
}

// wazeroFrame is how wazero names the function a start failure happened in.
var wazeroFrame = regexp.MustCompile(`^module\[[^\]]*\] function\[([^\]]*)\] failed: `)

// firstLine is an error's first line (wazero appends a stack trace), with
// wazero's wording made plain.
func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = wazeroFrame.ReplaceAllString(s, "in $1: ")
	s = strings.TrimSuffix(s, " (recovered by wazero)")
	// wazero names a function by all its export names, which are the
	// plugin's to choose: keep the line a line.
	if len(s) > maxErrorLine {
		cut := maxErrorLine
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
	}
	return s
}

// maxErrorLine bounds what firstLine keeps of an error.
const maxErrorLine = 1024

func sameSignature(a, b api.FunctionDefinition) bool {
	return equalTypes(a.ParamTypes(), b.ParamTypes()) && equalTypes(a.ResultTypes(), b.ResultTypes())
}

func equalTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func signature(f api.FunctionDefinition) string {
	names := func(ts []api.ValueType) string {
		var s []string
		for _, t := range ts {
			s = append(s, api.ValueTypeName(t))
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return names(f.ParamTypes()) + " -> " + names(f.ResultTypes())
}

// compileModule is r.CompileModule, with a panic in it turned into an
// error. wazero v1.12 panics on some modules its validator accepts: a
// typed select of a typed reference (0x1c 0x01 0x63 N) is validated as
// four bytes and compiled as three. The compile runs in this goroutine,
// and the runtime is closed after a failed load.
func compileModule(ctx context.Context, r wazero.Runtime, code []byte) (cm wazero.CompiledModule, err error) {
	defer func() {
		if v := recover(); v != nil {
			cm, err = nil, fmt.Errorf("wazero failed on it: %v", v)
		}
	}()
	return r.CompileModule(ctx, code)
}
