package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// iJSON reports whether the valid JSON text b, with no lone surrogate escape,
// is I-JSON (RFC 7493) as agentrt takes it: no two members of an object of the
// same name, as encoding/json decodes names; no number longer than
// protocol.MaxJSONNumberBytes or that strconv reads as ±Inf. It is written
// apart from protocol.CheckJSON, so that each checks the other.
func iJSON(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type container struct {
		names    map[string]bool // nil for an array
		wantName bool
	}
	var open []container
	ended := func() {
		if len(open) > 0 && open[len(open)-1].names != nil {
			open[len(open)-1].wantName = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return true // the end (b is valid)
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '{' || tok == '[' {
				if len(open) > 0 {
					open[len(open)-1].wantName = false
				}
				c := container{}
				if tok == '{' {
					c = container{names: map[string]bool{}, wantName: true}
				}
				open = append(open, c)
				continue
			}
			open = open[:len(open)-1]
		case string:
			if len(open) > 0 && open[len(open)-1].wantName {
				c := &open[len(open)-1]
				if c.names[tok] {
					return false
				}
				c.names[tok], c.wantName = true, false
				continue
			}
		case json.Number:
			f, _ := strconv.ParseFloat(string(tok), 64)
			if len(tok) > protocol.MaxJSONNumberBytes || math.IsInf(f, 0) {
				return false
			}
		}
		ended()
	}
}

func TestIJSONOracleOnKnownText(t *testing.T) {
	for _, tc := range []struct {
		json string
		ok   bool
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, true},
		{`{"a":1,"a":2}`, false},
		{`{"a":{"b":[{"c":1,"c":2}]}}`, false},
		{`{"a":1,"\u0061":2}`, false},
		{`{"a":"a","b":"a"}`, true},
		{`[1.7976931348623157e308,1e-400,123456789012345678901]`, true},
		{`{"a":[1e400]}`, false},
		{`"x"`, true},
		{`-0.` + strings.Repeat("0", 396) + `1`, true},
		{`-0.` + strings.Repeat("0", 397) + `1`, false},
	} {
		if got := iJSON([]byte(tc.json)); got != tc.ok {
			t.Errorf("iJSON(%s) = %v, want %v", tc.json, got, tc.ok)
		}
	}
}

// TestRequestBodiesThatAreNotIJSONAre422NamingTheField: a client body with a
// duplicate name or a number a double cannot hold, anywhere in it, is refused
// before it is decoded, with a message that names where and the rule, and
// never the value.
func TestRequestBodiesThatAreNotIJSONAre422NamingTheField(t *testing.T) {
	s := &Server{cfg: ServerConfig{MaxBodyBytes: 1 << 20, BodyTimeout: 10e9, MinBodyRate: 1024}}
	huge := strings.Repeat("9", 100000)
	for _, tc := range []struct{ body, want string }{
		{`{"input":"hi","additional_input":{"a":{"b":[0,0,0,1e400]}}}`, "number out of range at additional_input.a.b[3] (byte 50)"},
		{`{"additional_input":{"big":` + huge + `}}`, "number too long at additional_input.big (byte 27): 100000 bytes"},
		{`{"additional_input":{"t":-1.8e308}}`, "number out of range at additional_input.t"},
		{`{"input":"a","input":"b"}`, "duplicate member name at input (byte 13)"},
		{`{"additional_input":{"a":1},"additional_input":{"b":2}}`, "duplicate member name at additional_input (byte 28)"},
		{`{"additional_input":{"k":{"a":1,"\u0061":2}}}`, "duplicate member name at additional_input.k.a (byte 32)"},
	} {
		var task protocol.TaskRequestBody
		err := decodeRequestBody(s, []byte(tc.body), &task)
		if protocol.ErrorCode(err) != protocol.EUNPROCESSABLE || !strings.Contains(protocol.ErrorMessage(err), tc.want) {
			t.Errorf("body %.60q: %v (code %q), want unprocessable with %q", tc.body, err, protocol.ErrorCode(err), tc.want)
		}
		if msg := protocol.ErrorMessage(err); strings.Contains(msg, "99999") || len(msg) > 300 {
			t.Errorf("body %.60q: the message echoes the value or is long: %.400s", tc.body, msg)
		}
	}
	for _, ok := range []string{
		`{"additional_input":{"max":1.7976931348623157e308,"tiny":1e-400,"ns":1732000000123456789,"a":{"x":1},"b":{"x":1}}}`,
		`{"input":"x","additional_input":{"A":1,"a":2}}`,
	} {
		var task protocol.TaskRequestBody
		if err := decodeRequestBody(s, []byte(ok), &task); err != nil {
			t.Errorf("body %s: %v", ok, err)
		}
	}
}
