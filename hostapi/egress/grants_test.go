package egress

import (
	"encoding/json"
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
		// Names as written: encoding/json would take these as the fields,
		// which a reviewer's jq .secrets or .agents does not see.
		{`{"SECRETS": {"K": {"value": "long-enough-value", "agents": ["a"], "destinations": ["https://x.test"]}}}`, `SECRETS: member names are case-sensitive; did you mean "secrets"?`},
		{`{"agents": {"a": {"HTTP": "all"}}}`, `agents.a.HTTP: member names are case-sensitive; did you mean "http"?`},
		{`{"secrets": {"K": {"value": "long-enough-value", "Agents": ["*"], "destinations": ["https://x.test"]}}}`, `secrets.K.Agents: member names are case-sensitive`},
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

// What an operator writes is read in a destination's one spelling
// (abi.ParseDestination), by every door a grant comes in: --allow-http
// (Allow), --secret-env (AddSecret), --allow-private-host (AllowPrivate)
// and a policy file. Another spelling is refused with the canonical one
// in the error, never read as something else.
func TestTheOperatorsGrantsAreReadInTheirOneSpellingByEveryDoor(t *testing.T) {
	src := Sources{Getenv: func(string) (string, bool) { return "", false }, ReadFile: func(string) ([]byte, error) { return nil, nil }}
	for _, c := range []struct{ dest, why string }{
		{"HTTPS://api.openai.com/v1/", "write the scheme in lower case: https"},
		{"https://API.OpenAI.com/v1/", "write the host as api.openai.com"},
		{"https://*.Example.com", "write the host as *.example.com"},
		{"https://api.openai.com:443/v1/", "leave the port out: 443 is https's"},
		{"http://[::FFFF:7F00:1]:8080", "write the host as [::ffff:127.0.0.1]"},
		{"http://::1:8080", "an IPv6 address is written in brackets"},
		{"http://localhost:08080", "without leading zeros"},
		{"https://api.openai.com/%7ev1", "write the path's %7e as ~"},
		{"https://api.openai.com./v1", "empty label"},
		{"https://0x7f000001", "IPv4"},
	} {
		quoted, _ := json.Marshal(c.dest)
		for door, grant := range map[string]func() error{
			"--allow-http": func() error { return NewGrants().Allow("a", c.dest) },
			"--secret-env": func() error { return NewGrants().AddSecret("K", "long-enough-value", []string{"a"}, []string{c.dest}) },
			"policy http": func() error {
				return NewGrants().ReadPolicy([]byte(`{"agents": {"a": {"http": [`+string(quoted)+`]}}}`), src)
			},
			"policy secret": func() error {
				return NewGrants().ReadPolicy([]byte(`{"secrets": {"K": {"value": "long-enough-value", "agents": ["a"], "destinations": [`+string(quoted)+`]}}}`), src)
			},
		} {
			if err := grant(); err == nil || !strings.Contains(err.Error(), c.why) {
				t.Errorf("%s %s: %v, want %q", door, c.dest, err, c.why)
			}
		}
	}
	g := NewGrants()
	for _, dest := range []string{"https://api.openai.com/v1/", "https://*.example.com", "http://[::ffff:127.0.0.1]:8080", "http://127.0.0.1:8080/", "https://api.openai.com/a%3Ab"} {
		if err := g.Allow("a", dest); err != nil {
			t.Errorf("--allow-http %s: %v", dest, err)
		}
	}
	p, _ := g.For("a", nil, false)
	if got := names(p.Allow); got != "https://api.openai.com/v1/ https://*.example.com http://[::ffff:127.0.0.1]:8080 http://127.0.0.1:8080 https://api.openai.com/a%3Ab" {
		t.Errorf("granted %q", got)
	}
}

// A host allowed its private addresses is a destination's host in its
// one spelling, kept as the dialer names the host of a request to it:
// the host of the URL the policy read (abi.Target.Host), which is what
// privateAllowed compares it with.
func TestAPrivateHostIsADestinationsHostInItsOneSpelling(t *testing.T) {
	for _, host := range []string{"localhost", "*.internal.test", "127.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "[fd00::1]", "a_b.internal"} {
		got, err := privateHost(host)
		if err != nil {
			t.Errorf("privateHost(%q): %v", host, err)
			continue
		}
		want := strings.TrimPrefix(host, "*.")
		if target, err := abi.ParseTarget("http://" + want + ":8080/x"); err != nil {
			t.Errorf("a request to %s: %v", want, err)
		} else if want = target.Host; strings.HasPrefix(host, "*.") {
			want = "*." + want
		}
		if got != want {
			t.Errorf("privateHost(%q) = %q, want %q, the host of a request to it", host, got, want)
		}
	}
	for _, c := range []struct{ host, why string }{
		{"LOCALHOST", "write the host as localhost"},
		{"*.Internal.test", "write the host as *.internal.test"},
		{"::1", "an IPv6 address is written in brackets"},
		{"[::0001]", "write the host as [::1]"},
		{"[::FFFF:7F00:1]", "write the host as [::ffff:127.0.0.1]"},
		{"[[::1]]", "IPv6"},
		{"[::1", "closing"},
		{"::1]", "brackets"},
		{"fe80::1%eth0", "escape"},
		{"[fe80::1%25eth0]", "zone"},
		{"localhost:8080", "no port or path"},
		{"localhost:80", "leave the port out"},
		{"localhost/", "no port or path"},
		{"localhost/x", "no port or path"},
		{"localhost.", "empty label"},
		{"127.1", "IPv4"},
		{"0x7f000001", "IPv4"},
		{"*.127.0.0.1", "names, not addresses"},
		{"", "no host"},
		{"a b", "a URL may not"},
		{"user@localhost", "user information"},
	} {
		got, err := privateHost(c.host)
		switch {
		case err == nil:
			t.Errorf("privateHost(%q) = %q, want it refused", c.host, got)
		case !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "private host"):
			t.Errorf("privateHost(%q): %q does not say %q", c.host, err, c.why)
		}
	}
	for door, grant := range map[string]func() error{
		"--allow-private-host": func() error { return NewGrants().AllowPrivate("a", "::1") },
		"policy private_hosts": func() error {
			return NewGrants().ReadPolicy([]byte(`{"agents": {"a": {"private_hosts": ["::1"]}}}`), Sources{})
		},
	} {
		if err := grant(); err == nil || !strings.Contains(err.Error(), "[::1]") {
			t.Errorf("%s ::1: %v, want it refused saying [::1]", door, err)
		}
	}
}
