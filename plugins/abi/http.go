package abi

import (
	"strconv"
	"strings"
)

// Outbound HTTP (plugins/ABI.md, "Outbound HTTP"): the host makes a
// plugin's HTTP requests, to the destinations the operator granted its
// agent, filling in the secrets it holds; the plugin never opens a socket
// and never sees a secret's value. Added within version 1: a plugin that
// does not import these functions runs as before.
const (
	// http_request(req, req_len, body, body_len) -> 0: sends the request
	// (HTTPRequest, JSON) with the body bytes, follows redirects the
	// policy allows, and keeps the response for http_response and
	// http_response_body until the next request or the call's end.
	FuncHTTPRequest = "http_request"
	// http_response(buf, cap) -> len: the kept response's HTTPResponse
	// (JSON); copies when it fits.
	FuncHTTPResponse = "http_response"
	// http_response_body(buf, cap) -> len: the kept response's body;
	// copies when it fits.
	FuncHTTPResponseBody = "http_response_body"
	// artifact_fetch(id, id_len, path, path_len) -> size: fetches the
	// bytes of the task's http or https URI artifact id into the workspace
	// file path, as a GET through the same policy and limits as
	// http_request.
	FuncArtifactFetch = "artifact_fetch"
)

// Bounds of what a plugin hands http_request, checked before the host
// reads or decodes it.
const (
	// MaxHTTPRequestMetaBytes bounds the request message (its URL and
	// headers): a longer one is ErrInvalid.
	MaxHTTPRequestMetaBytes = 64 << 10
	// MaxURLBytes bounds a request's URL.
	MaxURLBytes = 8192
	// MaxHTTPHeaders bounds the headers of a request.
	MaxHTTPHeaders = 100
	// MaxHTTPHeaderBytes bounds one header: its name and value together,
	// as the plugin wrote them and as the host would send them, each
	// secret placeholder counted as MaxSecretBytes (SentHeaderBytes).
	MaxHTTPHeaderBytes = 16 << 10
	// MaxHTTPHeadersBytes bounds a request's headers together, as the
	// host would send them (SentHeaderBytes): a longer request is
	// ErrInvalid before a secret is filled in.
	MaxHTTPHeadersBytes = 64 << 10
	// MaxHTTPRedirects bounds the redirects one request follows.
	MaxHTTPRedirects = 10
)

// HTTPRequest is FuncHTTPRequest's request message; its body is the
// function's second argument, as bytes.
type HTTPRequest struct {
	// Method is GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS; "" is GET.
	Method string `json:"method,omitempty"`
	// URL is an absolute http or https URL (CheckURL).
	URL string `json:"url"`
	// Headers are sent in order. A value may hold secret placeholders,
	// "{{secret:NAME}}", which the host fills in for a destination the
	// secret is bound to.
	Headers []HTTPHeader `json:"headers,omitempty"`
	// TimeoutMS, when more than 0, is a time limit shorter than the
	// agent's, in milliseconds.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// MaxResponseBytes, when more than 0, is a limit on the response's
	// body lower than the agent's.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// NoRedirects makes a redirect the response, instead of following it.
	NoRedirects bool `json:"no_redirects,omitempty"`
}

// HTTPHeader is one header of a request or a response.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HTTPResponse is what FuncHTTPResponse returns.
type HTTPResponse struct {
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Headers are the response's headers, in the order received, names
	// in canonical form ("Content-Type").
	Headers []HTTPHeader `json:"headers"`
	// BodySize is the length of the body FuncHTTPResponseBody returns.
	BodySize int64 `json:"body_size"`
	// URL is the URL that answered: the request's, or the last redirect's.
	URL string `json:"url"`
}

// HTTPMethods are the methods a plugin may send.
var HTTPMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Secret placeholders: a header value's "{{secret:NAME}}" is the value of
// the secret NAME, filled in by the host. A name is 1 to 64 letters,
// digits and '_', not starting with a digit.
const (
	SecretPrefix       = "{{secret:"
	SecretSuffix       = "}}"
	MaxSecretNameBytes = 64
	// MaxSecretBytes bounds a secret's value.
	MaxSecretBytes = 4096
)

// SentHeaderBytes is what a header counts against MaxHTTPHeaderBytes and
// MaxHTTPHeadersBytes: its name and value with each placeholder of the
// secrets it names (SecretNames) counted as MaxSecretBytes, whatever the
// secret's length. It depends on nothing but the request, so a plugin
// can compute it, and whether a request fits tells nothing of a secret.
func SentHeaderBytes(name, value string, secrets []string) int {
	n := len(name) + len(value)
	for _, s := range secrets {
		n += MaxSecretBytes - len(SecretPrefix) - len(s) - len(SecretSuffix)
	}
	return n
}

// ValidSecretName reports whether name may name a secret.
func ValidSecretName(name string) bool {
	if name == "" || len(name) > MaxSecretNameBytes || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// SecretNames returns the names of the secret placeholders in a header
// value, in order, or why the value's placeholders are malformed.
func SecretNames(value string) ([]string, string) {
	var names []string
	for rest := value; ; {
		i := strings.Index(rest, SecretPrefix)
		if i < 0 {
			return names, ""
		}
		rest = rest[i+len(SecretPrefix):]
		j := strings.Index(rest, SecretSuffix)
		if j < 0 {
			return nil, "a secret placeholder is not closed with " + SecretSuffix
		}
		if !ValidSecretName(rest[:j]) {
			return nil, "a secret placeholder names no valid secret (1 to 64 letters, digits and _)"
		}
		names = append(names, rest[:j])
		rest = rest[j+len(SecretSuffix):]
	}
}

// ExpandSecrets returns value with each placeholder replaced by what
// lookup gives for its name; value's placeholders are well formed
// (SecretNames).
func ExpandSecrets(value string, lookup func(name string) string) string {
	if !strings.Contains(value, SecretPrefix) {
		return value
	}
	var b strings.Builder
	for rest := value; ; {
		i := strings.Index(rest, SecretPrefix)
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i])
		rest = rest[i+len(SecretPrefix):]
		j := strings.Index(rest, SecretSuffix)
		b.WriteString(lookup(rest[:j]))
		rest = rest[j+len(SecretSuffix):]
	}
}

// hostOwnedHeaders are the request headers the host sets or refuses:
// the destination (Host), the connection's (hop-by-hop ones), a proxy's,
// the framing of the body, and the encoding of the response, which the
// host decodes so that it can scrub secrets from it.
var hostOwnedHeaders = map[string]string{
	"host":                "the host sets Host from the URL",
	"connection":          "a hop-by-hop header is the host's",
	"keep-alive":          "a hop-by-hop header is the host's",
	"te":                  "a hop-by-hop header is the host's",
	"trailer":             "a hop-by-hop header is the host's",
	"transfer-encoding":   "a hop-by-hop header is the host's",
	"upgrade":             "a hop-by-hop header is the host's",
	"proxy-connection":    "a proxy header is refused",
	"proxy-authorization": "a proxy header is refused",
	"proxy-authenticate":  "a proxy header is refused",
	"content-length":      "the host sets Content-Length from the body",
	"expect":              "the host sends the body without waiting to be asked",
	"accept-encoding":     "the host asks for the encodings it decodes",
	"http2-settings":      "a hop-by-hop header is the host's",
}

// CheckRequestHeader says why a plugin may not send a header, "" when
// it may: its name must be a token (RFC 9110) and not one the host owns
// (Host, hop-by-hop and proxy headers, Content-Length, Expect,
// Accept-Encoding), its value one line to every reader, and the two
// within MaxHTTPHeaderBytes.
//
// One line to every reader, whatever it decodes the value as, so that no
// intermediary or server splits it into two headers or a header and a
// body: the value is valid UTF-8 (bytes that are not could be read as
// Latin-1 by one reader, where 0x85 is NEL, and as U+FFFD by another),
// with no character of Unicode's control category but tab (C0, DEL and
// C1: CR, LF, NUL and NEL U+0085 among them), and neither U+2028 (line
// separator) nor U+2029 (paragraph separator), where readers that split
// lines by Unicode (Python's str.splitlines, JavaScript) break. Other
// characters pass: a header may carry UTF-8 text. It costs one pass over
// the value.
func CheckRequestHeader(name, value string) string {
	switch {
	case name == "":
		return "a header has no name"
	case len(name)+len(value) > MaxHTTPHeaderBytes:
		return "a header is over " + strconv.Itoa(MaxHTTPHeaderBytes) + " bytes"
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return "a header name holds a character a name may not"
		}
	}
	lower := strings.ToLower(name)
	if why := hostOwnedHeaders[lower]; why != "" {
		return "the header " + name + " is refused: " + why
	}
	if strings.HasPrefix(lower, "proxy-") {
		return "the header " + name + " is refused: a proxy header is refused"
	}
	for i, r := range value {
		switch {
		case r < 0x20 && r != '\t' || r == 0x7f:
			return "the value of " + name + " holds a control character (a line break?)"
		case r < 0x80:
		case r == '\uFFFD' && !strings.HasPrefix(value[i:], "\uFFFD"):
			return "the value of " + name + " is not UTF-8"
		case r <= 0x9f:
			return "the value of " + name + " holds a control character (U+0080 to U+009F; U+0085 is a line break)"
		case r == '\u2028' || r == '\u2029':
			return "the value of " + name + " holds a line or paragraph separator (U+2028, U+2029)"
		}
	}
	return ""
}

// isTokenChar reports whether c may be in a token (RFC 9110, tchar).
func isTokenChar(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CanonicalHeaderName is name as net/http's CanonicalHeaderKey writes a
// token: "content-type" is "Content-Type".
func CanonicalHeaderName(name string) string {
	b := []byte(name)
	upper := true
	for i, c := range b {
		if !isTokenChar(c) {
			return name
		}
		if upper && c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		} else if !upper && c >= 'A' && c <= 'Z' {
			b[i] = c - 'A' + 'a'
		}
		upper = c == '-'
	}
	return string(b)
}
