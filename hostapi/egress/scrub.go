package egress

import (
	"bytes"
	"sort"
	"strings"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/plugins/abi/secretform"
)

// Scrubber replaces every form (secretform.Of) of a set of secrets'
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
		for _, form := range secretform.Of(sec.Value) {
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
