// Package jsontext makes random text for the tests that compare agentrt's
// JSON writers with encoding/json.
package jsontext

import (
	"math/rand/v2"
	"strings"
)

// pieces are what random text is made of: every kind of byte a JSON
// string encoder treats apart (quotes, backslashes, each control
// character, HTML's <>&, U+2028 and U+2029, invalid and truncated UTF-8,
// characters of 2, 3 and 4 bytes) and plain text.
var pieces = func() []string {
	p := []string{"", "a", "hi there", `"`, `\`, "<", ">", "&", "\u2028", "\u2029", "\u2027", "\u202a",
		"é", "€", "😀", "\xff", "\xe2\x80", "\xed\xa0\x80", "\x7f", "/", "'"}
	for c := range 0x20 {
		p = append(p, string(rune(c)))
	}
	return p
}()

// String is up to five random pieces.
func String(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// StringOrNil is String, or nil one time in three.
func StringOrNil(r *rand.Rand) *string {
	if r.IntN(3) == 0 {
		return nil
	}
	s := String(r)
	return &s
}
