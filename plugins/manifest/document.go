package manifest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// document is a manifest's JSON text, decoded: the value the schema
// validates and where each of its values starts in the text.
type document struct {
	// value is a map[string]any, []any, string, json.Number, bool or nil,
	// as the schema validator takes them.
	value any
	// at is the byte offset of each value, by its location (pointer).
	at map[string]int64
}

// keys are the names of the object obj at loc, in the order the file
// has them.
func (d *document) keys(loc []string, obj map[string]any) []string {
	type member struct {
		name string
		at   int64
	}
	members := make([]member, 0, len(obj))
	for name := range obj {
		members = append(members, member{name, d.at[pointer(append(loc[:len(loc):len(loc)], name))]})
	}
	slices.SortFunc(members, func(a, b member) int { return cmp.Compare(a.at, b.at) })
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.name
	}
	return names
}

// maxDepth bounds how deep a manifest nests. Its own fields are two
// deep (limits.memory); anything deeper is refused by the schema anyway,
// and the bound keeps what it costs to find out small.
const maxDepth = 32

// maxExponent bounds the exponent of a number. No number a manifest
// holds is near 10^400, while the schema validator parses numbers
// exactly: 1e1000000, nine bytes, takes it about 0.1 s and 400 KB.
const maxExponent = 400

// maxNumberBytes bounds the text of a number, as agentrt bounds every JSON
// value it takes (protocol.MaxJSONNumberBytes): every double is written in
// at most 327 bytes, even without an exponent (-5e-324 written out).
const maxNumberBytes = 400

// scan decodes data, one JSON value and nothing after it, into a
// document. It refuses what the JSON decoder would let through or
// quietly change: duplicate fields, invalid UTF-8 and lone surrogates
// (which it turns into U+FFFD); and, as every JSON value agentrt takes is
// I-JSON (RFC 7493), numbers that are not: longer than maxNumberBytes, or
// that round to ±Infinity as an IEEE 754 double (1e400); and numbers with
// huge exponents, even ones that are 0 as a double (1e-401).
func scan(data []byte) (*document, error) {
	s := &scanner{data: data, dec: json.NewDecoder(bytes.NewReader(data)), at: map[string]int64{}}
	s.dec.UseNumber()
	v, err := s.value(nil)
	if err != nil {
		return nil, err
	}
	end := s.dec.InputOffset()
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("data after the JSON object, at %s", s.position(int64(len(data)-len(rest))))
	}
	return &document{value: v, at: s.at}, nil
}

type scanner struct {
	data []byte
	dec  *json.Decoder
	at   map[string]int64
}

// token returns the next token and the text it was read from.
func (s *scanner) token() (json.Token, []byte, error) {
	start := s.dec.InputOffset()
	tok, err := s.dec.Token()
	if err != nil {
		return nil, nil, err
	}
	text := s.data[start:s.dec.InputOffset()]
	// The text starts after the previous token: drop what separates them.
	return tok, bytes.TrimLeft(text, " \t\r\n,:"), nil
}

// value decodes the value at loc.
func (s *scanner) value(loc []string) (any, error) {
	if len(loc) > maxDepth {
		return nil, fmt.Errorf("%s: nested deeper than %d levels", path(loc), maxDepth)
	}
	tok, text, err := s.token()
	if err != nil {
		if len(loc) == 0 && err == io.EOF {
			return nil, errors.New("empty: want a JSON object such as {}")
		}
		return nil, s.syntaxError(err)
	}
	s.at[pointer(loc)] = s.dec.InputOffset() - int64(len(text))
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '[' {
			return s.array(loc)
		}
		return s.object(loc)
	case string:
		if err := checkString(text); err != nil {
			return nil, fmt.Errorf("%s: %w", path(loc), err)
		}
	case json.Number:
		if err := checkNumber(string(tok)); err != nil {
			return nil, fmt.Errorf("%s: %w", path(loc), err)
		}
	}
	return tok, nil
}

func (s *scanner) object(loc []string) (any, error) {
	obj := map[string]any{}
	for s.dec.More() {
		tok, text, err := s.token()
		if err != nil {
			return nil, s.syntaxError(err)
		}
		key, ok := tok.(string)
		if !ok { // the decoder reads a string here or fails: cannot be
			return nil, errors.New("invalid JSON: a field name that is not a string")
		}
		field := append(loc[:len(loc):len(loc)], key)
		if err := checkString(text); err != nil {
			return nil, fmt.Errorf("%s: field name: %w", path(field), err)
		}
		if _, dup := obj[key]; dup {
			return nil, fmt.Errorf("duplicate field %s", quotePath(field))
		}
		if obj[key], err = s.value(field); err != nil {
			return nil, err
		}
	}
	if _, _, err := s.token(); err != nil { // '}'
		return nil, s.syntaxError(err)
	}
	return obj, nil
}

func (s *scanner) array(loc []string) (any, error) {
	arr := []any{}
	for s.dec.More() {
		v, err := s.value(append(loc[:len(loc):len(loc)], strconv.Itoa(len(arr))))
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
	}
	if _, _, err := s.token(); err != nil { // ']'
		return nil, s.syntaxError(err)
	}
	return arr, nil
}

// checkNumber refuses a number that is not I-JSON, or whose exponent is
// huge.
func checkNumber(num string) error {
	if len(num) > maxNumberBytes {
		return fmt.Errorf("number %s is too long: %d bytes, over the %d a number may take", truncate(num), len(num), maxNumberBytes)
	}
	if e := strings.IndexAny(num, "eE"); e >= 0 {
		if n, err := strconv.Atoi(num[e+1:]); err != nil || n > maxExponent || n < -maxExponent {
			return fmt.Errorf("number %s is out of range", truncate(num))
		}
	}
	if f, _ := strconv.ParseFloat(num, 64); math.IsInf(f, 0) {
		return fmt.Errorf("number %s is out of range: beyond ±1.7976931348623157e308, the largest IEEE 754 double", truncate(num))
	}
	return nil
}

// syntaxError says where the JSON text is wrong.
func (s *scanner) syntaxError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		msg := se.Error()
		// The decoder names a byte as a character: Ã for the first of é.
		if off := se.Offset; off < int64(len(s.data)) && s.data[off] >= utf8.RuneSelf {
			msg = "not valid UTF-8"
			if r, _ := utf8.DecodeRune(s.data[off:]); r != utf8.RuneError {
				msg = fmt.Sprintf("invalid character %q", r)
			}
		}
		return fmt.Errorf("invalid JSON at %s: %s", s.position(se.Offset), msg)
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON: unexpected end of file")
	}
	return err
}

// position is offset as a line and a column (in bytes), counting from 1.
func (s *scanner) position(offset int64) string {
	before := s.data[:min(offset, int64(len(s.data)))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

// checkString refuses a JSON string literal that is not valid UTF-8 or
// holds an escaped lone surrogate: the decoder would turn either into
// U+FFFD, and the manifest would not say what it is read to say.
func checkString(lit []byte) error {
	if !utf8.Valid(lit) {
		return errors.New("not valid UTF-8")
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		if i+1 >= len(lit) || lit[i+1] != 'u' {
			i++ // a one-letter escape, \\ included
			continue
		}
		r := hex4(lit[i+2:])
		i += 5
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r < 0xdc00 && i+6 < len(lit) && lit[i+1] == '\\' && lit[i+2] == 'u' {
			if low := hex4(lit[i+3:]); 0xdc00 <= low && low <= 0xdfff {
				i += 6
				continue
			}
		}
		return fmt.Errorf(`\u%04x is half of a UTF-16 surrogate pair, not a character`, r)
	}
	return nil
}

// hex4 is the value of the four hex digits b starts with (the decoder
// checked them); -1 if b is too short.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	if err != nil {
		return -1
	}
	return rune(n)
}

// pointer is loc as a JSON pointer (RFC 6901): the key of document.at.
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		pointerEscaper.WriteString(&b, tok)
	}
	return b.String()
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// path is loc as messages write it: limits.memory, settings["a b"].
func path(loc []string) string {
	var b strings.Builder
	for i, tok := range loc {
		switch {
		case isIdentifier(tok) && i == 0:
			b.WriteString(tok)
		case isIdentifier(tok):
			b.WriteByte('.')
			b.WriteString(tok)
		default:
			fmt.Fprintf(&b, "[%s]", quote(tok))
		}
	}
	return b.String()
}

// quotePath is loc quoted for a message: "limits.memory",
// settings["a b"].
func quotePath(loc []string) string {
	p := path(loc)
	if strings.Contains(p, `"`) {
		return p
	}
	return `"` + p + `"`
}

// isIdentifier reports whether a field name reads unquoted in a path.
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// maxQuoted is how much of a value a message quotes.
const maxQuoted = 40

// truncate shortens s, if need be, for a message.
func truncate(s string) string {
	if utf8.RuneCountInString(s) <= maxQuoted {
		return s
	}
	return string([]rune(s)[:maxQuoted]) + "…"
}

// quote is s quoted for a message, shortened if need be.
func quote(s string) string {
	if utf8.RuneCountInString(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(string([]rune(s)[:maxQuoted])) + "…"
}

// describe is a decoded value as a message shows it: "lots", 12, true,
// null, an object, an array.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		return quote(v)
	case json.Number:
		return truncate(string(v))
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprint(v)
}
