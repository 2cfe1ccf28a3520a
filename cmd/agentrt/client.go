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
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentrt/agentrt/protocol/client"
)

// defaultClientURL is the server "agentrt client" talks to unless told
// otherwise: the one "make run" and "agentrt run" serve.
const defaultClientURL = "http://127.0.0.1:8000"

const clientUsage = `Usage: agentrt client COMMAND [ARGS] [flags]

Talks to any Agent Protocol v1 server: by default the one "make run" (or
"agentrt run") serves at http://127.0.0.1:8000.

Commands:
  run INPUT                         create a task, execute its steps until the last,
                                    printing each, and list its artifacts
  create [INPUT]                    create a task
  tasks                             list tasks
  task TASK_ID                      show a task and its artifacts
  step TASK_ID [INPUT]              execute the task's next step (--async: in the
                                    background, answered at once)
  cancel TASK_ID STEP_ID            cancel a step while it runs
  events TASK_ID                    print the task's events (--follow: live, until
                                    the task is deleted)
  steps TASK_ID                     list a task's steps
  get-step TASK_ID STEP_ID          show one step
  artifacts TASK_ID                 list a task's artifacts
  upload TASK_ID FILE               upload a file as an artifact of the task
  upload TASK_ID --uri URI          upload a URI artifact: a reference, not bytes
  download TASK_ID [ARTIFACT_ID...] download artifacts (every one of the task's
                                    when none is named)
  schemes                           list the URI schemes the agent takes and makes

Flags of every command, before or after it:
  --url URL        the server: its base URL (http://HOST:PORT) or its /ap/v1 root
                   (default $AGENTRT_URL, else http://127.0.0.1:8000)
  --api-key KEY    sent as "Authorization: Bearer KEY" (default $AGENTRT_API_KEY)
  --json           print JSON (the protocol's objects) instead of text
  --timeout D      how long to wait for the server's answer to a call, or for an
                   upload or download to move on (default 5m; 0: no limit)
  --retries N      how many times to send a call again when the server refuses it
                   for now (503 or 429 with Retry-After: agentrt's answer when more
                   requests wait for a task than it lets wait, or its instances or
                   uploads are all taken), each time after the wait it asks for
                   plus a random part (default 5; 0: never). A Retry-After over
                   30s, or none, or a refusal that names a step it recorded, is
                   not waited for; an upload from a pipe is sent once

Run "agentrt client COMMAND --help" for a command's own flags. Put "--"
before an INPUT that starts with "-". Errors go to stderr; the exit status
is 1 when a call failed, 2 for a bad command line.
`

// clientEnv is what "agentrt client" runs with: its settings from the
// environment, and where it writes.
type clientEnv struct {
	getenv         func(string) string
	stdout, stderr io.Writer
	// terminal is set when stderr is a terminal: uploads and downloads of
	// large files draw a progress bar there.
	terminal bool
	// now tells the time to progress bars.
	now func() time.Time
}

// clientCommand runs "agentrt client".
func clientCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runClient(ctx, args, clientEnv{getenv: os.Getenv, stdout: stdout, stderr: stderr,
		terminal: isTerminal(stderr), now: time.Now})
}

// clientFlags are the flags of every client command.
type clientFlags struct {
	url, apiKey string
	json        bool
	timeout     time.Duration
	retries     int
}

// add defines the flags on fs, with their current values as defaults.
func (f *clientFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", f.url, "the server's base `URL` (http://HOST:PORT) or its /ap/v1 root; $AGENTRT_URL")
	fs.Var(secretFlag{&f.apiKey}, "api-key", "`KEY` sent as \"Authorization: Bearer KEY\"; $AGENTRT_API_KEY")
	fs.BoolVar(&f.json, "json", f.json, "print JSON instead of text")
	fs.DurationVar(&f.timeout, "timeout", f.timeout, "how long to wait for an answer, or for a transfer to move on (0: no limit)")
	fs.IntVar(&f.retries, "retries", f.retries, "times to send a call again after a 503 or 429 with Retry-After (0: never)")
}

// secretFlag is a string flag whose value --help never shows.
type secretFlag struct{ v *string }

func (s secretFlag) String() string     { return "" }
func (s secretFlag) Set(v string) error { *s.v = v; return nil }

// clientOptions are the flags of the commands that have them, each
// defined only on the commands that use it.
type clientOptions struct {
	additionalInput string
	maxSteps        int
	dir             string
	force           bool
	page, pageSize  int
	all             bool
	relativePath    string
	uri, fileName   string
	async           bool
	after           int64
	follow          bool
}

// clientSubcommand is one command of "agentrt client".
type clientSubcommand struct {
	name     string
	args     string // as the usage shows them
	summary  string
	min, max int // positional arguments; max -1: any number
	flags    func(fs *flag.FlagSet, o *clientOptions)
	run      func(ctx context.Context, s *clientSession, args []string) error
}

// clientSubcommands are the commands of "agentrt client".
var clientSubcommands = []*clientSubcommand{
	{name: "run", args: "INPUT", min: 1, max: 1, run: clientRun,
		summary: `Creates a task with INPUT, then executes its steps one after another,
printing each as it ends, until the agent marks one as the last (or
--max-steps have run). Lists the task's artifacts at the end, and with
--download saves them into DIR. With --json, prints one JSON object a
line: {"task": ...}, then {"step": ...} for each step, {"artifacts": [...]},
and {"saved": [...]} when downloading.`,
		flags: func(fs *flag.FlagSet, o *clientOptions) {
			additionalInputFlag(fs, o)
			fs.IntVar(&o.maxSteps, "max-steps", 100, "steps to execute at most before giving up on the last")
			fs.StringVar(&o.dir, "download", "", "save the task's artifacts into `DIR` at the end")
			forceFlag(fs, o)
		}},
	{name: "create", args: "[INPUT]", max: 1, run: clientCreate,
		summary: `Creates a task, with INPUT as its prompt if given, and prints it.`,
		flags:   additionalInputFlag},
	{name: "tasks", run: clientTasks,
		summary: `Lists the server's tasks, a page at a time (or all with --all).`,
		flags:   pageFlags},
	{name: "task", args: "TASK_ID", min: 1, max: 1, run: clientTask,
		summary: `Shows a task and its artifacts.`},
	{name: "step", args: "TASK_ID [INPUT]", min: 1, max: 2, run: clientStep,
		summary: `Executes the task's next step, with INPUT if given, and prints it when it ends.

With --async the server runs the step in the background (an agentrt
addition: "Prefer: respond-async") and answers at once: the step is
printed running, with its Location. Follow it with "agentrt client
events TASK_ID --follow", read it with get-step, stop it with cancel.
With --json, prints {"step": ..., "location": ...}. A server that does
not run steps in the background runs it at once, and says so.`,
		flags: func(fs *flag.FlagSet, o *clientOptions) {
			additionalInputFlag(fs, o)
			fs.BoolVar(&o.async, "async", false, "run the step in the background: answered at once, with its Location")
		}},
	{name: "cancel", args: "TASK_ID STEP_ID", min: 2, max: 2, run: clientCancel,
		summary: `Cancels a step while it runs (an agentrt addition): the server stops its
handler and records it as failed, its additional_output {"error":
{"code": "cancelled", ...}}, and the step so recorded is printed.
Cancelling a cancelled step prints it again; a step that ended
otherwise, or has not run, cannot be cancelled (409).`},
	{name: "events", args: "TASK_ID", min: 1, max: 1, run: clientEvents,
		summary: `Prints the task's events (an agentrt addition), one line each: id, time,
type, step, and the event's data. Without --follow, prints those after
--after to the newest and ends; with --json, as one page
{"events": [...], "trimmed", "trimmed_through", "last_event_id"}.

With --follow, prints each event as the server records it, until the
task is deleted (its task.deleted event is the last) or Ctrl-C; with
--json, one JSON event a line. A connection that drops is opened again
from the last event printed: none is printed twice or missed, but the
progress and log events the server trimmed, which a "trimmed" line
counts. --timeout does not bound a --follow.`,
		flags: func(fs *flag.FlagSet, o *clientOptions) {
			fs.Int64Var(&o.after, "after", 0, "print the events after the one with id `N` (0: from the first)")
			fs.BoolVar(&o.follow, "follow", false, "print events live as they are recorded, until the task is deleted")
		}},
	{name: "steps", args: "TASK_ID", min: 1, max: 1, run: clientSteps,
		summary: `Lists a task's steps, a page at a time (or all with --all).`,
		flags:   pageFlags},
	{name: "get-step", args: "TASK_ID STEP_ID", min: 2, max: 2, run: clientGetStep,
		summary: `Shows one step of a task.`},
	{name: "artifacts", args: "TASK_ID", min: 1, max: 1, run: clientArtifacts,
		summary: `Lists a task's artifacts, a page at a time (or all with --all).`,
		flags:   pageFlags},
	{name: "upload", args: "TASK_ID [FILE]", min: 1, max: 2, run: clientUpload,
		summary: `Uploads FILE as an artifact of the task, streamed from disk, under its
own name in the workspace directory --relative-path. With --uri instead
of FILE, uploads a URI artifact: a reference to bytes held elsewhere,
which the server records and hands to its agent (the artifact-management
RFC; "agentrt client schemes" lists the schemes the agent takes).`,
		flags: func(fs *flag.FlagSet, o *clientOptions) {
			fs.StringVar(&o.relativePath, "relative-path", "", "the `DIR` of the task's workspace to put the file in")
			fs.StringVar(&o.uri, "uri", "", "upload this `URI` as a URI artifact instead of a file")
			fs.StringVar(&o.fileName, "file-name", "", "with --uri, the artifact's `NAME` (default: after the URI)")
		}},
	{name: "download", args: "TASK_ID [ARTIFACT_ID...]", min: 1, max: -1, run: clientDownload,
		summary: `Saves the named artifacts of the task, or all of them when none is
named, into --dir at their relative_path/file_name, streamed to disk.

The server's names are not trusted: a name that would lead out of
--dir (.., a backslash, a control character) is refused, and nothing is
written outside --dir. Each file is written under a temporary name and
renamed when complete, so a download that fails or is interrupted leaves
nothing half-written. An existing file is not replaced unless --force is
given. When several artifacts have the same path (a file uploaded
twice), the latest is saved and the others are skipped. A URI artifact
is not fetched: its URI is printed instead.`,
		flags: func(fs *flag.FlagSet, o *clientOptions) {
			fs.StringVar(&o.dir, "dir", ".", "the `DIR` to save into (made if missing)")
			forceFlag(fs, o)
		}},
	{name: "schemes", run: clientSchemes,
		summary: `Lists the URI schemes the agent accepts in uploads (input) and may
produce (output), "file" standing for bytes (GET /agent/artifact-schemes,
from the artifact-management RFC).`},
}

func additionalInputFlag(fs *flag.FlagSet, o *clientOptions) {
	fs.StringVar(&o.additionalInput, "additional-input", "", "additional_input: a JSON `OBJECT`")
}

func forceFlag(fs *flag.FlagSet, o *clientOptions) {
	fs.BoolVar(&o.force, "force", false, "replace files that exist")
}

func pageFlags(fs *flag.FlagSet, o *clientOptions) {
	fs.IntVar(&o.page, "page", 0, "the page `N` to list, from 1 (default 1)")
	fs.IntVar(&o.pageSize, "page-size", 0, "items per page (default: the server's, 10 on agentrt)")
	fs.BoolVar(&o.all, "all", false, "list every page")
}

// clientSession is one client command's connection and options.
type clientSession struct {
	env   clientEnv
	c     *client.Client
	flags clientFlags
	opts  clientOptions
}

// runClient runs "agentrt client" with args.
func runClient(ctx context.Context, args []string, env clientEnv) error {
	flags := clientFlags{url: defaultClientURL, apiKey: env.getenv("AGENTRT_API_KEY"), timeout: 5 * time.Minute,
		retries: client.DefaultMaxRetries}
	if u := env.getenv("AGENTRT_URL"); u != "" {
		flags.url = u
	}
	global := flag.NewFlagSet("agentrt client", flag.ContinueOnError)
	global.SetOutput(env.stderr)
	global.Usage = func() { fmt.Fprint(env.stderr, clientUsage) }
	flags.add(global)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	if global.NArg() == 0 {
		fmt.Fprint(env.stderr, clientUsage)
		return &usageError{"client needs a command"}
	}
	name := global.Arg(0)
	if name == "help" {
		fmt.Fprint(env.stdout, clientUsage)
		return nil
	}
	var cmd *clientSubcommand
	for _, c := range clientSubcommands {
		if c.name == name {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprint(env.stderr, clientUsage)
		return &usageError{fmt.Sprintf("unknown client command %q", name)}
	}

	s := &clientSession{env: env}
	fs := flag.NewFlagSet("agentrt client "+name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.stderr, "Usage: agentrt client %s [flags]\n\n%s\n\nFlags:\n", strings.TrimSpace(name+" "+cmd.args), cmd.summary)
		fs.PrintDefaults()
	}
	flags.add(fs)
	if cmd.flags != nil {
		cmd.flags(fs, &s.opts)
	}
	var positional []string
	positional, err := parseInterspersed(fs, global.Args()[1:])
	if err != nil {
		return err
	}
	switch {
	case len(positional) < cmd.min || (cmd.max >= 0 && len(positional) > cmd.max):
		return &usageError{fmt.Sprintf("usage: agentrt client %s [flags] (--help says more)",
			strings.TrimSpace(name+" "+cmd.args))}
	case flags.timeout < 0:
		return &usageError{"bad --timeout: want 0 (no limit) or more"}
	case flags.retries < 0:
		return &usageError{"bad --retries: want 0 (never) or more"}
	}
	if err := s.opts.check(); err != nil {
		return err
	}
	c, err := client.New(flags.url)
	if err != nil {
		return &usageError{fmt.Sprintf("bad --url: %v", err)}
	}
	c.APIKey = flags.apiKey
	c.UserAgent = "agentrt-client/" + version
	c.MaxRetries = flags.retries
	s.c, s.flags = c, flags
	return s.explain(ctx, cmd.run(ctx, s, positional))
}

// check refuses options that make no sense together.
func (o *clientOptions) check() error {
	switch {
	case o.page < 0 || o.pageSize < 0:
		return &usageError{"bad --page or --page-size: want 1 or more"}
	case o.after < 0:
		return &usageError{"bad --after: want an event id, 0 or more"}
	case o.all && (o.page != 0 || o.pageSize != 0):
		return &usageError{"--all reads every page: give it without --page or --page-size"}
	case o.additionalInput != "":
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(o.additionalInput), &obj); err != nil || obj == nil {
			return &usageError{fmt.Sprintf("bad --additional-input %q: want a JSON object, such as '{\"key\": \"value\"}'", o.additionalInput)}
		}
	}
	return nil
}

// explain turns a failure to reach the server, a timeout or an interrupt
// into one line that says so; other errors are returned as they are.
func (s *clientSession) explain(ctx context.Context, err error) error {
	var opErr *net.OpError
	var apiErr *client.Error
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted: %w", err)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return fmt.Errorf("cannot reach the Agent Protocol server at %s: %v", s.c.URL(), opErr.Err)
	case errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("%w (no answer within --timeout %s)", err, s.flags.timeout)
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized && s.flags.apiKey == "":
		err = fmt.Errorf("%w (the server wants an API key: give it with --api-key or AGENTRT_API_KEY)", err)
	}
	return printableError{err}
}

// printableError is an error whose text, which may quote the server, is
// made safe to print on a terminal.
type printableError struct{ err error }

func (e printableError) Error() string { return printableLine(e.err.Error(), 0) }
func (e printableError) Unwrap() error { return e.err }

// call is ctx bounded by --timeout, for one call that is not a transfer.
func (s *clientSession) call(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.flags.timeout == 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.flags.timeout)
}

// transfer is what an upload or download runs with: a context that ends
// when the transfer has moved no byte for --timeout, the progress
// function that tells it (and a progress bar on a terminal) how it goes,
// and a stop function that ends both and turns a stall into its error.
func (s *clientSession) transfer(ctx context.Context, label string) (context.Context, client.Progress, func(error) error) {
	ctx, cancel := context.WithCancelCause(ctx)
	stalled := fmt.Errorf("%s: nothing moved for %s (--timeout)", label, s.flags.timeout)
	var timer *time.Timer
	if s.flags.timeout > 0 {
		timer = time.AfterFunc(s.flags.timeout, func() { cancel(stalled) })
	}
	var bar *progressBar
	if s.env.terminal {
		bar = newProgressBar(s.env.stderr, label, s.env.now)
	}
	progress := func(done, total int64) {
		if timer != nil {
			timer.Reset(s.flags.timeout)
		}
		if bar != nil {
			bar.update(done, total)
		}
	}
	stop := func(err error) error {
		if timer != nil {
			timer.Stop()
		}
		if bar != nil {
			bar.finish()
		}
		if err != nil && context.Cause(ctx) == stalled {
			err = stalled
		}
		cancel(nil)
		return err
	}
	return ctx, progress, stop
}

// printJSON prints v as indented JSON.
func (s *clientSession) printJSON(v any) error {
	enc := json.NewEncoder(s.env.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJSONLine prints {key: v} as one line of JSON.
func (s *clientSession) printJSONLine(key string, v any) error {
	return json.NewEncoder(s.env.stdout).Encode(map[string]any{key: v})
}

// taskBody is the request body of a task from INPUT (if given) and
// --additional-input.
func (s *clientSession) taskBody(input []string) client.TaskRequestBody {
	var body client.TaskRequestBody
	if len(input) > 0 {
		body.Input = &input[0]
	}
	if s.opts.additionalInput != "" {
		body.AdditionalInput = json.RawMessage(s.opts.additionalInput)
	}
	return body
}

func clientRun(ctx context.Context, s *clientSession, args []string) error {
	if s.opts.maxSteps < 1 {
		return &usageError{"bad --max-steps: want 1 or more"}
	}
	cctx, cancel := s.call(ctx)
	task, err := s.c.CreateTask(cctx, s.taskBody(args))
	cancel()
	if err != nil {
		return err
	}
	if s.flags.json {
		s.printJSONLine("task", task)
	} else {
		fmt.Fprintf(s.env.stdout, "task %s  %s\n", task.TaskID, printableLine(orEmpty(task.Input), 72))
	}
	n, last := 0, false
	for n < s.opts.maxSteps && !last {
		cctx, cancel := s.call(ctx)
		step, err := s.c.ExecuteStep(cctx, task.TaskID, client.StepRequestBody{})
		cancel()
		if err != nil {
			return fmt.Errorf("step %d: %w", n+1, err)
		}
		n++
		last = step.IsLast
		if s.flags.json {
			s.printJSONLine("step", step)
		} else {
			s.printStep(step, n)
		}
	}
	cctx, cancel = s.call(ctx)
	arts, err := s.c.AllArtifacts(cctx, task.TaskID)
	cancel()
	if err != nil {
		return err
	}
	if s.flags.json {
		s.printJSONLine("artifacts", nonNil(arts))
	} else {
		if last {
			fmt.Fprintf(s.env.stdout, "done: step %d was the last\n", n)
		}
		s.printArtifacts(arts, "artifacts:", "no artifacts")
	}
	var saveErr error
	if s.opts.dir != "" {
		saveErr = s.saveAll(ctx, task.TaskID, arts, "saved")
	}
	if !last {
		return fmt.Errorf("task %s has not ended after %d steps (--max-steps); "+
			"execute more with \"agentrt client step %s\"", task.TaskID, n, task.TaskID)
	}
	return saveErr
}

func clientCreate(ctx context.Context, s *clientSession, args []string) error {
	ctx, cancel := s.call(ctx)
	defer cancel()
	task, err := s.c.CreateTask(ctx, s.taskBody(args))
	if err != nil {
		return err
	}
	if s.flags.json {
		return s.printJSON(task)
	}
	s.printTask(task)
	return nil
}

func clientTask(ctx context.Context, s *clientSession, args []string) error {
	ctx, cancel := s.call(ctx)
	defer cancel()
	task, err := s.c.GetTask(ctx, args[0])
	if err != nil {
		return err
	}
	if s.flags.json {
		return s.printJSON(task)
	}
	s.printTask(task)
	return nil
}

func clientStep(ctx context.Context, s *clientSession, args []string) error {
	body := client.StepRequestBody(s.taskBody(args[1:]))
	ctx, cancel := s.call(ctx)
	defer cancel()
	if s.opts.async {
		return clientStepAsync(ctx, s, args[0], body)
	}
	step, err := s.c.ExecuteStep(ctx, args[0], body)
	if err != nil {
		return err
	}
	if s.flags.json {
		return s.printJSON(step)
	}
	s.printStep(step, 0)
	return nil
}

// clientStepAsync executes a step in the background and prints it with
// its Location.
func clientStepAsync(ctx context.Context, s *clientSession, taskID string, body client.StepRequestBody) error {
	step, loc, err := s.c.ExecuteStepAsync(ctx, taskID, body)
	if err != nil {
		return err
	}
	if loc == "" {
		fmt.Fprintln(s.env.stderr, "the server ran the step at once: it does not run steps in the background")
	}
	if s.flags.json {
		return s.printJSON(map[string]any{"step": step, "location": loc})
	}
	s.printStep(step, 0)
	if loc != "" {
		fmt.Fprintf(s.env.stdout, "location  %s\n", printableLine(loc, 0))
	}
	return nil
}

func clientCancel(ctx context.Context, s *clientSession, args []string) error {
	ctx, cancel := s.call(ctx)
	defer cancel()
	step, err := s.c.CancelStep(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	if s.flags.json {
		return s.printJSON(step)
	}
	s.printStep(step, 0)
	return nil
}

// eventPageSize is the page the events command asks for: agentrt's
// largest.
const eventPageSize = 1000

func clientEvents(ctx context.Context, s *clientSession, args []string) error {
	taskID := args[0]
	if s.opts.follow {
		return s.c.WatchEvents(ctx, taskID, s.opts.after, func(ev client.Event) error {
			if s.flags.json {
				return json.NewEncoder(s.env.stdout).Encode(ev)
			}
			s.printEvent(ev)
			return nil
		})
	}
	ctx, cancel := s.call(ctx)
	defer cancel()
	// Page after page to the newest: one page printed with --json.
	all := client.EventPage{Events: []client.Event{}}
	for after, n := s.opts.after, 0; ; n++ {
		page, err := s.c.Events(ctx, taskID, after, eventPageSize)
		if err != nil {
			return err
		}
		if n == 0 {
			all.Trimmed, all.TrimmedThrough = page.Trimmed, page.TrimmedThrough
			if page.Trimmed > 0 && !s.flags.json {
				s.printTrimmed(page.Trimmed, page.TrimmedThrough)
			}
		}
		all.Last = page.Last
		if s.flags.json {
			all.Events = append(all.Events, page.Events...)
		} else {
			for _, ev := range page.Events {
				s.printEvent(ev)
			}
		}
		if len(page.Events) == 0 || page.Events[len(page.Events)-1].ID >= page.Last {
			break
		}
		if next := page.Events[len(page.Events)-1].ID; next > after {
			after = next
		} else {
			return fmt.Errorf("events of task %s: the server answered events from id %d when asked for those after %d", taskID, next, after)
		}
	}
	if s.flags.json {
		return s.printJSON(all)
	}
	return nil
}

// printEvent prints an event on one line: id, time, type, step, data.
func (s *clientSession) printEvent(ev client.Event) {
	if ev.Type == client.EventTrimmed {
		var t struct {
			Trimmed        int64 `json:"trimmed"`
			TrimmedThrough int64 `json:"trimmed_through"`
		}
		json.Unmarshal(ev.Data, &t)
		s.printTrimmed(t.Trimmed, t.TrimmedThrough)
		return
	}
	line := fmt.Sprintf("%d  %s  %-16s", ev.ID, ev.CreatedAt.Local().Format("15:04:05.000"), printableLine(ev.Type, 40))
	if ev.StepID != "" {
		line += "  step " + printableLine(ev.StepID, 0)
	}
	if data := compactObject(ev.Data); data != "" {
		line += "  " + printableLine(data, 200)
	}
	fmt.Fprintln(s.env.stdout, line)
}

// printTrimmed says that the server trimmed n progress and log events,
// the last through.
func (s *clientSession) printTrimmed(n, through int64) {
	fmt.Fprintf(s.env.stdout, "-  trimmed: %s (progress and logs, up to id %d) are no longer held\n", plural(int(n), "event"), through)
}

func clientGetStep(ctx context.Context, s *clientSession, args []string) error {
	ctx, cancel := s.call(ctx)
	defer cancel()
	step, err := s.c.GetStep(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	if s.flags.json {
		return s.printJSON(step)
	}
	s.printStep(step, 0)
	return nil
}

// page is the page --page and --page-size ask for.
func (s *clientSession) page() client.Page {
	return client.Page{Current: s.opts.page, Size: s.opts.pageSize}
}

// listed fetches what a list command shows: every page with --all, else
// the page asked for. With --json it prints them (all pages as
// {"KEY": [...]}, one page as the server's answer) and printed is true.
func listed[T, L any](ctx context.Context, s *clientSession, key string,
	all func(context.Context) ([]T, error),
	page func(context.Context, client.Page) (*L, error),
	items func(*L) ([]T, *client.Pagination),
) (list []T, p *client.Pagination, printed bool, err error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	if s.opts.all {
		if list, err = all(ctx); err != nil {
			return nil, nil, false, err
		}
		if s.flags.json {
			return nil, nil, true, s.printJSON(map[string]any{key: nonNil(list)})
		}
		return list, nil, false, nil
	}
	l, err := page(ctx, s.page())
	if err != nil {
		return nil, nil, false, err
	}
	if s.flags.json {
		return nil, nil, true, s.printJSON(l)
	}
	list, p = items(l)
	return list, p, false, nil
}

func clientTasks(ctx context.Context, s *clientSession, _ []string) error {
	tasks, p, printed, err := listed(ctx, s, "tasks", s.c.AllTasks, s.c.ListTasks,
		func(l *client.TaskListResponse) ([]client.Task, *client.Pagination) { return l.Tasks, &l.Pagination })
	if printed || err != nil {
		return err
	}
	if len(tasks) > 0 {
		tw := tabwriter.NewWriter(s.env.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK ID\tARTIFACTS\tINPUT")
		for _, t := range tasks {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", printableLine(t.TaskID, 0), len(t.Artifacts), printableLine(orEmpty(t.Input), 60))
		}
		tw.Flush()
	}
	s.printCount(len(tasks), p, "task")
	return nil
}

func clientSteps(ctx context.Context, s *clientSession, args []string) error {
	taskID := args[0]
	steps, p, printed, err := listed(ctx, s, "steps",
		func(ctx context.Context) ([]client.Step, error) { return s.c.AllSteps(ctx, taskID) },
		func(ctx context.Context, pg client.Page) (*client.TaskStepsListResponse, error) {
			return s.c.ListSteps(ctx, taskID, pg)
		},
		func(l *client.TaskStepsListResponse) ([]client.Step, *client.Pagination) {
			return l.Steps, &l.Pagination
		})
	if printed || err != nil {
		return err
	}
	if len(steps) > 0 {
		tw := tabwriter.NewWriter(s.env.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "STEP ID\tSTATUS\tLAST\tNAME\tOUTPUT")
		for _, st := range steps {
			last := ""
			if st.IsLast {
				last = "last"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printableLine(st.StepID, 0), printableLine(string(st.Status), 20), last,
				printableLine(orEmpty(st.Name), 30), printableLine(orEmpty(st.Output), 50))
		}
		tw.Flush()
	}
	s.printCount(len(steps), p, "step")
	return nil
}

func clientArtifacts(ctx context.Context, s *clientSession, args []string) error {
	taskID := args[0]
	arts, p, printed, err := listed(ctx, s, "artifacts",
		func(ctx context.Context) ([]client.Artifact, error) { return s.c.AllArtifacts(ctx, taskID) },
		func(ctx context.Context, pg client.Page) (*client.TaskArtifactsListResponse, error) {
			return s.c.ListArtifacts(ctx, taskID, pg)
		},
		func(l *client.TaskArtifactsListResponse) ([]client.Artifact, *client.Pagination) {
			return l.Artifacts, &l.Pagination
		})
	if printed || err != nil {
		return err
	}
	s.printArtifacts(arts, "", "")
	s.printCount(len(arts), p, "artifact")
	return nil
}

func clientUpload(ctx context.Context, s *clientSession, args []string) error {
	switch {
	case len(args) == 2 && s.opts.uri != "":
		return &usageError{"upload takes a FILE or --uri, not both"}
	case len(args) == 1 && s.opts.uri == "":
		return &usageError{"upload needs a FILE, or --uri URI"}
	case s.opts.fileName != "" && s.opts.uri == "":
		return &usageError{"--file-name goes with --uri; a file is uploaded under its own name"}
	case s.opts.uri != "":
		return clientUploadURI(ctx, s, args[0])
	}
	taskID, file := args[0], args[1]
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("upload %s: not a regular file", file)
	}
	name := filepath.Base(file)
	tctx, progress, stop := s.transfer(ctx, "upload "+printableLine(name, 40))
	art, err := s.c.UploadArtifact(tctx, taskID, name, s.opts.relativePath, f, fi.Size(), progress)
	if err = stop(err); err != nil {
		return err
	}
	if s.flags.json {
		return s.printJSON(art)
	}
	fmt.Fprintf(s.env.stdout, "uploaded %s (%s) as artifact %s  %s\n", printableLine(file, 0), humanBytes(fi.Size()),
		printableLine(art.ArtifactID, 0), printableLine(artifactPath(*art), 0))
	return nil
}

func clientUploadURI(ctx context.Context, s *clientSession, taskID string) error {
	cctx, cancel := s.call(ctx)
	defer cancel()
	art, err := s.c.UploadURI(cctx, taskID, s.opts.uri, s.opts.fileName, s.opts.relativePath)
	if err != nil {
		return err
	}
	if s.flags.json {
		return s.printJSON(art)
	}
	fmt.Fprintf(s.env.stdout, "uploaded %s as artifact %s  %s\n", printableLine(art.URI, 0),
		printableLine(art.ArtifactID, 0), printableLine(artifactPath(*art), 0))
	return nil
}

func clientSchemes(ctx context.Context, s *clientSession, _ []string) error {
	cctx, cancel := s.call(ctx)
	defer cancel()
	schemes, err := s.c.ArtifactSchemes(cctx)
	if err != nil {
		return err
	}
	if s.flags.json {
		return s.printJSON(schemes)
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return printableLine(strings.Join(l, " "), 0)
	}
	fmt.Fprintf(s.env.stdout, "input:  %s\noutput: %s\n", list(schemes.Input), list(schemes.Output))
	return nil
}

func clientDownload(ctx context.Context, s *clientSession, args []string) error {
	taskID, ids := args[0], args[1:]
	cctx, cancel := s.call(ctx)
	arts, err := s.c.AllArtifacts(cctx, taskID)
	cancel()
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		byID := map[string]client.Artifact{}
		for _, a := range arts {
			byID[a.ArtifactID] = a
		}
		arts = arts[:0:0]
		for _, id := range ids {
			a, ok := byID[id]
			if !ok {
				return fmt.Errorf("task %s has no artifact %s", taskID, id)
			}
			arts = append(arts, a)
		}
	}
	if len(arts) == 0 {
		if s.flags.json {
			return s.printJSON([]any{})
		}
		fmt.Fprintf(s.env.stderr, "task %s has no artifacts\n", taskID)
		return nil
	}
	return s.saveAll(ctx, taskID, arts, "")
}

// savedArtifact is what --json prints of an artifact saved.
type savedArtifact struct {
	ArtifactID string `json:"artifact_id"`
	Path       string `json:"path"`
	Bytes      int64  `json:"bytes"`
}

// saveAll saves arts into --dir (or --download) through SaveArtifact,
// printing each file saved, and goes on past one that fails; it fails if
// any did. Of artifacts with the same path, the last listed (the latest)
// is saved. With --json, it prints the files saved as a list, or as one
// line {jsonKey: [...]} when jsonKey is set.
func (s *clientSession) saveAll(ctx context.Context, taskID string, arts []client.Artifact, jsonKey string) error {
	latest := map[string]int{}
	for i, a := range arts {
		if p, err := client.LocalPath(a); err == nil {
			latest[p] = i
		}
	}
	saved := []savedArtifact{}
	failed := 0
	for i, a := range arts {
		if a.URI != "" {
			fmt.Fprintf(s.env.stderr, "skipped artifact %s: a URI artifact, not fetched: %s\n",
				printableLine(a.ArtifactID, 0), printableLine(a.URI, 0))
			continue
		}
		if p, err := client.LocalPath(a); err == nil && latest[p] != i {
			fmt.Fprintf(s.env.stderr, "skipped artifact %s: artifact %s, listed after it, has the same path %s\n",
				printableLine(a.ArtifactID, 0), printableLine(arts[latest[p]].ArtifactID, 0), printableLine(p, 0))
			continue
		}
		tctx, progress, stop := s.transfer(ctx, "download "+printableLine(a.FileName, 40))
		path, n, err := s.c.SaveArtifact(tctx, taskID, a, s.opts.dir, s.opts.force, progress)
		if err = stop(err); err != nil {
			if ctx.Err() != nil {
				return err
			}
			if errors.Is(err, fs.ErrExist) {
				err = fmt.Errorf("%w; --force replaces it", err)
			}
			fmt.Fprintf(s.env.stderr, "agentrt: %s\n", printableLine(err.Error(), 0))
			failed++
			continue
		}
		saved = append(saved, savedArtifact{ArtifactID: a.ArtifactID, Path: path, Bytes: n})
		if !s.flags.json {
			fmt.Fprintf(s.env.stdout, "saved %s (%s)\n", printableLine(path, 0), humanBytes(n))
		}
	}
	switch {
	case s.flags.json && jsonKey != "":
		s.printJSONLine(jsonKey, saved)
	case s.flags.json:
		s.printJSON(saved)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d artifacts were not saved", failed, len(arts))
	}
	return nil
}

// printTask prints a task as text.
func (s *clientSession) printTask(t *client.Task) {
	const indent = "                  " // the width of the labels
	w := s.env.stdout
	fmt.Fprintf(w, "task              %s\n", printableLine(t.TaskID, 0))
	if t.Input != nil {
		fmt.Fprintf(w, "input             %s\n", indented(*t.Input, indent))
	}
	if obj := compactObject(t.AdditionalInput); obj != "" {
		fmt.Fprintf(w, "additional_input  %s\n", printableLine(obj, 0))
	}
	s.printArtifacts(t.Artifacts, "artifacts:", "no artifacts")
}

// printStep prints a step as text: a heading line, then its output
// indented. n, if not 0, is its place among the steps run.
func (s *clientSession) printStep(st *client.Step, n int) {
	w := s.env.stdout
	head := "step"
	if n > 0 {
		head += " " + strconv.Itoa(n)
	}
	if st.Name != nil && *st.Name != "" {
		head += " " + strconv.Quote(printableLine(*st.Name, 60))
	}
	head += "  " + printableLine(string(st.Status), 20)
	if st.IsLast {
		head += " (last)"
	}
	fmt.Fprintf(w, "%s  %s\n", head, printableLine(st.StepID, 0))
	if st.Output != nil && *st.Output != "" {
		fmt.Fprintf(w, "  %s\n", indented(*st.Output, "  "))
	}
	if obj := compactObject(st.AdditionalOutput); obj != "" {
		fmt.Fprintf(w, "  additional_output  %s\n", printableLine(obj, 200))
	}
	for _, a := range st.Artifacts {
		fmt.Fprintf(w, "  + artifact %s  %s\n", printableLine(a.ArtifactID, 0), printableLine(artifactPath(a), 0))
	}
}

// printArtifacts prints artifacts as a table, under heading if it is
// set, or none (if set) when there are none.
func (s *clientSession) printArtifacts(arts []client.Artifact, heading, none string) {
	w := s.env.stdout
	if len(arts) == 0 {
		if none != "" {
			fmt.Fprintln(w, none)
		}
		return
	}
	indent := ""
	if heading != "" {
		fmt.Fprintln(w, heading)
		indent = "  "
	}
	uris := slices.ContainsFunc(arts, func(a client.Artifact) bool { return a.URI != "" })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%sARTIFACT ID\tBY\tPATH", indent)
	if uris {
		fmt.Fprint(tw, "\tURI")
	}
	fmt.Fprintln(tw)
	for _, a := range arts {
		by := "upload"
		if a.AgentCreated {
			by = "agent"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s", indent, printableLine(a.ArtifactID, 0), by, printableLine(artifactPath(a), 0))
		if uris {
			fmt.Fprintf(tw, "\t%s", printableLine(a.URI, 0))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// printCount prints how many items were listed and, when p says there
// are several pages, which page this is.
func (s *clientSession) printCount(n int, p *client.Pagination, noun string) {
	w := s.env.stdout
	if p == nil || (p.TotalPages <= 1 && p.CurrentPage <= 1) {
		fmt.Fprintln(w, plural(n, noun))
		return
	}
	fmt.Fprintf(w, "page %d of %d (%s in all)", p.CurrentPage, p.TotalPages, plural(p.TotalItems, noun))
	if p.CurrentPage < p.TotalPages {
		fmt.Fprintf(w, "; --page %d for the next, --all for every page", p.CurrentPage+1)
	}
	fmt.Fprintln(w)
}

// plural is "1 task", "2 tasks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// artifactPath is where the server says an artifact sits in its task's
// workspace: relative_path/file_name.
func artifactPath(a client.Artifact) string {
	if a.RelativePath == nil || strings.Trim(*a.RelativePath, "/") == "" {
		return a.FileName
	}
	return strings.TrimRight(*a.RelativePath, "/") + "/" + a.FileName
}

// compactObject is a JSON value as compact text, or "" for nothing, null
// or an empty object.
func compactObject(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil {
		return ""
	}
	if s := b.String(); s != "null" && s != "{}" {
		return s
	}
	return ""
}

// orEmpty is *s, or "" for nil.
func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nonNil is list, or an empty list for nil, so that JSON shows [] rather
// than null.
func nonNil[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}

// printable is text from the server made safe to print on a terminal:
// control characters other than newline and tab (ESC above all, which
// starts a terminal's escape sequences) are shown as Go escapes, and
// bytes that are not UTF-8 as U+FFFD.
func printable(s string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// printableLine is printable(s) on one line: newlines and tabs shown as
// escapes, and cut to max runes (0: no limit) with "…".
func printableLine(s string, max int) string {
	s = strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(printable(s))
	if max > 0 && utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max-1]) + "…"
	}
	return s
}

// indented is printable(s) with every line after the first indented by
// indent.
func indented(s, indent string) string {
	return strings.ReplaceAll(strings.TrimRight(printable(s), "\n"), "\n", "\n"+indent)
}
