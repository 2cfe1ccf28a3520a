package protocol

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/agentrt/agentrt/protocol/internal/jsontext"
)

// rawPieces are stored JSON values, compact or not, nil (written as null)
// and empty (not JSON: an error).
var rawPieces = []json.RawMessage{nil, {}, json.RawMessage(`{}`), json.RawMessage(`null`),
	json.RawMessage(" {\"a\" : [1, 2.5e3, true],\n\t\"b\":{\"c\":\"<\\u2028>\"} } "), json.RawMessage(`{"s":"\u00e9 \"q\""}`)}

func randomStep(r *rand.Rand) *Step {
	st := &Step{TaskID: jsontext.String(r), StepID: jsontext.String(r), Name: jsontext.StringOrNil(r),
		Status: StepStatus(jsontext.String(r)), Input: jsontext.StringOrNil(r),
		AdditionalInput: rawPieces[r.IntN(len(rawPieces))], Output: jsontext.StringOrNil(r),
		AdditionalOutput: rawPieces[r.IntN(len(rawPieces))], IsLast: r.IntN(2) == 0}
	if r.IntN(4) > 0 { // else nil, written as null
		st.Artifacts = []Artifact{}
		for range r.IntN(3) {
			st.Artifacts = append(st.Artifacts, Artifact{ArtifactID: jsontext.String(r), AgentCreated: r.IntN(2) == 0,
				FileName: jsontext.String(r), RelativePath: jsontext.String(r), URI: jsontext.String(r), StepID: jsontext.String(r)})
		}
	}
	if r.IntN(3) > 0 {
		st.Build = &StepBuild{Agent: jsontext.String(r), SHA256: jsontext.String(r)}
	}
	return st
}

// A step's answer is written without encoding/json's reflection, and must
// be its text exactly: for random steps (strings of every kind of byte,
// null and present fields, stored JSON compact or not, artifacts or
// none), MarshalJSON writes what encoding/json writes. A field added to
// Step without being added to appendJSON shows here: encoding/json writes
// it, appendJSON does not.
func TestAStepIsWrittenAsEncodingJSONWritesIt(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		st := randomStep(r)
		want, werr := encodeJSON(st)
		got, gerr := MarshalJSON(st)
		if (werr != nil) != (gerr != nil) || string(got) != string(want) {
			t.Fatalf("step %d, %#v:\nMarshalJSON  %s (%v)\nencoding/json %s (%v)", i, st, got, gerr, want, werr)
		}
	}
}

// Stored JSON that is not one value fails as encoding/json fails.
func TestAStepWithInvalidStoredJSONIsAnError(t *testing.T) {
	for _, raw := range []string{"", "{", `{"a":}`, "1 2"} {
		st := &Step{AdditionalOutput: json.RawMessage(raw)}
		if _, err := encodeJSON(st); err == nil {
			t.Fatalf("encoding/json wrote %q", raw)
		}
		if b, err := MarshalJSON(st); err == nil {
			t.Errorf("additional_output %q: MarshalJSON wrote %s, want an error", raw, b)
		}
	}
}

// Every string, escaped, is what encoding/json writes for it, and reads
// back as encoding/json reads it.
func TestAppendJSONStringEscapesAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50000 {
		s := jsontext.String(r)
		want, err := encodeJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendJSONString([]byte("x"), s)
		if string(got[1:]) != string(want) {
			t.Fatalf("%q: AppendJSONString %s, encoding/json %s", s, got[1:], want)
		}
		var back, wantBack string
		if err := json.Unmarshal(got[1:], &back); err != nil {
			t.Fatalf("%q: %s does not read back: %v", s, got[1:], err)
		}
		json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q reads back as %q, encoding/json's as %q", s, back, wantBack)
		}
	}
}

// appendJSON covers every field of Step that encoding/json writes: a
// step with each one set (by reflection, so a new field is set too) is
// written alike.
func TestAStepWithEveryFieldSetIsWrittenAlike(t *testing.T) {
	st := &Step{}
	v := reflect.ValueOf(st).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("s" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(1)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(1)
		case reflect.Float32, reflect.Float64:
			f.SetFloat(1)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
			if e := f.Elem(); e.Kind() == reflect.String {
				e.SetString("p" + v.Type().Field(i).Name)
			}
		case reflect.Slice:
			if f.Type() == reflect.TypeFor[json.RawMessage]() {
				f.SetBytes([]byte(`{"f":"` + v.Type().Field(i).Name + `"}`))
			} else {
				f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			}
		}
	}
	want, err := encodeJSON(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := MarshalJSON(st)
	if err != nil || string(got) != string(want) {
		t.Fatalf("MarshalJSON %s (%v)\nencoding/json %s", got, err, want)
	}
}
