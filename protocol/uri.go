package protocol

import (
	"net/url"
	"path"
	"slices"
	"strings"
)

// URI artifacts (the artifact-management RFC): an artifact may be a
// reference to bytes held elsewhere (an object in S3, a page on the web)
// instead of bytes agentrt holds. agentrt records the URI and hands it to
// the agent; it fetches nothing itself.

// MaxURIBytes bounds an artifact's URI. Presigned S3 URLs, the longest
// ordinary ones, take one to two thousand bytes.
const MaxURIBytes = 4096

// SchemeFile names bytes held by agentrt: an uploaded file part, or bytes a
// plugin hands over. It is never the scheme of a URI artifact.
const SchemeFile = "file"

// maxSchemeBytes bounds a scheme's name.
const maxSchemeBytes = 32

// ArtifactSchemes are the URI schemes an agent accepts as input (in
// uploads) and may produce (artifacts its plugin creates). SchemeFile in
// a list stands for bytes held by agentrt.
type ArtifactSchemes struct {
	Input  []string `json:"input"`
	Output []string `json:"output"`
}

// DefaultArtifactSchemes are an agent's schemes when its manifest names
// none: bytes, and web URIs, either way.
var DefaultArtifactSchemes = ArtifactSchemes{
	Input:  []string{SchemeFile, "http", "https"},
	Output: []string{SchemeFile, "http", "https"},
}

// validScheme reports whether s is a scheme's name as RFC 3986 writes
// one, in either case, of at most maxSchemeBytes.
func validScheme(s string) bool {
	if s == "" || len(s) > maxSchemeBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// CleanURI checks the URI of a URI artifact and returns it with its scheme
// in lower case, and that scheme. It is strict, because what it accepts is
// stored, listed to every client, handed to plugins and sent as a
// redirect's Location header:
//
//   - at most MaxURIBytes, absolute (a scheme), and every character one
//     RFC 3986 allows: printable ASCII without space, '"', '<', '>', '\\',
//     '^', '`', '{', '|', '}' (anything else is percent-encoded by the
//     client; a '\\' is refused because browsers read "https:\\host" as
//     "https://host");
//   - every '%' starts a percent-encoded byte;
//   - no user information ("user:password@"): a secret in a URI would be
//     served to every client;
//   - an http or https URI names a host;
//   - not the file scheme, which names bytes held by agentrt: those are
//     uploaded as a file part.
func CleanURI(s string) (uri, scheme string, err error) {
	if s == "" {
		return "", "", Errorf(EUNPROCESSABLE, "the URI is empty")
	}
	if len(s) > MaxURIBytes {
		return "", "", Errorf(EUNPROCESSABLE, "the URI is %d bytes, over the limit of %d", len(s), MaxURIBytes)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"<>\^`+"`{|}", c) >= 0 {
			return "", "", Errorf(EUNPROCESSABLE, "the URI has a character a URI cannot hold at byte %d (%s); percent-encode it", i, describeByte(c))
		}
		if c == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			return "", "", Errorf(EUNPROCESSABLE, "the URI has a '%%' at byte %d that starts no percent-encoded byte", i)
		}
	}
	name, _, ok := strings.Cut(s, ":")
	if !ok || !validScheme(name) {
		return "", "", Errorf(EUNPROCESSABLE, "the URI has no scheme (such as https:); it must be absolute")
	}
	scheme = strings.ToLower(name)
	uri = scheme + s[len(name):]
	if scheme == SchemeFile {
		return "", "", Errorf(EUNPROCESSABLE, "a file: URI names no bytes agentrt can take; upload the file as a \"file\" part")
	}
	u, err := url.Parse(uri)
	if err != nil {
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err // without the URI, which the client has
		}
		return "", "", Errorf(EUNPROCESSABLE, "the URI does not parse: %v", err)
	}
	if u.User != nil {
		return "", "", Errorf(EUNPROCESSABLE, "the URI holds user information (user:password@); it would be served to every client")
	}
	if (scheme == "http" || scheme == "https") && (u.Host == "" || u.Hostname() == "") {
		return "", "", Errorf(EUNPROCESSABLE, "the %s URI names no host", scheme)
	}
	return uri, scheme, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// describeByte names a byte a URI may not hold, for an error message that
// must not echo it.
func describeByte(c byte) string {
	switch {
	case c == ' ':
		return "a space"
	case c < ' ' || c == 0x7f:
		return "a control character"
	case c >= 0x80:
		return "a byte that is not ASCII"
	}
	return "'" + string(c) + "'"
}

// uriFileName is the file name a URI artifact takes when none is given:
// the last segment of the URI's path, decoded, if it is a usable name;
// else its host; else "artifact".
func uriFileName(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "artifact"
	}
	if p := u.EscapedPath(); p != "" {
		if seg, err := url.PathUnescape(path.Base(strings.TrimRight(p, "/"))); err == nil {
			if name, err := CleanFileName(seg); err == nil && name == seg {
				return name
			}
		}
	}
	if name, err := CleanFileName(u.Hostname()); err == nil && name != "" {
		return name
	}
	return "artifact"
}

// URIScheme is the scheme of a URI CleanURI accepted.
func URIScheme(uri string) string {
	scheme, _, _ := strings.Cut(uri, ":")
	return scheme
}

// accepts reports whether scheme is in list.
func accepts(list []string, scheme string) bool { return slices.Contains(list, scheme) }

// schemeList is a list of schemes for a message: "file, http and https".
func schemeList(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
