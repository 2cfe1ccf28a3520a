package egress

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

func names(ds []abi.Destination) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.String())
	}
	return strings.Join(out, " ")
}

func TestGrantsGiveAnAgentWhatTheOperatorGrantsWithinWhatItAsks(t *testing.T) {
	asked := dests(t, "https://api.openai.com/v1/", "https://*.example.com")
	for _, c := range []struct {
		name  string
		grant func(g *Grants)
		asks  bool
		want  string
		note  string
	}{
		{"nothing by default", func(g *Grants) {}, true, "", ""},
		{"all it asks", func(g *Grants) { g.Allow("a", "all") }, true, "https://api.openai.com/v1/ https://*.example.com", ""},
		{"all, for every agent", func(g *Grants) { g.Allow(Every, "all") }, true, "https://api.openai.com/v1/ https://*.example.com", ""},
		{"a subset", func(g *Grants) { g.Allow("a", "https://api.openai.com/v1/") }, true, "https://api.openai.com/v1/", ""},
		{"narrower than asked", func(g *Grants) { g.Allow("a", "https://eu.example.com/docs") }, true, "https://eu.example.com/docs", ""},
		{"wider than asked", func(g *Grants) { g.Allow("a", "https://api.openai.com") }, true, "https://api.openai.com/v1/", ""},
		{"not asked", func(g *Grants) { g.Allow("a", "https://evil.test") }, true, "", "does not ask for it"},
		{"another agent's", func(g *Grants) { g.Allow("b", "all") }, true, "", ""},
		{"no manifest: the list", func(g *Grants) { g.Allow("a", "https://evil.test") }, false, "https://evil.test", ""},
		{"no manifest: all is nothing", func(g *Grants) { g.Allow("a", "all") }, false, "", "asks for nothing"},
	} {
		g := NewGrants()
		c.grant(g)
		p, notes := g.For("a", asked, c.asks)
		if got := names(p.Allow); got != c.want {
			t.Errorf("%s: granted %q, want %q", c.name, got, c.want)
		}
		if (c.note == "") != (len(notes) == 0) || (c.note != "" && !strings.Contains(strings.Join(notes, "\n"), c.note)) {
			t.Errorf("%s: notes %q, want %q", c.name, notes, c.note)
		}
	}
}

func TestAPolicyFileGrantsDestinationsPrivateHostsAndSecrets(t *testing.T) {
	g := NewGrants()
	env := map[string]string{"OPENAI_KEY": "sk-from-the-environment"}
	files := map[string]string{"/run/secrets/gh": "ghp_from_a_file_value\n"}
	err := g.ReadPolicy([]byte(`{
		"agents": {
			"llm-agent": {"http": ["https://api.openai.com/v1/"], "private_hosts": ["localhost", "*.internal.test", "[::1]"]},
			"*": {"http": "all"}
		},
		"secrets": {
			"OPENAI_API_KEY": {"env": "OPENAI_KEY", "agents": ["llm-agent"], "destinations": ["https://api.openai.com/v1/"]},
			"GH": {"file": "/run/secrets/gh", "agents": ["*"], "destinations": ["https://api.github.com"]},
			"INLINE": {"value": "an-inline-value", "agents": ["other"], "destinations": ["https://x.test"]}
		}
	}`), Sources{
		Getenv:   func(n string) (string, bool) { v, ok := env[n]; return v, ok },
		ReadFile: func(n string) ([]byte, error) { return []byte(files[n]), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := g.For("llm-agent", dests(t, "https://api.openai.com/v1/", "https://example.com"), true)
	if got := names(p.Allow); got != "https://api.openai.com/v1/ https://example.com" {
		t.Errorf("granted %q", got)
	}
	if got := strings.Join(p.PrivateHosts, " "); got != "*.internal.test ::1 localhost" {
		t.Errorf("private hosts %q", got)
	}
	var held []string
	for _, s := range p.Secrets {
		held = append(held, s.Name+"="+s.Value)
	}
	if got := strings.Join(held, " "); got != "GH=ghp_from_a_file_value OPENAI_API_KEY=sk-from-the-environment" {
		t.Errorf("secrets %q", got)
	}
	if d := p.Secrets[1].Destinations; len(d) != 1 || d[0].String() != "https://api.openai.com/v1/" {
		t.Errorf("OPENAI_API_KEY is bound to %v", d)
	}
}

func TestAPolicyFileThatIsWrongIsRefusedSayingWhereWithoutItsSecrets(t *testing.T) {
	src := Sources{Getenv: func(string) (string, bool) { return "", false }, ReadFile: func(n string) ([]byte, error) { return nil, errors.New("no such file") }}
	for _, c := range []struct{ file, why string }{
		{`{"agents": {"a": {"htp": []}}}`, "unknown field"},
		{`{"agents": {"a": {"http": "some"}}}`, `agents.a.http: want "all" or a list`},
		{`{"agents": {"a": {"http": ["ftp://x"]}}}`, "agents.a.http: destination"},
		{`{"agents": {"a": {"private_hosts": ["a b"]}}}`, "agents.a.private_hosts"},
		{`{"secrets": {"K": {"env": "NOPE", "agents": ["a"], "destinations": ["https://x.test"]}}}`, "the environment variable NOPE is not set"},
		{`{"secrets": {"K": {"file": "/nope", "agents": ["a"], "destinations": ["https://x.test"]}}}`, "secrets.K: no such file"},
		{`{"secrets": {"K": {"value": "long-enough-value", "env": "X", "agents": ["a"], "destinations": ["https://x.test"]}}}`, "exactly one of"},
		{`{"secrets": {"K": {"value": "short", "agents": ["a"], "destinations": ["https://x.test"]}}}`, "at least 8"},
		{`{"secrets": {"K": {"value": "has a\nnewline", "agents": ["a"], "destinations": ["https://x.test"]}}}`, "control character"},
		{`{"secrets": {"K": {"value": "long-enough-value", "agents": ["a"]}}}`, "destinations"},
		{`{"secrets": {"K": {"value": "long-enough-value", "destinations": ["https://x.test"]}}}`, "agents"},
		{`{"secrets": {"bad-name": {"value": "long-enough-value", "agents": ["a"], "destinations": ["https://x.test"]}}}`, "secret name"},
		{`{} {}`, "data after"},
	} {
		err := NewGrants().ReadPolicy([]byte(c.file), src)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want %q", c.file, err, c.why)
			continue
		}
		for _, v := range []string{"long-enough-value", "has a\nnewline", "short"} {
			if strings.Contains(c.file, v) && strings.Contains(err.Error(), v) {
				t.Errorf("%s: the error holds the secret's value: %v", c.file, err)
			}
		}
	}
}

func TestTheExamplePolicyFileReads(t *testing.T) {
	data, err := os.ReadFile("testdata/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	err = NewGrants().ReadPolicy(data, Sources{
		Getenv:   func(string) (string, bool) { return "sk-0123456789", true },
		ReadFile: func(string) ([]byte, error) { return []byte("token-0123456789\n"), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
}
