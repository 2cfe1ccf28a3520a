package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/protocol"
)

// FuzzDecodeRequestBody feeds bytes to decodeBody as the body of create-task
// and execute-step, and holds it to what agentrt promises of client bodies:
// it never panics; it refuses with EUNPROCESSABLE or ETOOLARGE only; it
// takes a body exactly when an independent oracle (below) says it should;
// and what it takes, once stored and served as the Agent serves it, is
// JSON a strict parser accepts: UTF-8 throughout, no lone surrogate escape.
//
// The seed corpus in testdata/fuzz/FuzzDecodeRequestBody holds valid bodies
// and one of each malformed class the client attack tests send
// (cmd/agentrt/client_attack_test.go). Run it with
//
//	go test -run '^$' -fuzz FuzzDecodeRequestBody -fuzztime 60s ./protocol
func FuzzDecodeRequestBody(f *testing.F) {
	// decodeBody needs only the limits; a ResponseRecorder has no read
	// deadline, which pacedBody tolerates (http.ErrNotSupported).
	const maxBody = 1 << 20
	s := &Server{cfg: ServerConfig{MaxBodyBytes: maxBody, BodyTimeout: time.Second, MinBodyRate: 1024}}
	f.Add([]byte(`{"input":"hi","additional_input":{"k":[1,2]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var task protocol.TaskRequestBody
		err := decodeRequestBody(s, body, &task)
		checkDecodeError(t, body, &protocol.TaskRequestBody{}, err, maxBody)
		if err == nil {
			checkServable(t, task.Input, task.AdditionalInput, func(addl json.RawMessage) any {
				return &protocol.Task{TaskID: "t", Input: task.Input, AdditionalInput: addl, Artifacts: []protocol.Artifact{}}
			})
		}
		var step protocol.StepRequestBody
		err2 := decodeRequestBody(s, body, &step)
		checkDecodeError(t, body, &protocol.StepRequestBody{}, err2, maxBody)
		if err2 == nil {
			checkServable(t, step.Input, step.AdditionalInput, func(addl json.RawMessage) any {
				return &protocol.Step{TaskID: "t", StepID: "s", Status: protocol.StatusCompleted, Input: step.Input,
					AdditionalInput: addl, Artifacts: []protocol.Artifact{}}
			})
		}
	})
}

// decodeRequestBody runs s.decodeBody on body as a POST's.
func decodeRequestBody(s *Server, body []byte, v any) error {
	req := httptest.NewRequest("POST", Prefix+"/agent/tasks", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return s.decodeBody(httptest.NewRecorder(), req, v)
}

// checkDecodeError checks decodeBody's verdict on body, decoded into v
// (a TaskRequestBody or a StepRequestBody), against the oracle.
func checkDecodeError(t *testing.T, body []byte, v any, err error, maxBody int) {
	t.Helper()
	if len(body) > maxBody {
		if protocol.ErrorCode(err) != protocol.ETOOLARGE {
			t.Fatalf("a %d-byte body over the %d-byte limit: err %v (code %q), want too_large", len(body), maxBody, err, protocol.ErrorCode(err))
		}
		return
	}
	if err != nil {
		var e *protocol.Error
		if !errors.As(err, &e) || e.Code != protocol.EUNPROCESSABLE {
			t.Fatalf("err %v (%T, code %q), want an *Error with code unprocessable", err, err, protocol.ErrorCode(err))
		}
		if e.Message == "" || !utf8.ValidString(e.Message) {
			t.Fatalf("error message %q is empty or not UTF-8", e.Message)
		}
	}
	if want := acceptableRequestBody(body, v); want != (err == nil) {
		t.Fatalf("decodeBody(%q) into a %T = %v; the oracle says it should be taken: %v", body, v, err, want)
	}
}

// acceptableRequestBody is the oracle: whether body is a create-task or
// execute-step body agentrt should take. Blank or null; or else a JSON
// object (RFC 8259: encoding/json's grammar) that is valid UTF-8, has no
// lone surrogate escape, nests at most MaxJSONDepth deep, is I-JSON
// (iJSON: no duplicate names, numbers a double holds) and whose fields
// have the right types (encoding/json decodes it into v, a
// TaskRequestBody or a StepRequestBody); and no member of the body, or of
// a step it plans, is named as one of their fields only in another case
// (caseVariantOf). Around the value, JSON's four white space bytes are
// trimmed, and nothing else: a no-break space is no more JSON to agentrt
// than to any strict parser.
func acceptableRequestBody(body []byte, v any) bool {
	b := bytes.Trim(body, " \t\r\n")
	if len(b) == 0 || string(b) == "null" {
		return true
	}
	if !(utf8.Valid(b) && json.Valid(b) && loneSurrogateEscapeAt(b) < 0 &&
		jsonNestingDepth(b) <= protocol.MaxJSONDepth && iJSON(b) && b[0] == '{' && json.Unmarshal(b, v) == nil) {
		return false
	}
	var members map[string]json.RawMessage
	json.Unmarshal(b, &members)
	top := []string{"input", "additional_input"}
	if _, ok := v.(*protocol.TaskRequestBody); !ok {
		return !caseVariantOf(members, top)
	}
	top = append(top, "title", "description", "version", "steps")
	if caseVariantOf(members, top) {
		return false
	}
	var steps []json.RawMessage
	json.Unmarshal(members["steps"], &steps)
	for _, st := range steps {
		var step map[string]json.RawMessage
		if json.Unmarshal(st, &step) == nil && caseVariantOf(step, []string{"name", "input", "additional_input"}) {
			return false
		}
	}
	return true
}

// caseVariantOf reports whether an object's members has a name that is one
// of fields' only when case is folded (strings.EqualFold).
func caseVariantOf(members map[string]json.RawMessage, fields []string) bool {
	for name := range members {
		if slices.Contains(fields, name) {
			continue
		}
		for _, f := range fields {
			if strings.EqualFold(name, f) {
				return true
			}
		}
	}
	return false
}

// checkServable checks what decodeBody took as the Agent would store and
// serve it: additional_input through protocol.ObjectOrEmpty, then the resource that
// holds it (built by resource) marshalled as the API marshals it.
func checkServable(t *testing.T, input *string, addl json.RawMessage, resource func(json.RawMessage) any) {
	t.Helper()
	if input != nil && !utf8.ValidString(*input) {
		t.Fatalf("input %q is not UTF-8", *input)
	}
	kept, err := protocol.ObjectOrEmpty("additional_input", addl)
	if err != nil {
		if protocol.ErrorCode(err) != protocol.EUNPROCESSABLE {
			t.Fatalf("protocol.ObjectOrEmpty(%q): %v, want unprocessable", addl, err)
		}
		if v := bytes.TrimSpace(addl); len(v) > 0 && v[0] == '{' {
			t.Fatalf("ObjectOrEmpty refused the object %q: %v", addl, err)
		}
		return
	}
	if !utf8.Valid(kept) || loneSurrogateEscapeAt(kept) >= 0 {
		t.Fatalf("additional_input kept as %q: not UTF-8, or a lone surrogate escape at %d", kept, loneSurrogateEscapeAt(kept))
	}
	out, err := json.Marshal(resource(kept))
	if err != nil {
		t.Fatalf("marshal what was taken (input %q, additional_input %q): %v", deref(input), kept, err)
	}
	if !utf8.Valid(out) || !json.Valid(out) || loneSurrogateEscapeAt(out) >= 0 {
		t.Fatalf("served as %q: not strict JSON (UTF-8 %v, JSON %v, lone surrogate at %d)",
			out, utf8.Valid(out), json.Valid(out), loneSurrogateEscapeAt(out))
	}
	var back struct {
		Input *string `json:"input"`
	}
	if err := json.Unmarshal(out, &back); err != nil || deref(back.Input) != deref(input) || (back.Input == nil) != (input == nil) {
		t.Fatalf("input %q is served back as %q (%v)", deref(input), deref(back.Input), err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// loneSurrogateEscapeAt returns the offset of the first \u escape in the
// JSON text b that stands for half a surrogate pair without the other half
// right after it, or -1. It is written apart from checkJSON, so that each
// checks the other.
func loneSurrogateEscapeAt(b []byte) int {
	hex := func(i int) rune {
		if i+4 > len(b) {
			return -1
		}
		v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(v)
	}
	inString := false
	for i := 0; i < len(b); i++ {
		if !inString {
			inString = b[i] == '"'
			continue
		}
		switch b[i] {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(b) || b[i+1] != 'u' {
				i++
				continue
			}
			switch r := hex(i + 2); {
			case 0xd800 <= r && r <= 0xdbff:
				if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					if low := hex(i + 8); 0xdc00 <= low && low <= 0xdfff {
						i += 11
						continue
					}
				}
				return i
			case 0xdc00 <= r && r <= 0xdfff:
				return i
			}
			i += 5
		}
	}
	return -1
}

// jsonNestingDepth is how deeply arrays and objects nest in the valid JSON
// text b: 0 for a scalar, 1 for [] or {}.
func jsonNestingDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

func TestRequestFuzzOraclesOnKnownText(t *testing.T) {
	for _, tc := range []struct {
		json  string
		lone  int
		depth int
	}{
		{`"plain"`, -1, 0},
		{`{"a":"\ud83d\ude00"}`, -1, 1},
		{`["\\ud800", "[{"]`, -1, 1},
		{`"\ud800"`, 1, 0},
		{`"\udc00\ud800"`, 1, 0},
		{`["\ud800\u0041"]`, 2, 1},
		{`{"a":[[{"b":"\uDBFF\uDFFF\uDBFF"}]]}`, 25, 4},
	} {
		if got := loneSurrogateEscapeAt([]byte(tc.json)); got != tc.lone {
			t.Errorf("loneSurrogateEscapeAt(%s) = %d, want %d", tc.json, got, tc.lone)
		}
		if got := jsonNestingDepth([]byte(tc.json)); got != tc.depth {
			t.Errorf("jsonNestingDepth(%s) = %d, want %d", tc.json, got, tc.depth)
		}
	}
}
