// Package plugin loads a plugin as agentrt runs it: compiled and
// validated by package runtime, with the host API (package hostapi) as
// the module it imports, outbound HTTP through its agent's egress client,
// and ABI version 1's wire format (protocol/wire). A *Plugin is the
// protocol.Plugin an agent's build runs.
//
// It is the one place a plugin's host module is wired: agentrt run and
// serve (through runtime/fleet), agentrt call, and the benchmarks all load
// plugins here, so that what they measure and run is what is served.
//
// What it costs beyond runtime.Load: nothing per load; per handler call,
// the context that binds the call's host functions to its protocol.Call.
package plugin

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"time"

	"github.com/agentrt/agentrt/hostapi"
	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/wire"
	"github.com/agentrt/agentrt/runtime"
	"github.com/tetratelabs/wazero"
)

// Config is how a plugin is loaded and run.
type Config struct {
	// Runtime is how the plugin is compiled and run: its limits, the
	// compiled-code cache, snapshots, the limiters of its instances.
	// Its HostModules are modules besides the host API's, which Load
	// adds first (a benchmark's counting module, say).
	Runtime runtime.Config
	// Host configures the host API's functions.
	Host hostapi.Config
	// Egress makes the plugin's outbound requests; nil: http_request
	// and artifact_fetch answer "not allowed". Once Load succeeds the
	// plugin owns it, and Close closes it; when Load fails, the caller
	// still does.
	Egress *egress.Client
	// Log is told when the compiled-code cache's disk is full; nil:
	// nothing is.
	Log *slog.Logger
}

// Plugin is a loaded plugin: a runtime.Plugin whose handler calls reach
// the host API. It implements protocol.Plugin. Its methods are safe for
// concurrent use.
type Plugin struct {
	rt     *runtime.Plugin
	egress *egress.Client
	// opts are what each call's host functions reach besides its
	// protocol.Call: the egress client, if any.
	opts []hostapi.Option
}

var _ protocol.Plugin = (*Plugin)(nil)

// Load reads, compiles and validates the plugin at path (runtime.Load).
// A full disk under the compiled-code cache does not keep it from
// loading: it is then compiled without the cache, and Config.Log told.
// Every error is one line that says what is wrong with the plugin.
func Load(ctx context.Context, path string, cfg Config) (*Plugin, error) {
	return load(ctx, path, cfg, func(rc runtime.Config) (*runtime.Plugin, error) {
		return runtime.Load(ctx, path, rc)
	})
}

// Compile is Load of the plugin whose code a caller has read already
// (runtime.Compile); name names it in errors.
func Compile(ctx context.Context, name string, code []byte, cfg Config) (*Plugin, error) {
	return load(ctx, name, cfg, func(rc runtime.Config) (*runtime.Plugin, error) {
		return runtime.Compile(ctx, name, code, rc)
	})
}

func load(ctx context.Context, path string, cfg Config, compile func(runtime.Config) (*runtime.Plugin, error)) (*Plugin, error) {
	rc := cfg.Runtime
	rc.HostModules = append([]runtime.HostModule{hostModule(cfg.Host)}, cfg.Runtime.HostModules...)
	rt, err := compile(rc)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		// The compiled code did not fit in the cache: a full disk must
		// not keep the server from starting, nor a plugin from loading.
		if cfg.Log != nil {
			cfg.Log.Warn("the compiled-code cache's disk is full: the plugin is compiled without it, at each load, until there is room", "plugin", path, "cache", rc.CacheDir, "err", err)
		}
		rc.CacheDir = ""
		rt, err = compile(rc)
	}
	if err != nil {
		return nil, err
	}
	p := &Plugin{rt: rt, egress: cfg.Egress}
	if cfg.Egress != nil {
		p.opts = []hostapi.Option{hostapi.WithEgress(cfg.Egress)}
	}
	return p, nil
}

// hostModule is the host API's module, configured by cfg: what a plugin
// imports as abi.ImportModule.
func hostModule(cfg hostapi.Config) runtime.HostModule {
	return runtime.HostModule{
		Name: abi.ImportModule,
		Instantiate: func(ctx context.Context, r wazero.Runtime) error {
			return hostapi.Instantiate(ctx, r, cfg)
		},
		Construction: hostapi.WithConstruction,
	}
}

// HasHandler reports whether the plugin defines handler h.
func (p *Plugin) HasHandler(h protocol.Handler) bool {
	return p.rt.HasExport(abi.ExportOf(string(h)))
}

// Codec is ABI version 1's: the only version runtime.Load accepts.
func (p *Plugin) Codec() protocol.Codec { return wire.V1 }

// Run runs handler h in a fresh instance whose host functions act on
// call (and make outbound requests through the plugin's egress client):
// see protocol.Plugin.
func (p *Plugin) Run(ctx context.Context, h protocol.Handler, call *protocol.Call) (int32, time.Duration, error) {
	return p.rt.Call(ctx, abi.ExportOf(string(h)), runtime.Invocation{
		Stdout:   call.Stdout(),
		Stderr:   call.Stderr(),
		Host:     func(ctx context.Context) context.Context { return hostapi.WithHost(ctx, call, p.opts...) },
		Deadline: call.Deadline(),
		Timeout:  call.Timeout(),
	})
}

// SHA256 is the sha256 of the plugin's code, in hex: the bytes compiled,
// whatever its file holds now. It is the id of the build it serves.
func (p *Plugin) SHA256() string { return p.rt.SHA256() }

// Start is how the plugin's instances start: from a snapshot, or running
// its initialization (and why).
func (p *Plugin) Start() runtime.Start { return p.rt.Start() }

// Cache is how the compiled-code cache served the plugin's compilation:
// runtime.CacheHit, CacheMiss or CacheOff.
func (p *Plugin) Cache() string { return p.rt.Cache() }

// Runtime is the compiled plugin itself, for the benchmarks that call it
// with a host of their own (bench/internal/echostep) or measure the
// sandbox alone.
func (p *Plugin) Runtime() *runtime.Plugin { return p.rt }

// Close stops the calls in progress, frees the plugin, and closes its
// egress client.
func (p *Plugin) Close(ctx context.Context) error {
	err := p.rt.Close(ctx)
	if p.egress != nil {
		p.egress.Close()
	}
	return err
}
