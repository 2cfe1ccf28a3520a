package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // for -debug-addr
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/hostapi"
	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/storage"
	"github.com/tetratelabs/wazero"
)

// runConfig is everything "agentrt run" is told.
type runConfig struct {
	plugin       string
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

	maxInstances      int // per plugin
	maxInstancesTotal int // across plugins
	maxQueue          int
	queueWait         time.Duration
	debugAddr         string
}

const runUsage = `Usage: agentrt run PLUGIN.wasm [flags]

Serves the plugin's agent over the Agent Protocol v1 at http://ADDR/ap/v1,
keeping tasks, steps and artifacts in DIR. Flags may come before or after
the plugin. Sizes take a unit: 512KiB, 64MiB, 1GiB (or plain bytes).

Flags:
`

// parseRunFlags parses the arguments of "agentrt run", flags and the plugin
// path in any order.
func parseRunFlags(args []string, stderr io.Writer) (*runConfig, error) {
	cfg := &runConfig{
		memoryLimit:  size(runtime.DefaultMemoryLimitPages) * 64 << 10,
		maxBody:      protocol.DefaultMaxBodyBytes,
		limits:       protocol.DefaultLimits,
		maxHostCalls: hostapi.DefaultMaxCalls,
	}
	goruntimeProcs := goruntime.GOMAXPROCS(0)
	maxUpload := size(cfg.limits.MaxUploadBytes)
	maxArtifact := size(cfg.limits.MaxArtifactBytes)
	maxResult := size(cfg.limits.MaxResultBytes)
	maxLog := size(cfg.limits.MaxLogBytes)
	maxWorkspace := size(cfg.limits.MaxWorkspaceBytes)
	logLevel := "info"
	var configFile string
	settings := map[string]string{}

	fs := flag.NewFlagSet("agentrt run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, runUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8000", "`HOST:PORT` to listen on")
	fs.StringVar(&cfg.dataDir, "data", "./agentrt-data", "data `DIR`: database, artifacts, workspaces, compiled-code cache")
	fs.StringVar(&cfg.cacheDir, "cache", "", "compiled-code cache `DIR` (default DIR/cache of -data); may be shared")
	fs.DurationVar(&cfg.callTimeout, "call-timeout", runtime.DefaultCallTimeout, "time limit of one plugin handler call")
	fs.Var(&cfg.memoryLimit, "memory", "memory limit of one plugin instance")
	fs.Var(&cfg.maxBody, "max-body", "limit of a JSON request body")
	fs.Var(&maxUpload, "max-upload", "limit of one uploaded file")
	fs.Var(&maxArtifact, "max-artifact", "limit of one artifact a plugin creates")
	fs.Var(&maxResult, "max-result", "limit of a handler's result message")
	fs.Var(&maxLog, "max-log", "limit of what one handler call logs (log lines, stdout, stderr)")
	fs.Var(&maxWorkspace, "max-workspace", "quota of one task's workspace")
	fs.IntVar(&cfg.limits.MaxWorkspaceFiles, "max-workspace-files", cfg.limits.MaxWorkspaceFiles, "files one task's workspace may hold")
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
	fs.DurationVar(&cfg.limits.MaxTaskTime, "task-time", cfg.limits.MaxTaskTime, "plugin time all handler calls of one task may use together (0: no limit)")
	fs.IntVar(&cfg.maxInstances, "max-instances", max(8, 4*goruntimeProcs), "plugin instances running at once, per plugin")
	fs.IntVar(&cfg.maxInstancesTotal, "max-instances-total", max(32, 16*goruntimeProcs), "plugin instances running at once, all plugins together")
	fs.IntVar(&cfg.maxQueue, "max-queue", 256, "calls that may wait for an instance; beyond, 503 with Retry-After")
	fs.DurationVar(&cfg.queueWait, "queue-wait", 30*time.Second, "how long a call may wait for an instance before 503")
	fs.IntVar(&cfg.maxHostCalls, "max-host-calls", cfg.maxHostCalls, "host calls one handler call may make before it is stopped")
	fs.StringVar(&cfg.debugAddr, "debug-addr", "", "`HOST:PORT` to serve Go's profiler (net/http/pprof) on; keep it private")
	fs.StringVar(&logLevel, "log-level", logLevel, "server log level: debug, info, warn or error")

	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(positional) {
	case 0:
		fs.Usage()
		return nil, &usageError{"run needs the path of a plugin (.wasm)"}
	case 1:
		cfg.plugin = positional[0]
	default:
		return nil, &usageError{fmt.Sprintf("run serves one plugin; got %d: %s", len(positional), strings.Join(positional, " "))}
	}
	if err := cfg.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return nil, &usageError{fmt.Sprintf("bad -log-level %q: want debug, info, warn or error", logLevel)}
	}
	if cfg.limits.MaxTaskArtifacts < 0 {
		return nil, &usageError{fmt.Sprintf("bad -max-task-artifacts %d: want 0 (no limit) or more", cfg.limits.MaxTaskArtifacts)}
	}
	cfg.limits.MaxUploadBytes = int64(maxUpload)
	cfg.limits.MaxArtifactBytes = int64(maxArtifact)
	cfg.limits.MaxResultBytes = int(maxResult)
	cfg.limits.MaxLogBytes = int(maxLog)
	cfg.limits.MaxWorkspaceBytes = int64(maxWorkspace)
	cfg.pluginConfig = map[string]string{}
	if configFile != "" {
		b, err := os.ReadFile(configFile)
		if err != nil {
			return nil, fmt.Errorf("plugin config: %w", err)
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
	return cfg, nil
}

// run serves until ctx is done, then shuts down gracefully: requests in
// progress (a step being executed) finish first.
func run(ctx context.Context, cfg *runConfig, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
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
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
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
	log.Info("serving", "plugin", cfg.plugin, "url", "http://"+ln.Addr().String()+protocol.Prefix, "data", cfg.dataDir)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down; waiting for requests in progress")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.callTimeout+10*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// server is a wired agentrt: store, plugin, agent and HTTP API.
type server struct {
	store   *storage.Store
	plugin  *runtime.Plugin
	agent   *protocol.Agent
	handler http.Handler
}

// open wires a server from cfg. It fails, with one line that says what is
// wrong, before anything is served.
func open(ctx context.Context, cfg *runConfig, log *slog.Logger) (*server, error) {
	if fi, err := os.Stat(cfg.plugin); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", cfg.plugin, unwrapPath(err))
	} else if fi.IsDir() {
		return nil, fmt.Errorf("plugin %s is a directory, not a .wasm file", cfg.plugin)
	}
	store, err := storage.Open(ctx, cfg.dataDir)
	if err != nil {
		return nil, err
	}
	hostCfg := hostapi.Config{MaxCalls: cfg.maxHostCalls}
	cacheDir := cfg.cacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(cfg.dataDir, "cache")
	}
	plugin, err := runtime.Load(ctx, cfg.plugin, runtime.Config{
		CacheDir:         cacheDir,
		MemoryLimitPages: uint32(int64(cfg.memoryLimit) / (64 << 10)),
		CallTimeout:      cfg.callTimeout,
		Limiters: []*runtime.Limiter{
			runtime.NewLimiter(cfg.maxInstances, cfg.maxQueue, cfg.queueWait),
			runtime.NewLimiter(cfg.maxInstancesTotal, cfg.maxQueue, cfg.queueWait),
		},
		HostModules: []runtime.HostModule{{
			Name: abi.ImportModule,
			Instantiate: func(ctx context.Context, r wazero.Runtime) error {
				return hostapi.Instantiate(ctx, r, hostCfg)
			},
		}},
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	agent := protocol.NewAgent(store, pluginAdapter{plugin}, protocol.AgentConfig{
		Limits: cfg.limits, PluginConfig: cfg.pluginConfig, Log: log,
	})
	return &server{
		store:   store,
		plugin:  plugin,
		agent:   agent,
		handler: protocol.NewServer(agent, protocol.ServerConfig{MaxBodyBytes: int64(cfg.maxBody), Log: log}),
	}, nil
}

// Close releases the plugin and the store.
func (s *server) Close() error {
	return errors.Join(s.plugin.Close(context.Background()), s.store.Close())
}

// pluginAdapter connects the runtime to the agent: each handler call gets a
// context carrying its protocol.Call for the host API to act on.
type pluginAdapter struct{ p *runtime.Plugin }

func (a pluginAdapter) HasHandler(handler string) bool {
	return a.p.HasExport(abi.ExportOf(handler))
}

func (a pluginAdapter) Run(ctx context.Context, handler string, call *protocol.Call) (int32, time.Duration, error) {
	return a.p.Call(hostapi.WithHost(ctx, call), abi.ExportOf(handler), call.Stdout(), call.Stderr())
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
