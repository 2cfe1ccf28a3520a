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
  agentrt keys list [--data DIR] [--json]                     closed or open; name, prefix, agents, created, last used
  agentrt keys revoke NAME [--data DIR]                       remove a key
  agentrt keys open --yes [--data DIR]                        let anyone in without a key (no key may be left)

API keys of the data directory DIR. Once a key has been created (or a server
started on DIR with --require-auth), DIR is closed: every request but
GET /healthz and GET /readyz needs a key, as "Authorization: Bearer KEY" or
"X-API-Key: KEY": 401 without, 403 on an agent the key may not use (--agent
limits it; none: every agent). It stays closed when its last key is revoked
(every request is then refused) and across restarts, with or without
--require-auth, until "keys open --yes" opens it to anyone who reaches the
port; creating a key closes it again. Keys work whether or not a server runs
on DIR, and a running one sees a change at its next request, and logs an
opening. Only a hash of each key is kept: a key lost is revoked and made
anew. "Last used" is written down about once a minute.

Flags:
`

// keysCommand runs "agentrt keys".
func keysCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var agents []string
	var dataDir string
	var asJSON, yes bool
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
	fs.BoolVar(&yes, "yes", false, "open: yes, let anyone who reaches the port use every agent without a key")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) == 0 {
		fs.Usage()
		return &usageError{"keys needs a command: create, list, revoke or open"}
	}
	cmd, rest := positional[0], positional[1:]
	want := map[string]int{"create": 1, "list": 0, "revoke": 1, "open": 0}
	n, ok := want[cmd]
	switch {
	case !ok:
		fs.Usage()
		return &usageError{fmt.Sprintf("unknown keys command %q: want create, list, revoke or open", cmd)}
	case len(rest) != n && n == 1:
		return &usageError{fmt.Sprintf("keys %s takes the key's NAME", cmd)}
	case len(rest) != n:
		return &usageError{fmt.Sprintf("keys %s takes no argument: %s", cmd, strings.Join(rest, " "))}
	case len(agents) > 0 && cmd != "create":
		return &usageError{"--agent is for keys create"}
	case yes && cmd != "open":
		return &usageError{"--yes is for keys open"}
	case cmd == "open" && !yes:
		return &usageError{fmt.Sprintf("keys open lets anyone who reaches the port of a server on %s use every agent without a key, "+
			"now and after every restart, until a key is created: run it with --yes to do that", dataDir)}
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
		keys, auth, err := keysAndAuth(ctx, admin)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			fmt.Fprintf(stderr, "no key is left: %s\n", authLine(auth, 0))
		}
	case "open":
		opened, err := admin.OpenToAnyone(ctx)
		if err != nil {
			return err
		}
		if !opened {
			fmt.Fprintf(stderr, "%s needed no key already: nothing changed\n", dataDir)
			return nil
		}
		fmt.Fprintf(stderr, "authentication turned off by operator command for %s: anyone who reaches the port may now use every agent "+
			"without a key (a server running on it logs this at its next request); agentrt keys create turns it back on\n", dataDir)
	case "list":
		keys, auth, err := keysAndAuth(ctx, admin)
		if err != nil {
			return err
		}
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(keys)
		}
		fmt.Fprintln(stdout, authLine(auth, len(keys)))
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

// keysAndAuth lists the keys and reads whether they are required.
func keysAndAuth(ctx context.Context, admin *storage.KeyAdmin) ([]storage.KeyInfo, storage.AuthState, error) {
	keys, err := admin.List(ctx)
	if err != nil {
		return nil, storage.AuthState{}, err
	}
	auth, err := admin.Auth(ctx)
	return keys, auth, err
}

// authLine says whether a server on the directory answers without a key,
// and since when and why: the first line of keys list.
func authLine(auth storage.AuthState, keys int) string {
	var why string
	if !auth.Since.IsZero() {
		why = fmt.Sprintf(" (since %s: %s)", auth.Since.Format(time.RFC3339), auth.Reason)
	} else if auth.Reason != "" {
		why = " (" + auth.Reason + ")"
	}
	switch {
	case keys > 0:
		return "closed: every request but the health checks needs a key" + why
	case auth.Required:
		return "closed, with no key: every request but the health checks is refused until a key is created, or keys open --yes" + why
	case auth.Since.IsZero():
		return "open: no key was ever required; anyone who reaches the port may use every agent" + why
	default:
		return "open: anyone who reaches the port may use every agent" + why
	}
}

// keysError makes a refused name a mistake of the command line.
func keysError(err error) error {
	if protocol.ErrorCode(err) == protocol.EINVALID {
		return &usageError{protocol.ErrorMessage(err)}
	}
	return err
}
