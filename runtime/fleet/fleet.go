// Package fleet is the agents one agentrt process serves over one store:
// one plugin ("agentrt run", OpenPlugin) or every plugin of a directory
// ("agentrt serve", OpenDir), each an agent by its name. It loads each
// plugin (runtime/plugin) under the limits its manifest gets within the
// operator's (limitsFor), swaps in a new build when a plugin changes,
// and describes its agents (protocol.AgentInfo). A Fleet is what a front
// end finds agents in: it implements httpapi.Agents without knowing HTTP.
//
// An agent outlives its builds: a plugin replaced in the directory is a
// new build of the same agent (protocol.Agent.Serve swaps it in; calls in
// progress end on the old one, which is closed once none uses it), and a
// plugin removed leaves its agent serving reads of its tasks. Agents that
// only have tasks in the store (their plugin was removed before a restart)
// are listed as removed.
package fleet

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/plugin"
)

// Config is what a fleet is told: the operator's limits and settings.
type Config struct {
	// Limits are the operator's: each agent's, unless its manifest asks
	// for less (limitsFor). An agent whose manifest asks for more gets
	// these. Limits.MaxInstances is not read: an agent has a bound of its
	// own only when its manifest asks for one.
	Limits Limits
	// MaxInstances bounds the plugin instances running at once, of every
	// agent together, and is the most an agent's manifest may ask for;
	// MaxQueue and QueueWait bound the calls waiting for an instance, for
	// that bound and for each agent's own (runtime.NewLimiter).
	MaxInstances int
	MaxQueue     int
	QueueWait    time.Duration
	// Settings are the operator's settings for every plugin; they win
	// over those of a manifest.
	Settings map[string]string
	// Dir is the plugin directory OpenDir serves: each NAME.wasm in it,
	// with its manifest NAME.json if there is one, is an agent.
	Dir string
	// DefaultAgent is the agent also served for the name "" (at the
	// root); "": the only one a plugin serves, if there is only one.
	// OpenPlugin makes its agent the default.
	DefaultAgent string
	// Watch follows the plugin directory (OpenDir) or the plugin file
	// (OpenPlugin, whose name must then end in .wasm) and loads what
	// changes, once its files have looked the same for Settle.
	Watch  bool
	Settle time.Duration
	// CacheDir holds plugins' compiled code across restarts; "": none.
	CacheDir string
	// MaxPluginBytes caps a plugin file (runtime.Config.MaxPluginBytes).
	MaxPluginBytes int64
	// NoSnapshots makes every call run its plugin's initialization
	// (runtime.Config.NoSnapshots).
	NoSnapshots bool
	// Version is agentrt's: snapshots cached by one version are not
	// another's (runtime.Config.Version).
	Version string
	// Egress is what the operator grants agents' outbound requests.
	Egress Egress
	// StepTimeout is the time limit of a step run in the background
	// (protocol.AgentConfig.StepTimeout); 0 is protocol.DefaultStepTimeout.
	StepTimeout time.Duration
	// MaxBackgroundSteps bounds the steps every agent runs in the
	// background together, beside each agent's own bound
	// (Limits.MaxBackgroundSteps); 0 or less is
	// DefaultMaxBackgroundSteps, never no bound.
	MaxBackgroundSteps int
	// CancelOnDisconnect cancels a synchronous step whose client went
	// away before its answer (protocol.AgentConfig.CancelOnDisconnect).
	CancelOnDisconnect bool
	// Log receives what the fleet and its agents have to say; nil:
	// nothing is said.
	Log *slog.Logger
	// Metrics, when set, counts what the fleet and its agents do.
	Metrics Metrics
}

// Egress is outbound HTTP, as the operator configures it: each build of
// an agent gets its own egress.Client, under the agent's policy
// (Grants.For) and limits.
type Egress struct {
	// Grants are the destinations and private hosts the operator granted
	// each agent, and the secrets the host holds for them; nil grants
	// nothing.
	Grants *egress.Grants
	// Resolver and TLS, when set (by tests), are what every agent's
	// client resolves names and trusts certificates with.
	Resolver egress.Resolver
	TLS      *tls.Config
}

// Store is the store a fleet's agents keep their tasks in, each agent
// through its own view; cmd/agentrt hands it the data directory's
// storage.Store.
type Store interface {
	// Agent is the view of the agent named name: it finds that agent's
	// tasks only.
	Agent(name string) AgentStore
	// AgentNames returns the names of the agents that have tasks, in
	// name order.
	AgentNames(ctx context.Context) ([]string, error)
}

// AgentStore is one agent's view of the store.
type AgentStore interface {
	protocol.Store
	// CountTasks returns how many tasks the agent has.
	CountTasks(ctx context.Context) (int, error)
	// AdoptTasks makes the tasks of the agent named from this agent's,
	// and returns how many there were.
	AdoptTasks(ctx context.Context, from string) (int, error)
}

// DefaultMaxBackgroundSteps bounds the steps every agent of a fleet runs
// in the background together, where Config says nothing: four agents at
// their own default bound (protocol.DefaultMaxBackgroundSteps). Each
// holds its task, a goroutine and, while its handler runs, an instance
// within MaxInstances.
const DefaultMaxBackgroundSteps = 4 * protocol.DefaultMaxBackgroundSteps

// Metrics count what a fleet and its agents do; cmd/agentrt's Prometheus
// metrics are one. Their methods must be quick and safe for concurrent
// use.
type Metrics interface {
	// HandlerDone is told of every handler call of every agent.
	protocol.Observer
	// PluginCompiled counts a plugin compiled, by how the compiled-code
	// cache served it (plugin.Plugin.Cache: hit, miss or off).
	PluginCompiled(cache string)
}

// Fleet is the agents served. It implements httpapi.Agents. Its methods
// are safe for concurrent use.
type Fleet struct {
	cfg     Config
	store   Store
	limiter *runtime.Limiter // the instances of every plugin together
	// background bounds the steps every agent runs in the background
	// together.
	background *protocol.BackgroundSlots
	log        *slog.Logger
	// defaultAgent is Config.DefaultAgent, or run's agent.
	defaultAgent string

	mu     sync.RWMutex
	agents map[string]*agent      // by agent name
	files  map[string]*pluginFile // by plugin file name (NAME of NAME.wasm)
	// retiring counts builds waiting for their last call to end before
	// they are closed.
	retiring sync.WaitGroup
	// loads counts the loads the watcher started (syncFileAsync);
	// fileLocks keeps two loads of one file from overlapping.
	loads     sync.WaitGroup
	fileLocks sync.Map // file name → *sync.Mutex
	// stopWatching stops following the plugin directory or file, and
	// waits until it has stopped; nil when nothing is followed.
	stopWatching func()
}

// agent is one agent: its protocol.Agent, and the build serving it.
type agent struct {
	name  string
	agent *protocol.Agent
	file  string // the plugin file serving it; "" once removed
	build *build // nil while none serves
	// err is why the agent's latest build failed to load, while an earlier
	// one serves (or none: the agent failed).
	err string
}

// New returns an empty fleet over store; OpenDir or OpenPlugin fills it.
func New(store Store, cfg Config) *Fleet {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Egress.Grants == nil {
		cfg.Egress.Grants = egress.NewGrants()
	}
	if cfg.MaxPluginBytes <= 0 {
		cfg.MaxPluginBytes = runtime.DefaultMaxPluginBytes
	}
	if cfg.MaxBackgroundSteps <= 0 {
		cfg.MaxBackgroundSteps = DefaultMaxBackgroundSteps
	}
	return &Fleet{cfg: cfg, store: store, log: log, defaultAgent: cfg.DefaultAgent,
		limiter:    runtime.NewLimiter(cfg.MaxInstances, cfg.MaxQueue, cfg.QueueWait),
		background: protocol.NewBackgroundSlots(cfg.MaxBackgroundSteps),
		agents:     map[string]*agent{}, files: map[string]*pluginFile{}}
}

// newAgent is the protocol.Agent of the agent named name: its steps run
// in the background share the fleet's bound.
func (f *Fleet) newAgent(name string, log *slog.Logger) *protocol.Agent {
	cfg := protocol.AgentConfig{Name: name, Log: log, StepTimeout: f.cfg.StepTimeout,
		Background: f.background, CancelOnDisconnect: f.cfg.CancelOnDisconnect}
	if f.cfg.Metrics != nil {
		cfg.Observer = f.cfg.Metrics
	}
	return protocol.NewAgent(f.store.Agent(name), nil, cfg)
}

// Agent returns the agent named name, or the default agent for "":
// ENOTFOUND when there is none. It implements httpapi.Agents.
func (f *Fleet) Agent(name string) (*protocol.Agent, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if name == "" {
		a := f.defaultOne()
		switch {
		case a == nil && f.defaultAgent != "":
			return nil, protocol.Errorf(protocol.ENOTFOUND,
				"the default agent %q is not served (GET /agents lists the agents)", f.defaultAgent)
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

// defaultOne is the agent served for the name "": the default agent's, or
// the only one a plugin serves. f.mu is held.
func (f *Fleet) defaultOne() *agent {
	if name := f.defaultAgent; name != "" {
		return f.agents[name]
	}
	var only *agent
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

// Plugin is the plugin of the build serving the agent named name now; nil
// when none serves.
func (f *Fleet) Plugin(name string) *plugin.Plugin {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if a := f.agents[name]; a != nil && a.build != nil {
		return a.build.plugin
	}
	return nil
}

// Instances counts the plugin instances running, of every agent, and the
// calls waiting for one: for the fleet's bound, and for each agent's own.
func (f *Fleet) Instances() (running, waiting int) {
	running, waiting = f.limiter.Load()
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, a := range f.agents {
		if a.build != nil && a.build.limiter != nil {
			_, w := a.build.limiter.Load()
			waiting += w
		}
	}
	return running, waiting
}

// Interrupt stops the handler calls of every agent, saying why: see
// protocol.Agent.Interrupt.
func (f *Fleet) Interrupt(why string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, a := range f.agents {
		a.agent.Interrupt(why)
	}
}

// Wait waits until every agent's steps running in the background have
// ended, or ctx ends (its error then): what a server shutting down gives
// them before it interrupts them (Interrupt). It holds no lock while it
// waits: agents loaded meanwhile are not waited for.
func (f *Fleet) Wait(ctx context.Context) error {
	f.mu.RLock()
	agents := make([]*protocol.Agent, 0, len(f.agents))
	for _, a := range f.agents {
		agents = append(agents, a.agent)
	}
	f.mu.RUnlock()
	for _, a := range agents {
		if err := a.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// BackgroundSteps counts the steps each agent runs in the background
// now, by agent name (agents running none included), and the bound on
// them all together.
func (f *Fleet) BackgroundSteps() (byAgent map[string]int, max int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	byAgent = make(map[string]int, len(f.agents))
	for name, a := range f.agents {
		byAgent[name] = a.agent.BackgroundSteps()
	}
	return byAgent, f.background.Max()
}

// Close stops following the plugins' files, stops serving every build,
// and closes each once its calls have ended.
func (f *Fleet) Close() error {
	if f.stopWatching != nil {
		f.stopWatching()
		f.stopWatching = nil
	}
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
