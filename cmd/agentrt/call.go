package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/hostapi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/plugin"
	"github.com/agentrt/agentrt/storage"
	"github.com/google/uuid"
)

// "agentrt call" runs one handler of a plugin in the sandbox, under the
// limits "agentrt run" would give it, without a server or a data
// directory: the task's workspace is a directory of the caller's, copied
// in before the call and back after it.

const callUsage = `Usage: agentrt call PLUGIN.wasm task|step|artifact [flags]

Runs one handler of the plugin, once, in agentrt's sandbox and under the
limits "agentrt run" gives it (the limit flags are run's), without a
server or a database, and prints what it did: its result, its log, the
artifacts it created. Exits 1 when the handler fails.

  task       runs the task handler on a task with -input: prints the steps it plans
  step       runs the step handler on a new step with -input (the task's input too,
             unless -task-input); -step-name NAME makes it a step the task handler
             planned with that name
  artifact   runs the artifact handler on an upload of -file: prints whether it
             accepts it

The task's workspace is -workspace DIR: the files in DIR are the
workspace's when the handler starts, and DIR holds the workspace as the
handler left it when it ends (a failed task handler's or a refused upload's
changes are undone, as agentrt undoes them). Without -workspace it starts
empty and is thrown away.

Flags:
`

// callConfig is what "agentrt call" is told besides the limits.
type callConfig struct {
	handler         protocol.Handler
	input           string
	stepName        string
	taskInput       *string
	additionalInput string
	file            string
	relativePath    string
	workspace       string
	artifacts       string
	json            bool
}

// serverFlags are run's flags that mean nothing without a server, which
// call refuses.
var (
	serverFlags = []string{"addr", "data", "max-body", "body-timeout", "min-body-rate", "max-uploads", "max-uploads-per-client",
		"max-instances", "max-queue", "queue-wait", "debug-addr", "log-level", "task-time", "max-task-log", "max-task-steps"}
)

// addCallFlags defines call's own flags on fs.
func addCallFlags(fs *flag.FlagSet) *callConfig {
	c := &callConfig{}
	fs.StringVar(&c.input, "input", "", "the `TEXT` of the request: the task's input (task), the step's input (step)")
	fs.Func("task-input", "the task's input, when it is not -input (`TEXT`)", func(v string) error {
		c.taskInput = &v
		return nil
	})
	fs.StringVar(&c.stepName, "step-name", "", "run the step as one the task handler planned, with this `NAME` (step)")
	fs.StringVar(&c.additionalInput, "additional-input", "", "the request's additional_input, a JSON `OBJECT`")
	fs.StringVar(&c.file, "file", "", "the `FILE` uploaded (artifact)")
	fs.StringVar(&c.relativePath, "relative-path", "", "the upload's relative_path (`DIR` in the workspace)")
	fs.StringVar(&c.workspace, "workspace", "", "the task's workspace: a `DIR` the handler's files are copied from and back to")
	fs.StringVar(&c.artifacts, "artifacts", "", "save the artifacts the handler creates in `DIR`, at relative_path/file_name")
	fs.BoolVar(&c.json, "json", false, "print what the call did as one JSON object")
	return c
}

// setArgs takes call's arguments, PLUGIN.wasm and the handler, and
// refuses the server's flags.
func (c *callConfig) setArgs(fs *flag.FlagSet, args []string) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		for _, s := range serverFlags {
			if f.Name == s {
				bad = append(bad, "-"+s)
			}
		}
	})
	if len(bad) > 0 {
		return &usageError{fmt.Sprintf("call runs no server: %s is not for call", strings.Join(bad, ", "))}
	}
	if len(args) != 2 {
		fs.Usage()
		return &usageError{"call needs a plugin (.wasm) and a handler: task, step or artifact"}
	}
	switch h := protocol.Handler(args[1]); h {
	case protocol.HandlerTask, protocol.HandlerStep, protocol.HandlerArtifact:
		c.handler = h
	default:
		return &usageError{fmt.Sprintf("unknown handler %q: want task, step or artifact", args[1])}
	}
	if c.handler == protocol.HandlerArtifact && c.file == "" {
		return &usageError{"call artifact needs -file, the file uploaded"}
	}
	if c.additionalInput != "" && !json.Valid([]byte(c.additionalInput)) {
		return &usageError{fmt.Sprintf("bad -additional-input %q: want a JSON object", c.additionalInput)}
	}
	return nil
}

// printCallUsage prints call's usage and the flags it takes: its own and
// run's limits, not the server's.
func printCallUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, callUsage)
	skip := map[string]bool{"name": true}
	for _, s := range serverFlags {
		skip[s] = true
	}
	out := flag.NewFlagSet("", flag.ContinueOnError)
	out.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		switch {
		case skip[f.Name]:
		case f.Name == "cache":
			out.Var(f.Value, f.Name, "compiled-code cache `DIR` (default $AGENTRT_CACHE/code, ~/.cache/agentrt/code)")
		default:
			out.Var(f.Value, f.Name, f.Usage)
		}
	})
	out.PrintDefaults()
}

// callCommand runs "agentrt call".
func callCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags("call", args, stderr)
	if err != nil {
		return err
	}
	c := cfg.call
	// What Go's HTTP client writes with the standard library's logger
	// (a server's bytes it quotes) reaches the terminal scrubbed of the
	// secrets held, as run's log does (stdlog.go).
	_, restoreStdLog := routeStdLog(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), cfg.egress.grants)
	defer restoreStdLog()
	if cfg.cacheDir == "" {
		cfg.cacheDir = filepath.Join(agentrtCache(), "code")
	}
	// The plugin alone, under the limits run gives it: no fleet, no
	// agent, no outbound HTTP.
	p, err := plugin.Load(ctx, cfg.plugin, plugin.Config{
		Runtime: runtime.Config{
			CacheDir:         cfg.cacheDir,
			MemoryLimitPages: uint32(int64(cfg.memoryLimit) / (64 << 10)),
			MaxTableEntries:  uint32(cfg.maxTableEntries),
			MaxPluginBytes:   int64(cfg.maxPluginSize),
			CallTimeout:      cfg.callTimeout,
			Limiters:         []*runtime.Limiter{runtime.NewLimiter(1, 1, time.Minute)},
			NoSnapshots:      !cfg.snapshots,
			Version:          buildVersion(),
		},
		Host: hostapi.Config{MaxCalls: cfg.maxHostCalls},
	})
	if err != nil {
		return err
	}
	defer p.Close(context.Background())

	tmp, err := os.MkdirTemp("", "agentrt-call-")
	if err != nil {
		return err
	}
	scratch, err := storage.OpenScratch(tmp, cfg.minFreeDisk.bytes())
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	defer scratch.Close()

	taskInput := c.input
	if c.taskInput != nil {
		taskInput = *c.taskInput
	}
	addl, err := protocol.ObjectOrEmpty("-additional-input", json.RawMessage(c.additionalInput))
	if err != nil {
		return &usageError{protocol.ErrorMessage(err)}
	}
	task := &protocol.Task{TaskID: uuid.Must(uuid.NewV7()).String(), Input: &taskInput, AdditionalInput: addl,
		Artifacts: []protocol.Artifact{}, CreatedAt: time.Now()}
	ws := scratch.Workspace(task.TaskID, cfg.limits.WorkspaceQuota())
	seeded, err := seedWorkspace(ctx, ws, c.workspace)
	if err != nil {
		return err
	}
	try := protocol.Try{Handler: c.handler, Task: task, Request: protocol.StepRequestBody{Input: &c.input, AdditionalInput: addl},
		StepName: c.stepName}
	if c.handler == protocol.HandlerArtifact {
		file, err := os.Open(c.file)
		if err != nil {
			return fmt.Errorf("-file: %w", err)
		}
		defer file.Close()
		try.Upload = &protocol.TryUpload{FileName: filepath.Base(c.file), RelativePath: c.relativePath, Data: file}
	}
	build := &protocol.Build{Plugin: p, ID: p.SHA256(), Limits: cfg.limits, Settings: cfg.pluginConfig}
	tried, err := protocol.TryHandler(ctx, scratch, build, try)
	if err != nil {
		return fmt.Errorf("%s handler: %s", c.handler, protocol.ErrorMessage(err))
	}
	defer tried.Discard()

	files, err := workspaceFiles(ctx, ws)
	if err != nil {
		return err
	}
	if c.workspace != "" {
		if err := mirrorWorkspace(ctx, ws, files, seeded, c.workspace); err != nil {
			return err
		}
	}
	saved := map[string]string{}
	if c.artifacts != "" {
		if saved, err = saveArtifacts(ctx, scratch, tried.Artifacts, c.artifacts); err != nil {
			return err
		}
	}
	report := callReport{cfg: cfg, tried: tried, files: files, saved: saved, scratch: scratch}
	if c.json {
		err = report.printJSON(ctx, stdout)
	} else {
		err = report.print(ctx, stdout)
	}
	if err != nil {
		return err
	}
	if tried.Err != nil {
		return errCallFailed
	}
	return nil
}

// errCallFailed is the handler's failure, already printed: exit 1, and
// nothing more to say.
var errCallFailed = errors.New("the handler failed")

// seedWorkspace writes the regular files of dir (if it exists) into the
// workspace, under its quota, and returns their paths.
func seedWorkspace(ctx context.Context, ws protocol.Workspace, dir string) (map[string]bool, error) {
	seeded := map[string]bool{}
	if dir == "" {
		return seeded, nil
	}
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return seeded, nil
	} else if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err // directories are walked; links and devices are not the workspace's
		}
		data, err := root.ReadFile(p)
		if err != nil {
			return err
		}
		if err := ws.Write(ctx, p, data); err != nil {
			return fmt.Errorf("%s: %s", p, protocol.ErrorMessage(err))
		}
		seeded[p] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	return seeded, nil
}

// workspaceFiles lists the workspace's files.
func workspaceFiles(ctx context.Context, ws protocol.Workspace) ([]protocol.FileInfo, error) {
	files, err := ws.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list the workspace: %s", protocol.ErrorMessage(err))
	}
	return files, nil
}

// mirrorWorkspace makes dir hold the workspace's files: each written, and
// each file that was seeded from dir and is gone from the workspace
// removed.
func mirrorWorkspace(ctx context.Context, ws protocol.Workspace, files []protocol.FileInfo, seeded map[string]bool, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("workspace %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", dir, err)
	}
	defer root.Close()
	kept := map[string]bool{}
	for _, f := range files {
		kept[f.Path] = true
		buf := make([]byte, f.Size)
		n, err := ws.ReadInto(ctx, f.Path, buf)
		if err != nil || n != f.Size {
			return fmt.Errorf("workspace file %s: %v", f.Path, protocol.ErrorMessage(err))
		}
		if err := root.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			return fmt.Errorf("workspace %s: %w", dir, err)
		}
		if err := root.WriteFile(f.Path, buf, 0o644); err != nil {
			return fmt.Errorf("workspace %s: %w", dir, err)
		}
	}
	for p := range seeded {
		if !kept[p] {
			if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("workspace %s: %w", dir, err)
			}
		}
	}
	return nil
}

// saveArtifacts writes the artifacts' bytes into dir at their
// relative_path/file_name, and returns where each went, by id.
func saveArtifacts(ctx context.Context, scratch *storage.Scratch, artifacts []protocol.Artifact, dir string) (map[string]string, error) {
	saved := map[string]string{}
	if len(artifacts) == 0 {
		return saved, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("-artifacts %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("-artifacts %s: %w", dir, err)
	}
	defer root.Close()
	for _, a := range artifacts {
		p := a.WorkspacePath() // cleaned by the host: relative, no ".."
		r, err := scratch.OpenArtifact(ctx, &a)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err == nil {
			err = root.MkdirAll(filepath.Dir(p), 0o755)
		}
		if err == nil {
			err = root.WriteFile(p, data, 0o644)
		}
		if err != nil {
			return nil, fmt.Errorf("save artifact %s: %w", p, err)
		}
		saved[a.ArtifactID] = filepath.Join(dir, p)
	}
	return saved, nil
}

// callReport prints what a call did.
type callReport struct {
	cfg     *runConfig
	tried   *protocol.Tried
	files   []protocol.FileInfo
	saved   map[string]string
	scratch *storage.Scratch
}

func (r *callReport) print(ctx context.Context, w io.Writer) error {
	c, t := r.cfg.call, r.tried
	var b strings.Builder
	what := fmt.Sprintf("%s handler of %s", c.handler, filepath.Base(r.cfg.plugin))
	if t.Err != nil {
		fmt.Fprintf(&b, "%s failed after %s (%s):\n  %s\n", what, elapsedText(t.Elapsed), t.Err.Code, indented(t.Err.Message, "  "))
	} else {
		fmt.Fprintf(&b, "%s: ok in %s\n", what, elapsedText(t.Elapsed))
	}
	switch {
	case t.Err != nil:
	case c.handler == protocol.HandlerTask:
		fmt.Fprintf(&b, "planned %d steps\n", len(t.Planned))
		for i, s := range t.Planned {
			fmt.Fprintf(&b, "  %d. %s", i+1, printable(orEmpty(s.Name)))
			if in := orEmpty(s.Input); in != "" {
				fmt.Fprintf(&b, ": %s", printableLine(in, 0))
			}
			if string(s.AdditionalInput) != "{}" {
				fmt.Fprintf(&b, "  %s", printable(string(s.AdditionalInput)))
			}
			b.WriteString("\n")
		}
	case c.handler == protocol.HandlerStep:
		s := t.Step
		if s.Name != nil {
			fmt.Fprintf(&b, "  name: %s\n", printableLine(*s.Name, 0))
		}
		if s.Output == nil {
			b.WriteString("  output: null\n")
		} else {
			fmt.Fprintf(&b, "  output: %s\n", indented(*s.Output, "          "))
		}
		if len(s.AdditionalOutput) > 0 {
			fmt.Fprintf(&b, "  additional_output: %s\n", printable(string(s.AdditionalOutput)))
		}
		fmt.Fprintf(&b, "  is_last: %v\n", s.IsLast)
	case t.Rejected != "":
		fmt.Fprintf(&b, "  rejected the upload %s: %s\n", printable(t.Upload.WorkspacePath()), indented(t.Rejected, "    "))
	default:
		fmt.Fprintf(&b, "  accepted the upload %s (%s)\n", printable(t.Upload.WorkspacePath()), sizeText(t.Upload.Size))
	}
	if len(t.Logs) == 0 {
		b.WriteString("log: empty\n")
	} else {
		b.WriteString("log:\n")
		for _, l := range t.Logs {
			fmt.Fprintf(&b, "  %-6s %s\n", l.Level, indented(l.Message, "         "))
		}
	}
	if len(t.Artifacts) == 0 {
		b.WriteString("artifacts: none\n")
	} else {
		b.WriteString("artifacts:\n")
		for _, a := range t.Artifacts {
			fmt.Fprintf(&b, "  %s (%s)", printable(a.WorkspacePath()), sizeText(a.Size))
			if p, ok := r.saved[a.ArtifactID]; ok {
				fmt.Fprintf(&b, " saved as %s", p)
			} else if preview := r.preview(ctx, a); preview != "" {
				fmt.Fprintf(&b, ": %s", preview)
			}
			b.WriteString("\n")
		}
	}
	if c.workspace != "" {
		fmt.Fprintf(&b, "workspace %s: %s\n", printable(c.workspace), filesText(len(r.files)))
	} else {
		fmt.Fprintf(&b, "workspace (not kept; -workspace DIR keeps it): %s\n", filesText(len(r.files)))
	}
	for _, f := range r.files {
		fmt.Fprintf(&b, "  %s (%s)\n", printable(f.Path), sizeText(f.Size))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// previewBytes is the most of an artifact's text the report shows.
const previewBytes = 80

// preview is the start of an artifact's bytes, quoted, when they are
// short UTF-8 text.
func (r *callReport) preview(ctx context.Context, a protocol.Artifact) string {
	rd, err := r.scratch.OpenArtifact(ctx, &a)
	if err != nil {
		return ""
	}
	defer rd.Close()
	buf := make([]byte, previewBytes+1)
	n, _ := io.ReadFull(rd, buf)
	data := buf[:n]
	more := n > previewBytes
	if more {
		data = data[:previewBytes]
		for len(data) > 0 && !utf8.Valid(data) {
			data = data[:len(data)-1]
		}
	}
	if !utf8.Valid(data) || bytes.ContainsFunc(data, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' }) {
		return ""
	}
	q := fmt.Sprintf("%q", data)
	if more {
		q += "…"
	}
	return q
}

func (r *callReport) printJSON(ctx context.Context, w io.Writer) error {
	t := r.tried
	out := map[string]any{
		"handler":    r.cfg.call.handler,
		"ok":         t.Err == nil,
		"elapsed_ms": float64(t.Elapsed.Microseconds()) / 1000,
		"logs":       t.Logs,
	}
	if t.Err != nil {
		out["error"] = map[string]string{"code": t.Err.Code, "message": t.Err.Message}
	}
	switch {
	case t.Step != nil:
		out["step"] = t.Step
	case r.cfg.call.handler == protocol.HandlerTask:
		out["planned"] = t.Planned
	case t.Upload != nil:
		out["upload"] = t.Upload
		out["rejected"] = t.Rejected
	}
	artifacts := []map[string]any{}
	for _, a := range t.Artifacts {
		m := map[string]any{"artifact_id": a.ArtifactID, "file_name": a.FileName, "relative_path": a.RelativePath, "size": a.Size}
		if p, ok := r.saved[a.ArtifactID]; ok {
			m["saved_as"] = p
		}
		artifacts = append(artifacts, m)
	}
	out["artifacts"] = artifacts
	files := []map[string]any{}
	for _, f := range r.files {
		files = append(files, map[string]any{"path": f.Path, "size": f.Size})
	}
	out["workspace"] = map[string]any{"dir": r.cfg.call.workspace, "files": files}
	b, err := protocol.MarshalJSON(out)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func elapsedText(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return d.Round(time.Millisecond).String()
}

func sizeText(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func filesText(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}
