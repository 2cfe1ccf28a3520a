package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// What every execute-step writes, twice (the handler's input message and
// the answer), is appended here field by field, as encoding/json with
// HTML escaping off (MarshalJSON) writes it but without its reflection:
// byte for byte the same text, which the tests check against
// encoding/json's for random values.

// AppendJSONString appends s as a JSON string, escaped as MarshalJSON
// escapes it: a quote, a backslash and control characters escaped (\n,
// \t and the rest as encoding/json writes them), U+2028 and U+2029 as
// \u2028 and \u2029, each byte of invalid UTF-8 as \ufffd, and all else
// as it is.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendJSONStringOrNull appends *s as AppendJSONString does, or null for
// nil.
func AppendJSONStringOrNull(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return AppendJSONString(b, *s)
}

// AppendRawJSON appends raw as MarshalJSON writes a json.RawMessage: null
// for nil, else compacted (insignificant whitespace removed), and an
// error, with nothing appended, if it is not one JSON value.
func AppendRawJSON(b []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, err
	}
	return buf.Bytes(), nil
}

// appendJSON appends st as MarshalJSON writes a Step.
func (st *Step) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"task_id":`...)
	b = AppendJSONString(b, st.TaskID)
	b = append(b, `,"step_id":`...)
	b = AppendJSONString(b, st.StepID)
	b = append(b, `,"name":`...)
	b = AppendJSONStringOrNull(b, st.Name)
	b = append(b, `,"status":`...)
	b = AppendJSONString(b, string(st.Status))
	b = append(b, `,"input":`...)
	b = AppendJSONStringOrNull(b, st.Input)
	b = append(b, `,"additional_input":`...)
	if b, err = AppendRawJSON(b, st.AdditionalInput); err != nil {
		return nil, err
	}
	b = append(b, `,"output":`...)
	b = AppendJSONStringOrNull(b, st.Output)
	b = append(b, `,"additional_output":`...)
	if b, err = AppendRawJSON(b, st.AdditionalOutput); err != nil {
		return nil, err
	}
	b = append(b, `,"artifacts":`...)
	if st.Artifacts == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range st.Artifacts {
			if i > 0 {
				b = append(b, ',')
			}
			a, err := st.Artifacts[i].MarshalJSON()
			if err != nil {
				return nil, err
			}
			b = append(b, a...)
		}
		b = append(b, ']')
	}
	b = append(b, `,"is_last":`...)
	b = strconv.AppendBool(b, st.IsLast)
	b = append(b, `,"build":`...)
	if st.Build == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"agent":`...)
		b = AppendJSONString(b, st.Build.Agent)
		b = append(b, `,"sha256":`...)
		b = AppendJSONString(b, st.Build.SHA256)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}
