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
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/plugins/manifest"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/httpapi"
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

	// taskCache and dbCache bound the store's caches
	// (storage.Config.TaskCacheBytes, DBCacheBytes; taskCache 0: none);
	// goMemoryLimit is the Go runtime's soft memory limit, 0 for none.
	taskCache, dbCache, goMemoryLimit int64

	bodyTimeout   time.Duration
	minBodyRate   size
	maxUploads    int
	maxUploadsPer int
	debugAddr     string
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

	// Steps in the background and the event log (background.go):
	// fleet.Config's StepTimeout, MaxBackgroundSteps and
	// CancelOnDisconnect; storage.Config.EventBounds; the event streams'
	// httpapi.ServerConfig.
	stepTimeout        time.Duration
	maxBackgroundTotal int
	cancelOnDisconnect bool
	eventBounds        protocol.EventBounds
	eventHeartbeat     time.Duration
	eventWriteTimeout  time.Duration
	// call is what "agentrt call" is told besides the limits (call.go);
	// nil for run and serve.
	call *callConfig
	// dev is run's -dev (dev.go): the log for a terminal, every request
	// and handler call in it, the plugin reloaded when its file changes.
	dev bool
	// doc is the configuration cfg was made of, as "agentrt config"
	// shows it.
	doc *Config
}

const runUsage = `Usage: agentrt run PLUGIN.wasm [flags]

Serves the plugin's agent over the Agent Protocol v1 at http://ADDR/ap/v1,
keeping tasks, steps and artifacts in DIR. Flags may come before or after
the plugin. Sizes take a unit: 512KiB, 64MiB, 1GiB (or plain bytes). Every
flag is also a field of --server-config FILE (docs/CONFIG.md); a flag given
wins over the file.

Flags:
`

const serveUsage = `Usage: agentrt serve --plugins DIR [flags]

Serves every plugin of DIR as an agent over the Agent Protocol v1: NAME.wasm,
with its manifest NAME.json if there is one (plugins/MANIFEST.md), at
http://ADDR/agents/NAME/ap/v1. The -default agent, or the only one when DIR
holds one plugin, is served at http://ADDR/ap/v1 too. Plugins added,
replaced or removed are picked up without a restart. The limit flags are
each agent's defaults and the most its manifest may ask for. Sizes take a
unit: 512KiB, 64MiB, 1GiB (or plain bytes). Every flag is also a field of
--server-config FILE (docs/CONFIG.md); a flag given wins over the file.

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

// parseFlags parses the arguments of command "run", "serve", "call" or
// "config": the server configuration file (-server-config), then the
// flags over it, each of which wins over the file; lists the flags
// repeat (-allow-http, -cors-origins, ...) add to the file's.
func parseFlags(command string, args []string, stderr io.Writer) (*runConfig, error) {
	doc := defaultConfig()
	// A first reading of the arguments finds the file; the second,
	// over what the file says, is the one that counts (and reports).
	if file := serverConfigArg(command, args); file != "" {
		if err := doc.load(file); err != nil {
			return nil, err
		}
	}
	cfg := &runConfig{doc: doc}
	fs := runFlags(command, doc, cfg, stderr)
	fromFile := egressFromFile{allow: len(doc.Egress.Allow), private: len(doc.Egress.PrivateHosts), secrets: len(doc.Egress.SecretEnv)}

	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	switch {
	case command == "config" && len(positional) > 0:
		return nil, &usageError{fmt.Sprintf("config takes flags, not arguments: %s (agentrt config check FILE checks a file)", strings.Join(positional, " "))}
	case command == "config":
	case command == "serve" && len(positional) > 0:
		return nil, &usageError{fmt.Sprintf("serve takes its plugins from -plugins DIR, not arguments: %s", strings.Join(positional, " "))}
	case command == "serve" && doc.Plugins.Dir == "":
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
	if cfg.dev && !flagSet(fs, "log-level") {
		doc.Log.Level = "debug"
	}
	if cfg.dev && !flagSet(fs, "access-log") {
		doc.HTTP.AccessLog = true
	}
	if err := cfg.apply(doc, fs, fromFile); err != nil {
		return nil, err
	}
	return cfg, nil
}

// serverConfigArg is the -server-config of args, "" without one: the
// arguments read with every flag of command, quietly (a mistake is
// reported by the reading that counts).
func serverConfigArg(command string, args []string) string {
	fs := runFlags(command, defaultConfig(), &runConfig{}, io.Discard)
	fs.Usage = func() {}
	parseInterspersed(fs, args)
	return fs.Lookup("server-config").Value.String()
}

// runFlags defines the flags of command on a new flag set: each sets a
// field of doc (run's -name and -dev, and call's own, set cfg's), its
// default what doc holds.
func runFlags(command string, doc *Config, cfg *runConfig, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("agentrt "+command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		switch command {
		case "serve":
			fmt.Fprint(stderr, serveUsage)
		case "call":
			printCallUsage(fs, stderr)
			return
		case "config":
			fmt.Fprint(stderr, configUsage)
		default:
			fmt.Fprint(stderr, runUsage)
		}
		fs.PrintDefaults()
	}
	if command == "call" {
		cfg.call = addCallFlags(fs)
	}
	fs.String("server-config", "", "a JSON `FILE` of the server's configuration (docs/CONFIG.md); the flags given win over it")
	if command == "serve" || command == "config" {
		fs.StringVar(&doc.Plugins.Dir, "plugins", doc.Plugins.Dir, "the plugin `DIR`: each NAME.wasm in it is an agent")
		fs.StringVar(&doc.Plugins.Default, "default", doc.Plugins.Default, "the agent (a `NAME`) also served at /ap/v1")
	}
	if command != "serve" && command != "config" {
		fs.StringVar(&cfg.name, "name", "", "the agent's `NAME` (default: the plugin's file name without .wasm)")
	}
	if command == "run" {
		fs.BoolVar(&cfg.dev, "dev", false, "for a plugin's author: a log for the terminal with every request and the plugin's log lines (-log-level debug, -access-log), and the plugin reloaded whenever its file changes")
	}
	h, l, sb := &doc.HTTP, &doc.Limits, &doc.Sandbox
	fs.StringVar(&h.Addr, "addr", h.Addr, "`HOST:PORT` to listen on")
	fs.StringVar(&doc.Data.Dir, "data", doc.Data.Dir, "data `DIR`: database, artifacts, workspaces, compiled-code cache")
	fs.StringVar(&doc.Data.Cache, "cache", doc.Data.Cache, "compiled-code cache `DIR` (default DIR/cache of -data); may be shared")
	fs.Var(&l.CallTimeout, "call-timeout", "time limit (a `DURATION`) of one plugin handler call")
	fs.Var(&l.Memory, "memory", "memory limit (a `SIZE`) of one plugin instance")
	fs.Var(&h.MaxBody, "max-body", "limit (a `SIZE`) of a JSON request body")
	fs.Var(&l.MaxUpload, "max-upload", "limit (a `SIZE`) of one uploaded file")
	fs.Var(&l.MaxArtifact, "max-artifact", "limit (a `SIZE`) of one artifact a plugin creates")
	fs.Var(&l.MaxResult, "max-result", "limit (a `SIZE`) of a handler's result message")
	fs.Var(&l.MaxLog, "max-log", "limit (a `SIZE`) of what one handler call logs (log lines, stdout, stderr; each line counts 64 bytes more than its text)")
	fs.Var(&l.MaxTaskLog, "max-task-log", "limit (a `SIZE`) of one task's log: what its task handler and artifact handlers logged, counted as -max-log counts (0: no limit)")
	fs.Var(&l.MaxWorkspace, "max-workspace", "quota (a `SIZE`) of one task's workspace: the bytes of its files")
	fs.IntVar(&l.MaxWorkspaceFiles, "max-workspace-files", l.MaxWorkspaceFiles, "files and directories one task's workspace may hold")
	fs.Func("config", "a `KEY=VALUE` setting for the plugin (repeatable; not for secrets)", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return errors.New("want KEY=VALUE")
		}
		if doc.Plugins.Settings == nil {
			doc.Plugins.Settings = map[string]string{}
		}
		doc.Plugins.Settings[k] = val
		return nil
	})
	fs.StringVar(&doc.Plugins.SettingsFile, "config-file", doc.Plugins.SettingsFile, "a JSON `FILE` of settings for the plugin ({\"key\": \"value\", ...}); -config wins")
	fs.IntVar(&l.MaxCallArtifacts, "max-call-artifacts", l.MaxCallArtifacts, "artifacts one handler call may create")
	fs.IntVar(&l.MaxTaskArtifacts, "max-task-artifacts", l.MaxTaskArtifacts, "artifacts one task may hold, uploaded and created (0: no limit)")
	fs.Var(&l.MaxTaskArtifactBytes, "max-task-artifact-bytes", "bytes (a `SIZE`) all artifacts of one task may hold, uploaded and created (0: no limit)")
	fs.IntVar(&l.MaxPlannedSteps, "max-planned-steps", l.MaxPlannedSteps, "steps a task handler may plan")
	fs.IntVar(&l.MaxTaskSteps, "max-task-steps", l.MaxTaskSteps, "steps one task may hold, planned ones included (0: no limit)")
	fs.IntVar(&l.MaxTableEntries, "max-table-entries", l.MaxTableEntries, "entries a plugin instance's tables may hold in all (8 bytes of host memory each)")
	fs.Var(&sb.MaxPluginSize, "max-plugin-size", "limit (a `SIZE`) of a plugin file: compiling one costs the host memory in proportion")
	fs.Var(&doc.Memory.TaskCache, "task-cache", "memory (a `SIZE`) the store's cache of tasks may hold, to answer reads without the database (0: none)")
	fs.Var(&doc.Memory.DBCache, "db-cache", "memory (a `SIZE`) SQLite's page caches may hold, the store's connections together (each takes at least 256KiB)")
	fs.Var(&doc.Memory.GoLimit, "go-memory-limit", "a soft limit (a `SIZE`) of the Go runtime's own memory, its heap and stacks: near it, Go collects garbage more often (0: none, or $GOMEMLIMIT; else at least 32MiB)")
	fs.Var(&doc.Data.MinFreeDisk, "min-free-disk", "free space (a `SIZE`) writes leave on the data directory's disk; past it they get 507 (0: no floor)")
	fs.Var(&h.BodyTimeout, "body-timeout", "time (a `DURATION`) a request body may take to arrive, plus a second per -min-body-rate bytes; slower clients get 408")
	fs.Var(&h.MinBodyRate, "min-body-rate", "bytes (a `SIZE`) per second a request body must arrive at, after -body-timeout")
	fs.IntVar(&h.MaxUploads, "max-uploads", h.MaxUploads, "uploads received at once; beyond, 503 with Retry-After")
	fs.IntVar(&h.MaxUploadsPerClient, "max-uploads-per-client", h.MaxUploadsPerClient, "uploads received at once from one client address (-1: no limit, e.g. behind a proxy)")
	fs.Var(&l.TaskTime, "task-time", "plugin time (a `DURATION`) all handler calls of one task may use together (0: no limit)")
	fs.IntVar(&sb.MaxInstances, "max-instances", sb.MaxInstances, "plugin instances running at once")
	fs.IntVar(&sb.MaxQueue, "max-queue", sb.MaxQueue, "calls that may wait for an instance; beyond, 503 with Retry-After")
	fs.Var(&sb.QueueWait, "queue-wait", "how long (a `DURATION`) a call may wait for an instance before 503")
	fs.IntVar(&l.MaxHostCalls, "max-host-calls", l.MaxHostCalls, "host calls one handler call may make before it is stopped")
	fs.BoolVar(&sb.Snapshots, "snapshots", sb.Snapshots, "start each plugin call from a snapshot of the plugin's initialized state, taken at load (docs/SECURITY.md); false runs its initialization in every call")
	fs.StringVar(&h.DebugAddr, "debug-addr", h.DebugAddr, "`HOST:PORT` to serve Go's profiler (net/http/pprof) on; keep it private")
	fs.StringVar(&doc.Log.Level, "log-level", doc.Log.Level, "server log level: debug, info, warn or error")
	fs.StringVar(&doc.Log.Format, "log-format", doc.Log.Format, "server log format: text or json")
	fs.BoolVar(&h.AccessLog, "access-log", h.AccessLog, "log a line for every request answered, at info (never its headers: no API key is logged); costs create-task about 8% of its CPU")
	fs.BoolVar(&h.RequireAuth, "require-auth", h.RequireAuth, "need an API key for every request but the health checks, even before any key exists; recorded in the data directory, so later starts need one too, until agentrt keys open (agentrt keys)")
	fs.Func("cors-origins", "browser `ORIGINS` (comma-separated, e.g. https://app.example; * for any) allowed to call the server (default: none)", func(v string) error {
		origins, err := corsOrigins(v)
		h.CORS.Origins = append(h.CORS.Origins, origins...)
		return err
	})
	fs.Func("cors-methods", "`METHODS` a CORS preflight allows (comma-separated; default "+strings.Join(httpapi.DefaultCORSMethods, ",")+")", func(v string) error {
		h.CORS.Methods = append(h.CORS.Methods, splitList(v)...)
		return nil
	})
	fs.Func("cors-headers", "request `HEADERS` a CORS preflight allows (comma-separated; default "+strings.Join(httpapi.DefaultCORSHeaders, ",")+")", func(v string) error {
		h.CORS.Headers = append(h.CORS.Headers, splitList(v)...)
		return nil
	})
	fs.Var(&h.CORS.MaxAge, "cors-max-age", "how long (a `DURATION`) a browser may keep a CORS preflight's answer")
	fs.Var(&h.ShutdownTimeout, "shutdown-timeout", "on SIGTERM or SIGINT, how long (a `DURATION`) steps running may take to finish before they are stopped (and recorded as interrupted)")
	addBackgroundFlags(fs, doc)
	addEgressFlags(fs, doc)
	return fs
}

// apply makes cfg what doc, the effective configuration, says, checking
// what a field's type cannot: each error names the flag that set the
// value, or the field of the file.
func (cfg *runConfig) apply(doc *Config, fs *flag.FlagSet, fromFile egressFromFile) error {
	name := func(flagName, field string) string {
		if flagSet(fs, flagName) {
			return "-" + flagName
		}
		return doc.field(field)
	}
	h, l, sb := doc.HTTP, doc.Limits, doc.Sandbox
	if doc.Plugins.Default != "" {
		if err := manifest.ValidName(doc.Plugins.Default); err != nil {
			return &usageError{fmt.Sprintf("bad %s %q: %v", name("default", "plugins.default"), doc.Plugins.Default, err)}
		}
	}
	if err := cfg.logLevel.UnmarshalText([]byte(doc.Log.Level)); err != nil {
		return &usageError{fmt.Sprintf("bad %s %q: want debug, info, warn or error", name("log-level", "log.level"), doc.Log.Level)}
	}
	if doc.Log.Format != "text" && doc.Log.Format != "json" {
		return &usageError{fmt.Sprintf("bad %s %q: want text or json", name("log-format", "log.format"), doc.Log.Format)}
	}
	for _, d := range []struct {
		flag, field string
		v           duration
		min         time.Duration
	}{
		{"shutdown-timeout", "http.shutdown_timeout", h.ShutdownTimeout, 0},
		{"body-timeout", "http.body_timeout", h.BodyTimeout, 0},
		{"cors-max-age", "http.cors.max_age", h.CORS.MaxAge, 0},
		{"call-timeout", "limits.call_timeout", l.CallTimeout, 0},
		{"task-time", "limits.task_time", l.TaskTime, 0},
		{"queue-wait", "sandbox.queue_wait", sb.QueueWait, 0},
	} {
		if time.Duration(d.v) < d.min {
			return &usageError{fmt.Sprintf("bad %s %s: want 0 or more", name(d.flag, d.field), &d.v)}
		}
	}
	for _, f := range []struct {
		flag, field string
		v, min      int
	}{
		{"max-task-artifacts", "limits.max_task_artifacts", l.MaxTaskArtifacts, 0},
		{"max-task-steps", "limits.max_task_steps", l.MaxTaskSteps, 0},
		{"max-planned-steps", "limits.max_planned_steps", l.MaxPlannedSteps, 0},
		{"max-workspace-files", "limits.max_workspace_files", l.MaxWorkspaceFiles, 0},
		{"max-call-artifacts", "limits.max_call_artifacts", l.MaxCallArtifacts, 0},
		{"max-table-entries", "limits.max_table_entries", l.MaxTableEntries, 1},
		{"max-uploads", "http.max_uploads", h.MaxUploads, 1},
		{"max-uploads-per-client", "http.max_uploads_per_client", h.MaxUploadsPerClient, -1},
		{"max-host-calls", "limits.max_host_calls", l.MaxHostCalls, 1},
		{"max-instances", "sandbox.max_instances", sb.MaxInstances, 1},
		{"max-queue", "sandbox.max_queue", sb.MaxQueue, 0},
	} {
		if f.v < f.min {
			return &usageError{fmt.Sprintf("bad %s %d: want %d or more", name(f.flag, f.field), f.v, f.min)}
		}
	}
	if h.MaxUploadsPerClient == 0 {
		return &usageError{fmt.Sprintf("bad %s 0: want -1 (no limit per client) or 1 or more", name("max-uploads-per-client", "http.max_uploads_per_client"))}
	}
	if l.MaxTableEntries > math.MaxUint32 {
		return &usageError{fmt.Sprintf("bad %s %d: want at most %d", name("max-table-entries", "limits.max_table_entries"), l.MaxTableEntries, uint32(math.MaxUint32))}
	}
	if h.MinBodyRate < 1 {
		return &usageError{fmt.Sprintf("bad %s 0: want at least 1 byte per second", name("min-body-rate", "http.min_body_rate"))}
	}
	if pages := int64(l.Memory) / (64 << 10); pages < 1 || pages > 65536 {
		return &usageError{fmt.Sprintf("bad %s %s: want from 64KiB to 4GiB", name("memory", "limits.memory"), &l.Memory)}
	}
	// A soft limit below what a serving agentrt holds live would have Go
	// collect without end (at up to half the CPU): refused, not obeyed.
	if g := doc.Memory.GoLimit; g != 0 && g < minGoMemoryLimit {
		return &usageError{fmt.Sprintf("bad %s %s: want 0 (none) or at least %dMiB", name("go-memory-limit", "memory.go_limit"), &g, minGoMemoryLimit>>20)}
	}
	if err := cfg.applyBackground(doc, name); err != nil {
		return err
	}
	// What a flag checked as it was read, a file's value is checked here.
	for _, o := range h.CORS.Origins {
		if _, err := corsOrigins(o); err != nil {
			return &usageError{fmt.Sprintf("bad %s: %v", name("cors-origins", "http.cors.origins"), err)}
		}
	}
	cfg.addr, cfg.dataDir, cfg.cacheDir, cfg.debugAddr = h.Addr, doc.Data.Dir, doc.Data.Cache, h.DebugAddr
	cfg.pluginDir, cfg.defaultAgent = doc.Plugins.Dir, doc.Plugins.Default
	cfg.settle = 300 * time.Millisecond
	cfg.callTimeout, cfg.memoryLimit, cfg.maxBody = time.Duration(l.CallTimeout), l.Memory, h.MaxBody
	cfg.limits = protocol.Limits{
		MaxUploadBytes:       int64(l.MaxUpload),
		MaxArtifactBytes:     int64(l.MaxArtifact),
		MaxResultBytes:       int(l.MaxResult),
		MaxLogBytes:          int(l.MaxLog),
		MaxTaskLogBytes:      int64(l.MaxTaskLog),
		MaxWorkspaceBytes:    int64(l.MaxWorkspace),
		MaxWorkspaceFiles:    l.MaxWorkspaceFiles,
		MaxCallArtifacts:     l.MaxCallArtifacts,
		MaxTaskArtifacts:     l.MaxTaskArtifacts,
		MaxTaskArtifactBytes: int64(l.MaxTaskArtifactBytes),
		MaxPlannedSteps:      l.MaxPlannedSteps,
		MaxTaskSteps:         l.MaxTaskSteps,
		MaxTaskTime:          time.Duration(l.TaskTime),
		MaxBackgroundSteps:   l.MaxBackgroundSteps,
	}
	cfg.maxHostCalls, cfg.maxTableEntries = l.MaxHostCalls, l.MaxTableEntries
	cfg.maxInstances, cfg.maxQueue, cfg.queueWait = sb.MaxInstances, sb.MaxQueue, time.Duration(sb.QueueWait)
	cfg.maxPluginSize, cfg.snapshots = sb.MaxPluginSize, sb.Snapshots
	cfg.minFreeDisk = doc.Data.MinFreeDisk
	cfg.taskCache, cfg.dbCache, cfg.goMemoryLimit = int64(doc.Memory.TaskCache), int64(doc.Memory.DBCache), int64(doc.Memory.GoLimit)
	if cfg.taskCache == 0 {
		cfg.taskCache = storage.NoTaskCache
	}
	cfg.dbCache = max(cfg.dbCache, 1) // 0: the least a connection takes
	cfg.bodyTimeout, cfg.minBodyRate = time.Duration(h.BodyTimeout), h.MinBodyRate
	cfg.maxUploads, cfg.maxUploadsPer = h.MaxUploads, h.MaxUploadsPerClient
	cfg.logFormat, cfg.accessLog, cfg.requireAuth = doc.Log.Format, h.AccessLog, h.RequireAuth
	cfg.shutdownTimeout = time.Duration(h.ShutdownTimeout)
	cfg.cors = httpapi.CORS{Origins: h.CORS.Origins, Headers: h.CORS.Headers, MaxAge: time.Duration(h.CORS.MaxAge)}
	for _, m := range h.CORS.Methods {
		cfg.cors.Methods = append(cfg.cors.Methods, strings.ToUpper(m))
	}
	cfg.pluginConfig = map[string]string{}
	if file := doc.Plugins.SettingsFile; file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("plugin config: %w", err)
		}
		if err := protocol.CheckJSON(b, protocol.MaxJSONDepth); err != nil { // I-JSON: a setting written twice is refused, not read as the last
			return fmt.Errorf("plugin config %s must be a JSON object of strings: %w", file, err)
		}
		if err := json.Unmarshal(b, &cfg.pluginConfig); err != nil {
			return fmt.Errorf("plugin config %s must be a JSON object of strings: %w", file, err)
		}
	}
	for k, v := range doc.Plugins.Settings {
		cfg.pluginConfig[k] = v
	}
	return cfg.applyEgress(doc, fs, fromFile)
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
	if cfg.goMemoryLimit > 0 {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(cfg.goMemoryLimit))
	}
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

// shutdown stops a server gracefully: it accepts nothing more (event
// streams end) and gives the requests in progress (a step running) and
// the steps running in the background, together, up to timeout to end.
// Then it stops the steps still running, which are recorded as
// interrupted (saying why, with a step.failed event) and answered so,
// gives their answers and records a few seconds, and closes what is
// left.
func shutdown(hs *http.Server, srv *server, timeout time.Duration, log *slog.Logger) error {
	log.Info("shutting down: accepting nothing more; waiting for the requests in progress and the steps running in the background", "timeout", timeout)
	srv.api.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := hs.Shutdown(ctx)
	if err == nil {
		err = srv.fleet.Wait(ctx)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	why := fmt.Sprintf("the server shut down, and the step did not finish within the %s it was given", timeout)
	log.Warn("requests or background steps still running at the shutdown timeout; stopping their steps", "timeout", timeout)
	srv.fleet.Interrupt(why)
	ctx, cancel = context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		log.Warn("closing the connections still open", "err", err)
		hs.Close()
	}
	if err := srv.fleet.Wait(ctx); err != nil {
		log.Warn("background steps still recording their interruption at the end of the grace", "grace", shutdownGrace)
	}
	return nil
}

// shutdownGrace is how long, after steps were stopped at the shutdown
// timeout, their answers (and uploads still arriving) and the records of
// background steps are given.
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

		StepTimeout:        c.stepTimeout,
		MaxBackgroundSteps: c.maxBackgroundTotal,
		CancelOnDisconnect: c.cancelOnDisconnect,
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
	store, err := storage.Open(ctx, cfg.dataDir, storage.Config{MinFreeDisk: cfg.minFreeDisk.bytes(),
		TaskCacheBytes: cfg.taskCache, DBCacheBytes: cfg.dbCache, EventBounds: cfg.eventBounds, Log: log})
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
	m.registry.MustRegister(newMemoryCollector(store.Caches),
		newBackgroundCollector(func() (map[string]int, int) { return srv.fleet.BackgroundSteps() }))
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
		EventHeartbeat:      cfg.eventHeartbeat,
		EventWriteTimeout:   cfg.eventWriteTimeout,
	})
	m.registry.MustRegister(eventStreams(srv.api.EventStreams))
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

// minGoMemoryLimit is the least --go-memory-limit takes: a few times the
// live heap of a serving agentrt with its caches at their defaults.
const minGoMemoryLimit = 32 << 20

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
