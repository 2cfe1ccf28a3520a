package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentrt/agentrt/protocol/conformance"
)

const checkUsage = `Usage: agentrt check URL [flags]

Checks the Agent Protocol v1 server at URL: every check is printed by
group, passed, FAILed (with the request that showed it and what came
back) or skipped (with why), then "N passed, N failed, N skipped". The
exit status is 1 when a check failed, 2 for a mistake in the command line.
A server that needs an API key is given one with -api-key or
$AGENTRT_API_KEY.

URL is the server's base URL (http://127.0.0.1:8000, as the protocol's
clients take it) or its API root (http://127.0.0.1:8000/ap/v1).

Each check is at one of three levels: spec, the letter of the protocol's
specification and of its official compliance suite; strict, what agentrt
promises beyond it; added, agentrt's additions to the protocol (steps in
the background, cancel, a task's events), skipped against a server
without them. Groups: tasks, steps, artifacts, pagination, errors,
uploads, downloads, events. A check that needs the agent to do something
(create an artifact, finish a task) is skipped when it does not.

The checks create tasks, steps and artifacts (the protocol deletes
nothing) and need no empty server, but nobody else creating tasks while
they run.

Flags:
`

// checkConfig is everything "agentrt check" is told.
type checkConfig struct {
	root    string // the URL as given
	only    []string
	json    bool
	list    bool
	timeout time.Duration
	apiKey  string
}

// parseCheckFlags parses the arguments of "agentrt check", flags and the
// URL in any order.
func parseCheckFlags(args []string, stderr io.Writer) (*checkConfig, error) {
	cfg := &checkConfig{apiKey: os.Getenv("AGENTRT_API_KEY")}
	var only string
	fs := flag.NewFlagSet("agentrt check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, checkUsage)
		fs.PrintDefaults()
	}
	fs.BoolVar(&cfg.json, "json", false, "print a machine-readable report (JSON) instead of text")
	fs.StringVar(&only, "only", "", "run only these checks: a comma-separated `LIST` of groups, levels (spec, strict, added) and check ids")
	fs.DurationVar(&cfg.timeout, "timeout", conformance.DefaultTimeout, "time limit of each request, answer included")
	fs.BoolVar(&cfg.list, "list", false, "list the checks (with -only, those it selects) instead of running them; no URL needed")
	fs.Var(secretFlag{&cfg.apiKey}, "api-key", "`KEY` sent with every request as \"Authorization: Bearer KEY\"; $AGENTRT_API_KEY")

	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if only != "" {
		cfg.only = strings.Split(only, ",")
	}
	if cfg.timeout <= 0 {
		return nil, &usageError{fmt.Sprintf("bad -timeout %s: want a positive duration", cfg.timeout)}
	}
	switch {
	case len(positional) == 1:
		cfg.root = positional[0]
	case len(positional) > 1:
		return nil, &usageError{fmt.Sprintf("check takes one URL; got %d: %s", len(positional), strings.Join(positional, " "))}
	case !cfg.list:
		fs.Usage()
		return nil, &usageError{"check needs the URL of an Agent Protocol server (http://HOST:PORT)"}
	}
	return cfg, nil
}

// checkCommand runs "agentrt check": the conformance checks against a
// server, reported as text or JSON. A failed check is an error (exit
// status 1); so is a run cut short by ctx.
func checkCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseCheckFlags(args, stderr)
	if err != nil {
		return err
	}
	checks, err := conformance.Select(cfg.only)
	if err != nil {
		return &usageError{fmt.Sprintf("bad -only: %v", err)}
	}
	if len(checks) == 0 {
		return &usageError{fmt.Sprintf("-only %s selects no check", strings.Join(cfg.only, ","))}
	}
	if cfg.list {
		return listChecks(stdout, checks, cfg.json)
	}
	root, err := conformance.APIRoot(cfg.root)
	if err != nil {
		return &usageError{fmt.Sprintf("bad URL %q: %v", cfg.root, err)}
	}
	report := conformance.Run(ctx, conformance.Config{Root: root, Checks: checks, Timeout: cfg.timeout, APIKey: cfg.apiKey})
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	switch {
	case report.Failed > 0:
		return fmt.Errorf("check %s: %d of %d checks failed", root, report.Failed, len(report.Results))
	case ctx.Err() != nil:
		return fmt.Errorf("check %s: stopped: %w", root, ctx.Err())
	}
	return nil
}

// listChecks prints the checks: a table, or JSON.
func listChecks(w io.Writer, checks []conformance.Check, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(checks)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range checks {
		asserts := c.Asserts
		if c.Needs != "" {
			asserts += " (needs " + c.Needs + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.ID, c.Group, c.Level, asserts)
	}
	return tw.Flush()
}
