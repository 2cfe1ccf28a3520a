package abi

import (
	"strings"
	"testing"
)

func TestAHeaderValueIsOneLineOfUTF8ToEveryReader(t *testing.T) {
	for _, c := range []struct{ value, why string }{
		{"a\r\nHost: evil.test", "control character"},
		{"a\nb", "control character"},
		{"a\rb", "control character"},
		{"a\x00b", "control character"},
		{"a\x0bb", "control character"}, // vertical tab: str.splitlines breaks there
		{"a\x0cb", "control character"},
		{"a\x1cb", "control character"},
		{"a\x7fb", "control character"},
		{"a\u0085Host: evil.test", "U+0085"}, // NEL
		{"a\u0080b", "control character"},
		{"a\u009fb", "control character"},
		{"a\u2028Host: evil.test", "U+2028"},
		{"a\u2029b", "U+2029"},
		{"a\x85b", "not UTF-8"}, // NEL to a reader of Latin-1
		{"a\xe2\x80b", "not UTF-8"},
		{"a\xc0\x8ab", "not UTF-8"},     // an overlong LF
		{"a\xed\xa0\x80b", "not UTF-8"}, // a surrogate
	} {
		if why := CheckRequestHeader("X-A", c.value); !strings.Contains(why, c.why) {
			t.Errorf("CheckRequestHeader(X-A, %q) = %q, want %q", c.value, why, c.why)
		}
	}
	for _, v := range []string{"", "a\tb", "Bearer {{secret:KEY}}", "attachment; filename*=UTF-8''caf%C3%A9", "café, naïve, 東京", "a\uFFFDb", "a\u00a0b", "\u2027\u202a\ufeff\U0001f600"} {
		if why := CheckRequestHeader("X-A", v); why != "" {
			t.Errorf("CheckRequestHeader(X-A, %q) = %q", v, why)
		}
	}
}
