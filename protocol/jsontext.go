package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxJSONDepth is how deeply arrays and objects may nest in a JSON value agentrt stores.
const MaxJSONDepth = 100

// maxJSONNesting is the deepest nesting CheckJSON can follow, and encoding/json's own
// limit; a larger maxDepth is treated as this one. The bit stack that follows it is
// 1.25 KiB of CheckJSON's stack frame, zeroed on every call: about 40 ns, most of the
// time CheckJSON takes for a value as small as {"a":1}.
const maxJSONNesting = 10000

// CheckJSON reports whether b is exactly one JSON value (RFC 8259; surrounding
// whitespace allowed) that agentrt will store and serve: valid UTF-8 throughout, no
// \u escape that leaves a lone surrogate, arrays and objects nested at most maxDepth
// deep. A maxDepth below 0 is 0 (scalars only); above 10000 it is 10000.
//
// json.Valid and json.Unmarshal accept what this refuses: raw bytes that are not UTF-8
// inside strings, and escapes such as "\ud800" that strict parsers (serde_json, for one)
// refuse. Once stored, either would make every list that shows the value unparsable for
// such clients, so values from clients and plugins are checked here before they are
// stored.
//
// What it costs: one pass over b, no recursion, no allocation unless it returns an
// error. It scans a 4 KiB object in about 5 µs and a 1 MiB one in about 1.5 ms
// (700 MB/s), a third of the time json.Valid alone takes (BenchmarkCheckJSON, on a
// busy 2-core AMD EPYC).
//
// The error is a *jsonTextError whose text, fit for a client, names the problem and
// its byte offset (counted from 0).
func CheckJSON(b []byte, maxDepth int) error {
	maxDepth = min(max(maxDepth, 0), maxJSONNesting)
	// Bit d of inObject is set while the container at depth d+1 is an object and
	// clear while it is an array.
	var inObject [(maxJSONNesting + 63) / 64]uint64
	depth := 0
	i := skipJSONSpace(b, 0)
	if i == len(b) {
		return &jsonTextError{fault: jsonNoValue, offset: i}
	}
	for {
		// A value starts at b[i].
		if i == len(b) {
			return malformedJSON(b, i, "a value")
		}
		var err error
		switch c := b[i]; c {
		case '[', '{':
			if depth == maxDepth {
				return &jsonTextError{fault: jsonTooDeep, offset: i, maxDepth: maxDepth}
			}
			word, bit := uint(depth)/64, uint64(1)<<(uint(depth)%64)
			depth++
			i = skipJSONSpace(b, i+1)
			if c == '[' {
				inObject[word] &^= bit
				if i < len(b) && b[i] == ']' {
					i++
					depth--
					break // the empty array is the value that ends here
				}
				continue
			}
			inObject[word] |= bit
			if i < len(b) && b[i] == '}' {
				i++
				depth--
				break // the empty object is the value that ends here
			}
			if i, err = scanJSONKey(b, i); err != nil {
				return err
			}
			continue
		case '"':
			i, err = scanJSONString(b, i)
		case 't':
			i, err = scanJSONLiteral(b, i, "true")
		case 'f':
			i, err = scanJSONLiteral(b, i, "false")
		case 'n':
			i, err = scanJSONLiteral(b, i, "null")
		default:
			if c != '-' && (c < '0' || c > '9') {
				return malformedJSON(b, i, "a value")
			}
			i, err = scanJSONNumber(b, i)
		}
		if err != nil {
			return err
		}
		// A value ends at b[i]: close the containers that end with it, then move to
		// where the next value starts.
	next:
		for {
			i = skipJSONSpace(b, i)
			if depth == 0 {
				if i < len(b) {
					return afterJSONValue(b, i)
				}
				return nil
			}
			d := uint(depth - 1)
			object := inObject[d/64]>>(d%64)&1 == 1
			switch {
			case i < len(b) && b[i] == ',':
				i = skipJSONSpace(b, i+1)
				if object {
					if i, err = scanJSONKey(b, i); err != nil {
						return err
					}
				}
				break next
			case i < len(b) && (b[i] == ']' && !object || b[i] == '}' && object):
				i++
				depth--
				continue
			}
			if object {
				return malformedJSON(b, i, "',' or '}'")
			}
			return malformedJSON(b, i, "',' or ']'")
		}
	}
}

// skipJSONSpace returns the offset of the first byte at or after b[i] that is not
// JSON whitespace (space, tab, LF, CR).
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// scanJSONKey checks the object key at b[i], the colon after it and the whitespace
// around them, and returns where the key's value starts.
func scanJSONKey(b []byte, i int) (int, error) {
	if i == len(b) || b[i] != '"' {
		return 0, malformedJSON(b, i, "a string as an object key")
	}
	i, err := scanJSONString(b, i)
	if err != nil {
		return 0, err
	}
	i = skipJSONSpace(b, i)
	if i == len(b) || b[i] != ':' {
		return 0, malformedJSON(b, i, "':' after an object key")
	}
	return skipJSONSpace(b, i+1), nil
}

// plainInJSONString[c] is whether byte c stands for itself in a JSON string: ASCII,
// not a control character, not a quote or backslash.
var plainInJSONString = func() (plain [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		plain[c] = c != '"' && c != '\\'
	}
	return plain
}()

// scanJSONString checks the string whose opening quote is b[i] and returns the
// offset just past its closing quote.
func scanJSONString(b []byte, i int) (int, error) {
	i++
	for {
		// Skip plain ASCII eight bytes at a time while no byte in the word is a quote,
		// a backslash, a control character or non-ASCII, then one byte at a time.
		for i+8 <= len(b) && !hasJSONSpecial(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plainInJSONString[b[i]] {
			i++
		}
		if i == len(b) {
			return 0, malformedJSON(b, i, `'"' to end the string`)
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			var err error
			if i, err = scanJSONEscape(b, i); err != nil {
				return 0, err
			}
		case c < 0x20:
			return 0, &jsonTextError{fault: jsonControl, offset: i, found: rune(c)}
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return 0, &jsonTextError{fault: jsonBadUTF8, offset: i}
			}
			i += n
		}
	}
}

// hasJSONSpecial reports whether any of the eight bytes in w is one a string scan
// must stop at: below 0x20, a quote, a backslash, or 0x80 and above. The bit tricks are
// haszero and hasless from "Bit Twiddling Hacks": exact about whether there is such
// a byte, not about which one it is.
func hasJSONSpecial(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quotes, backslashes := w^(ones*'"'), w^(ones*'\\')
	below20 := (w - ones*0x20) &^ w
	quote := (quotes - ones) &^ quotes
	backslash := (backslashes - ones) &^ backslashes
	return (below20|quote|backslash|w)&highs != 0
}

// scanJSONEscape checks the escape whose backslash is b[i] and returns the offset
// just past it.
func scanJSONEscape(b []byte, i int) (int, error) {
	if i+1 == len(b) {
		return 0, malformedJSON(b, i+1, jsonEscapeChars)
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
		return scanJSONHexEscape(b, i)
	}
	return 0, malformedJSON(b, i+1, jsonEscapeChars)
}

const jsonEscapeChars = `one of " \ / b f n r t u after '\'`

// scanJSONHexEscape checks the \uXXXX escape whose backslash is b[i] and returns the
// offset just past it; for the high half of a surrogate pair, past the low half too.
func scanJSONHexEscape(b []byte, i int) (int, error) {
	r, n := hex4(b, i+2)
	if n < 4 {
		return 0, malformedJSON(b, i+2+n, `four hex digits after \u`)
	}
	if !utf16.IsSurrogate(r) {
		return i + 6, nil
	}
	// A high surrogate (D800-DBFF) must be followed at once by the \u escape of a
	// low one (DC00-DFFF); a low one on its own, or a high one without its low, is
	// lone.
	if r < 0xdc00 && i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
		if low, n := hex4(b, i+8); n == 4 && 0xdc00 <= low && low <= 0xdfff {
			return i + 12, nil
		}
	}
	e := &jsonTextError{fault: jsonLoneSurrogate, offset: i}
	copy(e.escape[:], b[i+2:i+6])
	return 0, e
}

// hex4 returns the value of the hex digits at b[i:], up to four, and how many there are.
func hex4(b []byte, i int) (v rune, n int) {
	for ; n < 4 && i+n < len(b); n++ {
		c := b[i+n]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c|0x20 && c|0x20 <= 'f':
			c = c | 0x20 - 'a' + 10
		default:
			return v, n
		}
		v = v<<4 | rune(c)
	}
	return v, n
}

// scanJSONNumber checks the number that starts at b[i] and returns the offset just
// past it.
func scanJSONNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
		if i == len(b) || b[i] < '0' || b[i] > '9' {
			return 0, malformedJSON(b, i, "a digit after '-'")
		}
	}
	if b[i] == '0' {
		i++
		if i < len(b) && '0' <= b[i] && b[i] <= '9' {
			return 0, malformedJSON(b, i, "no digit after a leading 0")
		}
	} else {
		i = skipDigits(b, i)
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i == len(b) || b[i] < '0' || b[i] > '9' {
			return 0, malformedJSON(b, i, "a digit after '.'")
		}
		i = skipDigits(b, i)
	}
	if i < len(b) && b[i]|0x20 == 'e' {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i == len(b) || b[i] < '0' || b[i] > '9' {
			return 0, malformedJSON(b, i, "a digit in the exponent")
		}
		i = skipDigits(b, i)
	}
	return i, nil
}

// skipDigits returns the offset of the first byte at or after b[i] that is not a digit.
func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// scanJSONLiteral checks that lit (true, false or null) is at b[i] and returns the
// offset just past it.
func scanJSONLiteral(b []byte, i int, lit string) (int, error) {
	for j := range len(lit) {
		if i+j == len(b) || b[i+j] != lit[j] {
			return 0, malformedJSON(b, i+j, "the literal "+lit)
		}
	}
	return i + len(lit), nil
}

// jsonFault is what kind of thing CheckJSON refused.
type jsonFault uint8

const (
	jsonMalformed     jsonFault = iota // not RFC 8259 grammar
	jsonControl                        // a raw control character in a string
	jsonNoValue                        // empty, or only whitespace
	jsonDataAfter                      // something after the value
	jsonBadUTF8                        // bytes that are not UTF-8
	jsonLoneSurrogate                  // a \u escape of half a surrogate pair
	jsonTooDeep                        // nested deeper than allowed
)

// jsonTextError is why CheckJSON refused a value. Its text is fit for a client.
type jsonTextError struct {
	fault  jsonFault
	offset int // of the first byte that cannot be accepted, counted from 0

	expected string  // jsonMalformed: what the grammar allows at offset
	found    rune    // jsonMalformed, jsonControl: the character at offset; -1 at the end of the input
	escape   [4]byte // jsonLoneSurrogate: the escape's hex digits as written
	maxDepth int     // jsonTooDeep
}

func (e *jsonTextError) Error() string {
	switch e.fault {
	case jsonNoValue:
		return "no JSON value"
	case jsonDataAfter:
		return fmt.Sprintf("data after the JSON value at byte %d", e.offset)
	case jsonBadUTF8:
		return fmt.Sprintf("invalid UTF-8 at byte %d", e.offset)
	case jsonLoneSurrogate:
		return fmt.Sprintf(`a \u escape at byte %d is a lone surrogate (\u%s)`, e.offset, e.escape[:])
	case jsonTooDeep:
		return fmt.Sprintf("nested deeper than %d levels at byte %d", e.maxDepth, e.offset)
	case jsonControl:
		return fmt.Sprintf("malformed JSON at byte %d: unescaped control character U+%04X in a string", e.offset, e.found)
	}
	found := "the end of the input"
	if e.found >= 0 && unicode.IsPrint(e.found) {
		found = fmt.Sprintf("%q", e.found)
	} else if e.found >= 0 {
		found = fmt.Sprintf("U+%04X", e.found)
	}
	return fmt.Sprintf("malformed JSON at byte %d: expected %s, found %s", e.offset, e.expected, found)
}

// afterJSONValue is the error for b[i:], after the one value b may hold.
func afterJSONValue(b []byte, i int) error {
	if r, n := utf8.DecodeRune(b[i:]); r == utf8.RuneError && n == 1 {
		return &jsonTextError{fault: jsonBadUTF8, offset: i}
	}
	return &jsonTextError{fault: jsonDataAfter, offset: i}
}

// malformedJSON is the error for b[i] (or the end of b) where the grammar wants
// expected, or for the bytes there if they are not UTF-8.
func malformedJSON(b []byte, i int, expected string) error {
	e := &jsonTextError{fault: jsonMalformed, offset: i, expected: expected, found: -1}
	if i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return &jsonTextError{fault: jsonBadUTF8, offset: i}
		}
		e.found = r
	}
	return e
}

// ObjectOrEmpty checks that v is absent, null or a JSON object, and returns
// it with absent and null as {}.
func ObjectOrEmpty(field string, v json.RawMessage) (json.RawMessage, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || bytes.Equal(v, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if !isObject(v) {
		return nil, Errorf(EUNPROCESSABLE, "%s must be a JSON object", field)
	}
	return v, nil
}

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{' && json.Valid(v)
}

// MarshalJSON is json.Marshal without its escaping of <, > and & for
// HTML: each took 6 bytes (\u003c), so a message of names made of them
// was six times the size of their text. A string takes at most twice its
// bytes (a quote is \", U+2028 and U+2029 are still escaped); a control
// character 6, but names and paths refuse them. Everything agentrt
// writes as JSON (answers, handler input, the host API's answers, stored
// logs) is written with it. A step, every execute-step's answer, is
// written without reflection (jsonappend.go).
func MarshalJSON(v any) ([]byte, error) {
	if st, ok := v.(*Step); ok && st != nil {
		return st.appendJSON(make([]byte, 0, 512))
	}
	return encodeJSON(v)
}

// encodeJSON is MarshalJSON by encoding/json alone.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
