package protocol_test

import (
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// What CleanURI accepts is stored, listed, handed to plugins and sent as
// a redirect's Location: it holds no character a header, a JSON string or
// a browser would read otherwise, and no secret.
func TestCleanURIKeepsOnlyWhatIsSafeToStoreServeAndRedirectTo(t *testing.T) {
	for _, tc := range []struct{ in, want, scheme string }{
		{"https://example.com/report.pdf", "https://example.com/report.pdf", "https"},
		{"HTTPS://Example.com/a?b=c&d=%2F#frag", "https://Example.com/a?b=c&d=%2F#frag", "https"},
		{"s3://bucket/reports/2026/r.pdf", "s3://bucket/reports/2026/r.pdf", "s3"},
		{"urn:isbn:0451450523", "urn:isbn:0451450523", "urn"},
		{"git+ssh://host/repo.git", "git+ssh://host/repo.git", "git+ssh"},
		{"http://[::1]:8080/x", "http://[::1]:8080/x", "http"},
		{"https://example.com/" + strings.Repeat("a", protocol.MaxURIBytes-20), "https://example.com/" + strings.Repeat("a", protocol.MaxURIBytes-20), "https"},
	} {
		got, scheme, err := protocol.CleanURI(tc.in)
		if err != nil || got != tc.want || scheme != tc.scheme {
			t.Errorf("CleanURI(%.60q) = %.60q, %q, %v; want %.60q, %q", tc.in, got, scheme, err, tc.want, tc.scheme)
		}
	}
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"too long", "https://example.com/" + strings.Repeat("a", protocol.MaxURIBytes), "over the limit"},
		{"relative", "/etc/passwd", "no scheme"},
		{"no scheme at all", "example.com/a", "no scheme"},
		{"scheme starting with a digit", "3s://b/k", "no scheme"},
		{"file", "file:///etc/passwd", "upload the file"},
		{"FILE", "FILE:///etc/passwd", "upload the file"},
		{"user and password", "https://user:secret@example.com/", "user information"},
		{"user alone", "s3://key@bucket/k", "user information"},
		{"http without a host", "http:///path", "names no host"},
		{"https, opaque", "https:example.com", "names no host"},
		{"CR LF (header injection)", "https://example.com/\r\nSet-Cookie: a=b", "control character"},
		{"NUL", "https://example.com/\x00", "control character"},
		{"DEL", "https://example.com/\x7f", "control character"},
		{"tab", "https://example.com/\tx", "control character"},
		{"space", "https://example.com/a b", "a space"},
		{"not ASCII", "https://example.com/é", "not ASCII"},
		{"backslash (https:\\\\evil)", `https:\\evil.com\`, `'\'`},
		{"quote", `https://example.com/"`, `'"'`},
		{"angle bracket", "https://example.com/<script>", "'<'"},
		{"bad percent", "https://example.com/%zz", "starts no percent-encoded byte"},
		{"percent at the end", "https://example.com/%2", "starts no percent-encoded byte"},
		{"bad port", "https://example.com:port/", "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := protocol.CleanURI(tc.in)
			if err == nil || protocol.ErrorCode(err) != protocol.EUNPROCESSABLE || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CleanURI(%.60q) = %q, %v; want a refusal saying %q", tc.in, got, err, tc.want)
			}
			// The refusal does not echo what it refuses.
			if strings.ContainsAny(err.Error(), "\r\n\x00\x7f") || strings.Contains(err.Error(), "secret") {
				t.Errorf("the refusal echoes the URI: %q", err)
			}
		})
	}
}
