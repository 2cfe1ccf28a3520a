package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"sync"
	"time"

	"github.com/agentrt/agentrt/hostapi"
	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/plugins/manifest"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/httpapi"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/plugin"
	"github.com/agentrt/agentrt/storage"
)

// fleet is the agents one agentrt process serves over one store: one
// plugin ("agentrt run") or every plugin of a directory ("agentrt
// serve"), each at /agents/NAME, and the default one at the root too. It
// implements httpapi.Agents.
//
// An agent outlives its builds: a plugin replaced in the directory is a
// new build of the same agent (protocol.Agent.Serve swaps it in; calls in
// progress end on the old one, which is closed once none uses it), and a
// plugin removed leaves its agent serving reads of its tasks. Agents that
// only have tasks in the store (their plugin was removed before a restart)
// are listed as removed.
type fleet struct {
	cfg      *runConfig       // the operator's limits: each agent's defaults and maximums
	store    *storage.Store   // the unnamed agent's view; each agent has its own
	limiter  *runtime.Limiter // the instances of every plugin together
	cacheDir string
	log      *slog.Logger
	dir      string         // serve's plugin directory
	metrics  *serverMetrics // nil: none kept

	mu     sync.RWMutex
	agents map[string]*fleetAgent // by agent name
	files  map[string]*pluginFile // by plugin file name (NAME of NAME.wasm)
	// retiring counts builds waiting for their last call to end before
	// they are closed.
	retiring sync.WaitGroup
	// loads counts the loads the watcher started (syncFileAsync);
	// fileLocks keeps two loads of one file from overlapping.
	loads     sync.WaitGroup
	fileLocks sync.Map // file name → *sync.Mutex
}

// fleetAgent is one agent: its protocol.Agent, and the build serving it.
type fleetAgent struct {
	name  string
	agent *protocol.Agent
	file  string      // the plugin file serving it; "" once removed
	build *fleetBuild // nil while none serves
	// err is why the agent's latest build failed to load, while an earlier
	// one serves (or none: the agent failed).
	err string
}

// pluginFile is what the fleet last made of one plugin's files.
type pluginFile struct {
	name  string   // NAME of NAME.wasm
	agent string   // the agent it serves; "" when it serves none
	key   [32]byte // of the plugin and manifest bytes last tried
	err   string   // why they could not be served
}

// fleetBuild is a loaded plugin with what it runs under.
type fleetBuild struct {
	plugin   *plugin.Plugin     // with the egress client that makes its outbound requests
	limiter  *runtime.Limiter   // the agent's own bound on its instances; nil: none
	manifest *manifest.Manifest // nil without one
	limits   agentLimits
	settings map[string]string
	loadedAt time.Time
	// http describes what the operator granted its outbound requests.
	http *httpapi.OutboundHTTP
}

// agentLimits are the limits one agent runs under.
type agentLimits struct {
	protocol.Limits
	callTimeout     time.Duration
	memory          int64 // bytes, a multiple of 64 KiB
	maxHostCalls    int
	maxTableEntries int
	maxInstances    int // of this agent's plugin at once; 0: only the fleet's bound
	egress          egress.Limits
}

// newFleet returns an empty fleet over store; dir is serve's plugin
// directory ("" for run).
func newFleet(cfg *runConfig, store *storage.Store, limiter *runtime.Limiter, dir string, log *slog.Logger) *fleet {
	cacheDir := cfg.cacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(cfg.dataDir, "cache")
	}
	return &fleet{cfg: cfg, store: store, limiter: limiter, cacheDir: cacheDir, log: log, dir: dir,
		agents: map[string]*fleetAgent{}, files: map[string]*pluginFile{}}
}

// loaded is what loading a plugin's files gave.
type loaded struct {
	file   string
	exists bool     // the plugin file is there
	key    [32]byte // of its bytes and its manifest's
	name   string   // the agent it is, "" when that could not be told
	build  *fleetBuild
	err    error
}

// operatorLimits are the limits the operator's flags give every agent.
func (f *fleet) operatorLimits() agentLimits {
	c := f.cfg
	return agentLimits{Limits: c.limits, callTimeout: c.callTimeout, memory: int64(c.memoryLimit),
		maxHostCalls: c.maxHostCalls, maxTableEntries: c.maxTableEntries, egress: c.egress.limits}
}

// limitsFor are the limits of an agent whose manifest asks for m's: each
// the operator's, or less where the manifest asks for less. A manifest
// asking for more gets the operator's maximum. For limits where 0 means
// none, a manifest may set one where the operator set none.
func (f *fleet) limitsFor(m *manifest.Manifest) agentLimits {
	l := f.operatorLimits()
	if m == nil {
		return l
	}
	ml := m.Limits
	l.callTimeout = tighter(l.callTimeout, ml.CallTimeout, false)
	l.MaxTaskTime = tighter(l.MaxTaskTime, ml.TaskTime, true)
	l.memory = tighter(l.memory, ml.Memory, false) &^ (64<<10 - 1) // whole pages
	l.MaxUploadBytes = tighter(l.MaxUploadBytes, ml.MaxUpload, false)
	l.MaxArtifactBytes = tighter(l.MaxArtifactBytes, ml.MaxArtifact, false)
	l.MaxResultBytes = int(tighter(int64(l.MaxResultBytes), ml.MaxResult, false))
	l.MaxLogBytes = int(tighter(int64(l.MaxLogBytes), ml.MaxLog, false))
	l.MaxTaskLogBytes = tighter(l.MaxTaskLogBytes, ml.MaxTaskLog, true)
	l.MaxWorkspaceBytes = tighter(l.MaxWorkspaceBytes, ml.MaxWorkspace, false)
	l.MaxTaskArtifactBytes = tighter(l.MaxTaskArtifactBytes, ml.MaxTaskArtifactBytes, true)
	l.MaxWorkspaceFiles = tighter(l.MaxWorkspaceFiles, ml.MaxWorkspaceFiles, false)
	l.MaxCallArtifacts = tighter(l.MaxCallArtifacts, ml.MaxCallArtifacts, false)
	l.MaxTaskArtifacts = tighter(l.MaxTaskArtifacts, ml.MaxTaskArtifacts, true)
	l.MaxPlannedSteps = tighter(l.MaxPlannedSteps, ml.MaxPlannedSteps, false)
	l.MaxTaskSteps = tighter(l.MaxTaskSteps, ml.MaxTaskSteps, true)
	l.maxHostCalls = tighter(l.maxHostCalls, ml.MaxHostCalls, false)
	l.maxTableEntries = tighter(l.maxTableEntries, ml.MaxTableEntries, false)
	if v := ml.MaxInstances; v != nil {
		l.maxInstances = min(*v, f.cfg.maxInstances)
	}
	l.egress = egressLimitsFor(l.egress, &ml)
	return l
}

// tighter is the limit an agent runs under when the operator's is op and
// its manifest asks for v (nil: nothing): the smaller, so that a manifest
// never loosens a limit. Where zeroIsNone, 0 means no limit: a manifest
// asking for none gets the operator's, and one asking for some gets it
// where the operator set none.
func tighter[T int | int64 | time.Duration](op T, v *T, zeroIsNone bool) T {
	switch {
	case v == nil:
		return op
	case zeroIsNone && *v == 0:
		return op
	case zeroIsNone && op == 0:
		return *v
	}
	return min(op, *v)
}

// newBuild loads the plugin at path as a build of the agent name, whose
// manifest is m (nil: none): under the limits m gets (limitsFor), with
// its settings and the outbound HTTP the operator grants it. code, when
// not nil, is what the caller read of the file.
func (f *fleet) newBuild(ctx context.Context, path string, code []byte, name string, m *manifest.Manifest) (*fleetBuild, error) {
	l := f.limitsFor(m)
	limiters := []*runtime.Limiter{f.limiter}
	var own *runtime.Limiter
	if l.maxInstances > 0 {
		// The agent's own bound first: a call waiting for one of its
		// agent's instances holds none of the fleet's.
		own = runtime.NewLimiter(l.maxInstances, f.cfg.maxQueue, f.cfg.queueWait)
		limiters = []*runtime.Limiter{own, f.limiter}
	}
	client, http, notes := f.egressFor(name, m, l.egress)
	cfg := plugin.Config{
		Runtime: runtime.Config{
			CacheDir:         f.cacheDir,
			MemoryLimitPages: uint32(l.memory / (64 << 10)),
			MaxTableEntries:  uint32(l.maxTableEntries),
			MaxPluginBytes:   int64(f.cfg.maxPluginSize),
			CallTimeout:      l.callTimeout,
			Limiters:         limiters,
			NoSnapshots:      !f.cfg.snapshots,
			Version:          buildVersion(),
		},
		Host:   hostapi.Config{MaxCalls: l.maxHostCalls},
		Egress: client,
		Log:    f.log,
	}
	var p *plugin.Plugin
	var err error
	if code != nil {
		p, err = plugin.Compile(ctx, path, code, cfg)
	} else {
		p, err = plugin.Load(ctx, path, cfg)
	}
	if err != nil {
		client.Close()
		return nil, err
	}
	for _, n := range notes {
		f.log.Warn("outbound HTTP: a grant that does not apply", "agent", name, "note", n)
	}
	f.metrics.compiled(p.Cache())
	settings := map[string]string{}
	if m != nil {
		for k, v := range m.Settings {
			settings[k] = v
		}
	}
	for k, v := range f.cfg.pluginConfig { // the operator's win
		settings[k] = v
	}
	return &fleetBuild{plugin: p, limiter: own, manifest: m, limits: l, settings: settings, loadedAt: time.Now(), http: http}, nil
}

// newAgent is the protocol.Agent of the agent named name.
func (f *fleet) newAgent(name string, log *slog.Logger) *protocol.Agent {
	cfg := protocol.AgentConfig{Name: name, Log: log}
	if f.metrics != nil {
		cfg.Observer = f.metrics
	}
	return protocol.NewAgent(f.store.Agent(name), nil, cfg)
}

// queued counts the calls waiting for a plugin instance: for the fleet's,
// and for each agent's own.
func (f *fleet) queued() float64 {
	_, n := f.limiter.Load()
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, a := range f.agents {
		if a.build != nil && a.build.limiter != nil {
			_, w := a.build.limiter.Load()
			n += w
		}
	}
	return float64(n)
}

// instances counts the plugin instances running.
func (f *fleet) instances() float64 {
	n, _ := f.limiter.Load()
	return float64(n)
}

// interrupt stops the handler calls of every agent, saying why: see
// protocol.Agent.Interrupt.
func (f *fleet) interrupt(why string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, a := range f.agents {
		a.agent.Interrupt(why)
	}
}

// loadFile loads the plugin file NAME of the plugin directory with its
// manifest. It compiles nothing when the files hold what was last tried
// (unchanged is then set).
func (f *fleet) loadFile(ctx context.Context, file string) (res loaded, unchanged bool) {
	res.file = file
	wasmPath := filepath.Join(f.dir, file+pluginExt)
	code, err := readLimited(wasmPath, int64(f.cfg.maxPluginSize))
	if errors.Is(err, fs.ErrNotExist) {
		return res, false
	}
	res.exists = true
	manifestPath := filepath.Join(f.dir, file+manifestExt)
	manifestBytes, merr := readLimited(manifestPath, manifest.MaxSize)
	h := sha256.New()
	h.Write(code)
	h.Write([]byte{0})
	h.Write(manifestBytes)
	copy(res.key[:], h.Sum(nil))
	f.mu.RLock()
	pf := f.files[file]
	unchanged = pf != nil && pf.key == res.key
	f.mu.RUnlock()
	if unchanged {
		return res, true
	}
	switch {
	case errors.Is(err, errTooLarge):
		res.err = fmt.Errorf("plugin %s is over the limit of %d bytes for a plugin", wasmPath, int64(f.cfg.maxPluginSize))
		return res, false
	case err != nil:
		res.err = fmt.Errorf("read %s: %w", wasmPath, unwrapPath(err))
		return res, false
	}
	if err := manifest.ValidName(file); err != nil {
		res.err = fmt.Errorf("plugin file %s%s: %v", file, pluginExt, err)
		return res, false
	}
	var m *manifest.Manifest
	switch {
	case errors.Is(merr, fs.ErrNotExist):
	case merr != nil && !errors.Is(merr, errTooLarge):
		res.err = fmt.Errorf("read %s: %w", manifestPath, unwrapPath(merr))
		return res, false
	default:
		if m, err = manifest.Parse(file+manifestExt, bytes.NewReader(manifestBytes)); err != nil {
			res.err = err
			return res, false
		}
	}
	res.name = file
	if m != nil && m.Name != "" {
		res.name = m.Name
	}
	res.build, res.err = f.newBuild(ctx, wasmPath, code, res.name, m)
	return res, false
}

// errTooLarge is a file over the size readLimited was allowed.
var errTooLarge = errors.New("file too large")

// readLimited reads a file of at most max bytes (more is errTooLarge,
// with the first max+1 bytes, enough to tell it changed).
func readLimited(path string, max int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err == nil && int64(len(b)) > max {
		err = errTooLarge
	}
	return b, err
}

// apply makes what loading a plugin's files gave the fleet's: a new build
// of its agent, a failure, or the plugin's removal.
func (f *fleet) apply(res loaded) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pf := f.files[res.file]
	if !res.exists {
		if pf == nil {
			return
		}
		if a := f.agents[pf.agent]; a != nil && a.file == res.file {
			f.log.Info("plugin removed; its agent's tasks stay readable", "agent", a.name, "file", res.file+pluginExt)
			f.retire(a, nil)
			a.file, a.err = "", ""
		}
		delete(f.files, res.file)
		return
	}
	if pf == nil {
		pf = &pluginFile{name: res.file}
		f.files[res.file] = pf
	}
	pf.key = res.key
	if res.err == nil {
		if other := f.agents[res.name]; other != nil && other.file != "" && other.file != res.file {
			res.err = fmt.Errorf("agent name %q is already served from %s%s", res.name, other.file, pluginExt)
			res.build.plugin.Close(context.Background())
		}
	}
	if res.err != nil {
		msg := res.err.Error()
		pf.err = msg
		if a := f.agents[pf.agent]; a != nil && a.file == res.file {
			a.err = msg
			if a.build != nil {
				f.log.Warn("a new build failed to load; the previous one keeps serving", "agent", a.name, "err", msg)
				return
			}
		}
		f.log.Warn("plugin failed to load", "file", res.file+pluginExt, "err", msg)
		return
	}
	if old := f.agents[pf.agent]; old != nil && pf.agent != res.name && old.file == res.file {
		// The manifest renamed the agent: the old name's agent is gone.
		f.retire(old, nil)
		old.file, old.err = "", ""
	}
	a := f.agents[res.name]
	if a == nil {
		a = &fleetAgent{name: res.name, agent: f.newAgent(res.name, f.log.With("agent", res.name))}
		f.agents[res.name] = a
	}
	pf.agent, pf.err = res.name, ""
	a.file, a.err = res.file, ""
	f.log.Info("agent ready", "agent", a.name, "file", res.file+pluginExt, "sha256", res.build.plugin.SHA256(),
		"start", res.build.plugin.Start().String())
	f.retire(a, res.build)
}

// retire makes next (nil: none) serve agent a, and closes the build it
// replaces once the calls on it have ended. f.mu is held.
func (f *fleet) retire(a *fleetAgent, next *fleetBuild) {
	var pb *protocol.Build
	if next != nil {
		pb = next.protocolBuild()
	}
	drained := a.agent.Serve(pb)
	old := a.build
	a.build = next
	if old == nil {
		return
	}
	f.retiring.Add(1)
	go func() {
		defer f.retiring.Done()
		<-drained
		if err := old.plugin.Close(context.Background()); err != nil {
			f.log.Warn("closing a replaced build", "agent", a.name, "err", err)
		}
	}()
}

// protocolBuild is the build as the domain runs it.
func (b *fleetBuild) protocolBuild() *protocol.Build {
	return &protocol.Build{Plugin: b.plugin, ID: b.plugin.SHA256(), Limits: b.limits.Limits, Settings: b.settings,
		Schemes: b.schemes()}
}

// schemes are the URI schemes of the build's agent: its manifest's lists,
// and agentrt's default for a list it leaves out.
func (b *fleetBuild) schemes() protocol.ArtifactSchemes {
	s := protocol.DefaultArtifactSchemes
	if b.manifest != nil && b.manifest.Capabilities.ArtifactSchemes != nil {
		if m := b.manifest.Capabilities.ArtifactSchemes; m.Input != nil {
			s.Input = m.Input
		}
		if m := b.manifest.Capabilities.ArtifactSchemes; m.Output != nil {
			s.Output = m.Output
		}
	}
	return s
}

// syncFile loads a plugin's files again and applies what changed: the
// dirWatcher's callback.
func (f *fleet) syncFile(ctx context.Context, file string) {
	res, unchanged := f.loadFile(ctx, file)
	if unchanged {
		return
	}
	f.apply(res)
	if !res.exists {
		// A plugin refused the name the removed one had may have it now.
		for _, name := range f.forgetFailed() {
			f.syncFileAsync(ctx, name)
		}
	}
}

// syncFileAsync is syncFile on a goroutine of its own: plugins that change
// together compile in parallel, while the loads of one file follow each
// other in order. waitLoads waits for them.
func (f *fleet) syncFileAsync(ctx context.Context, file string) {
	mu, _ := f.fileLocks.LoadOrStore(file, &sync.Mutex{})
	f.loads.Add(1)
	go func() {
		defer f.loads.Done()
		mu.(*sync.Mutex).Lock()
		defer mu.(*sync.Mutex).Unlock()
		if ctx.Err() == nil {
			f.syncFile(ctx, file)
		}
	}()
}

// waitLoads waits for the loads syncFileAsync started.
func (f *fleet) waitLoads() { f.loads.Wait() }

// pluginFiles lists the plugin files of the directory and those the fleet
// knows of, gone or not.
func (f *fleet) pluginFiles() ([]string, error) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, fmt.Errorf("plugin directory: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if name := pluginFileName(e.Name()); name != "" && !e.IsDir() {
			seen[name] = true
		}
	}
	f.mu.RLock()
	for name := range f.files {
		seen[name] = true
	}
	f.mu.RUnlock()
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// forgetFailed returns the plugin files that serve no agent, and forgets
// what was tried of them, so that they are loaded again.
func (f *fleet) forgetFailed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, pf := range f.files {
		if pf.agent == "" {
			pf.key = [32]byte{}
			names = append(names, pf.name)
		}
	}
	sort.Strings(names)
	return names
}

// syncAll loads every plugin of the directory, and forgets those gone: at
// start, before the watcher runs. Plugins compile in
// parallel (wazero's compilation cache makes a restart's fast); results
// are applied in file name order, so which of two files claiming one
// agent name wins does not depend on which compiled first.
func (f *fleet) syncAll(ctx context.Context) error {
	names, err := f.pluginFiles()
	if err != nil {
		return err
	}

	type result struct {
		res       loaded
		unchanged bool
	}
	results := make([]result, len(names))
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(1, goruntime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i].res, results[i].unchanged = f.loadFile(ctx, names[i])
			}
		}()
	}
	for i := range names {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, r := range results {
		if !r.unchanged {
			f.apply(r.res)
		}
	}
	return nil
}

// openDir starts a fleet on the plugin directory: the agents that only
// have tasks left, then every plugin. The default agent takes the tasks a
// data directory holds from before agents had names.
func (f *fleet) openDir(ctx context.Context) error {
	if fi, err := os.Stat(f.dir); err != nil {
		return fmt.Errorf("plugin directory %s: %w", f.dir, unwrapPath(err))
	} else if !fi.IsDir() {
		return fmt.Errorf("plugin directory %s is not a directory", f.dir)
	}
	if name := f.cfg.defaultAgent; name != "" {
		if n, err := f.store.Agent(name).AdoptTasks(ctx, ""); err != nil {
			return err
		} else if n > 0 {
			f.log.Info("the default agent takes the tasks from before agents had names", "agent", name, "tasks", n)
		}
	}
	if err := f.addRemovedAgents(ctx); err != nil {
		return err
	}
	return f.syncAll(ctx)
}

// addRemovedAgents lists the agents that have tasks in the store, so that
// their tasks stay readable while no plugin serves them.
func (f *fleet) addRemovedAgents(ctx context.Context) error {
	names, err := f.store.AgentNames(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, name := range names {
		if name == "" || f.agents[name] != nil {
			continue
		}
		f.agents[name] = &fleetAgent{name: name, agent: f.newAgent(name, f.log.With("agent", name))}
	}
	return nil
}

// openPlugin starts a fleet of the one plugin run serves, under the
// operator's limits and settings (no manifest). It takes the tasks a data
// directory holds from before agents had names.
func (f *fleet) openPlugin(ctx context.Context, path, name string) error {
	if fi, err := os.Stat(path); err != nil {
		return fmt.Errorf("plugin %s: %w", path, unwrapPath(err))
	} else if fi.IsDir() {
		return fmt.Errorf("plugin %s is a directory, not a .wasm file", path)
	}
	b, err := f.newBuild(ctx, path, nil, name, nil)
	if err != nil {
		return err
	}
	if n, err := f.store.Agent(name).AdoptTasks(ctx, ""); err != nil {
		b.plugin.Close(ctx)
		return err
	} else if n > 0 {
		f.log.Info("the agent takes the tasks from before agents had names", "agent", name, "tasks", n)
	}
	f.cfg.defaultAgent = name
	f.mu.Lock()
	defer f.mu.Unlock()
	a := &fleetAgent{name: name, file: filepath.Base(path), agent: f.newAgent(name, f.log)}
	f.agents[name] = a
	f.retire(a, b)
	return nil
}

// Agent implements httpapi.Agents.
func (f *fleet) Agent(name string) (*protocol.Agent, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if name == "" {
		a := f.defaultAgent()
		switch {
		case a == nil && f.cfg.defaultAgent != "":
			return nil, protocol.Errorf(protocol.ENOTFOUND,
				"the default agent %q is not served (GET /agents lists the agents)", f.cfg.defaultAgent)
		case a == nil:
			return nil, protocol.Errorf(protocol.ENOTFOUND,
				"no default agent: this server serves several, each under /agents/NAME/ap/v1 (GET /agents lists them)")
		}
		return a.agent, nil
	}
	if a := f.agents[name]; a != nil {
		return a.agent, nil
	}
	return nil, protocol.Errorf(protocol.ENOTFOUND, "no agent %q (GET /agents lists them)", name)
}

// defaultAgent is the agent served at the root: -default's, or the only
// one a plugin serves. f.mu is held.
func (f *fleet) defaultAgent() *fleetAgent {
	if name := f.cfg.defaultAgent; name != "" {
		return f.agents[name]
	}
	var only *fleetAgent
	for _, a := range f.agents {
		if a.file == "" {
			continue
		}
		if only != nil {
			return nil
		}
		only = a
	}
	return only
}

// List implements httpapi.Agents: every agent, and every plugin file that
// failed to become one.
func (f *fleet) List(ctx context.Context) ([]httpapi.AgentInfo, error) {
	f.mu.RLock()
	infos := make([]httpapi.AgentInfo, 0, len(f.agents))
	for _, a := range f.agents {
		infos = append(infos, f.info(a))
	}
	for _, pf := range f.files {
		if pf.agent == "" && f.agents[pf.name] == nil {
			infos = append(infos, failedFileInfo(pf))
		}
	}
	f.mu.RUnlock()
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	kept := infos[:0]
	for i := range infos {
		if err := f.countTasks(ctx, &infos[i]); err != nil {
			return nil, err
		}
		if infos[i].State != "removed" || infos[i].Tasks > 0 {
			kept = append(kept, infos[i]) // a removed agent is listed while it has tasks
		}
	}
	return kept, nil
}

// Info implements httpapi.Agents.
func (f *fleet) Info(ctx context.Context, name string) (*httpapi.AgentInfo, error) {
	f.mu.RLock()
	var info httpapi.AgentInfo
	a := f.agents[name]
	pf := f.files[name]
	switch {
	case a != nil:
		info = f.info(a)
	case pf != nil && pf.agent == "":
		info = failedFileInfo(pf)
	default:
		f.mu.RUnlock()
		return nil, protocol.Errorf(protocol.ENOTFOUND, "no agent %q (GET /agents lists them)", name)
	}
	f.mu.RUnlock()
	if err := f.countTasks(ctx, &info); err != nil {
		return nil, err
	}
	if info.State == "removed" && info.Tasks == 0 {
		return nil, protocol.Errorf(protocol.ENOTFOUND, "no agent %q (GET /agents lists them)", name)
	}
	return &info, nil
}

func (f *fleet) countTasks(ctx context.Context, info *httpapi.AgentInfo) error {
	n, err := f.store.Agent(info.Name).CountTasks(ctx)
	info.Tasks = n
	return err
}

// info describes agent a. f.mu is held.
func (f *fleet) info(a *fleetAgent) httpapi.AgentInfo {
	info := httpapi.AgentInfo{Name: a.name, Handlers: []string{}, Error: a.err, Limits: map[string]any{}}
	if a.file != "" {
		info.File = a.file
		if f.dir != "" {
			info.File += pluginExt
		}
	}
	if d := f.defaultAgent(); d == a {
		info.Default = true
	}
	b := a.build
	switch {
	case b != nil:
		info.State = "ready"
	case a.file != "":
		info.State = "failed"
	default:
		info.State = "removed"
	}
	if b == nil {
		return info
	}
	if m := b.manifest; m != nil {
		info.Version, info.Description = m.Version, m.Description
	}
	info.SHA256 = b.plugin.SHA256()
	info.ABIVersion = abi.Version
	for _, h := range []protocol.Handler{protocol.HandlerTask, protocol.HandlerStep, protocol.HandlerArtifact, protocol.HandlerDownload} {
		if b.plugin.HasHandler(h) {
			info.Handlers = append(info.Handlers, string(h))
		}
	}
	loaded := b.loadedAt.UTC()
	info.LoadedAt = &loaded
	info.Limits = b.limits.describe()
	schemes := b.schemes()
	info.ArtifactSchemes = &schemes
	info.Start = startInfo(b.plugin.Start())
	info.HTTP = b.http
	return info
}

// startInfo is how a plugin's instances start, as /agents shows it.
func startInfo(s runtime.Start) *httpapi.StartInfo {
	if !s.Snapshot {
		return &httpapi.StartInfo{From: "initialization", Why: s.Why}
	}
	return &httpapi.StartInfo{From: "snapshot", MemoryBytes: s.MemoryBytes, Reseeded: s.Reseeded, Cached: s.Cached}
}

// failedFileInfo describes a plugin file that serves no agent.
func failedFileInfo(pf *pluginFile) httpapi.AgentInfo {
	return httpapi.AgentInfo{Name: pf.name, File: pf.name + pluginExt, State: "failed", Error: pf.err,
		Handlers: []string{}, Limits: map[string]any{}}
}

// describe names each limit as a manifest does.
func (l agentLimits) describe() map[string]any {
	d := map[string]any{
		"call_timeout":            l.callTimeout.String(),
		"memory":                  l.memory,
		"max_upload":              l.MaxUploadBytes,
		"max_artifact":            l.MaxArtifactBytes,
		"max_result":              l.MaxResultBytes,
		"max_log":                 l.MaxLogBytes,
		"max_task_log":            l.MaxTaskLogBytes,
		"max_workspace":           l.MaxWorkspaceBytes,
		"max_workspace_files":     l.MaxWorkspaceFiles,
		"max_call_artifacts":      l.MaxCallArtifacts,
		"max_task_artifacts":      l.MaxTaskArtifacts,
		"max_task_artifact_bytes": l.MaxTaskArtifactBytes,
		"max_planned_steps":       l.MaxPlannedSteps,
		"max_task_steps":          l.MaxTaskSteps,
		"task_time":               l.MaxTaskTime.String(),
		"max_host_calls":          l.maxHostCalls,
		"max_table_entries":       l.maxTableEntries,
	}
	if l.maxInstances > 0 {
		d["max_instances"] = l.maxInstances
	}
	describeEgressLimits(d, l.egress)
	return d
}

// Close stops serving every build, and closes each once its calls have
// ended.
func (f *fleet) Close() error {
	f.mu.Lock()
	for _, a := range f.agents {
		if a.build != nil {
			f.retire(a, nil)
		}
	}
	f.mu.Unlock()
	f.retiring.Wait()
	return nil
}
