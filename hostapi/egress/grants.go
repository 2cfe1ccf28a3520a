package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Grants are the operator's decisions, from a policy file and flags: for
// each agent, or every agent ("*"), the destinations it may reach ("all"
// it asks for, or a list), the hosts whose private addresses it may
// reach, and the secrets it holds. Nothing is granted by default.
type Grants struct {
	agents  map[string]*grant // by agent name; "*" for every agent
	secrets []heldSecret
}

// Every names every agent in Grants.
const Every = "*"

// grant is what the operator gave one agent (or every agent).
type grant struct {
	all          bool
	allow        []abi.Destination
	privateHosts []string
}

// heldSecret is a secret and the agents that hold it.
type heldSecret struct {
	Secret
	agents []string
}

// NewGrants returns grants that grant nothing.
func NewGrants() *Grants { return &Grants{agents: map[string]*grant{}} }

func (g *Grants) of(agent string) *grant {
	if g.agents[agent] == nil {
		g.agents[agent] = &grant{}
	}
	return g.agents[agent]
}

// Allow grants agent (Every: every agent) the destination dest, or, for
// "all", every destination its manifest asks for.
func (g *Grants) Allow(agent, dest string) error {
	if dest == "all" {
		g.of(agent).all = true
		return nil
	}
	d, err := abi.ParseDestination(dest)
	if err != nil {
		return fmt.Errorf("destination %q: %w", dest, err)
	}
	g.of(agent).allow = append(g.of(agent).allow, d)
	return nil
}

// AllowPrivate lets agent (Every: every agent) reach the non-public
// addresses of host: a name, "*.name" for its subdomains, or an address.
func (g *Grants) AllowPrivate(agent, host string) error {
	h, err := privateHost(host)
	if err != nil {
		return err
	}
	g.of(agent).privateHosts = append(g.of(agent).privateHosts, h)
	return nil
}

// privateHost reads a host allowed its private addresses: the host of a
// destination, in a destination's one spelling (abi.ParseDestination): a
// name in lower case, "*.name", an IPv4 address in dotted decimal or an
// IPv6 address in brackets as RFC 5952 writes it; no port (it is allowed
// on every port) and no path. It returns the host as the dialer names
// it: an IPv6 address without brackets.
func privateHost(host string) (string, error) {
	d, err := abi.ParseDestination("http://" + host)
	if err == nil && (d.Port != 80 || d.Path != "" || "http://"+host != d.String()) {
		err = errors.New("a private host has no port or path (it is allowed on every port)")
	}
	if err != nil {
		return "", fmt.Errorf("private host %q: want a name (localhost), *.name or an address (127.0.0.1, [::1]): %w", host, err)
	}
	if d.Wildcard {
		return "*." + d.Host, nil
	}
	return d.Host, nil
}

// AddSecret makes value the secret name of agents (Every: every agent),
// to be sent only to dests.
func (g *Grants) AddSecret(name, value string, agents, dests []string) error {
	if err := checkSecret(name, value); err != nil {
		return err
	}
	for _, s := range g.secrets {
		if s.Name == name {
			return fmt.Errorf("secret %s is given twice", name)
		}
	}
	if len(agents) == 0 {
		return fmt.Errorf("secret %s: name the agents that hold it", name)
	}
	if len(dests) == 0 {
		return fmt.Errorf("secret %s: name the destinations it may be sent to", name)
	}
	s := heldSecret{Secret: Secret{Name: name, Value: value}, agents: agents}
	for _, dest := range dests {
		d, err := abi.ParseDestination(dest)
		if err != nil {
			return fmt.Errorf("secret %s: destination %q: %w", name, dest, err)
		}
		s.Destinations = append(s.Destinations, d)
	}
	g.secrets = append(g.secrets, s)
	return nil
}

// For is the policy of agent, whose manifest asks for the destinations
// asked (asks is false when it has no capabilities.http): what the
// operator granted it and every agent, within what it asks for. An agent
// that asks for nothing gets what the operator listed for it ("all"
// grants it nothing). notes say what the operator granted that the
// manifest does not ask for, for the log.
func (g *Grants) For(agent string, asked []abi.Destination, asks bool) (p Policy, notes []string) {
	var all bool
	var listed []abi.Destination
	for _, name := range []string{Every, agent} {
		if gr := g.agents[name]; gr != nil {
			all = all || gr.all
			listed = append(listed, gr.allow...)
			p.PrivateHosts = append(p.PrivateHosts, gr.privateHosts...)
		}
	}
	switch {
	case !asks:
		p.Allow = listed
		if all {
			notes = append(notes, "--allow-http all grants what a manifest's capabilities.http asks for, and this agent asks for nothing")
		}
	default:
		if all {
			p.Allow = append(p.Allow, asked...)
		}
		for _, l := range listed {
			found := false
			for _, a := range asked {
				if d, ok := a.Intersect(l); ok {
					p.Allow, found = append(p.Allow, d), true
				}
			}
			if !found {
				notes = append(notes, fmt.Sprintf("%s is granted but the agent's manifest does not ask for it", l))
			}
		}
	}
	p.Allow = dedupe(p.Allow)
	p.PrivateHosts = dedupeStrings(p.PrivateHosts)
	for _, s := range g.secrets {
		if slices.Contains(s.agents, agent) || slices.Contains(s.agents, Every) {
			p.Secrets = append(p.Secrets, s.Secret)
		}
	}
	return p, notes
}

func dedupe(ds []abi.Destination) []abi.Destination {
	var out []abi.Destination
	for _, d := range ds {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

func dedupeStrings(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}

// PolicyFile is the operator's policy file, as JSON:
//
//	{
//	  "agents": {
//	    "llm-agent": {"http": ["https://api.openai.com/v1/"], "private_hosts": []},
//	    "*": {"http": "all"}
//	  },
//	  "secrets": {
//	    "OPENAI_API_KEY": {"env": "OPENAI_API_KEY", "agents": ["llm-agent"],
//	                       "destinations": ["https://api.openai.com/v1/"]}
//	  }
//	}
//
// A secret's value is in the environment variable "env", in the file
// "file" (one trailing newline dropped; relative to the policy file), or
// in "value".
type policyFile struct {
	Agents map[string]struct {
		HTTP         json.RawMessage `json:"http"`
		PrivateHosts []string        `json:"private_hosts"`
	} `json:"agents"`
	Secrets map[string]struct {
		Env          string   `json:"env"`
		File         string   `json:"file"`
		Value        string   `json:"value"`
		Agents       []string `json:"agents"`
		Destinations []string `json:"destinations"`
	} `json:"secrets"`
}

// policyNames are the member names of a policy file's objects, as
// written: encoding/json matches "SECRETS" to secrets, which a reviewer's
// jq .secrets does not see.
var policyNames = struct{ top, agent, secret []string }{
	top:    []string{"agents", "secrets"},
	agent:  []string{"http", "private_hosts"},
	secret: []string{"env", "file", "value", "agents", "destinations"},
}

// policyNamesAsWritten refuses a member of a policy file (decoded
// already, so well formed) named as one of its fields only in another
// case.
func policyNamesAsWritten(data []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return err
	}
	if err := namesAsWritten("", top, policyNames.top); err != nil {
		return err
	}
	for _, section := range []struct {
		name  string
		names []string
	}{{"agents", policyNames.agent}, {"secrets", policyNames.secret}} {
		var entries map[string]map[string]json.RawMessage
		if raw, ok := top[section.name]; !ok || json.Unmarshal(raw, &entries) != nil {
			continue // absent, or null: nothing named in it
		}
		for key, members := range entries {
			if err := namesAsWritten(section.name+"."+key+".", members, section.names); err != nil {
				return err
			}
		}
	}
	return nil
}

// namesAsWritten refuses a name of members that is one of names only in
// another case.
func namesAsWritten(at string, members map[string]json.RawMessage, names []string) error {
	for m := range members {
		for _, n := range names {
			if m != n && strings.EqualFold(m, n) {
				return fmt.Errorf("%s%s: member names are case-sensitive; did you mean %q?", at, m, n)
			}
		}
	}
	return nil
}

// Sources are where a policy file's secrets come from.
type Sources struct {
	// Getenv returns an environment variable and whether it is set.
	Getenv func(name string) (string, bool)
	// ReadFile reads a file named in the policy file.
	ReadFile func(name string) ([]byte, error)
}

// ReadPolicy adds the grants of a policy file's data to g. Its errors
// name the field and never hold a secret's value.
func (g *Grants) ReadPolicy(data []byte, src Sources) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f policyFile
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("not a policy: %w", err)
	}
	if dec.More() {
		return errors.New("not a policy: data after the object")
	}
	if err := policyNamesAsWritten(data); err != nil {
		return fmt.Errorf("not a policy: %w", err)
	}
	agents := make([]string, 0, len(f.Agents))
	for name := range f.Agents {
		agents = append(agents, name)
	}
	sort.Strings(agents)
	for _, name := range agents {
		a := f.Agents[name]
		if len(a.HTTP) > 0 && !bytes.Equal(a.HTTP, []byte("null")) {
			var all string
			var list []string
			switch {
			case json.Unmarshal(a.HTTP, &all) == nil && all == "all":
				g.of(name).all = true
			case json.Unmarshal(a.HTTP, &list) == nil:
				for _, d := range list {
					if err := g.Allow(name, d); err != nil {
						return fmt.Errorf("agents.%s.http: %w", name, err)
					}
				}
			default:
				return fmt.Errorf(`agents.%s.http: want "all" or a list of destinations`, name)
			}
		}
		for _, h := range a.PrivateHosts {
			if err := g.AllowPrivate(name, h); err != nil {
				return fmt.Errorf("agents.%s.private_hosts: %w", name, err)
			}
		}
	}
	names := make([]string, 0, len(f.Secrets))
	for name := range f.Secrets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := f.Secrets[name]
		var value string
		switch {
		case s.Env != "" && s.File == "" && s.Value == "":
			v, ok := src.Getenv(s.Env)
			if !ok || v == "" {
				return fmt.Errorf("secrets.%s: the environment variable %s is not set", name, s.Env)
			}
			value = v
		case s.File != "" && s.Env == "" && s.Value == "":
			b, err := src.ReadFile(s.File)
			if err != nil {
				return fmt.Errorf("secrets.%s: %w", name, err)
			}
			value = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		case s.Value != "" && s.Env == "" && s.File == "":
			value = s.Value
		default:
			return fmt.Errorf("secrets.%s: give exactly one of env, file and value", name)
		}
		if err := g.AddSecret(name, value, s.Agents, s.Destinations); err != nil {
			return err // it names the secret
		}
	}
	return nil
}
