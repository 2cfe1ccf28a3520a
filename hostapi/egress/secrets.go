package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Secrets are held by the host and never handed to a plugin. A plugin
// writes a placeholder, "{{secret:NAME}}", in a header value; the host
// fills it in after the policy has allowed the request, only for a
// destination the secret is bound to, and only in the request it sends
// (which nothing stores). What comes back (headers, body, errors, the
// final URL) is scrubbed of every secret the agent holds: a server that
// echoes a key (an error saying "invalid key sk-…", an echo endpoint)
// hands the plugin the placeholder, not the value.

// Secret is a value the host holds for an agent, and where it may be sent.
type Secret struct {
	Name  string
	Value string
	// Destinations are where the value may be sent; a request elsewhere
	// that names the secret is refused.
	Destinations []abi.Destination
}

// Bounds on a secret's value: long enough that scrubbing it from what a
// server answers garbles nothing else, short enough for a header.
const (
	MinSecretBytes = 8
	MaxSecretBytes = 4096
)

// checkSecret says what is wrong with a secret, nil if nothing.
func checkSecret(name, value string) error {
	switch {
	case !abi.ValidSecretName(name):
		return fmt.Errorf("secret name %q: want 1 to %d letters, digits and _, not starting with a digit", name, abi.MaxSecretNameBytes)
	case len(value) < MinSecretBytes:
		return fmt.Errorf("secret %s: its value has %d bytes; a secret has at least %d, so that scrubbing it from answers garbles nothing else", name, len(value), MinSecretBytes)
	case len(value) > MaxSecretBytes:
		return fmt.Errorf("secret %s: its value is over %d bytes", name, MaxSecretBytes)
	case strings.Contains(value, abi.SecretPrefix):
		return fmt.Errorf("secret %s: its value holds a secret placeholder", name)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("secret %s: its value holds a control character (a trailing newline?), which a header cannot carry", name)
		}
	}
	return nil
}

// scrubber replaces the forms a secret's value may take in an answer
// with the secret's placeholder: the value itself, and as JSON, a URL
// and base64 (HTTP Basic) would write it.
type scrubber struct {
	forms    [][]byte // the forms to look for, longest first
	replacer *strings.Replacer
}

func newScrubber(secrets []Secret) *scrubber {
	s := &scrubber{}
	var pairs []string
	seen := map[string]bool{}
	for _, sec := range secrets {
		placeholder := abi.SecretPrefix + sec.Name + abi.SecretSuffix
		quoted, _ := json.Marshal(sec.Value)
		for _, form := range []string{
			sec.Value,
			string(quoted[1 : len(quoted)-1]),
			url.QueryEscape(sec.Value),
			url.PathEscape(sec.Value),
			base64.StdEncoding.EncodeToString([]byte(sec.Value)),
			base64.RawURLEncoding.EncodeToString([]byte(sec.Value)),
		} {
			if form == "" || seen[form] {
				continue
			}
			seen[form] = true
			s.forms = append(s.forms, []byte(form))
			pairs = append(pairs, form, placeholder)
		}
	}
	if len(pairs) > 0 {
		s.replacer = strings.NewReplacer(pairs...)
	}
	return s
}

// bytes returns b scrubbed: b itself, not copied, when it holds no
// secret (the common case costs one scan per form and no allocation).
func (s *scrubber) bytes(b []byte) []byte {
	if !s.holds(b) {
		return b
	}
	return []byte(s.replacer.Replace(string(b)))
}

// string returns v scrubbed.
func (s *scrubber) string(v string) string {
	if s.replacer == nil {
		return v
	}
	return s.replacer.Replace(v)
}

// holds reports whether b holds a form of a secret.
func (s *scrubber) holds(b []byte) bool {
	for _, f := range s.forms {
		if bytes.Contains(b, f) {
			return true
		}
	}
	return false
}

// error is err's text, scrubbed.
func (s *scrubber) error(err error) string { return s.string(err.Error()) }

// errNoSecret is why a placeholder cannot be filled in: the same words
// whether the agent holds no such secret or holds it for other
// destinations, so that a refusal tells nothing of what exists.
func errNoSecret(name string, t abi.Target) error {
	return &Error{Code: Refused, Message: fmt.Sprintf("no secret %s is held for %s%s (the operator binds each secret to an agent and to destinations)", name, t.Origin(), t.Path)}
}

// secretFor returns the value of the secret name for a request to t, or
// the refusal.
func (c *Client) secretFor(name string, t abi.Target) (string, error) {
	for _, s := range c.policy.Secrets {
		if s.Name != name {
			continue
		}
		for _, d := range s.Destinations {
			if d.Allows(t) {
				return s.Value, nil
			}
		}
	}
	return "", errNoSecret(name, t)
}

// header is one request header as the plugin wrote it, with the secrets
// its value names.
type header struct {
	name, value string
	secrets     []string
}

// expand returns h's value with its secrets filled in for a request to
// t, or the refusal when a secret it names is not held for t.
func (c *Client) expand(h header, t abi.Target) (string, error) {
	if len(h.secrets) == 0 {
		return h.value, nil
	}
	values := map[string]string{}
	for _, name := range h.secrets {
		v, err := c.secretFor(name, t)
		if err != nil {
			return "", err
		}
		values[name] = v
	}
	return abi.ExpandSecrets(h.value, func(name string) string { return values[name] }), nil
}
