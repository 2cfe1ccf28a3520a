package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math"
	"strconv"
	"strings"
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

// maxJSONText is the longest text CheckJSON takes: it keeps offsets in 32 bits. No
// door of agentrt's lets a JSON value come near it.
const maxJSONText = math.MaxInt32

// MaxJSONNumberBytes bounds the text of one number in a JSON value agentrt stores.
// Every IEEE 754 double fits in it as the encoders in use write doubles: in 24 bytes
// at most in the shortest form with an exponent (-2.2250738585072014e-308, as Go,
// JavaScript, Python and serde_json write it), 327 in the shortest form without
// one (-5e-324 written out as -0.000…5, as Rust's Display and Go's 'f' format
// write it), 317 in C's %f (-1.7976931348623157e308 written out); every 64-bit
// integer fits in 20. A longer number carries digits no double keeps (RFC 7493 §2.2
// asks for strings there). It stays below what readers refuse: Python's int limit
// (4300 digits, 640 at its lowest setting) and Jackson's maxNumberLength (1000).
const MaxJSONNumberBytes = 400

// CheckJSON reports whether b is exactly one JSON value (RFC 8259; surrounding
// whitespace allowed) that agentrt will store and serve: an I-JSON message
// (RFC 7493), nested at most maxDepth deep. That is: valid UTF-8 throughout, no
// \u escape that leaves a lone surrogate; no two members of one object with the same
// name (compared as decoded, so "a" and "\u0061" are the same name); every number
// at most MaxJSONNumberBytes long and within the range of an IEEE 754 double, that
// is, one that does not round to ±Infinity when read as one (1.7976931348623157e308
// is the largest; 1.8e308 and 1e400 are refused). A number that underflows, 1e-400,
// is taken: every reader reads it alike, as 0 or the nearest subnormal. So are
// integers beyond 2^53, such as nanosecond timestamps: a reader of doubles rounds
// them (RFC 7493 says a sender cannot expect more), readers of integers keep them,
// and agentrt serves them as they were sent. A maxDepth below 0 is 0 (scalars only);
// above 10000 it is 10000.
//
// json.Valid and json.Unmarshal accept what this refuses: raw bytes that are not UTF-8
// inside strings, escapes such as "\ud800" that strict parsers (serde_json, for one)
// refuse, duplicate names that parsers read differently (the first, the last, or an
// error), 1e400 (Infinity in JavaScript, an error for encoding/json into any) and a
// 100,000-digit integer (an error in Python). Once stored, any of them would make
// every list that shows the value unparsable, or read differently, for some clients,
// so values from clients and plugins are checked here before they are stored.
//
// What it costs: one pass over b, no recursion. The names of the members of the
// objects open are kept, to compare: up to 16 in an object, one by one (most pairs
// told apart by their length, first and last bytes); past 16, in a hash set. It
// allocates nothing for a value whose open objects hold at most 16 names in all,
// nest at most 8 objects deep and have no names with escapes, unless it returns an
// error. It scans a create-task body in about 0.17 µs, a 4 KiB object in about
// 5 µs and a 1 MiB one in about 1.3 ms (800 MB/s), half the time json.Valid alone
// takes; the I-JSON rules cost 10 to 18% of that (BenchmarkCheckJSON, on a busy
// 2-core AMD EPYC). The worst of texts for it, one object of short names (100,000
// in 1 MiB), takes 8 to 14 ms a MiB (encoding/json takes 29 to decode it into an
// any) and allocates 7 times its size, at most about 4.5 times live at once.
//
// The error is a *jsonTextError whose text, fit for a client, names the problem and
// its byte offset (counted from 0); for a number or a duplicate name, also where it
// is, as a path such as additional_input.a.b[3], never the value itself.
func CheckJSON(b []byte, maxDepth int) error {
	return CheckJSONFields(b, maxDepth, nil)
}

// CheckJSONFields is CheckJSON for a value that will be decoded into a Go value
// whose fields are fields (JSONFieldsOf; nil for none): in the same pass, it
// refuses what fields.Check refuses, a member named as a field only in another case,
// with a *JSONNameError. It costs what CheckJSON does and, for each name of an
// object decoded into a struct, a few comparisons with the struct's fields: about
// 17 ns more (10%) for a create-task body, 75 ns (25%) for one that plans three
// steps (BenchmarkCheckJSONFields).
func CheckJSONFields(b []byte, maxDepth int, fields *JSONFields) error {
	maxDepth = min(max(maxDepth, 0), maxJSONNesting)
	// Bit d of inObject is set while the container at depth d+1 is an object and
	// clear while it is an array.
	var inObject [(maxJSONNesting + 63) / 64]uint64
	depth := 0
	if len(b) > maxJSONText {
		return &jsonTextError{fault: jsonTooLarge, offset: maxJSONText}
	}
	// The names of the members of the objects open, to find duplicates.
	var m jsonMembers
	// The containers open that decode into fields, to check their names.
	t := jsonFieldsTrack{next: fields}
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
			if t.next != nil {
				t.open(c, i)
			}
			i = skipJSONSpace(b, i+1)
			if c == '[' {
				inObject[word] &^= bit
				if i < len(b) && b[i] == ']' {
					i++
					t.close(depth)
					depth--
					break // the empty array is the value that ends here
				}
				continue
			}
			inObject[word] |= bit
			if i < len(b) && b[i] == '}' {
				i++
				t.close(depth)
				depth--
				break // the empty object is the value that ends here
			}
			m.open()
			if i, err = m.scanKey(b, i); err != nil {
				return err
			}
			if depth == t.n {
				if err = t.member(b, m.text(b, m.nNames-1), m.name(m.nNames-1).sum); err != nil {
					return err
				}
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
					if i, err = m.scanKey(b, i); err != nil {
						return err
					}
				}
				if depth == t.n {
					if object {
						err = t.member(b, m.text(b, m.nNames-1), m.name(m.nNames-1).sum)
					} else {
						t.element()
					}
					if err != nil {
						return err
					}
				}
				break next
			case i < len(b) && (b[i] == ']' && !object || b[i] == '}' && object):
				if object {
					m.close()
				}
				i++
				t.close(depth)
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

// scanKey checks the object key at b[i], that no earlier member of its object has
// the same name, the colon after it and the whitespace around them, and returns
// where the key's value starts.
func (m *jsonMembers) scanKey(b []byte, i int) (int, error) {
	if i == len(b) || b[i] != '"' {
		return 0, malformedJSON(b, i, "a string as an object key")
	}
	at := i
	i, escapes, err := scanJSONStringEscapes(b, i)
	if err != nil {
		return 0, err
	}
	if m.add(b, at+1, i-1, escapes) {
		return 0, &jsonTextError{fault: jsonDuplicateName, offset: at, path: jsonPathAt(b, at)}
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
	end, _, err := scanJSONStringEscapes(b, i)
	return end, err
}

// scanJSONStringEscapes is scanJSONString, and says whether the string has escapes.
func scanJSONStringEscapes(b []byte, i int) (end int, escapes bool, err error) {
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
			return 0, false, malformedJSON(b, i, `'"' to end the string`)
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escapes, nil
		case c == '\\':
			if i, err = scanJSONEscape(b, i); err != nil {
				return 0, false, err
			}
			escapes = true
		case c < 0x20:
			return 0, false, &jsonTextError{fault: jsonControl, offset: i, found: rune(c)}
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return 0, false, &jsonTextError{fault: jsonBadUTF8, offset: i}
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

// scanJSONNumber checks the number that starts at b[i], its grammar and then that it
// is at most MaxJSONNumberBytes long and does not round to ±Infinity as a double, and
// returns the offset just past it.
func scanJSONNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
		if i == len(b) || b[i] < '0' || b[i] > '9' {
			return 0, malformedJSON(b, i, "a digit after '-'")
		}
	}
	intAt := i
	if b[i] == '0' {
		i++
		if i < len(b) && '0' <= b[i] && b[i] <= '9' {
			return 0, malformedJSON(b, i, "no digit after a leading 0")
		}
	} else {
		i = skipDigits(b, i)
	}
	intEnd, fracEnd := i, i
	if i < len(b) && b[i] == '.' {
		i++
		if i == len(b) || b[i] < '0' || b[i] > '9' {
			return 0, malformedJSON(b, i, "a digit after '.'")
		}
		i = skipDigits(b, i)
		fracEnd = i
	}
	expAt := -1 // past the 'e'
	if i < len(b) && b[i]|0x20 == 'e' {
		i++
		expAt = i
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i == len(b) || b[i] < '0' || b[i] > '9' {
			return 0, malformedJSON(b, i, "a digit in the exponent")
		}
		i = skipDigits(b, i)
	}
	if i-start > MaxJSONNumberBytes {
		return 0, &jsonTextError{fault: jsonNumberTooLong, offset: start, length: i - start, path: jsonPathAt(b, start)}
	}
	// A number below 10^308 fits; without an exponent, that is one of at most 308
	// integer digits.
	if expAt >= 0 || intEnd-intAt > 308 {
		exp := b[i:i]
		if expAt >= 0 {
			exp = b[expAt:i]
		}
		if !fitsDouble(b[start:i], b[intAt:intEnd], b[intEnd:fracEnd], exp) {
			return 0, &jsonTextError{fault: jsonNumberRange, offset: start, path: jsonPathAt(b, start)}
		}
	}
	return i, nil
}

// fitsDouble reports whether the number num, whose integer digits are intPart, whose
// fraction is frac ("" or '.' and digits) and whose exponent is exp ("" or an
// optional sign and digits), does not round to ±Infinity when read as an IEEE 754
// double (round to
// nearest, as JavaScript, Python and Go read it). It decides from the position of the
// first significant digit, and asks strconv.ParseFloat only when that is 10^308 (which
// allocates num as a string, at most MaxJSONNumberBytes).
func fitsDouble(num, intPart, frac, exp []byte) bool {
	// lead is the power of ten of the first digit that is not 0.
	lead := len(intPart) - 1
	if intPart[0] == '0' {
		k := 1 // past the '.'
		for k < len(frac) && frac[k] == '0' {
			k++
		}
		if k >= len(frac) {
			return true // zero, whatever its exponent
		}
		lead = -k
	}
	neg := len(exp) > 0 && exp[0] == '-'
	if len(exp) > 0 && (neg || exp[0] == '+') {
		exp = exp[1:]
	}
	e := 0
	for _, c := range exp {
		e = min(e*10+int(c-'0'), 1<<20) // far past any double, and far from overflow
	}
	if neg {
		e = -e
	}
	switch e += lead; {
	case e < 308:
		return true
	case e > 308:
		return false
	}
	f, _ := strconv.ParseFloat(string(num), 64)
	return !math.IsInf(f, 0)
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
	jsonDuplicateName                  // a member name its object has already (I-JSON)
	jsonNumberRange                    // a number that rounds to ±Infinity as a double (I-JSON)
	jsonNumberTooLong                  // a number longer than MaxJSONNumberBytes
	jsonTooLarge                       // a text longer than maxJSONText
)

// jsonTextError is why CheckJSON refused a value. Its text is fit for a client.
type jsonTextError struct {
	fault  jsonFault
	offset int // of the first byte that cannot be accepted, counted from 0

	expected string  // jsonMalformed: what the grammar allows at offset
	found    rune    // jsonMalformed, jsonControl: the character at offset; -1 at the end of the input
	escape   [4]byte // jsonLoneSurrogate: the escape's hex digits as written
	maxDepth int     // jsonTooDeep
	length   int     // jsonNumberTooLong: the number's length
	path     string  // jsonDuplicateName, jsonNumber*: where the value or member is (jsonPathAt)
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
	case jsonTooLarge:
		return fmt.Sprintf("a JSON text over %d bytes", maxJSONText)
	case jsonDuplicateName:
		return fmt.Sprintf("duplicate member name at %s (byte %d): the names in one object must differ (I-JSON, RFC 7493)", e.where(), e.offset)
	case jsonNumberRange:
		return fmt.Sprintf("number out of range at %s (byte %d): it is beyond ±1.7976931348623157e308, the largest IEEE 754 double (I-JSON, RFC 7493)", e.where(), e.offset)
	case jsonNumberTooLong:
		return fmt.Sprintf("number too long at %s (byte %d): %d bytes, over the %d a number may take; send it as a string (I-JSON, RFC 7493)", e.where(), e.offset, e.length, MaxJSONNumberBytes)
	}
	found := "the end of the input"
	if e.found >= 0 && unicode.IsPrint(e.found) {
		found = fmt.Sprintf("%q", e.found)
	} else if e.found >= 0 {
		found = fmt.Sprintf("U+%04X", e.found)
	}
	return fmt.Sprintf("malformed JSON at byte %d: expected %s, found %s", e.offset, e.expected, found)
}

// where is the error's path, or what stands for the whole value.
func (e *jsonTextError) where() string {
	if e.path == "" {
		return "the top level"
	}
	return e.path
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

// linearNames is how many member names of one object are compared one by one; past
// it, the object's names go into a hash set.
const linearNames = 16

// jsonMembers is what CheckJSON keeps to find duplicate member names: the names of
// the members of every object open at once, the innermost object's last. The first
// names and objects are kept in arrays, in CheckJSON's frame; only those past them,
// names written with escapes and the sets of large objects are allocated.
type jsonMembers struct {
	names       [16]jsonName
	moreNames   []jsonName // names past len(names)
	nNames      int
	objects     [8]jsonObject
	moreObjects []jsonObject // open objects past len(objects)
	nObjects    int
	decoded     []byte       // names written with escapes, decoded
	seed        maphash.Seed // for every set; made with the first
	spare       *jsonNameSet // a set of the smallest size, emptied, for the next object that needs one
}

// jsonName is a member name as decoded: b[lo:hi] of the text checked, or, for a
// name written with escapes, decoded[-lo-1:hi]. Names of different sums (their
// length, first and last bytes) differ: the sum spares comparing most of them.
type jsonName struct {
	lo, hi int32
	sum    uint32
}

// nameSum is the sum of a name's decoded bytes.
func nameSum(name []byte) uint32 {
	if len(name) == 0 {
		return 0
	}
	return uint32(len(name))<<16 | uint32(name[0])<<8 | uint32(name[len(name)-1])
}

// jsonObject is an open object: names first and after are its members so far.
type jsonObject struct {
	first   int32
	decoded int32        // len(decoded) when it opened
	sums    uint64       // bit sum*φ>>58 of each name's sum: a name whose bit is clear is new
	set     *jsonNameSet // its names once it has more than linearNames
}

// name is the kth name kept.
func (m *jsonMembers) name(k int) *jsonName {
	if k < len(m.names) {
		return &m.names[k]
	}
	return &m.moreNames[k-len(m.names)]
}

// object is the innermost open object.
func (m *jsonMembers) object() *jsonObject {
	if k := m.nObjects - 1; k < len(m.objects) {
		return &m.objects[k]
	}
	return &m.moreObjects[m.nObjects-1-len(m.objects)]
}

// open starts the members of an object.
func (m *jsonMembers) open() {
	o := jsonObject{first: int32(m.nNames), decoded: int32(len(m.decoded))}
	if m.nObjects < len(m.objects) {
		m.objects[m.nObjects] = o
	} else {
		m.moreObjects = appendDoubling(m.moreObjects[:m.nObjects-len(m.objects)], o)
	}
	m.nObjects++
}

// close forgets the members of the innermost object.
func (m *jsonMembers) close() {
	o := m.object()
	m.nNames, m.decoded = int(o.first), m.decoded[:o.decoded]
	m.nObjects--
	if o.set != nil && len(o.set.slots) == smallSet {
		// Emptying it costs what making one would: reusing it spares the garbage
		// of an array of objects of a few more names than linearNames.
		clear(o.set.slots)
		o.set.n = 0
		m.spare = o.set
	}
}

// text is name k's decoded bytes.
func (m *jsonMembers) text(b []byte, k int) []byte {
	n := m.name(k)
	if n.lo < 0 {
		return m.decoded[-n.lo-1 : n.hi]
	}
	return b[n.lo:n.hi]
}

// add adds the name b[lo:hi] (a string's content, checked, with escapes or not)
// to the innermost open object, and reports whether the object has a member of
// that name already.
func (m *jsonMembers) add(b []byte, lo, hi int, escapes bool) (duplicate bool) {
	name := b[lo:hi]
	n := jsonName{lo: int32(lo), hi: int32(hi)}
	if escapes {
		start := len(m.decoded)
		m.decoded = appendUnescaped(m.decoded, name)
		name = m.decoded[start:]
		n = jsonName{lo: -int32(start) - 1, hi: int32(len(m.decoded))}
	}
	n.sum = nameSum(name)
	k := m.nNames
	if k < len(m.names) {
		m.names[k] = n
	} else {
		m.moreNames = appendDoubling(m.moreNames[:k-len(m.names)], n)
	}
	o := m.object()
	if o.set != nil {
		if !o.set.insert(m, b, k) {
			return true
		}
		m.nNames++
		return false
	}
	bit := uint64(1) << (n.sum * 0x9e3779b9 >> 26)
	if o.sums&bit == 0 {
		o.sums |= bit // no name so far has this one's sum
	} else if k < len(m.names) { // all in the array
		for j, other := range m.names[o.first:k] {
			if other.sum == n.sum && bytes.Equal(m.text(b, int(o.first)+j), name) {
				return true
			}
		}
	} else {
		for j := int(o.first); j < k; j++ {
			if m.name(j).sum == n.sum && bytes.Equal(m.text(b, j), name) {
				return true
			}
		}
	}
	m.nNames++
	if m.nNames-int(o.first) > linearNames {
		if m.seed == (maphash.Seed{}) {
			m.seed = maphash.MakeSeed()
		}
		if o.set, m.spare = m.spare, nil; o.set == nil {
			o.set = &jsonNameSet{slots: make([]uint64, smallSet)}
		}
		for j := int(o.first); j < m.nNames; j++ {
			o.set.insert(m, b, j)
		}
	}
	return false
}

// appendDoubling is append that doubles what it allocates when it must grow: so all
// it allocates for a slice is at most twice what the slice holds at the end (append
// grows large slices by a quarter: five times).
func appendDoubling[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		grown := make([]T, len(s), max(2*len(s), 64))
		copy(grown, s)
		s = grown
	}
	return append(s, v)
}

// smallSet is how many slots a jsonNameSet starts with.
const smallSet = 4 * linearNames

// jsonNameSet is the set of the member names of one object with many, by open
// addressing with linear probing: a slot holds the high 32 bits of a name's hash
// and 1 + its index in jsonMembers, or 0. With the hash in the slot, a probe reads
// a name only when their hashes match, and growing reads no name at all.
type jsonNameSet struct {
	slots []uint64 // a power of two, at most half full
	n     int
}

// insert adds name k unless a name equal to it is in the set already, and reports
// whether it added it.
func (s *jsonNameSet) insert(m *jsonMembers, b []byte, k int) bool {
	if 2*(s.n+1) > len(s.slots) {
		old := s.slots
		s.slots = make([]uint64, 2*len(old))
		for _, v := range old {
			if v != 0 {
				s.place(v)
			}
		}
	}
	name := m.text(b, k)
	hash := maphash.Bytes(m.seed, name) &^ (1<<32 - 1)
	mask := uint64(len(s.slots) - 1)
	for h := hash >> 32 & mask; ; h = (h + 1) & mask {
		v := s.slots[h]
		if v == 0 {
			s.slots[h] = hash | uint64(k+1)
			s.n++
			return true
		}
		if v&^(1<<32-1) == hash && bytes.Equal(m.text(b, int(v&(1<<32-1))-1), name) {
			return false
		}
	}
}

// place puts slot v, for a name not in the set, where it goes.
func (s *jsonNameSet) place(v uint64) {
	mask := uint64(len(s.slots) - 1)
	h := v >> 32 & mask
	for s.slots[h] != 0 {
		h = (h + 1) & mask
	}
	s.slots[h] = v
}

// appendUnescaped appends the content of a JSON string, s (between its quotes, and
// checked: every escape is whole, every surrogate escape one of a pair), decoded.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch s[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(s, i+2)
			if utf16.IsSurrogate(r) {
				low, _ := hex4(s, i+8)
				r = utf16.DecodeRune(r, low)
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			i += 6
			continue
		default: // " \ /
			dst = append(dst, s[i+1])
		}
		i += 2
	}
	return dst
}

// maxPathBytes bounds the path an error names; a longer one keeps its end.
const maxPathBytes = 200

// maxPathName bounds each name in the path an error names, in characters.
const maxPathName = 40

// jsonPathAt is where in the value b the value or member name at b[at] is, as a
// message writes it: a.b[3], a["a b"]; "" for the value itself. b[:at] must be JSON
// text CheckJSON has scanned without fault. It walks b again, so it is for errors
// only.
func jsonPathAt(b []byte, at int) string {
	type frame struct {
		object bool
		name   [2]int // where the name of the member being read is written, quotes excluded
		index  int
	}
	var stack []frame
	expectName := false
	for i := 0; i < at; {
		switch b[i] {
		case '{':
			stack = append(stack, frame{object: true})
			expectName = true
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
			stack = stack[:len(stack)-1]
			expectName = false
		case ',':
			if top := &stack[len(stack)-1]; top.object {
				expectName = true
			} else {
				top.index++
			}
		case '"':
			end, _ := scanJSONString(b, i)
			if expectName {
				stack[len(stack)-1].name = [2]int{i + 1, end - 1}
				expectName = false
			}
			i = end
			continue
		}
		i++ // white space, ':', and the bytes of numbers and literals
	}
	if expectName && at < len(b) && b[at] == '"' { // the name of a member is at b[at]
		end, _ := scanJSONString(b, at)
		stack[len(stack)-1].name = [2]int{at + 1, end - 1}
	}
	var p strings.Builder
	for _, f := range stack {
		if !f.object {
			fmt.Fprintf(&p, "[%d]", f.index)
			continue
		}
		name := string(appendUnescaped(nil, b[f.name[0]:f.name[1]]))
		switch {
		case pathIdentifier(name) && p.Len() == 0:
			p.WriteString(name)
		case pathIdentifier(name):
			p.WriteByte('.')
			p.WriteString(name)
		case utf8.RuneCountInString(name) > maxPathName:
			fmt.Fprintf(&p, "[%s…]", strconv.Quote(string([]rune(name)[:maxPathName])))
		default:
			fmt.Fprintf(&p, "[%s]", strconv.Quote(name))
		}
	}
	path := p.String()
	if len(path) > maxPathBytes {
		cut := len(path) - maxPathBytes
		for cut < len(path) && !utf8.RuneStart(path[cut]) {
			cut++
		}
		path = "…" + path[cut:]
	}
	return path
}

// pathIdentifier reports whether a member name reads unquoted in a path: ASCII
// letters, digits, '_' and '-', at most maxPathName of them.
func pathIdentifier(s string) bool {
	if s == "" || len(s) > maxPathName {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
