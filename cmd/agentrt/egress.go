package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

// addEgressFlags defines the flags of outbound HTTP on fs; the returned
// function applies them once fs is parsed.
func addEgressFlags(fs *flag.FlagSet, cfg *egressConfig) (apply func() error) {
	cfg.limits = egress.DefaultLimits
	maxRequest, maxResponse := size(cfg.limits.MaxRequestBytes), size(cfg.limits.MaxResponseBytes)
	var policyFile string
	var allow, private, secrets []string
	fs.DurationVar(&cfg.limits.Timeout, "http-timeout", cfg.limits.Timeout, "time limit of one outbound HTTP request of a plugin, within its handler call's")
	fs.IntVar(&cfg.limits.MaxRequests, "max-http-requests", cfg.limits.MaxRequests, "outbound HTTP requests one handler call may make")
	fs.Var(&maxRequest, "max-http-request", "limit (a `SIZE`) of the body of one outbound HTTP request")
	fs.Var(&maxResponse, "max-http-response", "limit (a `SIZE`) of the body of the response to one outbound HTTP request")
	fs.StringVar(&policyFile, "http-policy", "", "a JSON `FILE` granting agents destinations, private hosts and secrets (docs/SECURITY.md, \"Outbound HTTP\")")
	fs.Func("allow-http", "grant [`AGENT=]DEST`: a destination (https://api.example.com/v1), or all that the agent's manifest asks for (AGENT=all); without AGENT=, every agent (repeatable)", func(v string) error {
		allow = append(allow, v)
		return nil
	})
	fs.Func("allow-private-host", "let [`AGENT=]HOST` (a name, *.name or an address) be reached on loopback, private and link-local addresses (repeatable)", func(v string) error {
		private = append(private, v)
		return nil
	})
	fs.Func("secret-env", "hold the environment variable NAME as the secret NAME, sent only to DEST: [`AGENT=]NAME@DEST` (repeatable)", func(v string) error {
		secrets = append(secrets, v)
		return nil
	})
	return func() error {
		cfg.limits.MaxRequestBytes, cfg.limits.MaxResponseBytes = int64(maxRequest), int64(maxResponse)
		switch {
		case cfg.limits.Timeout <= 0:
			return &usageError{fmt.Sprintf("bad -http-timeout %s: want more than 0s", cfg.limits.Timeout)}
		case cfg.limits.MaxRequests < 0:
			return &usageError{fmt.Sprintf("bad -max-http-requests %d: want 0 or more", cfg.limits.MaxRequests)}
		}
		cfg.grants = egress.NewGrants()
		if policyFile != "" {
			if err := readPolicyFile(cfg.grants, policyFile); err != nil {
				return err
			}
		}
		for _, v := range allow {
			agent, dest := agentPrefix(v)
			if err := cfg.grants.Allow(agent, dest); err != nil {
				return &usageError{fmt.Sprintf("bad -allow-http %q: %v", v, err)}
			}
		}
		for _, v := range private {
			agent, host := agentPrefix(v)
			if err := cfg.grants.AllowPrivate(agent, host); err != nil {
				return &usageError{fmt.Sprintf("bad -allow-private-host %q: %v", v, err)}
			}
		}
		for _, v := range secrets {
			agent, rest := agentPrefix(v)
			name, dest, ok := strings.Cut(rest, "@")
			if !ok {
				return &usageError{fmt.Sprintf("bad -secret-env %q: want [AGENT=]NAME@DEST", v)}
			}
			value, set := os.LookupEnv(name)
			if !set || value == "" {
				return &usageError{fmt.Sprintf("bad -secret-env %q: the environment variable %s is not set", v, name)}
			}
			if err := cfg.grants.AddSecret(name, value, []string{agent}, []string{dest}); err != nil {
				return &usageError{fmt.Sprintf("bad -secret-env %q: %v", v, err)}
			}
		}
		return nil
	}
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
	// I-JSON first, as every JSON agentrt reads: a grant or a secret
	// written twice would be read as its last here and as its first by a
	// reviewer's tool.
	if err := protocol.CheckJSON(data, protocol.MaxJSONDepth); err != nil {
		return fmt.Errorf("http policy %s: %w", path, err)
	}
	err = g.ReadPolicy(data, egress.Sources{
		Getenv: os.LookupEnv,
		ReadFile: func(name string) ([]byte, error) {
			if !filepath.IsAbs(name) {
				name = filepath.Join(filepath.Dir(path), name)
			}
			b, err := os.ReadFile(name)
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("no file %s", name)
			}
			return b, err
		},
	})
	if err != nil {
		return fmt.Errorf("http policy %s: %w", path, err)
	}
	return nil
}
