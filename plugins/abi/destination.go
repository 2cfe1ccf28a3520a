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
// "/v10"). A request's URL is read by ParseTarget.
//
// One reader, one spelling. A destination and a request's URL are read
// by one function (parseWebURL), so that a scheme, a host, a port and a
// path mean the same in a grant as in a request, and each has one
// canonical spelling, the one String writes: scheme and host names in
// lower case, an IPv6 address in brackets as RFC 5952 writes it, no port
// when it is the scheme's. The two differ only in what they do with
// another spelling:
//
//   - A destination must be written canonically, or it is refused with
//     an error naming the canonical spelling. A grant is written once, by
//     a person, then shown back (GET /agents, the log), read by eye
//     against the requests it allows and compared as text (a manifest's
//     "none twice"): with one spelling, what the operator wrote, what
//     agentrt shows and what it matches are the same string. A path of
//     "/" alone is the same as none (every path). A path's escapes are
//     canonical too (RFC 3986 §6.2.2): hex digits in upper case, and no
//     escaped letter, digit, '-', '.', '_' or '~'.
//   - A request's URL (a plugin's, and every redirect's Location, which
//     servers write) may write the scheme, a name or an IPv6 address in
//     another case or form, and the scheme's port out: RFC 3986 makes
//     these the same URL for every reader, libraries and servers write
//     them, and the host sends the canonical URL it checked
//     (Target.String), so nothing after it reads another. Its path and
//     query are sent byte for byte (a request signature may cover them)
//     and a path is compared with a grant's byte for byte: one spelled
//     with other escapes than the grant's is refused, never let through.
//   - What could be read two ways is refused in both: a host with a ':'
//     outside brackets, a host ending in a number that is not an IPv4
//     address in dotted decimal (resolvers and browsers read
//     "2130706433", "0x7f000001" and "0177.1" as addresses), an empty
//     label (a trailing dot), a port with a leading zero, user
//     information, a fragment, "." and ".." segments, an escaped '/' or
//     '\', and characters RFC 3986 does not allow.

// Target is an absolute http or https URL as the policy reads it and the
// host sends it.
type Target struct {
	Scheme string // "http" or "https"
	// Host is in lower case: a name, an IPv4 address, or an IPv6 address
	// (without brackets) as RFC 5952 writes it.
	Host string
	Port int // as the URL gives it, or the scheme's
	// Path is the escaped path as given, "/" at least; Query the escaped
	// query as given, without its '?'.
	Path  string
	Query string
}

// Destination is a place outbound requests may go: an http or https
// origin, or every subdomain of a name, and a path prefix.
type Destination struct {
	Scheme string
	// Host is in lower case, an IPv6 address without brackets as RFC 5952
	// writes it; for a wildcard, the name whose subdomains match, without
	// "*.".
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
// The scheme and host may be in any case and the scheme's port written
// out: the Target is canonical. The error says what is wrong without
// repeating the URL.
func ParseTarget(raw string) (Target, error) {
	u, err := parseWebURL(raw, false)
	if err != nil {
		return Target{}, err
	}
	t := Target{Scheme: u.scheme, Host: u.host, Port: u.port, Path: u.path, Query: u.query}
	if len(t.String()) > MaxURLBytes { // "/" added, an IPv6 address written longer
		return Target{}, errors.New("the URL is over " + strconv.Itoa(MaxURLBytes) + " bytes as it is sent")
	}
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

// ParseDestination reads a destination, in its canonical spelling only
// (String's; a path of "/" alone is also none). The error says what is
// wrong, and for another spelling of a destination, how to write it.
func ParseDestination(s string) (Destination, error) {
	u, err := parseWebURL(s, true)
	if err != nil {
		return Destination{}, err
	}
	return Destination{Scheme: u.scheme, Host: u.host, Wildcard: u.wildcard, Port: u.port, Path: u.path}, nil
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

// webURL is an http or https URL, or a destination, as parseWebURL reads
// it: scheme and host canonical, port given.
type webURL struct {
	scheme, host string
	wildcard     bool
	port         int
	path, query  string
}

// parseWebURL reads a request's URL (grant false: ParseTarget) or a
// destination (grant true: ParseDestination), by the same rules (the
// comment at the top of this file says which, and why). A destination
// may have "*." before its host and no query; its path is "" for every
// path, a URL's "/" at least.
func parseWebURL(raw string, grant bool) (webURL, error) {
	var u webURL
	what := "the URL"
	if grant {
		what = "the destination"
	}
	if len(raw) > MaxURLBytes {
		return u, errors.New(what + " is over " + strconv.Itoa(MaxURLBytes) + " bytes")
	}
	if why := urlChars(raw); why != "" {
		return u, errors.New(what + " " + why)
	}
	switch {
	case grant && strings.ContainsAny(raw, "?#"):
		return u, errors.New("a destination has no query or fragment")
	case strings.IndexByte(raw, '#') >= 0:
		return u, errors.New("the URL has a fragment (#…), which is never sent: leave it out")
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	switch {
	case !ok && grant:
		return u, errors.New("want a destination such as https://api.example.com or https://*.example.com/v1")
	case !ok:
		return u, errors.New("the URL is not absolute: want http://… or https://…")
	}
	u.scheme = strings.ToLower(scheme)
	switch {
	case u.scheme != "http" && u.scheme != "https" && grant:
		return u, errors.New("a destination's scheme is http or https")
	case u.scheme != "http" && u.scheme != "https":
		return u, errors.New("the URL's scheme is not http or https")
	case grant && scheme != u.scheme:
		return u, errors.New("write the scheme in lower case: " + u.scheme)
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, rest := rest[:end], rest[end:]
	if grant && strings.HasPrefix(authority, "*.") {
		u.wildcard, authority = true, authority[2:]
	}
	host, port, canonical, err := parseAuthority(authority, u.wildcard)
	if err != nil {
		return u, err
	}
	u.host, u.port = host, port
	if grant && !canonical {
		if u.wildcard {
			host = "*." + host
		}
		return u, errors.New("write the host as " + hostPort(host, defaultPort(u.scheme), u.scheme) + " (a name in lower case, an IPv6 address as RFC 5952 writes it)")
	}
	switch {
	case u.port == 0:
		u.port = defaultPort(u.scheme)
	case grant && u.port == defaultPort(u.scheme):
		return u, errors.New("leave the port out: " + strconv.Itoa(u.port) + " is " + u.scheme + "'s")
	}
	u.path, u.query, _ = strings.Cut(rest, "?")
	if u.path != "" {
		if err := checkPath(u.path); err != nil {
			return u, err
		}
	}
	switch {
	case grant && u.path == "/":
		u.path = ""
	case grant:
		if err := canonicalEscapes(u.path); err != nil {
			return u, err
		}
	case u.path == "":
		u.path = "/"
	}
	return u, nil
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

// canonicalEscapes checks that a destination's path writes each escape
// as RFC 3986 (§6.2.2.1, §6.2.2.2) normalises it: its hex digits in upper
// case, and no escape of an unreserved character. s has passed
// checkEscapes.
func canonicalEscapes(s string) error {
	for i := strings.IndexByte(s, '%'); i >= 0; i = strings.IndexByte(s, '%') {
		esc := s[i : i+3]
		s = s[i+3:]
		n, _ := strconv.ParseUint(esc[1:], 16, 8)
		switch c := byte(n); {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0:
			return errors.New("write the path's " + esc + " as " + string(c) + " (it needs no escape)")
		case esc != strings.ToUpper(esc):
			return errors.New("write the path's " + esc + " as " + strings.ToUpper(esc))
		}
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseAuthority reads host[:port]: no user information, a host that is
// a name (letters, digits, '-', '_', dots between labels), an IPv4
// address in dotted decimal or an IPv6 address in brackets (without a
// zone), and a port from 1 to 65535 without leading zeros (0 when none
// is given). host is in canonical form (a name in lower case, an IPv6
// address as RFC 5952 writes it, without brackets), and canonical says
// whether it was written so. wildcard is set for the name of "*.name",
// which must not be an address.
func parseAuthority(s string, wildcard bool) (host string, port int, canonical bool, err error) {
	if strings.IndexByte(s, '@') >= 0 {
		return "", 0, false, errors.New("user information (user@) is refused: put credentials in a header, with a secret")
	}
	var portText string
	hasPort := false
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, false, errors.New("the IPv6 address has no closing ']'")
		}
		written := s[1:end]
		a, err := netip.ParseAddr(written)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", 0, false, errors.New("the host is not an IPv6 address (without a zone)")
		}
		if wildcard {
			return "", 0, false, errors.New("a wildcard (*.) is for names, not addresses")
		}
		host, canonical, s = a.String(), a.String() == written, s[end+1:]
		if s != "" && s[0] != ':' {
			return "", 0, false, errors.New("the host has something after its IPv6 address")
		}
		portText, hasPort = strings.CutPrefix(s, ":")
	} else {
		host, portText, hasPort = strings.Cut(s, ":")
		if hasPort && strings.IndexByte(portText, ':') >= 0 {
			return "", 0, false, errors.New("the host holds a ':' (an IPv6 address is written in brackets: [::1])")
		}
		lower := strings.ToLower(host)
		if err := checkHostName(lower, wildcard); err != nil {
			return "", 0, false, err
		}
		host, canonical = lower, lower == host
	}
	if hasPort {
		n, err := strconv.Atoi(portText)
		if err != nil || n < 1 || n > 65535 || portText[0] < '1' || portText[0] > '9' {
			return "", 0, false, errors.New("the port is not a number from 1 to 65535 (without leading zeros)")
		}
		port = n
	}
	return host, port, canonical, nil
}

// checkHostName checks a name or an IPv4 address, in lower case: at most
// 253 bytes of labels of letters, digits, '-' and '_' between single
// dots; a last label that is a number (digits, or "0x" and hex digits)
// only if the whole is an IPv4 address in dotted decimal: a resolver
// (inet_aton) or a browser (the WHATWG URL standard) reads "2130706433",
// "0x7f000001", "0177.1" or "127.1" as an address.
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
	if hex, ok := strings.CutPrefix(last, "0x"); !(ok && strings.Trim(hex, "0123456789abcdef") == "") && strings.Trim(last, "0123456789") != "" {
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
