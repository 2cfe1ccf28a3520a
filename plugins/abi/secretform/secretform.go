// Package secretform says what forms a secret's value takes on its way
// from a server to what agentrt hands on: each is a form the host
// scrubs from what a plugin reads and its own log (hostapi/egress), and
// looks for in what a request sends where the secret is not bound; the
// kit's test hosts (go/agenttest) scrub and look for the same, so that a
// plugin's test sees what agentrt would show it. Plugins do not import it.
package secretform

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Encoder is one way a value is written.
type Encoder struct {
	Name   string
	Encode func(string) string
}

// Encoders are the encoders a secret's value may pass through between a
// server and what agentrt hands on (to a plugin, its own log, an
// error): each is a form the Scrubber replaces and the check of an
// outgoing request looks for. They are Go's own, on the path: a JSON
// string as encoding/json writes it by default (<, > and & as \u003c…)
// and without HTML escaping (agentrt's JSON writer, slog's JSON
// handler); %q, as net/http, textproto and net/url quote what a server
// sent into an error, and as slog's text handler quotes a value; %+q;
// a URL's query, a path segment and a path as net/url writes a URL
// (which leaves '/', ';' and ',' as they are); base64 in both alphabets,
// with and without padding. And one that servers commonly write: JSON with non-ASCII as
// \u escapes (Python's json.dumps). JSON escaping only '"' and '\'
// (JavaScript, serde_json) is, for a value checkSecret accepts, Go's
// without HTML escaping. Each but base64 encodes rune by rune, so the
// form of a value is found inside the form of any text around it
// (base64 of the value alone only: TestEveryFormOfASecretIsScrubbedInsideAnyText).
var Encoders = []Encoder{
	{"as it is", func(v string) string { return v }},
	{"JSON", func(v string) string { return JSONString(v, true) }},
	{"JSON without HTML escaping", func(v string) string { return JSONString(v, false) }},
	{"JSON with non-ASCII escaped", JSONASCII},
	{"%q", func(v string) string { return unquote(strconv.Quote(v)) }},
	{"%+q", func(v string) string { return unquote(strconv.QuoteToASCII(v)) }},
	{"a URL's query", url.QueryEscape},
	{"a URL's path segment", url.PathEscape},
	{"a URL's path as net/url writes a URL", func(v string) string { return (&url.URL{Path: v}).EscapedPath() }},
	{"base64", base64Form(base64.StdEncoding)},
	{"base64 without padding", base64Form(base64.RawStdEncoding)},
	{"base64url", base64Form(base64.URLEncoding)},
	{"base64url without padding", base64Form(base64.RawURLEncoding)},
}

// Of are the distinct forms of value, in the order of Encoders.
func Of(value string) []string {
	var out []string
	for _, f := range Encoders {
		if form := f.Encode(value); form != "" && !slices.Contains(out, form) {
			out = append(out, form)
		}
	}
	return out
}

// JSONString is v as encoding/json writes a string, without its quotes.
func JSONString(v string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	enc.Encode(v) // a string always encodes
	return unquote(strings.TrimSuffix(b.String(), "\n"))
}

// JSONASCII is v as a JSON string of ASCII only, without its quotes: '"'
// and '\' escaped, every rune past ASCII as \u escapes (a UTF-16
// surrogate pair past U+FFFF), as Python's json.dumps writes it.
func JSONASCII(v string) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			b.WriteString(`\u` + hex4(r1) + `\u` + hex4(r2))
		default:
			b.WriteString(`\u` + hex4(r))
		}
	}
	return b.String()
}

func hex4(r rune) string {
	s := strconv.FormatInt(int64(r), 16)
	return strings.Repeat("0", 4-len(s)) + s
}

func unquote(q string) string { return q[1 : len(q)-1] }

func base64Form(enc *base64.Encoding) func(string) string {
	return func(v string) string { return enc.EncodeToString([]byte(v)) }
}
