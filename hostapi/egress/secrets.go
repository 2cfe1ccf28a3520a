package egress

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Secrets are held by the host and never handed to a plugin. A plugin
// writes a placeholder, "{{secret:NAME}}", in a header value; the host
// fills it in after the policy has allowed the request, only for a
// destination the secret is bound to, and only in the request it sends
// (which nothing stores). No request leaves for a destination a secret
// is not bound to with that secret's value in it, in any form the
// scrubber knows, anywhere: its URL, a header, its body, on any redirect
// hop (outgoing.go). What comes back (headers, body, errors, the final
// URL) is scrubbed of every secret the agent holds (scrub.go): a server
// that echoes a key (an error saying "invalid key sk-…", an echo
// endpoint) hands the plugin the placeholder, not the value.

// Secret is a value the host holds for an agent, and where it may be sent.
type Secret struct {
	Name  string
	Value string
	// Destinations are where the value may be sent; a request elsewhere
	// that names the secret, or holds its value, is refused.
	Destinations []abi.Destination
}

// Bounds on a secret's value: long enough that scrubbing it from what a
// server answers garbles nothing else, short enough for a header.
const (
	MinSecretBytes = 8
	MaxSecretBytes = abi.MaxSecretBytes
)

// checkSecret says what is wrong with a secret, nil if nothing. A value
// is what a header value can carry and scrubbing can find: UTF-8 (each
// of its forms is then written rune by rune, the same inside any text as
// alone), with no control character (a trailing newline?), no C1 control
// and no line or paragraph separator (U+0085, U+2028 and U+2029 break
// lines where a reader decodes UTF-8), and no space at either end (a
// receiver trims it).
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
	case !utf8.ValidString(value):
		return fmt.Errorf("secret %s: its value is not UTF-8", name)
	}
	for _, r := range value {
		switch {
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("secret %s: its value holds a control character (a trailing newline?), which a header cannot carry", name)
		case r >= 0x80 && r <= 0x9f, r == '\u2028', r == '\u2029':
			return fmt.Errorf("secret %s: its value holds %U, a control or line-breaking character, which a header cannot carry", name, r)
		}
	}
	if value[0] == ' ' || value[len(value)-1] == ' ' {
		return fmt.Errorf("secret %s: its value begins or ends with a space, which a receiver trims from a header", name)
	}
	return nil
}

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
		if s.Name == name && bound(s, t) {
			return s.Value, nil
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
