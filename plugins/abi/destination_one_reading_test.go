package abi

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// oneReading says how ParseTarget and ParseDestination disagree on raw,
// or how a value they read does not read back from its String, or how
// what the host sends (net/url's reading of Target.String, the reader of
// Go's transport) is not what was checked; "" when they agree.
func oneReading(raw string) string {
	t, terr := ParseTarget(raw)
	d, derr := ParseDestination(raw)
	if terr == nil {
		if back, err := ParseTarget(t.String()); err != nil || back != t {
			return fmt.Sprintf("ParseTarget(%q) = %+v reads back from %q as %+v, %v", raw, t, t.String(), back, err)
		}
		if why := canonicalHost(t.Host); why != "" {
			return fmt.Sprintf("ParseTarget(%q) has the host %q, %s", raw, t.Host, why)
		}
		if why := sentAsChecked(t); why != "" {
			return fmt.Sprintf("ParseTarget(%q): %s", raw, why)
		}
		if t.Query == "" {
			// The canonical spelling of a URL without a query is a
			// destination, unless its path's escapes are not canonical.
			d2, err := ParseDestination(t.String())
			switch {
			case err != nil && !strings.Contains(err.Error(), "write the path's"):
				return fmt.Sprintf("ParseTarget(%q) = %s, which ParseDestination refuses: %v", raw, t, err)
			case err == nil && !sameRead(t, d2):
				return fmt.Sprintf("%q reads as the URL %+v and the destination %+v", t.String(), t, d2)
			}
		}
	}
	if derr == nil {
		if back, err := ParseDestination(d.String()); err != nil || back != d {
			return fmt.Sprintf("ParseDestination(%q) = %+v reads back from %q as %+v, %v", raw, d, d.String(), back, err)
		}
		if raw != d.String() && !(d.Path == "" && raw == d.String()+"/") {
			return fmt.Sprintf("ParseDestination(%q) accepts a spelling that is not %q", raw, d.String())
		}
		if why := canonicalHost(d.Host); why != "" {
			return fmt.Sprintf("ParseDestination(%q) has the host %q, %s", raw, d.Host, why)
		}
		if !d.Wildcard {
			// Every destination but a wildcard is a URL, read the same.
			switch {
			case terr != nil:
				return fmt.Sprintf("ParseDestination(%q) accepts what ParseTarget refuses: %v", raw, terr)
			case !sameRead(t, d):
				return fmt.Sprintf("%q reads as the URL %+v and the destination %+v", raw, t, d)
			case !d.Allows(t):
				return fmt.Sprintf("the destination %s does not allow the URL %s", d, t)
			}
		}
	}
	return ""
}

// sameRead reports whether t and d have the same scheme, host, port and
// path (a destination's "" being a URL's "/").
func sameRead(t Target, d Destination) bool {
	path := d.Path
	if path == "" {
		path = "/"
	}
	return !d.Wildcard && t.Scheme == d.Scheme && t.Host == d.Host && t.Port == d.Port && t.Path == path
}

// canonicalHost says how host is not in its canonical form, "" if it is.
func canonicalHost(host string) string {
	if strings.IndexByte(host, ':') >= 0 {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.String() != host {
			return "which holds a ':' and is not an IPv6 address as RFC 5952 writes it"
		}
		return ""
	}
	if host != strings.ToLower(host) || checkHostName(host, false) != nil {
		return "which is not a name in lower case or an IPv4 address"
	}
	return ""
}

// sentAsChecked says how the request Go's transport makes of t (from
// url.Parse(t.String()): its Host header, the address it dials, its
// request line) is not t, "" if it is t.
func sentAsChecked(t Target) string {
	u, err := url.Parse(t.String())
	if err != nil {
		return fmt.Sprintf("net/url cannot read %q: %v", t.String(), err)
	}
	port := ""
	if t.Port != defaultPort(t.Scheme) {
		port = strconv.Itoa(t.Port)
	}
	want := t.Path
	if t.Query != "" {
		want += "?" + t.Query
	}
	switch {
	case u.Scheme != t.Scheme || u.Hostname() != t.Host || u.Port() != port:
		return fmt.Sprintf("net/url reads %q as %s, %s, port %q", t.String(), u.Scheme, u.Hostname(), u.Port())
	case u.RequestURI() != want:
		return fmt.Sprintf("net/url sends %q as %q", t.String(), u.RequestURI())
	case u.User != nil || u.Fragment != "":
		return fmt.Sprintf("net/url reads user information or a fragment in %q", t.String())
	}
	return ""
}

// spellings are the pieces the test below and the fuzz target's seeds
// combine: each host, port and path a grant or a request may write, in
// canonical and other spellings.
var spellings = struct{ schemes, hosts, ports, paths []string }{
	schemes: []string{"http", "https", "HTTPS", "Http", "ftp"},
	hosts: []string{"api.example.com", "API.Example.com", "*.example.com", "*.EXAMPLE.com", "a_b.example",
		"127.0.0.1", "127.1", "2130706433", "0x7f000001", "0x7f.0.0.1", "1.2.3.0x4", "0177.0.0.1", "127.000.0.1",
		"example.com.", ".example.com", "exa..mple.com", "xn--bcher-kva.example",
		"[::1]", "[0:0:0:0:0:0:0:1]", "[::FFFF:7F00:1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[FE80::1]",
		"[fe80::1%25eth0]", "[127.0.0.1]", "*.[::1]", "*.127.0.0.1",
		"::1", "fe80::1", "a:b", "FE80::1", "example.com:80", "host:80:80", "[::1", "::1]", "[::1]x",
		"user@example.com", "", "*", "*."},
	ports: []string{"", ":80", ":443", ":8080", ":0", ":080", ":0443", ":65535", ":65536", ":+80", ":", ":-1"},
	paths: []string{"", "/", "/v1", "/v1/", "/V1/chat", "/a%2fb", "/a%3ab", "/a%3Ab", "/%7euser", "/~user", "/%41",
		"/v1/../admin", "/v1/%2e%2E/x", "/v1/..;/x", "/a;b=c", "/a[b]", "/a?q=1", "/a?", "?q", "/a#f", "/a b", "/a%zz"},
}

func TestParseTargetAndParseDestinationReadEveryURLOneWayInOneSpelling(t *testing.T) {
	n := 0
	for _, scheme := range spellings.schemes {
		for _, host := range spellings.hosts {
			for _, port := range spellings.ports {
				for _, path := range spellings.paths {
					raw := scheme + "://" + host + port + path
					if why := oneReading(raw); why != "" {
						t.Error(why)
					}
					n++
				}
			}
		}
	}
	for _, raw := range []string{"api.example.com", "https:/x", "https://", "https://" + strings.Repeat("a", 250) + ".example/" + strings.Repeat("b", MaxURLBytes-270),
		"http://[::ffff:7f00:1]/" + strings.Repeat("a", MaxURLBytes-24)} {
		if why := oneReading(raw); why != "" {
			t.Error(why)
		}
	}
	t.Logf("%d spellings", n)
}

func FuzzParseTargetAndParseDestination(f *testing.F) {
	for i, host := range spellings.hosts {
		scheme := spellings.schemes[i%len(spellings.schemes)]
		port := spellings.ports[i%len(spellings.ports)]
		path := spellings.paths[i%len(spellings.paths)]
		f.Add(scheme + "://" + host + port + path)
		f.Add("https://" + host + path)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if why := oneReading(raw); why != "" {
			t.Error(why)
		}
	})
}

func TestAGrantIsReadInItsCanonicalSpellingOnlyAndTheErrorSaysIt(t *testing.T) {
	for _, c := range []struct{ dest, why string }{
		{"HTTPS://api.example.com", "write the scheme in lower case: https"},
		{"https://API.example.com/v1", "write the host as api.example.com"},
		{"https://*.Example.com", "write the host as *.example.com"},
		{"http://[::FFFF:7F00:1]:9", "write the host as [::ffff:127.0.0.1]"},
		{"http://[0:0:0:0:0:0:0:1]", "write the host as [::1]"},
		{"http://[::0001]:8080", "write the host as [::1]"},
		{"https://api.example.com:443", "leave the port out: 443 is https's"},
		{"http://localhost:80/v1", "leave the port out: 80 is http's"},
		{"http://localhost:0080", "without leading zeros"},
		{"https://api.example.com/%7euser", "write the path's %7e as ~"},
		{"https://api.example.com/%41", "write the path's %41 as A"},
		{"https://api.example.com/a%3ab", "write the path's %3a as %3A"},
		{"https://api.example.com./", "empty label"},
		{"https://::1", "written in brackets"},
		{"https://fe80::1:8443", "written in brackets"},
		{"https://0x7f000001", "IPv4"},
	} {
		if d, err := ParseDestination(c.dest); err == nil {
			t.Errorf("ParseDestination(%q) = %v, want it refused", c.dest, d)
		} else if !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseDestination(%q): %q does not say %q", c.dest, err, c.why)
		}
	}
	for _, dest := range []string{"https://api.example.com", "https://api.example.com/", "https://*.example.com/v1/",
		"http://[::1]:9", "http://[::ffff:127.0.0.1]", "http://127.0.0.1:8080/x", "https://api.example.com/a%3Ab%20c", "https://a.example/~user"} {
		d, err := ParseDestination(dest)
		if err != nil {
			t.Errorf("ParseDestination(%q): %v", dest, err)
		} else if got := d.String(); got != strings.TrimSuffix(dest, "/") && got != dest {
			t.Errorf("ParseDestination(%q) = %s", dest, got)
		}
	}
}

func TestARequestsURLIsReadInCanonicalFormOrRefusedWhenItCouldBeReadTwoWays(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"HTTP://API.Example.COM:80/V1?Q=1", "http://api.example.com/V1?Q=1"},
		{"https://api.example.com:443", "https://api.example.com/"},
		{"http://[::FFFF:7F00:1]:80/", "http://[::ffff:127.0.0.1]/"},
		{"http://[0:0:0:0:0:0:0:1]:9/", "http://[::1]:9/"},
		{"https://api.example.com/%7euser/a%3ab", "https://api.example.com/%7euser/a%3ab"},
	} {
		if got, err := ParseTarget(c.raw); err != nil || got.String() != c.want {
			t.Errorf("ParseTarget(%q) = %s, %v, want %s", c.raw, got, err, c.want)
		}
	}
	for _, c := range []struct{ raw, why string }{
		{"http://a:b:80/", "written in brackets"},
		{"http://::1/", "written in brackets"},
		{"http://FE80::1:80/", "written in brackets"},
		{"http://example.com:80:80/", "written in brackets"},
		{"http://0x7f000001/", "IPv4"},
		{"http://0X7F.1/", "IPv4"},
		{"http://1.2.3.0x4/", "IPv4"},
		{"http://0x/", "IPv4"},
		{"http://[::1]:080/", "leading zeros"},
		{"http://example.com:0443/", "leading zeros"},
		{"http://example.com./", "empty label"},
	} {
		if got, err := ParseTarget(c.raw); err == nil {
			t.Errorf("ParseTarget(%q) = %s, want it refused", c.raw, got)
		} else if !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseTarget(%q): %q does not say %q", c.raw, err, c.why)
		}
	}
	// A path is compared as it is written: a grant's path spelled with
	// other escapes is another path, refused rather than let through.
	d, _ := ParseDestination("https://api.example.com/~user")
	for _, raw := range []string{"https://api.example.com/%7Euser", "https://api.example.com/%7euser/x"} {
		if target, err := ParseTarget(raw); err != nil || d.Allows(target) {
			t.Errorf("%s allows %s (%v)", d, raw, err)
		}
	}
}
