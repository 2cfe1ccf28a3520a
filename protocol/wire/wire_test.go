package wire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
)

// The host's side of the wire format: a result message, as a plugin hands
// it to set_result and the domain accepts it (protocol.CheckJSON: I-JSON),
// read for each handler. Whatever the bytes, decoding never panics, never keeps
// more planned steps than the limit, reads what encoding/json reads, and
// what it accepts is text the host can store and serve.

var resultSeeds = []string{
	`{}`,
	`{"output":"hi","additional_output":{"a":[1,{"b":null}]},"name":"n","is_last":true}`,
	`{"steps":[{"name":"a","input":"i","additional_input":{"k":"v"}},{}],"error":""}`,
	`{"steps":null,"error":null}`,
	`{"reject":"no","error":"x"}`,
	`{"steps":[{},{},{},{}]}`,
	`{"steps":[1]}`, `{"steps":{}}`, `{"steps":[{"name":5}]}`, `[]`, `"s"`, `{"output":5}`,
	"{\"output\":\"\xff\"}", `{"output":"\ud800"}`, `{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
	`{"steps":[{}],"steps":[{},{},{},{},{}]}`, `{"output":"a"} {}`, ``, `{"error":"` + strings.Repeat("e", 5000) + `"}`,
	`{"ERROR":"boom","Steps":[{"Name":"n"}]}`, `{"steps":[{"name":"a"}],"STEPS":null}`,
	`{"output":"a","additional_output":{"n":1e400}}`, `{"steps":[{"additional_input":{"k":1,"\u006b":2}}]}`,
	`{"additional_output":{"n":1.7976931348623157e308,"tiny":1e-400}}`, `{"output":"a","output":"b"}`,
}

func FuzzResultDecoding(f *testing.F) {
	for _, s := range resultSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, result []byte) {
		if protocol.CheckJSON(result, protocol.MaxJSONDepth) != nil {
			return // set_result refuses it: no codec ever sees it
		}
		// What set_result takes is I-JSON: encoding/json decodes it into an any
		// (no number is ±Inf), and whichever of two same-named members a decoder
		// would keep never matters, since there are none.
		var v any
		if err := json.Unmarshal(result, &v); err != nil {
			t.Fatalf("set_result takes %q, which encoding/json cannot decode: %v", result, err)
		}
		task, err := V1.DecodeTaskResult(result, 3)
		if err == nil && len(task.Steps) > 3 {
			t.Fatalf("%d planned steps kept, over the limit of 3", len(task.Steps))
		}
		if err != nil && protocol.ErrorCode(err) != protocol.EINTERNAL && protocol.ErrorCode(err) != protocol.EPLUGIN {
			t.Fatalf("decoding failed with code %s: %v", protocol.ErrorCode(err), err)
		}
		if err == nil {
			for _, s := range task.Steps {
				if !utf8.ValidString(s.Name) || (s.Input != nil && !utf8.ValidString(*s.Input)) || !utf8.Valid(s.AdditionalInput) {
					t.Fatalf("a planned step with invalid text: %+v", s)
				}
			}
		}
		// Read the same as encoding/json reads it, within the limit.
		if counted, err := V1.DecodeTaskResult(result, 1<<30); err == nil {
			var ref abi.TaskResult
			if err := json.Unmarshal(result, &ref); err != nil {
				t.Fatalf("the task result %q is read, encoding/json refuses it: %v", result, err)
			}
			want := &protocol.TaskResult{Error: ref.Error}
			for _, s := range ref.Steps {
				want.Steps = append(want.Steps, protocol.PlannedStep{Name: s.Name, Input: s.Input, AdditionalInput: s.AdditionalInput})
			}
			if !reflect.DeepEqual(counted, want) {
				t.Fatalf("the task result %q reads as %+v, encoding/json reads %+v", result, counted, want)
			}
		}
		if step, err := V1.DecodeStepResult(result); err == nil {
			if step.Output != nil && !utf8.ValidString(*step.Output) || step.Name != nil && !utf8.ValidString(*step.Name) || !utf8.ValidString(step.Error) {
				t.Fatalf("a step result with invalid text: %+v", step)
			}
		}
		if art, err := V1.DecodeArtifactResult(result); err == nil && (!utf8.ValidString(art.Reject) || !utf8.ValidString(art.Error)) {
			t.Fatalf("an artifact result with invalid text: %+v", art)
		}
	})
}

func TestAPlanOverTheLimitIsRefusedBeforeItsStepsAreDecoded(t *testing.T) {
	// 349,521 empty steps: what a 1 MiB result holds.
	result := []byte(`{"steps":[` + strings.Repeat(`{},`, 349520) + `{}]}`)
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := V1.DecodeTaskResult(result, 256); protocol.ErrorCode(err) != protocol.EPLUGIN {
				b.Fatalf("decoding: %v", err)
			}
		}
	})
	// Decoding them all would allocate tens of MB (a PlannedStep each, and
	// the slice that holds them); refusing at the 257th, a few KB.
	if perOp := allocs.AllocedBytesPerOp(); perOp > 256<<10 {
		t.Errorf("refusing a plan of 349,521 steps allocated %d KiB", perOp>>10)
	}
}

func TestAPlanAtTheLimitIsKept(t *testing.T) {
	res, err := V1.DecodeTaskResult([]byte(`{"steps":[{"name":"a"},{"name":"b","input":"i","additional_input":{"k":1}}]}`), 2)
	if err != nil {
		t.Fatal(err)
	}
	in := "i"
	want := []protocol.PlannedStep{{Name: "a"}, {Name: "b", Input: &in, AdditionalInput: json.RawMessage(`{"k":1}`)}}
	if !reflect.DeepEqual(res.Steps, want) {
		t.Errorf("steps = %+v, want %+v", res.Steps, want)
	}
	if _, err := V1.DecodeTaskResult([]byte(`{"steps":[{},{},{}]}`), 2); protocol.ErrorCode(err) != protocol.EPLUGIN {
		t.Errorf("3 steps over a limit of 2: %v", err)
	}
}

// fullInput is a handler input with every field the domain has set.
func fullInput() *protocol.HandlerInput {
	art := protocol.Artifact{ArtifactID: "a1", AgentCreated: true, FileName: "f.txt", RelativePath: "dir", TaskID: "t1", StepID: "s0", Size: 3}
	link := protocol.Artifact{ArtifactID: "a2", AgentCreated: true, FileName: "r.pdf", RelativePath: "links", URI: "s3://b/r.pdf", TaskID: "t1", StepID: "s0"}
	return &protocol.HandlerInput{
		Handler: protocol.HandlerStep,
		Task:    &protocol.Task{TaskID: "t1", Input: str("task input"), AdditionalInput: json.RawMessage(`{"k":"v"}`), Artifacts: []protocol.Artifact{art, link}},
		Step: &protocol.Step{TaskID: "t1", StepID: "s1", Name: str("step name"), Input: str("step input"),
			AdditionalInput: json.RawMessage(`{"s":1}`), Planned: true},
		Request:  &protocol.StepRequestBody{Input: str("request input"), AdditionalInput: json.RawMessage(`{"r":true}`)},
		Artifact: &art,
	}
}

func str(s string) *string { return &s }

// Every field of abi.Input, at every depth, is set by EncodeInput from a
// domain input with every field set: a field added to the ABI's messages
// that the host does not fill fails here.
func TestEncodeInputWritesEveryFieldOfTheABIInput(t *testing.T) {
	var msg map[string]any
	if err := json.Unmarshal(V1.EncodeInput(fullInput()), &msg); err != nil {
		t.Fatal(err)
	}
	checkEveryField(t, "input", reflect.TypeOf(abi.Input{}), msg)
}

// exclusiveFields are the fields of a message that are never set
// together: an artifact is bytes in the workspace or a URI.
var exclusiveFields = map[string]string{"workspace_path": "uri", "uri": "workspace_path"}

// checkEveryField checks that v, a decoded JSON object, holds every field
// of struct type typ (or the field it excludes), recursing into nested
// structs and arrays of them, where each field is set in some element.
func checkEveryField(t *testing.T, path string, typ reflect.Type, v any) {
	t.Helper()
	obj, ok := v.(map[string]any)
	if !ok {
		t.Errorf("%s is %T, want an object", path, v)
		return
	}
	set := func(name string) bool {
		val, ok := obj[name]
		return ok && val != nil && val != "" && val != false && val != 0.0
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		val := obj[name]
		if !set(name) {
			if other := exclusiveFields[name]; other == "" || !set(other) {
				t.Errorf("%s.%s is not set (%v)", path, name, val)
			}
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			checkEveryField(t, path+"."+name, ft, val)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			list, _ := val.([]any)
			if len(list) == 0 {
				t.Errorf("%s.%s is empty", path, name)
			}
			for j, e := range list {
				checkEveryField(t, fmt.Sprintf("%s.%s[%d]", path, name, j), ft.Elem(), e)
			}
			for other := range exclusiveFields {
				some := false
				for _, e := range list {
					m, _ := e.(map[string]any)
					some = some || (m[other] != nil && m[other] != "")
				}
				if _, ok := ft.Elem().FieldByName(fieldOf(ft.Elem(), other)); ok && !some {
					t.Errorf("%s.%s: no element sets %s", path, name, other)
				}
			}
		}
	}
}

// fieldOf is the name of typ's field whose JSON name is name, or "".
func fieldOf(typ reflect.Type, name string) string {
	for i := range typ.NumField() {
		if strings.Split(typ.Field(i).Tag.Get("json"), ",")[0] == name {
			return typ.Field(i).Name
		}
	}
	return ""
}

func TestEncodeInputCarriesTheDomainsValues(t *testing.T) {
	var got abi.Input
	if err := json.Unmarshal(V1.EncodeInput(fullInput()), &got); err != nil {
		t.Fatal(err)
	}
	art := abi.Artifact{ArtifactID: "a1", AgentCreated: true, FileName: "f.txt", RelativePath: "dir", WorkspacePath: "dir/f.txt", StepID: "s0"}
	link := abi.Artifact{ArtifactID: "a2", AgentCreated: true, FileName: "r.pdf", RelativePath: "links", URI: "s3://b/r.pdf", StepID: "s0"}
	want := abi.Input{
		ABI: abi.Version, Handler: abi.HandlerStep,
		Task:     abi.Task{TaskID: "t1", Input: str("task input"), AdditionalInput: json.RawMessage(`{"k":"v"}`), Artifacts: []abi.Artifact{art, link}},
		Step:     &abi.Step{StepID: "s1", Name: str("step name"), Input: str("step input"), AdditionalInput: json.RawMessage(`{"s":1}`), Planned: true},
		Request:  &abi.Request{Input: str("request input"), AdditionalInput: json.RawMessage(`{"r":true}`)},
		Artifact: &art,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("input decodes as\n%+v\nwant\n%+v", got, want)
	}
	// The domain's handler names are the ABI's.
	for _, h := range []protocol.Handler{protocol.HandlerTask, protocol.HandlerStep, protocol.HandlerArtifact, protocol.HandlerDownload} {
		if abi.ExportOf(string(h)) == "" {
			t.Errorf("handler %q has no export in the ABI", h)
		}
	}
}

// Every field of each result message, filled by reflection, reaches the
// domain's result with its value: a field added to abi's results that the
// host does not read fails here.
func TestDecodeResultsReadEveryFieldOfTheABIResults(t *testing.T) {
	for _, tc := range []struct {
		msg    any
		decode func([]byte) (any, error)
	}{
		{&abi.StepResult{}, func(b []byte) (any, error) { return V1.DecodeStepResult(b) }},
		{&abi.ArtifactResult{}, func(b []byte) (any, error) { return V1.DecodeArtifactResult(b) }},
		{&abi.TaskResult{}, func(b []byte) (any, error) { return V1.DecodeTaskResult(b, 10) }},
	} {
		v := reflect.ValueOf(tc.msg).Elem()
		fill(v, v.Type().Name())
		b, err := json.Marshal(tc.msg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tc.decode(b)
		if err != nil {
			t.Fatalf("%s: %v", v.Type().Name(), err)
		}
		if want, got := byName(v), byName(reflect.ValueOf(got)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s decodes as\n%v\nwant\n%v", v.Type().Name(), b, got, want)
		}
	}
}

// fill sets every field of v to a value no two fields share, and one
// element in each slice.
func fill(v reflect.Value, name string) {
	switch {
	case v.Type() == reflect.TypeOf(json.RawMessage(nil)):
		v.SetBytes([]byte(fmt.Sprintf(`{%q:1}`, name)))
	case v.Kind() == reflect.String:
		v.SetString(name)
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		v.SetInt(int64(len(name)))
	case v.Kind() == reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), name)
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), name+"[0]")
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), name+"."+v.Type().Field(i).Name)
		}
	default:
		panic("fill: no value for " + v.Type().String())
	}
}

// byName is v as nested maps keyed by Go field name, so that an abi
// message and the domain's type compare field by field.
func byName(v reflect.Value) any {
	switch {
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return byName(v.Elem())
	case v.Type() == reflect.TypeOf(json.RawMessage(nil)):
		return string(v.Bytes())
	case v.Kind() == reflect.Slice:
		out := []any{}
		for i := range v.Len() {
			out = append(out, byName(v.Index(i)))
		}
		return out
	case v.Kind() == reflect.Struct:
		out := map[string]any{}
		for i := range v.NumField() {
			out[v.Type().Field(i).Name] = byName(v.Field(i))
		}
		return out
	}
	return v.Interface()
}
