package abi

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// Where a plugin's outbound requests may go. A manifest asks for
// destinations (capabilities.http), the operator grants them, and a
// secret is bound to them, all in one syntax:
//
//	scheme://host[:port][/path-prefix]
//
// scheme is http or https; host is a name, an IPv4 address or an IPv6
// address in brackets, or "*.name" for every subdomain of name (not name
// itself); a port left out is the scheme's (80, 443); a path prefix
// matches whole segments ("/v1" matches "/v1" and "/v1/chat", not
// "/v10"). A request's URL is read by ParseTarget, as strictly, so that
// what the policy checks is what is sent.

// Target is an absolute http or https URL as the policy reads it and the
// host sends it.
type Target struct {
	Scheme string // "http" or "https"
	// Host is in lower case: a name, an IPv4 address, or an IPv6 address
	// (without brackets).
	Host string
	Port int // as the URL gives it, or the scheme's
	// Path is the escaped path, "/" at least; Query the escaped query,
	// without its '?'.
	Path  string
	Query string
}

// Destination is a place outbound requests may go: an http or https
// origin, or every subdomain of a name, and a path prefix.
type Destination struct {
	Scheme string
	// Host is in lower case; for a wildcard, the name whose subdomains
	// match, without "*.".
	Host     string
	Wildcard bool
	Port     int    // as given, or the scheme's
	Path     string // a prefix of whole segments; "" for every path
}

// defaultPort is a scheme's port.
func defaultPort(scheme string) int {
	if scheme == "https" {
		return 443
	}
	return 80
}

// ParseTarget reads an absolute http or https URL, refusing what the host
// will not send or could read two ways: over MaxURLBytes, characters
// RFC 3986 does not allow or a space, user information, a fragment, a
// host that is not a plain name or address, a path with "." or ".."
// segments (also escaped, also before a ';') or an escaped '/' or '\'.
// The error says what is wrong without repeating the URL.
func ParseTarget(raw string) (Target, error) {
	var t Target
	if len(raw) > MaxURLBytes {
		return t, errors.New("the URL is over " + strconv.Itoa(MaxURLBytes) + " bytes")
	}
	if why := urlChars(raw); why != "" {
		return t, errors.New("the URL " + why)
	}
	if strings.IndexByte(raw, '#') >= 0 {
		return t, errors.New("the URL has a fragment (#…), which is never sent: leave it out")
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return t, errors.New("the URL is not absolute: want http://… or https://…")
	}
	t.Scheme = strings.ToLower(scheme)
	if t.Scheme != "http" && t.Scheme != "https" {
		return t, errors.New("the URL's scheme is not http or https")
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	var err error
	if t.Host, t.Port, err = parseAuthority(rest[:end], false); err != nil {
		return t, err
	}
	if t.Port == 0 {
		t.Port = defaultPort(t.Scheme)
	}
	rest = rest[end:]
	path, query, _ := strings.Cut(rest, "?")
	if path == "" {
		path = "/"
	}
	if err := checkPath(path); err != nil {
		return t, err
	}
	if err := checkEscapes(query); err != nil {
		return t, errors.New("the URL's query " + err.Error())
	}
	t.Path, t.Query = path, query
	return t, nil
}

// String is the URL as the host sends it.
func (t Target) String() string {
	s := t.Scheme + "://" + hostPort(t.Host, t.Port, t.Scheme) + t.Path
	if t.Query != "" {
		s += "?" + t.Query
	}
	return s
}

// Origin is the target without its path and query.
func (t Target) Origin() string { return t.Scheme + "://" + hostPort(t.Host, t.Port, t.Scheme) }

// hostPort writes a host and its port, the port only when it is not the
// scheme's, an IPv6 address in brackets.
func hostPort(host string, port int, scheme string) string {
	if strings.IndexByte(host, ':') >= 0 {
		host = "[" + host + "]"
	}
	if port != defaultPort(scheme) {
		host += ":" + strconv.Itoa(port)
	}
	return host
}

// ParseDestination reads a destination. The error says what is wrong.
func ParseDestination(s string) (Destination, error) {
	var d Destination
	if len(s) > MaxURLBytes {
		return d, errors.New("a destination is over " + strconv.Itoa(MaxURLBytes) + " bytes")
	}
	if why := urlChars(s); why != "" {
		return d, errors.New("the destination " + why)
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return d, errors.New("want a destination such as https://api.example.com or https://*.example.com/v1")
	}
	d.Scheme = strings.ToLower(scheme)
	if d.Scheme != "http" && d.Scheme != "https" {
		return d, errors.New("a destination's scheme is http or https")
	}
	if strings.ContainsAny(rest, "?#") {
		return d, errors.New("a destination has no query or fragment")
	}
	end := strings.IndexByte(rest, '/')
	if end < 0 {
		end = len(rest)
	}
	host := rest[:end]
	if strings.HasPrefix(host, "*.") {
		d.Wildcard, host = true, host[2:]
	}
	var err error
	if d.Host, d.Port, err = parseAuthority(host, d.Wildcard); err != nil {
		return d, err
	}
	if d.Port == 0 {
		d.Port = defaultPort(d.Scheme)
	}
	if path := rest[end:]; path != "" && path != "/" {
		if err := checkPath(path); err != nil {
			return d, err
		}
		d.Path = path
	}
	return d, nil
}

// String is the destination as ParseDestination reads it.
func (d Destination) String() string {
	host := d.Host
	if d.Wildcard {
		host = "*." + host
	}
	return d.Scheme + "://" + hostPort(host, d.Port, d.Scheme) + d.Path
}

// Allows reports whether a request to t may go to d.
func (d Destination) Allows(t Target) bool {
	return d.Scheme == t.Scheme && d.Port == t.Port && d.hostMatches(t.Host) && pathCovers(d.Path, t.Path)
}

// hostMatches reports whether host is d's, or a subdomain of a wildcard's.
func (d Destination) hostMatches(host string) bool {
	if !d.Wildcard {
		return host == d.Host
	}
	return strings.HasSuffix(host, "."+d.Host) && strings.IndexByte(host, ':') < 0
}

// Intersect is the destinations both d and o allow, when that is one
// destination: the narrower, where one holds the other.
func (d Destination) Intersect(o Destination) (Destination, bool) {
	if d.Scheme != o.Scheme || d.Port != o.Port {
		return Destination{}, false
	}
	out := d
	switch {
	case !d.Wildcard && !o.Wildcard:
		if d.Host != o.Host {
			return Destination{}, false
		}
	case d.Wildcard && o.Wildcard:
		switch {
		case d.Host == o.Host || o.hostMatches(d.Host): // d is the narrower
		case d.hostMatches(o.Host):
			out.Host = o.Host
		default:
			return Destination{}, false
		}
	case d.Wildcard:
		if !d.hostMatches(o.Host) {
			return Destination{}, false
		}
		out.Host, out.Wildcard = o.Host, false
	default:
		if !o.hostMatches(d.Host) {
			return Destination{}, false
		}
	}
	switch {
	case pathCovers(d.Path, o.Path):
		out.Path = o.Path
	case pathCovers(o.Path, d.Path):
		out.Path = d.Path
	default:
		return Destination{}, false
	}
	return out, true
}

// pathCovers reports whether the path prefix prefix holds path: its
// segments are path's first.
func pathCovers(prefix, path string) bool {
	if prefix == "" || path == prefix {
		return true
	}
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return strings.HasSuffix(prefix, "/") || path[len(prefix)] == '/'
}

// urlChars says what is wrong with the characters of a URL, "" if
// nothing: each is printable ASCII that RFC 3986 allows, so no space,
// '"', '<', '>', '\', '^', '`', '{', '|' or '}' (a secret placeholder
// cannot be in a URL), and each '%' starts an escape.
func urlChars(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"<>\\^`{|}", c) >= 0 {
			return "holds a character a URL may not (percent-encode it; secrets go in headers)"
		}
	}
	if err := checkEscapes(s); err != nil {
		return err.Error()
	}
	return ""
}

// checkEscapes checks that each '%' starts an escape of two hex digits.
func checkEscapes(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			return errors.New("has a '%' that starts no escape")
		}
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseAuthority reads host[:port]: no user information, a host in lower
// case that is a name (letters, digits, '-', '_', dots between labels),
// an IPv4 address in dotted decimal or an IPv6 address in brackets
// (without a zone), and a port from 1 to 65535 (0 when none is given).
// wildcard is set for the name of "*.name", which must not be an
// address.
func parseAuthority(s string, wildcard bool) (host string, port int, err error) {
	if strings.IndexByte(s, '@') >= 0 {
		return "", 0, errors.New("user information (user@) is refused: put credentials in a header, with a secret")
	}
	host = s
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, errors.New("the IPv6 address has no closing ']'")
		}
		host = s[1:end]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", 0, errors.New("the host is not an IPv6 address (without a zone)")
		}
		if wildcard {
			return "", 0, errors.New("a wildcard (*.) is for names, not addresses")
		}
		host, s = a.String(), s[end+1:]
		if s != "" && s[0] != ':' {
			return "", 0, errors.New("the host has something after its IPv6 address")
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, s = s[:i], s[i:]
	} else {
		s = ""
	}
	if strings.HasPrefix(s, ":") {
		p := s[1:]
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || len(p) > 5 || p[0] == '+' {
			return "", 0, errors.New("the port is not a number from 1 to 65535")
		}
		port = n
	}
	if strings.IndexByte(host, ':') >= 0 {
		return host, port, nil // an IPv6 address, checked above
	}
	host = strings.ToLower(host)
	if err := checkHostName(host, wildcard); err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// checkHostName checks a name or an IPv4 address: at most 253 bytes of
// labels of letters, digits, '-' and '_' between single dots; a last
// label of digits only if the whole is an IPv4 address in dotted decimal
// (a resolver may read "2130706433" or "0177.1" as an address).
func checkHostName(host string, wildcard bool) error {
	switch {
	case host == "":
		return errors.New("there is no host")
	case len(host) > 253:
		return errors.New("the host is over 253 bytes")
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" {
			return errors.New("the host has an empty label (a leading, trailing or double dot)")
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return errors.New("the host holds a character a host name may not (write an international name in punycode, xn--…)")
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") != "" {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		if wildcard {
			return errors.New("a wildcard (*.) is for names, not addresses")
		}
		return nil
	}
	return errors.New("the host ends in a number but is not an IPv4 address in dotted decimal")
}

// checkPath checks an escaped path: it starts with '/', and no segment is
// "." or ".." (also escaped, also before a ';'), and it has no escaped
// '/' or '\': a server could read any of them as another path than the
// policy checked.
func checkPath(path string) error {
	if path[0] != '/' {
		return errors.New("the path does not start with /")
	}
	lower := strings.ToLower(path)
	if strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") {
		return errors.New("the path has an escaped / or \\ (%2F, %5C)")
	}
	for _, seg := range strings.Split(path[1:], "/") {
		seg, _, _ = strings.Cut(seg, ";")
		seg = strings.ReplaceAll(strings.ToLower(seg), "%2e", ".")
		if seg == "." || seg == ".." {
			return errors.New("the path has a . or .. segment")
		}
	}
	return nil
}
