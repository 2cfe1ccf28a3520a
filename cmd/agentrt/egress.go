package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/plugins/manifest"
	"github.com/agentrt/agentrt/protocol"
)

// Outbound HTTP, as the operator configures it: what each agent may reach
// (--allow-http, --allow-private-host, a --http-policy file), the secrets
// the host holds for it (--secret-env, the policy file), and the limits
// its requests run under (--http-timeout, --max-http-requests,
// --max-http-request, --max-http-response), which a manifest may tighten.
// Each build of an agent gets its own egress.Client from these
// (runtime/fleet).

// egressConfig is what the operator's flags say of outbound HTTP.
type egressConfig struct {
	limits egress.Limits
	grants *egress.Grants
	// resolver and tls, when set (by tests), are what every agent's
	// client resolves names and trusts certificates with.
	resolver egress.Resolver
	tls      *tls.Config
}

// addEgressFlags defines the flags of outbound HTTP on fs, over doc: the
// limits each agent's (doc.Limits), the grants added to doc.Egress's.
func addEgressFlags(fs *flag.FlagSet, doc *Config) {
	l, e := &doc.Limits, &doc.Egress
	fs.Var(&l.HTTPTimeout, "http-timeout", "time limit (a `DURATION`) of one outbound HTTP request of a plugin, within its handler call's")
	fs.IntVar(&l.MaxHTTPRequests, "max-http-requests", l.MaxHTTPRequests, "outbound HTTP requests one handler call may make")
	fs.Var(&l.MaxHTTPRequest, "max-http-request", "limit (a `SIZE`) of the body of one outbound HTTP request")
	fs.Var(&l.MaxHTTPResponse, "max-http-response", "limit (a `SIZE`) of the body of the response to one outbound HTTP request")
	fs.StringVar(&e.PolicyFile, "http-policy", e.PolicyFile, "a JSON `FILE` granting agents destinations, private hosts and secrets (docs/SECURITY.md, \"Outbound HTTP\")")
	fs.Func("allow-http", "grant [`AGENT=]DEST`: a destination (https://api.example.com/v1), or all that the agent's manifest asks for (AGENT=all); without AGENT=, every agent (repeatable)", func(v string) error {
		e.Allow = append(e.Allow, v)
		return nil
	})
	fs.Func("allow-private-host", "let [`AGENT=]HOST` (a name, *.name or an address) be reached on loopback, private and link-local addresses (repeatable)", func(v string) error {
		e.PrivateHosts = append(e.PrivateHosts, v)
		return nil
	})
	fs.Func("secret-env", "hold the environment variable NAME as the secret NAME, sent only to DEST: [`AGENT=]NAME@DEST` (repeatable)", func(v string) error {
		e.SecretEnv = append(e.SecretEnv, v)
		return nil
	})
}

// egressFromFile counts the entries of each egress list the file gave,
// before the flags added theirs: an error names the flag or the field.
type egressFromFile struct{ allow, private, secrets int }

// applyEgress makes cfg.egress what doc says: its limits, and the grants
// of the policy file, the inline policy and the lists.
func (cfg *runConfig) applyEgress(doc *Config, fs *flag.FlagSet, fromFile egressFromFile) error {
	l, e := doc.Limits, doc.Egress
	name := func(flagName, field string, i, fileEntries int) string {
		switch {
		case i < 0 && flagSet(fs, flagName), i >= fileEntries:
			return "-" + flagName
		case i < 0:
			return doc.field(field)
		}
		return doc.field(fmt.Sprintf("%s[%d]", field, i))
	}
	cfg.egress.limits = egress.Limits{Timeout: time.Duration(l.HTTPTimeout), MaxRequests: l.MaxHTTPRequests,
		MaxRequestBytes: int64(l.MaxHTTPRequest), MaxResponseBytes: int64(l.MaxHTTPResponse)}
	switch {
	case cfg.egress.limits.Timeout <= 0:
		return &usageError{fmt.Sprintf("bad %s %s: want more than 0s", name("http-timeout", "limits.http_timeout", -1, 0), cfg.egress.limits.Timeout)}
	case l.MaxHTTPRequests < 0:
		return &usageError{fmt.Sprintf("bad %s %d: want 0 or more", name("max-http-requests", "limits.max_http_requests", -1, 0), l.MaxHTTPRequests)}
	}
	g := egress.NewGrants()
	cfg.egress.grants = g
	if e.PolicyFile != "" {
		if err := readPolicyFile(g, e.PolicyFile); err != nil {
			return err
		}
	}
	if len(e.Policy) > 0 {
		if err := readPolicy(g, e.Policy, doc.policyDir); err != nil {
			return fmt.Errorf("%s: %w", doc.field("egress.policy"), err)
		}
	}
	for i, v := range e.Allow {
		agent, dest := agentPrefix(v)
		if err := g.Allow(agent, dest); err != nil {
			return &usageError{fmt.Sprintf("bad %s %q: %v", name("allow-http", "egress.allow", i, fromFile.allow), v, err)}
		}
	}
	for i, v := range e.PrivateHosts {
		agent, host := agentPrefix(v)
		if err := g.AllowPrivate(agent, host); err != nil {
			return &usageError{fmt.Sprintf("bad %s %q: %v", name("allow-private-host", "egress.private_hosts", i, fromFile.private), v, err)}
		}
	}
	for i, v := range e.SecretEnv {
		what := name("secret-env", "egress.secret_env", i, fromFile.secrets)
		agent, rest := agentPrefix(v)
		secret, dest, ok := strings.Cut(rest, "@")
		if !ok {
			return &usageError{fmt.Sprintf("bad %s %q: want [AGENT=]NAME@DEST", what, v)}
		}
		value, set := os.LookupEnv(secret)
		if !set || value == "" {
			return &usageError{fmt.Sprintf("bad %s %q: the environment variable %s is not set", what, v, secret)}
		}
		if err := g.AddSecret(secret, value, []string{agent}, []string{dest}); err != nil {
			return &usageError{fmt.Sprintf("bad %s %q: %v", what, v, err)}
		}
	}
	return nil
}

// agentPrefix splits "AGENT=REST" when what is before the '=' is an
// agent's name or "*"; otherwise REST is the whole and the agent is every
// agent ("*"). A destination has a ':' before any '=', and a name has
// none.
func agentPrefix(v string) (agent, rest string) {
	if name, rest, ok := strings.Cut(v, "="); ok && (name == egress.Every || manifest.ValidName(name) == nil) {
		return name, rest
	}
	return egress.Every, v
}

// readPolicyFile reads the operator's policy file into g. Files it names
// for secrets are relative to it.
func readPolicyFile(g *egress.Grants, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("http policy: %w", err)
	}
	if err := readPolicy(g, data, filepath.Dir(path)); err != nil {
		return fmt.Errorf("http policy %s: %w", path, err)
	}
	return nil
}

// readPolicy reads a policy document into g; files it names for secrets
// are relative to dir.
func readPolicy(g *egress.Grants, data []byte, dir string) error {
	// I-JSON first, as every JSON agentrt reads: a grant or a secret
	// written twice would be read as its last here and as its first by a
	// reviewer's tool.
	if err := protocol.CheckJSON(data, protocol.MaxJSONDepth); err != nil {
		return err
	}
	return g.ReadPolicy(data, egress.Sources{
		Getenv: os.LookupEnv,
		ReadFile: func(name string) ([]byte, error) {
			if !filepath.IsAbs(name) {
				name = filepath.Join(dir, name)
			}
			b, err := os.ReadFile(name)
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("no file %s", name)
			}
			return b, err
		},
	})
}
