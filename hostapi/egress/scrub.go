package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/agentrt/agentrt/plugins/abi"
)

// secretForms are the encoders a secret's value may pass through between
// a server and what agentrt hands on (to a plugin, its own log, an
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
var secretForms = []struct {
	name   string
	encode func(string) string
}{
	{"as it is", func(v string) string { return v }},
	{"JSON", func(v string) string { return jsonString(v, true) }},
	{"JSON without HTML escaping", func(v string) string { return jsonString(v, false) }},
	{"JSON with non-ASCII escaped", jsonASCII},
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

// forms are the distinct forms of value.
func forms(value string) []string {
	var out []string
	for _, f := range secretForms {
		if form := f.encode(value); form != "" && !slices.Contains(out, form) {
			out = append(out, form)
		}
	}
	return out
}

// jsonString is v as encoding/json writes a string, without its quotes.
func jsonString(v string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	enc.Encode(v) // a string always encodes
	return unquote(strings.TrimSuffix(b.String(), "\n"))
}

// jsonASCII is v as a JSON string of ASCII only, without its quotes: '"'
// and '\' escaped, every rune past ASCII as \u escapes (a UTF-16
// surrogate pair past U+FFFF), as Python's json.dumps writes it.
func jsonASCII(v string) string {
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

// Scrubber replaces every form (secretForms) of a set of secrets'
// values with the secrets' placeholders. Its methods are safe for
// concurrent use. Each Client has one of its agent's secrets; the
// server's log has one of every secret the server holds
// (Grants.Scrubber).
//
// What it costs: looking for secrets in text that holds none is a scan
// per distinct form (about 5 for a secret of letters and digits, at most
// 13) and no allocation; text that holds one is copied once, replaced.
type Scrubber struct {
	secrets []scrubbed
	// forms are every secret's, longest first; replacer replaces them,
	// the longest match first.
	forms    [][]byte
	replacer *strings.Replacer
}

// scrubbed is a secret's name and its distinct forms, as strings and
// as bytes.
type scrubbed struct {
	name      string
	forms     []string
	formBytes [][]byte
}

// NewScrubber returns a Scrubber of secrets.
func NewScrubber(secrets []Secret) *Scrubber {
	s := &Scrubber{}
	type pair struct{ form, placeholder string }
	var pairs []pair
	seen := map[string]bool{}
	for _, sec := range secrets {
		placeholder := abi.SecretPrefix + sec.Name + abi.SecretSuffix
		own := scrubbed{name: sec.Name}
		for _, form := range forms(sec.Value) {
			own.forms, own.formBytes = append(own.forms, form), append(own.formBytes, []byte(form))
			if !seen[form] {
				seen[form] = true
				s.forms = append(s.forms, []byte(form))
				pairs = append(pairs, pair{form, placeholder})
			}
		}
		s.secrets = append(s.secrets, own)
	}
	if len(pairs) == 0 {
		return s
	}
	// strings.Replacer takes, where several match, the first given: the
	// longest first, so that no form is cut short by another that starts
	// it (a base64 form without padding, the value inside its JSON form).
	sort.SliceStable(pairs, func(i, j int) bool { return len(pairs[i].form) > len(pairs[j].form) })
	sort.SliceStable(s.forms, func(i, j int) bool { return len(s.forms[i]) > len(s.forms[j]) })
	args := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p.form, p.placeholder)
	}
	s.replacer = strings.NewReplacer(args...)
	return s
}

// Bytes returns b scrubbed: b itself, not copied, when it holds no
// secret (the common case costs one scan per form and no allocation).
func (s *Scrubber) Bytes(b []byte) []byte {
	if !s.holds(b) {
		return b
	}
	return []byte(s.replacer.Replace(string(b)))
}

// String returns v scrubbed.
func (s *Scrubber) String(v string) string {
	if s.replacer == nil {
		return v
	}
	return s.replacer.Replace(v)
}

// holds reports whether b holds a form of a secret.
func (s *Scrubber) holds(b []byte) bool {
	for _, f := range s.forms {
		if bytes.Contains(b, f) {
			return true
		}
	}
	return false
}

// error is err's text, scrubbed.
func (s *Scrubber) error(err error) string { return s.String(err.Error()) }

// Scrubber returns a Scrubber of every secret g holds, for what is
// written where no one agent's Client is at hand (the standard library's
// logger).
func (g *Grants) Scrubber() *Scrubber {
	if g == nil {
		return NewScrubber(nil)
	}
	secrets := make([]Secret, len(g.secrets))
	for i, s := range g.secrets {
		secrets[i] = s.Secret
	}
	return NewScrubber(secrets)
}
