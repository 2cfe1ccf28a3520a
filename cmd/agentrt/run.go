package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	_ "net/http/pprof" // for -debug-addr
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/hostapi"
	"github.com/agentrt/agentrt/plugins/manifest"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/httpapi"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/fleet"
	"github.com/agentrt/agentrt/runtime/plugin"
	"github.com/agentrt/agentrt/storage"
)

// runConfig is everything "agentrt run" and "agentrt serve" are told.
type runConfig struct {
	// plugin is run's plugin file; name the agent it serves (its base
	// name without .wasm unless -name says).
	plugin string
	name   string
	// pluginDir is serve's plugin directory; defaultAgent the agent it
	// also serves at the root (-default).
	pluginDir    string
	defaultAgent string
	// settle is how long serve waits for a changed plugin's files to stay
	// the same before it loads them (fleet.Config.Settle).
	settle       time.Duration
	addr         string
	dataDir      string
	cacheDir     string
	callTimeout  time.Duration
	memoryLimit  size
	maxBody      size
	limits       protocol.Limits
	maxHostCalls int
	logLevel     slog.Level
	pluginConfig map[string]string

	maxInstances    int // of all plugins together
	maxQueue        int
	queueWait       time.Duration
	maxTableEntries int
	maxPluginSize   size
	minFreeDisk     diskFloorFlag
	bodyTimeout     time.Duration
	minBodyRate     size
	maxUploads      int
	maxUploadsPer   int
	debugAddr       string
	// snapshots is whether plugins' calls start from a snapshot of their
	// initialized state (runtime.Config.NoSnapshots).
	snapshots bool
	// egress is outbound HTTP: grants, secrets, limits (egress.go).
	egress egressConfig

	logFormat       string // text or json
	accessLog       bool
	requireAuth     bool
	cors            httpapi.CORS
	shutdownTimeout time.Duration
	// call is what "agentrt call" is told besides the limits (call.go);
	// nil for run and serve.
	call *callConfig
	// dev is run's -dev (dev.go): the log for a terminal, every request
	// and handler call in it, the plugin reloaded when its file changes.
	dev bool
}

const runUsage = `Usage: agentrt run PLUGIN.wasm [flags]

Serves the plugin's agent over the Agent Protocol v1 at http://ADDR/ap/v1,
keeping tasks, steps and artifacts in DIR. Flags may come before or after
the plugin. Sizes take a unit: 512KiB, 64MiB, 1GiB (or plain bytes).

Flags:
`

const serveUsage = `Usage: agentrt serve --plugins DIR [flags]

Serves every plugin of DIR as an agent over the Agent Protocol v1: NAME.wasm,
with its manifest NAME.json if there is one (plugins/MANIFEST.md), at
http://ADDR/agents/NAME/ap/v1. The -default agent, or the only one when DIR
holds one plugin, is served at http://ADDR/ap/v1 too. Plugins added,
replaced or removed are picked up without a restart. The limit flags are
each agent's defaults and the most its manifest may ask for. Sizes take a
unit: 512KiB, 64MiB, 1GiB (or plain bytes).

Flags:
`

// parseRunFlags parses the arguments of "agentrt run", flags and the plugin
// path in any order.
func parseRunFlags(args []string, stderr io.Writer) (*runConfig, error) {
	return parseFlags("run", args, stderr)
}

// parseServeFlags parses the arguments of "agentrt serve".
func parseServeFlags(args []string, stderr io.Writer) (*runConfig, error) {
	return parseFlags("serve", args, stderr)
}

// parseFlags parses the arguments of command "run" or "serve", which
// share every flag but how the plugins are named.
func parseFlags(command string, args []string, stderr io.Writer) (*runConfig, error) {
	cfg := &runConfig{
		memoryLimit:     size(runtime.DefaultMemoryLimitPages) * 64 << 10,
		maxBody:         httpapi.DefaultMaxBodyBytes,
		limits:          protocol.DefaultLimits,
		maxHostCalls:    hostapi.DefaultMaxCalls,
		maxTableEntries: runtime.DefaultMaxTableEntries,
		maxPluginSize:   runtime.DefaultMaxPluginBytes,
		minFreeDisk:     diskFloorFlag{auto: true},
		minBodyRate:     httpapi.DefaultMinBodyRate,
		settle:          300 * time.Millisecond,
		logFormat:       "text",
		shutdownTimeout: 30 * time.Second,
		cors:            httpapi.CORS{MaxAge: 10 * time.Minute},
	}
	maxUpload := size(cfg.limits.MaxUploadBytes)
	maxArtifact := size(cfg.limits.MaxArtifactBytes)
	maxResult := size(cfg.limits.MaxResultBytes)
	maxLog := size(cfg.limits.MaxLogBytes)
	maxWorkspace := size(cfg.limits.MaxWorkspaceBytes)
	maxTaskLog := size(cfg.limits.MaxTaskLogBytes)
	maxTaskArtifactBytes := size(cfg.limits.MaxTaskArtifactBytes)
	logLevel := "info"
	var configFile string
	settings := map[string]string{}

	fs := flag.NewFlagSet("agentrt "+command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		switch command {
		case "serve":
			fmt.Fprint(stderr, serveUsage)
		case "call":
			printCallUsage(fs, stderr)
			return
		default:
			fmt.Fprint(stderr, runUsage)
		}
		fs.PrintDefaults()
	}
	if command == "call" {
		cfg.call = addCallFlags(fs)
	}
	if command == "serve" {
		fs.StringVar(&cfg.pluginDir, "plugins", "", "the plugin `DIR`: each NAME.wasm in it is an agent")
		fs.StringVar(&cfg.defaultAgent, "default", "", "the agent (a `NAME`) also served at /ap/v1")
	} else {
		fs.StringVar(&cfg.name, "name", "", "the agent's `NAME` (default: the plugin's file name without .wasm)")
	}
	if command == "run" {
		fs.BoolVar(&cfg.dev, "dev", false, "for a plugin's author: a log for the terminal with every request and the plugin's log lines (-log-level debug, -access-log), and the plugin reloaded whenever its file changes")
	}
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8000", "`HOST:PORT` to listen on")
	fs.StringVar(&cfg.dataDir, "data", "./agentrt-data", "data `DIR`: database, artifacts, workspaces, compiled-code cache")
	fs.StringVar(&cfg.cacheDir, "cache", "", "compiled-code cache `DIR` (default DIR/cache of -data); may be shared")
	fs.DurationVar(&cfg.callTimeout, "call-timeout", runtime.DefaultCallTimeout, "time limit of one plugin handler call")
	fs.Var(&cfg.memoryLimit, "memory", "memory limit (a `SIZE`) of one plugin instance")
	fs.Var(&cfg.maxBody, "max-body", "limit (a `SIZE`) of a JSON request body")
	fs.Var(&maxUpload, "max-upload", "limit (a `SIZE`) of one uploaded file")
	fs.Var(&maxArtifact, "max-artifact", "limit (a `SIZE`) of one artifact a plugin creates")
	fs.Var(&maxResult, "max-result", "limit (a `SIZE`) of a handler's result message")
	fs.Var(&maxLog, "max-log", "limit (a `SIZE`) of what one handler call logs (log lines, stdout, stderr; each line counts 64 bytes more than its text)")
	fs.Var(&maxTaskLog, "max-task-log", "limit (a `SIZE`) of one task's log: what its task handler and artifact handlers logged, counted as -max-log counts (0: no limit)")
	fs.Var(&maxWorkspace, "max-workspace", "quota (a `SIZE`) of one task's workspace: the bytes of its files")
	fs.IntVar(&cfg.limits.MaxWorkspaceFiles, "max-workspace-files", cfg.limits.MaxWorkspaceFiles, "files and directories one task's workspace may hold")
	fs.Func("config", "a `KEY=VALUE` setting for the plugin (repeatable; not for secrets)", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return errors.New("want KEY=VALUE")
		}
		settings[k] = val
		return nil
	})
	fs.StringVar(&configFile, "config-file", "", "a JSON `FILE` of settings for the plugin ({\"key\": \"value\", ...}); -config wins")
	fs.IntVar(&cfg.limits.MaxCallArtifacts, "max-call-artifacts", cfg.limits.MaxCallArtifacts, "artifacts one handler call may create")
	fs.IntVar(&cfg.limits.MaxTaskArtifacts, "max-task-artifacts", cfg.limits.MaxTaskArtifacts, "artifacts one task may hold, uploaded and created (0: no limit)")
	fs.Var(&maxTaskArtifactBytes, "max-task-artifact-bytes", "bytes (a `SIZE`) all artifacts of one task may hold, uploaded and created (0: no limit)")
	fs.IntVar(&cfg.limits.MaxPlannedSteps, "max-planned-steps", cfg.limits.MaxPlannedSteps, "steps a task handler may plan")
	fs.IntVar(&cfg.limits.MaxTaskSteps, "max-task-steps", cfg.limits.MaxTaskSteps, "steps one task may hold, planned ones included (0: no limit)")
	fs.IntVar(&cfg.maxTableEntries, "max-table-entries", cfg.maxTableEntries, "entries a plugin instance's tables may hold in all (8 bytes of host memory each)")
	fs.Var(&cfg.maxPluginSize, "max-plugin-size", "limit (a `SIZE`) of a plugin file: compiling one costs the host memory in proportion")
	fs.Var(&cfg.minFreeDisk, "min-free-disk", "free space (a `SIZE`) writes leave on the data directory's disk; past it they get 507 (0: no floor)")
	fs.DurationVar(&cfg.bodyTimeout, "body-timeout", httpapi.DefaultBodyTimeout, "time a request body may take to arrive, plus a second per -min-body-rate bytes; slower clients get 408")
	fs.Var(&cfg.minBodyRate, "min-body-rate", "bytes (a `SIZE`) per second a request body must arrive at, after -body-timeout")
	fs.IntVar(&cfg.maxUploads, "max-uploads", httpapi.DefaultMaxUploads, "uploads received at once; beyond, 503 with Retry-After")
	fs.IntVar(&cfg.maxUploadsPer, "max-uploads-per-client", httpapi.DefaultMaxUploadsPerClient, "uploads received at once from one client address (-1: no limit, e.g. behind a proxy)")
	fs.DurationVar(&cfg.limits.MaxTaskTime, "task-time", cfg.limits.MaxTaskTime, "plugin time all handler calls of one task may use together (0: no limit)")
	fs.IntVar(&cfg.maxInstances, "max-instances", max(8, 4*cpus), "plugin instances running at once")
	fs.IntVar(&cfg.maxQueue, "max-queue", 256, "calls that may wait for an instance; beyond, 503 with Retry-After")
	fs.DurationVar(&cfg.queueWait, "queue-wait", 30*time.Second, "how long a call may wait for an instance before 503")
	fs.IntVar(&cfg.maxHostCalls, "max-host-calls", cfg.maxHostCalls, "host calls one handler call may make before it is stopped")
	fs.BoolVar(&cfg.snapshots, "snapshots", true, "start each plugin call from a snapshot of the plugin's initialized state, taken at load (docs/SECURITY.md); false runs its initialization in every call")
	fs.StringVar(&cfg.debugAddr, "debug-addr", "", "`HOST:PORT` to serve Go's profiler (net/http/pprof) on; keep it private")
	fs.StringVar(&logLevel, "log-level", logLevel, "server log level: debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", cfg.logFormat, "server log format: text or json")
	fs.BoolVar(&cfg.accessLog, "access-log", false, "log a line for every request answered, at info (never its headers: no API key is logged); costs create-task about 8% of its CPU")
	fs.BoolVar(&cfg.requireAuth, "require-auth", false, "need an API key for every request but the health checks, even before any key exists; recorded in the data directory, so later starts need one too, until agentrt keys open (agentrt keys)")
	fs.Func("cors-origins", "browser `ORIGINS` (comma-separated, e.g. https://app.example; * for any) allowed to call the server (default: none)", func(v string) error {
		origins, err := corsOrigins(v)
		cfg.cors.Origins = append(cfg.cors.Origins, origins...)
		return err
	})
	fs.Func("cors-methods", "`METHODS` a CORS preflight allows (comma-separated; default "+strings.Join(httpapi.DefaultCORSMethods, ",")+")", func(v string) error {
		cfg.cors.Methods = append(cfg.cors.Methods, splitList(strings.ToUpper(v))...)
		return nil
	})
	fs.Func("cors-headers", "request `HEADERS` a CORS preflight allows (comma-separated; default "+strings.Join(httpapi.DefaultCORSHeaders, ",")+")", func(v string) error {
		cfg.cors.Headers = append(cfg.cors.Headers, splitList(v)...)
		return nil
	})
	fs.DurationVar(&cfg.cors.MaxAge, "cors-max-age", cfg.cors.MaxAge, "how long a browser may keep a CORS preflight's answer")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", cfg.shutdownTimeout, "on SIGTERM or SIGINT, how long steps running may take to finish before they are stopped (and recorded as interrupted)")
	applyEgress := addEgressFlags(fs, &cfg.egress)

	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	switch {
	case command == "serve" && len(positional) > 0:
		return nil, &usageError{fmt.Sprintf("serve takes its plugins from -plugins DIR, not arguments: %s", strings.Join(positional, " "))}
	case command == "serve" && cfg.pluginDir == "":
		fs.Usage()
		return nil, &usageError{"serve needs -plugins DIR"}
	case command == "serve":
	case command == "call":
		if err := cfg.call.setArgs(fs, positional); err != nil {
			return nil, err
		}
		cfg.plugin = positional[0]
	case len(positional) == 0:
		fs.Usage()
		return nil, &usageError{"run needs the path of a plugin (.wasm)"}
	case len(positional) == 1:
		cfg.plugin = positional[0]
		if cfg.name == "" {
			cfg.name = agentNameOf(cfg.plugin)
		}
		if err := manifest.ValidName(cfg.name); err != nil {
			return nil, &usageError{fmt.Sprintf("bad agent name %q (set one with -name): %v", cfg.name, err)}
		}
	default:
		return nil, &usageError{fmt.Sprintf("run serves one plugin; got %d: %s", len(positional), strings.Join(positional, " "))}
	}
	if cfg.defaultAgent != "" {
		if err := manifest.ValidName(cfg.defaultAgent); err != nil {
			return nil, &usageError{fmt.Sprintf("bad -default %q: %v", cfg.defaultAgent, err)}
		}
	}
	if cfg.dev && !flagSet(fs, "log-level") {
		logLevel = "debug"
	}
	if cfg.dev && !flagSet(fs, "access-log") {
		cfg.accessLog = true
	}
	if err := cfg.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return nil, &usageError{fmt.Sprintf("bad -log-level %q: want debug, info, warn or error", logLevel)}
	}
	if cfg.logFormat != "text" && cfg.logFormat != "json" {
		return nil, &usageError{fmt.Sprintf("bad -log-format %q: want text or json", cfg.logFormat)}
	}
	if cfg.shutdownTimeout < 0 {
		return nil, &usageError{fmt.Sprintf("bad -shutdown-timeout %s: want 0 or more", cfg.shutdownTimeout)}
	}
	for _, f := range []struct {
		name string
		v    int
		min  int
	}{
		{"max-task-artifacts", cfg.limits.MaxTaskArtifacts, 0},
		{"max-task-steps", cfg.limits.MaxTaskSteps, 0},
		{"max-planned-steps", cfg.limits.MaxPlannedSteps, 0},
		{"max-workspace-files", cfg.limits.MaxWorkspaceFiles, 0},
		{"max-call-artifacts", cfg.limits.MaxCallArtifacts, 0},
		{"max-table-entries", cfg.maxTableEntries, 1},
		{"max-uploads", cfg.maxUploads, 1},
		{"max-uploads-per-client", cfg.maxUploadsPer, -1},
		{"max-host-calls", cfg.maxHostCalls, 1},
	} {
		if f.v < f.min {
			return nil, &usageError{fmt.Sprintf("bad -%s %d: want %d or more", f.name, f.v, f.min)}
		}
	}
	if cfg.maxUploadsPer == 0 {
		return nil, &usageError{"bad -max-uploads-per-client 0: want -1 (no limit per client) or 1 or more"}
	}
	if cfg.maxTableEntries > math.MaxUint32 {
		return nil, &usageError{fmt.Sprintf("bad -max-table-entries %d: want at most %d", cfg.maxTableEntries, uint32(math.MaxUint32))}
	}
	if cfg.minBodyRate < 1 {
		return nil, &usageError{"bad -min-body-rate 0: want at least 1 byte per second"}
	}
	cfg.limits.MaxUploadBytes = int64(maxUpload)
	cfg.limits.MaxArtifactBytes = int64(maxArtifact)
	cfg.limits.MaxResultBytes = int(maxResult)
	cfg.limits.MaxLogBytes = int(maxLog)
	cfg.limits.MaxWorkspaceBytes = int64(maxWorkspace)
	cfg.limits.MaxTaskLogBytes = int64(maxTaskLog)
	cfg.limits.MaxTaskArtifactBytes = int64(maxTaskArtifactBytes)
	cfg.pluginConfig = map[string]string{}
	if configFile != "" {
		b, err := os.ReadFile(configFile)
		if err != nil {
			return nil, fmt.Errorf("plugin config: %w", err)
		}
		if err := protocol.CheckJSON(b, protocol.MaxJSONDepth); err != nil { // I-JSON: a setting written twice is refused, not read as the last
			return nil, fmt.Errorf("plugin config %s must be a JSON object of strings: %w", configFile, err)
		}
		if err := json.Unmarshal(b, &cfg.pluginConfig); err != nil {
			return nil, fmt.Errorf("plugin config %s must be a JSON object of strings: %w", configFile, err)
		}
	}
	for k, v := range settings {
		cfg.pluginConfig[k] = v
	}
	pages := int64(cfg.memoryLimit) / (64 << 10)
	if pages < 1 || pages > 65536 {
		return nil, &usageError{fmt.Sprintf("bad -memory %s: want from 64KiB to 4GiB", &cfg.memoryLimit)}
	}
	if err := applyEgress(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// run serves until ctx is done, then shuts down gracefully: requests in
// progress (a step being executed) finish first.
func run(ctx context.Context, cfg *runConfig, stderr io.Writer) error {
	log := newLogger(stderr, cfg.logFormat, cfg.logLevel)
	if cfg.dev {
		log = slog.New(httpapi.LogHandler(newConsoleHandler(stderr, cfg.logLevel)))
	}
	stdlog, restoreStdLog := routeStdLog(log, cfg.egress.grants) // stdlog.go
	defer restoreStdLog()
	srv, err := open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.addr, unwrapSyscall(err))
	}
	hs := &http.Server{
		Handler:           srv.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          stdlog.logger,
	}
	if cfg.debugAddr != "" {
		dln, err := net.Listen("tcp", cfg.debugAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.debugAddr, unwrapSyscall(err))
		}
		defer dln.Close()
		go http.Serve(dln, http.DefaultServeMux) // net/http/pprof registers there
		log.Info("serving the profiler", "url", "http://"+dln.Addr().String()+"/debug/pprof/")
	}
	if cfg.plugin != "" {
		log.Info("serving", "plugin", cfg.plugin, "url", "http://"+ln.Addr().String()+httpapi.Prefix, "data", cfg.dataDir,
			"start", srv.plugin.Start().String())
	} else {
		list, _ := srv.fleet.List(ctx)
		ready := 0
		for _, a := range list {
			if a.State == "ready" {
				ready++
			}
		}
		log.Info("serving", "plugins", cfg.pluginDir, "agents", ready, "url", "http://"+ln.Addr().String()+"/agents", "data", cfg.dataDir)
	}

	reclaimCtx, stopReclaim := context.WithCancel(context.Background())
	reclaimed := make(chan struct{})
	go func() {
		defer close(reclaimed)
		reclaimMemory(reclaimCtx, reclaimEvery, reclaimThreshold)
	}()
	defer func() { stopReclaim(); <-reclaimed }()

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	return shutdown(hs, srv, cfg.shutdownTimeout, log)
}

// shutdown stops a server gracefully: it accepts nothing more and gives
// the requests in progress (a step running) up to timeout to end. Then
// it stops the steps still running, which are recorded as interrupted
// (saying why) and answered so, gives their answers a few seconds to go,
// and closes what is left.
func shutdown(hs *http.Server, srv *server, timeout time.Duration, log *slog.Logger) error {
	log.Info("shutting down: accepting nothing more; waiting for the requests in progress", "timeout", timeout)
	srv.api.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := hs.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	why := fmt.Sprintf("the server shut down, and the step did not finish within the %s it was given", timeout)
	log.Warn("requests still in progress at the shutdown timeout; stopping their steps", "timeout", timeout)
	srv.fleet.Interrupt(why)
	ctx, cancel = context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		log.Warn("closing the connections still open", "err", err)
		hs.Close()
	}
	return nil
}

// shutdownGrace is how long, after steps were stopped at the shutdown
// timeout, their answers (and uploads still arriving) are given.
const shutdownGrace = 5 * time.Second

// newLogger is the server's logger: text or JSON on w, each line of a
// request carrying the request's id.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(httpapi.LogHandler(h))
}

// corsOrigins reads -cors-origins: "*", or origins (scheme://host[:port]).
func corsOrigins(v string) ([]string, error) {
	origins := splitList(v)
	for _, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("%q is not an origin: want scheme://host[:port], such as https://app.example", o)
		}
	}
	return origins, nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, strings.TrimSuffix(item, "/"))
		}
	}
	return out
}

// server is a wired agentrt: store, agents and HTTP API.
type server struct {
	store   *storage.Store
	keys    *storage.Keyring
	fleet   *fleet.Fleet
	api     *httpapi.Server
	handler http.Handler
	// plugin is run's plugin, as it was loaded; nil for serve.
	plugin *plugin.Plugin
}

// fleetConfig is what the fleet is told of cfg: run's plugin or serve's
// directory, followed by serve and by run --dev.
func (c *runConfig) fleetConfig(log *slog.Logger, m fleet.Metrics) fleet.Config {
	cacheDir := c.cacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(c.dataDir, "cache")
	}
	return fleet.Config{
		Limits: fleet.Limits{Limits: c.limits, CallTimeout: c.callTimeout, Memory: int64(c.memoryLimit),
			MaxHostCalls: c.maxHostCalls, MaxTableEntries: c.maxTableEntries, Egress: c.egress.limits},
		MaxInstances:   c.maxInstances,
		MaxQueue:       c.maxQueue,
		QueueWait:      c.queueWait,
		Settings:       c.pluginConfig,
		Dir:            c.pluginDir,
		DefaultAgent:   c.defaultAgent,
		Watch:          c.pluginDir != "" || c.dev,
		Settle:         c.settle,
		CacheDir:       cacheDir,
		MaxPluginBytes: int64(c.maxPluginSize),
		NoSnapshots:    !c.snapshots,
		Version:        buildVersion(),
		Egress:         fleet.Egress{Grants: c.egress.grants, Resolver: c.egress.resolver, TLS: c.egress.tls},
		Log:            log,
		Metrics:        m,
	}
}

// fleetStore is the data directory's store as the fleet reaches it: each
// agent's view of it a fleet.AgentStore.
type fleetStore struct{ *storage.Store }

func (s fleetStore) Agent(name string) fleet.AgentStore { return s.Store.Agent(name) }

// open wires a server from cfg: run's plugin, or serve's directory of
// plugins. It fails, with one line that says what is wrong, before
// anything is served.
func open(ctx context.Context, cfg *runConfig, log *slog.Logger) (*server, error) {
	if cfg.plugin != "" {
		if fi, err := os.Stat(cfg.plugin); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", cfg.plugin, unwrapPath(err))
		} else if fi.IsDir() {
			return nil, fmt.Errorf("plugin %s is a directory, not a .wasm file", cfg.plugin)
		}
	}
	store, err := storage.Open(ctx, cfg.dataDir, storage.Config{MinFreeDisk: cfg.minFreeDisk.bytes(), Log: log})
	if err != nil {
		return nil, err
	}
	srv := &server{store: store}
	if srv.keys, err = store.Keys(ctx); err != nil {
		store.Close()
		return nil, err
	}
	if cfg.requireAuth {
		// Kept in the store, so that a start without the flag stays
		// closed. The flag holds this run whether or not it is written.
		if err := srv.keys.Require(ctx, storage.ReasonRequireAuth); err != nil {
			log.Warn("recording --require-auth in the data directory failed: a later start without it may answer without a key", "err", err)
		}
	}
	m := newMetrics(
		func() float64 { running, _ := srv.fleet.Instances(); return float64(running) },
		func() float64 { _, waiting := srv.fleet.Instances(); return float64(waiting) })
	srv.fleet = fleet.New(fleetStore{store}, cfg.fleetConfig(log, m))
	if cfg.plugin != "" {
		err = srv.fleet.OpenPlugin(ctx, cfg.plugin, cfg.name)
		srv.plugin = srv.fleet.Plugin(cfg.name)
	} else {
		err = srv.fleet.OpenDir(ctx)
	}
	if err != nil {
		srv.Close()
		return nil, err
	}
	srv.api = httpapi.NewServer(srv.fleet, httpapi.ServerConfig{
		MaxBodyBytes:        int64(cfg.maxBody),
		BodyTimeout:         cfg.bodyTimeout,
		MinBodyRate:         int64(cfg.minBodyRate),
		MaxUploads:          cfg.maxUploads,
		MaxUploadsPerClient: cfg.maxUploadsPer,
		Log:                 log,
		AccessLog:           cfg.accessLog,
		Keys:                apiKeys{ring: srv.keys, require: cfg.requireAuth},
		CORS:                cfg.cors,
		Observer:            m,
		Metrics:             m.handler(),
		Ready:               store.Ping,
	})
	srv.handler = srv.api
	return srv, nil
}

// apiKeys are the data directory's API keys, as the HTTP API checks them.
type apiKeys struct {
	ring    *storage.Keyring
	require bool // -require-auth: keys are needed even while none exists
}

// Required is the flag or the data directory's record: false only when
// neither asks for keys. --require-auth=false never opens a directory
// that needs them (agentrt keys open does).
func (k apiKeys) Required(ctx context.Context) bool { return k.require || k.ring.Required(ctx) }

func (k apiKeys) Check(ctx context.Context, key string) (string, []string, bool) {
	found := k.ring.Check(ctx, key)
	if found == nil {
		return "", nil, false
	}
	return found.Name, found.Agents, true
}

// Close releases the plugins and the store.
func (s *server) Close() error {
	var errs []error
	if s.fleet != nil {
		errs = append(errs, s.fleet.Close())
	}
	if s.keys != nil {
		errs = append(errs, s.keys.Close())
	}
	return errors.Join(append(errs, s.store.Close())...)
}

// unwrapPath drops the *PathError wrapper whose path the caller already
// printed.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// unwrapSyscall keeps the system's reason ("address already in use").
func unwrapSyscall(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// diskFloorFlag is -min-free-disk: a size, or "auto", the default: the
// smaller of 1 GiB and 5% of the data directory's file system.
type diskFloorFlag struct {
	auto bool
	n    size
}

func (f *diskFloorFlag) String() string {
	if f.auto {
		return "auto (the smaller of 1GiB and 5% of the disk)"
	}
	return f.n.String()
}

func (f *diskFloorFlag) Set(v string) error {
	if v == "auto" {
		f.auto = true
		return nil
	}
	f.auto = false
	return f.n.Set(v)
}

func (f *diskFloorFlag) bytes() int64 {
	if f.auto {
		return storage.AutoMinFreeDisk
	}
	return int64(f.n)
}

// size is a byte count flag that takes units: 512KiB, 64MiB, 1GiB, 10MB.
type size int64

func (s *size) String() string {
	switch v := int64(*s); {
	case v != 0 && v%(1<<30) == 0:
		return strconv.FormatInt(v>>30, 10) + "GiB"
	case v != 0 && v%(1<<20) == 0:
		return strconv.FormatInt(v>>20, 10) + "MiB"
	case v != 0 && v%(1<<10) == 0:
		return strconv.FormatInt(v>>10, 10) + "KiB"
	default:
		return strconv.FormatInt(v, 10)
	}
}

func (s *size) Set(v string) error {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return errors.New("want a size such as 512KiB, 64MiB or 1GiB")
	}
	*s = size(n * mult)
	return nil
}

// agentNameOf is the name run gives the agent of the plugin file path: its
// base name without .wasm, with each character an agent name cannot hold
// turned into '-' ("my agent.wasm" serves "my-agent").
func agentNameOf(path string) string {
	name := []byte(strings.TrimSuffix(filepath.Base(path), fleet.PluginExt))
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			name[i] = '-'
		}
	}
	s := strings.TrimLeft(string(name), "._-")
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		return "agent"
	}
	return s
}
