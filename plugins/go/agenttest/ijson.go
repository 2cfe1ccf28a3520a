package agenttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What agentrt takes of a plugin's result (protocol.CheckJSON and the
// wire format's reading of it), the harness takes: an I-JSON message (RFC
// 7493: valid UTF-8, no lone surrogate escape, no member name twice in an
// object, numbers a double holds written in at most 400 bytes, nested at
// most 100 deep), whose members are named as its fields are, in the same
// case: a result agentrt would refuse fails here too, so that a plugin's
// test does not pass where agentrt fails the step.

const (
	maxJSONDepth       = 100
	maxJSONNumberBytes = 400
)

// readResult decodes b, a handler's result, into v, and says why agentrt
// would refuse it ("" when it would not): not I-JSON, not an object, or
// naming a field of v in another case.
func readResult(b []byte, v any) string {
	if why := checkResult(b, v); why != "" {
		return why
	}
	if b := bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
		return "it is not a JSON object"
	}
	if err := json.Unmarshal(b, v); err != nil {
		return err.Error()
	}
	return ""
}

// checkResult says why agentrt would refuse b as a result decoded into
// v, "" when it would not.
func checkResult(b []byte, v any) string {
	if err := checkIJSON(b); err != nil {
		return err.Error()
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return err.Error()
	}
	return namesAsWritten(doc, reflect.TypeOf(v), "")
}

// checkIJSON checks the I-JSON rules of b.
func checkIJSON(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("invalid UTF-8")
	}
	if err := loneSurrogate(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type object struct {
		names map[string]bool
		key   bool // the next string token is a member's name
	}
	var open []*object // nil for an array
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		var top *object
		if len(open) > 0 {
			top = open[len(open)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(open) == maxJSONDepth {
					return fmt.Errorf("nested deeper than %d levels", maxJSONDepth)
				}
				if top != nil {
					top.key = true
				}
				if t == '{' {
					open = append(open, &object{names: map[string]bool{}, key: true})
				} else {
					open = append(open, nil)
				}
			default:
				open = open[:len(open)-1]
			}
			continue
		case string:
			if top != nil && top.key {
				if top.names[t] {
					return fmt.Errorf("duplicate member name %q: the names in one object must differ (I-JSON, RFC 7493)", t)
				}
				top.names[t] = true
				top.key = false
				continue
			}
		case json.Number:
			if len(t) > maxJSONNumberBytes {
				return fmt.Errorf("number too long: %d bytes, over the %d a number may take (I-JSON, RFC 7493)", len(t), maxJSONNumberBytes)
			}
			if f, err := strconv.ParseFloat(string(t), 64); math.IsInf(f, 0) {
				return fmt.Errorf("number out of range: beyond the largest IEEE 754 double (I-JSON, RFC 7493): %v", err)
			}
		}
		if top != nil {
			top.key = true
		}
	}
	return nil
}

// loneSurrogate finds a \u escape in a string of b that leaves a lone
// UTF-16 surrogate (encoding/json would read it as U+FFFD).
func loneSurrogate(b []byte) error {
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			inString = !inString
		case inString && c == '\\' && i+1 < len(b):
			if b[i+1] != 'u' {
				i++
				continue
			}
			r, ok := hex4(b, i+2)
			if !ok {
				continue
			}
			switch {
			case r >= 0xd800 && r <= 0xdbff:
				low, ok := rune(0), false
				if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					low, ok = hex4(b, i+8)
				}
				if !ok || low < 0xdc00 || low > 0xdfff {
					return fmt.Errorf("a \\u escape at byte %d is a lone surrogate (%s)", i, b[i:i+6])
				}
				i += 11
			case r >= 0xdc00 && r <= 0xdfff:
				return fmt.Errorf("a \\u escape at byte %d is a lone surrogate (%s)", i, b[i:i+6])
			default:
				i += 5
			}
		}
	}
	return nil
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
	return rune(n), err == nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// namesAsWritten refuses a member of doc, decoded into t, named as one of
// t's fields only in another case ("OUTPUT" for output), which Go's
// decoder would take for the field and other readers would not.
func namesAsWritten(doc any, t reflect.Type, at string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(unmarshaler) {
		return ""
	}
	switch v := doc.(type) {
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range v {
				if why := namesAsWritten(e, t.Elem(), fmt.Sprintf("%s[%d]", at, i)); why != "" {
					return why
				}
			}
		}
	case map[string]any:
		switch t.Kind() {
		case reflect.Map:
			for k, e := range v {
				if why := namesAsWritten(e, t.Elem(), at+"."+k); why != "" {
					return why
				}
			}
		case reflect.Struct:
			for k, e := range v {
				field, exact := fieldNamed(t, k)
				if field != nil && !exact {
					// As agentrt says it: %+q shows how "ſteps" differs.
					return fmt.Sprintf("%+q%s: member names are case-sensitive; did you mean %q?", k, where(at), jsonName(*field))
				}
				if field != nil {
					if why := namesAsWritten(e, field.Type, strings.TrimPrefix(at+"."+k, ".")); why != "" {
						return why
					}
				}
			}
		}
	}
	return ""
}

func where(at string) string {
	if at == "" {
		return ""
	}
	return " in " + at
}

// fieldNamed is the field of t that encoding/json reads the member name
// into, and whether name is its name exactly.
func fieldNamed(t reflect.Type, name string) (*reflect.StructField, bool) {
	var folded *reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		n := jsonName(f)
		if n == "-" || !f.IsExported() {
			continue
		}
		if n == name {
			return &f, true
		}
		if folded == nil && strings.EqualFold(n, name) {
			folded = &f
		}
	}
	return folded, false
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}
