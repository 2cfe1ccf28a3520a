package abi

import (
	"strings"
	"testing"
)

func TestParseTargetReadsWhatIsSentAndRefusesWhatCouldBeReadTwoWays(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want string // the URL sent; "" when refused
		why  string // what the refusal says
	}{
		{"https://API.Example.com/v1/chat?x=1", "https://api.example.com/v1/chat?x=1", ""},
		{"HTTP://example.com", "http://example.com/", ""},
		{"http://example.com:80/a", "http://example.com/a", ""},
		{"http://example.com:8080", "http://example.com:8080/", ""},
		{"http://127.0.0.1:9/", "http://127.0.0.1:9/", ""},
		{"http://[::1]:9/", "http://[::1]:9/", ""},
		{"http://[::ffff:127.0.0.1]/", "http://[::ffff:127.0.0.1]/", ""},
		{"http://a_b.example/x;p=1", "http://a_b.example/x;p=1", ""},
		{"http://example.com/a%20b", "http://example.com/a%20b", ""},
		{"ftp://example.com/", "", "scheme"},
		{"example.com/x", "", "not absolute"},
		{"http://user:pw@example.com/", "", "user information"},
		{"http://example.com/#top", "", "fragment"},
		{"http://example.com/a b", "", "character"},
		{"http://example.com/{{secret:KEY}}", "", "secrets go in headers"},
		{"http://example.com\\@evil.com/", "", "character"},
		{"http://example.com/%zz", "", "escape"},
		{"http://example.com/v1/../admin", "", ". or .. segment"},
		{"http://example.com/v1/%2e%2E/admin", "", ". or .. segment"},
		{"http://example.com/v1/..;/admin", "", ". or .. segment"},
		{"http://example.com/v1/./x", "", ". or .. segment"},
		{"http://example.com/v1%2f..%2fadmin", "", "escaped"},
		{"http://example.com/v1%5Cadmin", "", "escaped"},
		{"http://2130706433/", "", "IPv4"},
		{"http://0177.0.0.1/", "", "IPv4"},
		{"http://127.1/", "", "IPv4"},
		{"http://example.com./", "", "empty label"},
		{"http://exa..mple.com/", "", "empty label"},
		{"http://ex%61mple.com/", "", "character"},
		{"http://bücher.example/", "", "character"},
		{"http://[fe80::1%25eth0]/", "", "IPv6"},
		{"http://[::1/", "", "closing"},
		{"http://example.com:0/", "", "port"},
		{"http://example.com:65536/", "", "port"},
		{"http://example.com:+80/", "", "port"},
		{"http://example.com:/", "", "port"},
		{"http:///x", "", "no host"},
		{"http://" + strings.Repeat("a", MaxURLBytes) + "/", "", "over"},
	} {
		got, err := ParseTarget(c.raw)
		switch {
		case c.want != "" && err != nil:
			t.Errorf("ParseTarget(%q): %v", c.raw, err)
		case c.want != "" && got.String() != c.want:
			t.Errorf("ParseTarget(%q) = %s, want %s", c.raw, got, c.want)
		case c.want == "" && err == nil:
			t.Errorf("ParseTarget(%q) = %s, want it refused", c.raw, got)
		case c.want == "" && !strings.Contains(err.Error(), c.why):
			t.Errorf("ParseTarget(%q): %q does not say %q", c.raw, err, c.why)
		case err != nil && strings.Contains(err.Error(), c.raw):
			t.Errorf("ParseTarget(%q): %q repeats the URL", c.raw, err)
		}
	}
}

func TestDestinationsAllowTheirOriginsSubdomainsAndPathPrefixesOnly(t *testing.T) {
	for _, c := range []struct {
		dest    string
		allowed []string
		refused []string
	}{
		{"https://api.openai.com",
			[]string{"https://api.openai.com/", "https://API.openai.com:443/v1/chat?a=1"},
			[]string{"http://api.openai.com/", "https://api.openai.com:8443/", "https://x.api.openai.com/", "https://api.openai.com.evil.com/", "https://openai.com/"}},
		{"https://api.openai.com/v1",
			[]string{"https://api.openai.com/v1", "https://api.openai.com/v1/", "https://api.openai.com/v1/chat/completions"},
			[]string{"https://api.openai.com/", "https://api.openai.com/v10", "https://api.openai.com/v2/x", "https://api.openai.com/V1/x"}},
		{"https://api.openai.com/v1/",
			[]string{"https://api.openai.com/v1/", "https://api.openai.com/v1/x"},
			[]string{"https://api.openai.com/v1", "https://api.openai.com/v1x"}},
		{"https://*.example.com",
			[]string{"https://a.example.com/", "https://a.b.example.com/x"},
			[]string{"https://example.com/", "https://aexample.com/", "https://a.example.com.evil/", "http://a.example.com/"}},
		{"http://localhost:8080/",
			[]string{"http://localhost:8080/", "http://localhost:8080/anything"},
			[]string{"http://localhost/", "http://localhost:8081/", "http://127.0.0.1:8080/"}},
		{"http://[::1]:9",
			[]string{"http://[::1]:9/", "http://[0:0::1]:9/"},
			[]string{"http://[::2]:9/", "http://localhost:9/"}},
	} {
		d, err := ParseDestination(c.dest)
		if err != nil {
			t.Fatalf("ParseDestination(%q): %v", c.dest, err)
		}
		if back, err := ParseDestination(d.String()); err != nil || back != d {
			t.Errorf("%q reads back from %q as %+v, %v", c.dest, d.String(), back, err)
		}
		for _, u := range c.allowed {
			if target, err := ParseTarget(u); err != nil || !d.Allows(target) {
				t.Errorf("%s does not allow %s (%v)", c.dest, u, err)
			}
		}
		for _, u := range c.refused {
			if target, err := ParseTarget(u); err == nil && d.Allows(target) {
				t.Errorf("%s allows %s", c.dest, u)
			}
		}
	}
}

func TestParseDestinationRefusesWhatIsNoDestination(t *testing.T) {
	for _, c := range []struct{ dest, why string }{
		{"api.openai.com", "want a destination"},
		{"ftp://example.com", "scheme"},
		{"https://example.com/?q=1", "no query"},
		{"https://*.127.0.0.1", "names, not addresses"},
		{"https://*.[::1]", "names, not addresses"},
		{"https://a.*.example.com", "character"},
		{"https://*", "character"}, {"https://*.", "no host"},
		{"https://example.com/a/../b", ". or .."},
		{"https://u@example.com", "user information"},
	} {
		if d, err := ParseDestination(c.dest); err == nil {
			t.Errorf("ParseDestination(%q) = %v, want it refused", c.dest, d)
		} else if !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseDestination(%q): %q does not say %q", c.dest, err, c.why)
		}
	}
}

func TestIntersectIsTheNarrowerDestinationWhereOneHoldsTheOther(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"https://api.openai.com", "https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"https://*.openai.com", "https://api.openai.com/v1/", "https://api.openai.com/v1/"},
		{"https://*.example.com", "https://*.eu.example.com", "https://*.eu.example.com"},
		{"https://*.example.com/a", "https://x.example.com/a/b", "https://x.example.com/a/b"},
		{"https://*.example.com", "https://example.com", ""},
		{"https://a.example.com/x", "https://a.example.com/y", ""},
		{"https://a.example.com", "http://a.example.com", ""},
		{"https://a.example.com", "https://a.example.com:8443", ""},
		{"https://*.a.example", "https://*.b.example", ""},
	} {
		a, err1 := ParseDestination(c.a)
		b, err2 := ParseDestination(c.b)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		for _, pair := range [][2]Destination{{a, b}, {b, a}} {
			got, ok := pair[0].Intersect(pair[1])
			switch {
			case c.want == "" && ok:
				t.Errorf("%s ∩ %s = %s, want none", pair[0], pair[1], got)
			case c.want != "" && (!ok || got.String() != c.want):
				t.Errorf("%s ∩ %s = %s (%v), want %s", pair[0], pair[1], got, ok, c.want)
			}
		}
	}
}

func TestCheckRequestHeaderRefusesWhatTheHostOwns(t *testing.T) {
	for _, name := range []string{"Host", "host", "Connection", "Keep-Alive", "TE", "Trailer", "Transfer-Encoding",
		"Upgrade", "Proxy-Authorization", "Proxy-Connection", "Proxy-Anything", "Content-Length", "Expect", "Accept-Encoding"} {
		if why := CheckRequestHeader(name, "x"); !strings.Contains(why, "refused") {
			t.Errorf("CheckRequestHeader(%q) = %q, want it refused", name, why)
		}
	}
	for _, c := range []struct{ name, value, why string }{
		{"", "x", "no name"},
		{"X Y", "x", "name"},
		{"X:Y", "x", "name"},
		{"{{secret:A}}", "x", "name"},
		{"X-A", "a\r\nHost: evil", "control"},
		{"X-A", "a\x00", "control"},
		{"X-A", strings.Repeat("v", MaxHTTPHeaderBytes), "over"},
	} {
		if why := CheckRequestHeader(c.name, c.value); !strings.Contains(why, c.why) {
			t.Errorf("CheckRequestHeader(%q, %q) = %q, want %q", c.name, c.value, why, c.why)
		}
	}
	for _, h := range [][2]string{{"Authorization", "Bearer {{secret:KEY}}"}, {"Content-Type", "application/json"}, {"X-Tab", "a\tb"}} {
		if why := CheckRequestHeader(h[0], h[1]); why != "" {
			t.Errorf("CheckRequestHeader(%q, %q) = %q", h[0], h[1], why)
		}
	}
}

func TestSecretPlaceholdersAreNamedAndExpanded(t *testing.T) {
	names, why := SecretNames("Bearer {{secret:A_1}} and {{secret:b}}")
	if why != "" || strings.Join(names, ",") != "A_1,b" {
		t.Fatalf("SecretNames = %v, %q", names, why)
	}
	got := ExpandSecrets("Bearer {{secret:A_1}} and {{secret:b}}!", func(n string) string { return "<" + n + ">" })
	if got != "Bearer <A_1> and <b>!" {
		t.Errorf("ExpandSecrets = %q", got)
	}
	for _, bad := range []string{"{{secret:A", "{{secret:}}", "{{secret:1A}}", "{{secret:a-b}}", "{{secret:" + strings.Repeat("a", 65) + "}}"} {
		if _, why := SecretNames(bad); why == "" {
			t.Errorf("SecretNames(%q) accepts it", bad)
		}
	}
	if got := CanonicalHeaderName("content-TYPE"); got != "Content-Type" {
		t.Errorf("CanonicalHeaderName = %q", got)
	}
}
