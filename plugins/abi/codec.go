package abi

import (
	"encoding/json"
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON codec for the ABI's messages, without reflection. The Go kit
// uses it so that a plugin built with TinyGo, whose reflection-based
// encoding/json is slow, spends its call on the handler rather than on
// decoding its input. The host uses encoding/json; the tests check that
// both read and write the same JSON.

// DecodeInput parses an Input message. Unknown fields are ignored.
func DecodeInput(data []byte) (*Input, error) {
	var in Input
	s := &scanner{b: data}
	err := s.object(func(key string) error {
		var err error
		switch key {
		case "abi":
			n := int64(in.ABI)
			err = into(s, &n, s.integer)
			in.ABI = int(n)
		case "handler":
			err = into(s, &in.Handler, s.str)
		case "task":
			err = s.task(&in.Task)
		case "step":
			if s.null() {
				return nil
			}
			in.Step = &Step{}
			err = s.object(func(key string) error {
				switch key {
				case "step_id":
					return into(s, &in.Step.StepID, s.str)
				case "name":
					return into(s, &in.Step.Name, s.nullableStr)
				case "input":
					return into(s, &in.Step.Input, s.nullableStr)
				case "additional_input":
					return into(s, &in.Step.AdditionalInput, s.raw)
				case "planned":
					return into(s, &in.Step.Planned, s.boolean)
				}
				return s.skip()
			})
		case "request":
			if s.null() {
				return nil
			}
			in.Request = &Request{}
			err = s.object(func(key string) error {
				switch key {
				case "input":
					return into(s, &in.Request.Input, s.nullableStr)
				case "additional_input":
					return into(s, &in.Request.AdditionalInput, s.raw)
				}
				return s.skip()
			})
		case "artifact":
			if s.null() {
				return nil
			}
			in.Artifact = &Artifact{}
			err = s.artifact(in.Artifact)
		default:
			err = s.skip()
		}
		return err
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return nil, err
	}
	return &in, nil
}

func (s *scanner) task(t *Task) error {
	return s.object(func(key string) error {
		switch key {
		case "task_id":
			return into(s, &t.TaskID, s.str)
		case "input":
			return into(s, &t.Input, s.nullableStr)
		case "additional_input":
			return into(s, &t.AdditionalInput, s.raw)
		case "artifacts":
			if s.null() {
				t.Artifacts = nil
				return nil
			}
			t.Artifacts = []Artifact{}
			return s.array(func() error {
				var a Artifact
				if err := s.artifact(&a); err != nil {
					return err
				}
				t.Artifacts = append(t.Artifacts, a)
				return nil
			})
		}
		return s.skip()
	})
}

func (s *scanner) artifact(a *Artifact) error {
	return s.object(func(key string) error {
		switch key {
		case "artifact_id":
			return into(s, &a.ArtifactID, s.str)
		case "agent_created":
			return into(s, &a.AgentCreated, s.boolean)
		case "file_name":
			return into(s, &a.FileName, s.str)
		case "relative_path":
			return into(s, &a.RelativePath, s.str)
		case "workspace_path":
			return into(s, &a.WorkspacePath, s.str)
		case "uri":
			return into(s, &a.URI, s.str)
		case "step_id":
			return into(s, &a.StepID, s.str)
		}
		return s.skip()
	})
}

// DecodeFileInfo parses a FileInfo (workspace_stat).
func DecodeFileInfo(data []byte) (FileInfo, error) {
	s := &scanner{b: data}
	var fi FileInfo
	err := s.fileInfo(&fi)
	if err == nil {
		err = s.end()
	}
	return fi, err
}

// DecodeFileInfos parses an array of FileInfo (workspace_list).
func DecodeFileInfos(data []byte) ([]FileInfo, error) {
	s := &scanner{b: data}
	var list []FileInfo
	err := s.array(func() error {
		var fi FileInfo
		if err := s.fileInfo(&fi); err != nil {
			return err
		}
		list = append(list, fi)
		return nil
	})
	if err == nil {
		err = s.end()
	}
	return list, err
}

func (s *scanner) fileInfo(fi *FileInfo) error {
	return s.object(func(key string) error {
		switch key {
		case "path":
			return into(s, &fi.Path, s.str)
		case "size":
			return into(s, &fi.Size, s.integer)
		case "mod_time":
			return into(s, &fi.ModTime, s.integer)
		}
		return s.skip()
	})
}

// DecodeStrings parses a JSON object of strings (config).
func DecodeStrings(data []byte) (map[string]string, error) {
	s := &scanner{b: data}
	m := map[string]string{}
	err := s.object(func(key string) error {
		v, err := s.str()
		m[key] = v
		return err
	})
	if err == nil {
		err = s.end()
	}
	return m, err
}

// AppendJSON appends r as JSON.
func (r *StepResult) AppendJSON(b []byte) []byte {
	w := objectWriter{b: append(b, '{')}
	if r.Output != nil {
		w.key("output")
		w.b = appendString(w.b, *r.Output)
	}
	if len(r.AdditionalOutput) > 0 {
		w.key("additional_output")
		w.b = append(w.b, r.AdditionalOutput...)
	}
	if r.Name != nil {
		w.key("name")
		w.b = appendString(w.b, *r.Name)
	}
	if r.IsLast {
		w.key("is_last")
		w.b = append(w.b, "true"...)
	}
	w.optional("error", r.Error)
	return append(w.b, '}')
}

// AppendJSON appends r as JSON.
func (r *TaskResult) AppendJSON(b []byte) []byte {
	w := objectWriter{b: append(b, '{')}
	if len(r.Steps) > 0 {
		w.key("steps")
		w.b = append(w.b, '[')
		for i, st := range r.Steps {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			sw := objectWriter{b: append(w.b, '{')}
			sw.key("name")
			sw.b = appendString(sw.b, st.Name)
			if st.Input != nil {
				sw.key("input")
				sw.b = appendString(sw.b, *st.Input)
			}
			if len(st.AdditionalInput) > 0 {
				sw.key("additional_input")
				sw.b = append(sw.b, st.AdditionalInput...)
			}
			w.b = append(sw.b, '}')
		}
		w.b = append(w.b, ']')
	}
	w.optional("error", r.Error)
	return append(w.b, '}')
}

// AppendJSON appends r as JSON.
func (r *ArtifactResult) AppendJSON(b []byte) []byte {
	w := objectWriter{b: append(b, '{')}
	w.optional("reject", r.Reject)
	if r.Replace != nil {
		w.key("replace")
		rw := objectWriter{b: append(w.b, '{')}
		rw.optional("uri", r.Replace.URI)
		rw.optional("workspace_path", r.Replace.WorkspacePath)
		w.b = append(rw.b, '}')
	}
	w.optional("error", r.Error)
	return append(w.b, '}')
}

// AppendJSON appends r as JSON.
func (r *DownloadResult) AppendJSON(b []byte) []byte {
	w := objectWriter{b: append(b, '{')}
	if r.Default {
		w.key("default")
		w.b = append(w.b, "true"...)
	}
	w.optional("error", r.Error)
	return append(w.b, '}')
}

// AppendJSON appends m as JSON.
func (m *ArtifactMeta) AppendJSON(b []byte) []byte {
	w := objectWriter{b: append(b, '{')}
	w.key("file_name")
	w.b = appendString(w.b, m.FileName)
	w.optional("relative_path", m.RelativePath)
	w.optional("workspace_path", m.WorkspacePath)
	w.optional("uri", m.URI)
	return append(w.b, '}')
}

// objectWriter writes the members of a JSON object.
type objectWriter struct {
	b    []byte
	more bool
}

func (w *objectWriter) key(k string) {
	if w.more {
		w.b = append(w.b, ',')
	}
	w.more = true
	w.b = appendString(w.b, k)
	w.b = append(w.b, ':')
}

// optional writes a string member unless it is empty.
func (w *objectWriter) optional(k, v string) {
	if v != "" {
		w.key(k)
		w.b = appendString(w.b, v)
	}
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// with encoding/json.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// scanner reads JSON from b.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) fail(what string) error {
	return errors.New("malformed JSON at byte " + strconv.Itoa(s.i) + ": " + what)
}

func (s *scanner) ws() {
	// Most calls find none: looked for once before the loop, since in the
	// sandbox every turn of a loop, the first included, costs a check
	// (plugins/README.md, "Loops cost").
	if s.i >= len(s.b) || s.b[s.i] > ' ' {
		return
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end checks that only white space is left.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("data after the value")
	}
	return nil
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) literal(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

// null consumes a null and reports whether there was one.
func (s *scanner) null() bool {
	return s.peek() == 'n' && s.literal("null")
}

// into stores what read returns in *dst; null leaves *dst as it is, as
// with encoding/json.
func into[T any](s *scanner, dst *T, read func() (T, error)) error {
	if s.null() {
		return nil
	}
	v, err := read()
	*dst = v
	return err
}

// object calls member for each member of an object, with the scanner at
// the member's value. null is an object without members, as encoding/json
// reads null into a struct: it leaves the struct as it is.
func (s *scanner) object(member func(key string) error) error {
	if s.null() {
		return nil
	}
	if s.peek() != '{' {
		return s.fail("want an object")
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return s.fail("want ':'")
		}
		s.i++
		if err := member(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.fail("want ',' or '}'")
		}
	}
}

// array calls elem for each element of an array.
func (s *scanner) array(elem func() error) error {
	if s.peek() != '[' {
		return s.fail("want an array")
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.fail("want ',' or ']'")
		}
	}
}

func (s *scanner) str() (string, error) {
	if s.peek() != '"' {
		return "", s.fail("want a string")
	}
	s.i++
	start := s.i
	n, ascii := plainRun(s.b[start:])
	s.i += n
	if s.i < len(s.b) && s.b[s.i] == '"' { // fast path: no escapes
		v := string(s.b[start:s.i])
		s.i++
		if !ascii && !utf8.ValidString(v) {
			return string([]rune(v)), nil // invalid bytes become U+FFFD
		}
		return v, nil
	}
	buf := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(buf) {
				return string([]rune(string(buf))), nil
			}
			return string(buf), nil
		case c < 0x20:
			return "", s.fail("control character in a string")
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		s.i++
		if s.i >= len(s.b) {
			break
		}
		e := s.b[s.i]
		s.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", s.fail("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// A valid pair is one rune; anything else makes this
				// escape U+FFFD and leaves the next one to be read on its
				// own, as encoding/json does.
				save := s.i
				if s.literal(`\u`) {
					if r2, ok := s.hex4(); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							buf = utf8.AppendRune(buf, d)
							continue
						}
					}
				}
				s.i = save
				r = utf8.RuneError
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", s.fail("bad escape")
		}
	}
	return "", s.fail("unterminated string")
}

// plainRun is the length of the run of plain string characters that b
// starts with (bytes other than '"', '\\' and control characters), and
// whether they are all ASCII. It looks at eight bytes at a time, so that a
// string costs the sandbox's loop check about once per eight bytes rather
// than once per byte.
func plainRun(b []byte) (n int, ascii bool) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	var high uint64
	for ; len(b)-n >= 8; n += 8 {
		c := b[n : n+8]
		w := uint64(c[0]) | uint64(c[1])<<8 | uint64(c[2])<<16 | uint64(c[3])<<24 |
			uint64(c[4])<<32 | uint64(c[5])<<40 | uint64(c[6])<<48 | uint64(c[7])<<56
		// A byte's high bit is set in each term when that byte is a quote,
		// a backslash or below 0x20; a borrow can set bits above the first
		// such byte, never below it, so the lowest set bit is exact.
		quote, backslash := w^(ones*'"'), w^(ones*'\\')
		special := ((quote - ones) &^ quote) | ((backslash - ones) &^ backslash) | ((w - ones*0x20) &^ w)
		if special &= highs; special != 0 {
			run := bits.TrailingZeros64(special) / 8
			// Only the run's own bytes count towards ascii.
			return n + run, high|w&(1<<(8*run)-1)&highs == 0
		}
		high |= w & highs
	}
	for ; n < len(b); n++ {
		c := b[n]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		high |= uint64(c) & 0x80
	}
	return n, high == 0
}

func (s *scanner) hex4() (rune, bool) {
	if len(s.b)-s.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

func (s *scanner) nullableStr() (*string, error) {
	if s.null() {
		return nil, nil
	}
	v, err := s.str()
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func (s *scanner) boolean() (bool, error) {
	s.ws()
	switch {
	case s.literal("true"):
		return true, nil
	case s.literal("false"):
		return false, nil
	}
	return false, s.fail("want true or false")
}

func (s *scanner) integer() (int64, error) {
	s.ws()
	start := s.i
	if err := s.number(); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		return 0, s.fail("want an integer")
	}
	return n, nil
}

// number consumes a JSON number.
func (s *scanner) number() error {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if intStart := s.i; digits() == 0 || (s.b[intStart] == '0' && s.i-intStart > 1) {
		return s.fail("bad number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return s.fail("bad number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return s.fail("bad number")
		}
	}
	if s.i == start {
		return s.fail("bad number")
	}
	return nil
}

// maxDepth bounds nesting, so that hostile input cannot exhaust the stack.
const maxDepth = 10000

// raw returns the next value's JSON text, checked, or nil for null.
func (s *scanner) raw() (json.RawMessage, error) {
	s.ws()
	start := s.i
	if s.null() {
		return nil, nil
	}
	if err := s.skipDepth(0); err != nil {
		return nil, err
	}
	return s.b[start:s.i:s.i], nil
}

// skip consumes the next value, checking its syntax.
func (s *scanner) skip() error { return s.skipDepth(0) }

func (s *scanner) skipDepth(depth int) error {
	if depth > maxDepth {
		return s.fail("nested too deeply")
	}
	switch c := s.peek(); {
	case c == '{':
		return s.object(func(string) error { return s.skipDepth(depth + 1) })
	case c == '[':
		return s.array(func() error { return s.skipDepth(depth + 1) })
	case c == '"':
		_, err := s.str()
		return err
	case c == 't' || c == 'f':
		_, err := s.boolean()
		return err
	case c == 'n':
		if s.null() {
			return nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return s.fail("want a value")
}
