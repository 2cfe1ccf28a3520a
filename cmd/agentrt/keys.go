package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentrt/agentrt/plugins/manifest"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/storage"
)

const keysUsage = `Usage:
  agentrt keys create NAME [--agent AGENT]... [--data DIR]   make a key; it is printed once
  agentrt keys list [--data DIR] [--json]                     name, prefix, agents, created, last used
  agentrt keys revoke NAME [--data DIR]                       remove a key

API keys of the data directory DIR. Once a key exists (or with agentrt run
--require-auth), every request but GET /healthz and GET /readyz needs one, as
"Authorization: Bearer KEY" or "X-API-Key: KEY": 401 without, 403 on an agent
the key may not use (--agent limits it; none: every agent). Keys work
whether or not a server runs on DIR, and a running one sees a change at its
next request. Only a hash of each key is kept: a key lost is revoked and
made anew. "Last used" is written down about once a minute.

Flags:
`

// keysCommand runs "agentrt keys".
func keysCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var agents []string
	var dataDir string
	var asJSON bool
	fs := flag.NewFlagSet("agentrt keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, keysUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&dataDir, "data", "./agentrt-data", "the data `DIR` of the server the keys are for")
	fs.Func("agent", "an `AGENT` the new key may use (repeatable; none: every agent)", func(v string) error {
		if err := manifest.ValidName(v); err != nil {
			return err
		}
		agents = append(agents, v)
		return nil
	})
	fs.BoolVar(&asJSON, "json", false, "list: print JSON")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) == 0 {
		fs.Usage()
		return &usageError{"keys needs a command: create, list or revoke"}
	}
	cmd, rest := positional[0], positional[1:]
	want := map[string]int{"create": 1, "list": 0, "revoke": 1}
	n, ok := want[cmd]
	switch {
	case !ok:
		fs.Usage()
		return &usageError{fmt.Sprintf("unknown keys command %q: want create, list or revoke", cmd)}
	case len(rest) != n && n == 1:
		return &usageError{fmt.Sprintf("keys %s takes the key's NAME", cmd)}
	case len(rest) != n:
		return &usageError{fmt.Sprintf("keys %s takes no argument: %s", cmd, strings.Join(rest, " "))}
	case len(agents) > 0 && cmd != "create":
		return &usageError{"--agent is for keys create"}
	}
	admin, err := storage.OpenKeyAdmin(ctx, dataDir)
	if err != nil {
		return err
	}
	defer admin.Close()
	switch cmd {
	case "create":
		key, err := admin.Create(ctx, rest[0], agents)
		if err != nil {
			return keysError(err)
		}
		fmt.Fprintln(stdout, key)
		scope := "every agent"
		if len(agents) > 0 {
			scope = "agents " + strings.Join(agents, ", ")
		}
		fmt.Fprintf(stderr, "key %q created for %s; it is shown this once: keep it now\n", rest[0], scope)
	case "revoke":
		if err := admin.Revoke(ctx, rest[0]); err != nil {
			return keysError(err)
		}
		fmt.Fprintf(stderr, "key %q revoked\n", rest[0])
	case "list":
		keys, err := admin.List(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(keys)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tPREFIX\tAGENTS\tCREATED\tLAST USED")
		for _, k := range keys {
			agents, used := "*", "never"
			if k.Agents != nil {
				agents = strings.Join(k.Agents, ",")
			}
			if k.LastUsed != nil {
				used = k.LastUsed.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Name, k.Prefix, agents, k.CreatedAt.Format(time.RFC3339), used)
		}
		return tw.Flush()
	}
	return nil
}

// keysError makes a refused name a mistake of the command line.
func keysError(err error) error {
	if protocol.ErrorCode(err) == protocol.EINVALID {
		return &usageError{protocol.ErrorMessage(err)}
	}
	return err
}
