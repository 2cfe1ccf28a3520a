package protocol

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// fieldsProbe is a struct of every shape JSONFieldsOf follows.
type fieldsProbe struct {
	Plain    string          `json:"plain"`
	Opt      *string         `json:"opt,omitempty"`
	Kind     string          `json:"kind"`
	Raw      json.RawMessage `json:"raw"`
	Untagged bool            // matched as "Untagged"
	Skipped  string          `json:"-"`
	//lint:ignore SA5008 "-," names the field "-", as encoding/json documents: the probe checks it does
	Dash    string                      `json:"-,"` // named "-"
	Inner   *fieldsProbe                `json:"inner"`
	List    []fieldsProbeItem           `json:"list"`
	ByName  map[string]fieldsProbe      `json:"by_name"`
	Steps   []RequestedStep             `json:"steps"`
	Patch   *TaskPatch                  `json:"patch"`
	Nested  [][]fieldsProbeItem         `json:"nested"`
	Any     any                         `json:"any"`
	_       struct{}                    // unexported: not a field
	Strings map[string]string           `json:"strings"`
	Items   map[string]*fieldsProbeItem `json:"items"`
}

type fieldsProbeItem struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// nameVariants are names encoding/json may or may not read as name: in
// other cases (ASCII and Unicode folds: ſ for s, the Kelvin sign for k),
// with its delimiters changed or dropped, with spaces; and name itself.
func nameVariants(name string) []string {
	v := []string{name, strings.ToUpper(name), name + " ", " " + name, name + "s",
		strings.ReplaceAll(name, "_", ""), strings.ReplaceAll(name, "_", "-"), strings.ToUpper(name[:1]) + name[1:],
		strings.ReplaceAll(name, "s", "ſ"), strings.ReplaceAll(name, "k", "\u212a"), strings.ReplaceAll(name, "K", "\u212a"),
		strings.ReplaceAll(name, "i", "İ"), strings.ReplaceAll(name, "i", "ı"), strings.ReplaceAll(strings.ToUpper(name), "S", "ſ")}
	if len(name) > 1 {
		v = append(v, name[:len(name)-1]+strings.ToUpper(name[len(name)-1:]), name[1:])
	}
	return v
}

// sampleJSON is a JSON value that decoding into a t sets to something
// other than its zero value.
func sampleJSON(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[RequestedStep]():
		return `"a step"`
	case t == reflect.TypeFor[json.RawMessage]():
		return `{"k":1}`
	}
	switch t.Kind() {
	case reflect.Pointer:
		return sampleJSON(t.Elem())
	case reflect.String:
		return `"x"`
	case reflect.Bool:
		return `true`
	case reflect.Int:
		return `7`
	case reflect.Slice:
		return "[" + sampleJSON(t.Elem()) + "]"
	case reflect.Map:
		return `{"m":` + sampleJSON(t.Elem()) + `}`
	case reflect.Interface:
		return `1`
	}
	return `{}` // a struct: non-nil through its pointer
}

// TestJSONFieldsRefuseExactlyTheNamesEncodingJSONReadsAsAnotherName holds
// Check to encoding/json itself: for every field of the types decoded at
// agentrt's doors, and of fieldsProbe, each variant of its name is sent
// alone; Check must refuse it exactly when encoding/json sets the field
// from it though it is not the field's name. Were encoding/json to change
// how it matches names, this fails.
func TestJSONFieldsRefuseExactlyTheNamesEncodingJSONReadsAsAnotherName(t *testing.T) {
	refused := 0
	for _, typ := range []reflect.Type{reflect.TypeFor[TaskRequestBody](), reflect.TypeFor[StepRequestBody](),
		reflect.TypeFor[fieldsProbe](), reflect.TypeFor[fieldsProbeItem]()} {
		fields := JSONFieldsOf(typ)
		for i := range typ.NumField() {
			sf := typ.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "" {
				name = sf.Name
			}
			for _, variant := range nameVariants(name) {
				key, _ := json.Marshal(variant)
				body := []byte(fmt.Sprintf(`{%s:%s}`, key, sampleJSON(sf.Type)))
				v := reflect.New(typ)
				if err := json.Unmarshal(body, v.Interface()); err != nil {
					t.Fatalf("%s: encoding/json refuses %s: %v", typ, body, err)
				}
				readAsField := !v.Elem().Field(i).IsZero()
				want := readAsField && variant != name && sf.Tag.Get("json") != "-"
				err := checkFieldsBothWays(t, fields, body)
				if (err != nil) != want {
					t.Errorf("%s field %s: Check(%s) = %v; encoding/json reads it as the field: %v", typ, sf.Name, body, err, readAsField)
				}
				if err != nil {
					refused++
				}
			}
		}
	}
	if refused < 50 {
		t.Errorf("only %d variants refused: the probe is not probing", refused)
	}
}

func TestJSONFieldsCheckNamesTheMemberWhereItIsAndTheField(t *testing.T) {
	probe := JSONFieldsOf(reflect.TypeFor[fieldsProbe]())
	task := JSONFieldsOf(reflect.TypeFor[TaskRequestBody]())
	for _, tc := range []struct {
		fields *JSONFields
		body   string
		want   string // "" for none
	}{
		{task, `{"input":"a","INPUT":"b"}`, `"INPUT": member names are case-sensitive; did you mean "input"?`},
		{task, `{"Additional_Input":{}}`, `"Additional_Input": member names are case-sensitive; did you mean "additional_input"?`},
		{task, `{"\u0049nput":"b"}`, `"Input": member names are case-sensitive; did you mean "input"?`},
		{task, `{"ſteps":[]}`, `"\u017fteps": member names are case-sensitive; did you mean "steps"?`},
		{task, `{"steps":["a",{"name":"b"},{"NAME":"c"}]}`, `"NAME" in steps[2]: member names are case-sensitive; did you mean "name"?`},
		{task, `{"steps":[{"name":"b","Additional_input":{}}]}`, `"Additional_input" in steps[0]: member names are case-sensitive; did you mean "additional_input"?`},
		{probe, `{"inner":{"inner":{"PLAIN":1}}}`, `"PLAIN" in inner.inner: member names are case-sensitive; did you mean "plain"?`},
		{probe, `{"by_name":{"x":{"kind":"a"},"y":{"\u212aind":"b"}}}`, `"\u212aind" in by_name.y: member names are case-sensitive; did you mean "kind"?`},
		{probe, `{"nested":[[],[{"name":"a"},{"Size":1}]]}`, `"Size" in nested[1][1]: member names are case-sensitive; did you mean "size"?`},
		{probe, `{"items":{"a":null,"b":{"NAME":"x"}}}`, `"NAME" in items.b: member names are case-sensitive; did you mean "name"?`},
		{probe, `{"untagged":true}`, `"untagged": member names are case-sensitive; did you mean "Untagged"?`},
		// Accepted: exact names, names written with escapes, unknown names,
		// names in values decoded as they are (json.RawMessage, any, a map
		// of strings, a type with its own UnmarshalJSON), and values of the
		// wrong type, which decoding refuses.
		{task, `{"input":"a","\u0069nput2":"b","inputs":1,"additional_input":{"INPUT":1,"Steps":[{"NAME":1}]}}`, ""},
		{task, `{"steps":"x","title":null,"Titles":1}`, ""},
		{task, `{"additional_input":{"a":"}\"{[\\","b":[{"c":"]"}]},"x":[1,-2.5e3,true,null,{}],"input":"x"}`, ""},
		{probe, `{"raw":{"PLAIN":1},"any":{"Plain":1},"strings":{"PLAIN":"x"},"patch":{"TITLE":"t"},"Skipped":"x","-":"y","list":[1,"a",null,[{"NAME":1}]]}`, ""},
		{probe, `{"steps":[{"name":"a","INPUT":"b"}]}`, `"INPUT" in steps[0]: member names are case-sensitive; did you mean "input"?`},
		// The skip must keep its place past strings with escapes, objects
		// and numbers to find a name after them.
		{task, `{"additional_input":{"a":"\\\"}","b":{"c":["\"{"]}},"x":"\\","y":-0.5e-3,"z":[[[]]],"Input":"x"}`, `"Input": member names are case-sensitive; did you mean "input"?`},
		{task, " \n{ \"additional_input\" : { } , \t\"INPUT\" : 1 } ", `"INPUT": member names are case-sensitive; did you mean "input"?`},
		{task, `{"additional_input":{"z":[11111111,22222222,[33333333]]},"x":[44444444,55555555],"Input":1}`, `"Input": member names are case-sensitive; did you mean "input"?`},
		{probe, strings.Repeat(`{"inner":`, 10) + `{"plain":"a","Inner":{}}` + strings.Repeat(`}`, 10),
			`"Inner" in inner.inner.inner.inner.inner.inner.inner.inner.inner.inner: member names are case-sensitive; did you mean "inner"?`},
		{task, `["INPUT"]`, ""},
		{task, `"INPUT"`, ""},
		{nil, `{"INPUT":1}`, ""},
	} {
		if err := CheckJSON([]byte(tc.body), MaxJSONDepth); err != nil {
			t.Fatalf("test body %s is not I-JSON: %v", tc.body, err)
		}
		err := checkFieldsBothWays(t, tc.fields, []byte(tc.body))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Check(%s) = %v, want nil", tc.body, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("Check(%s) = %v\nwant %s", tc.body, err, tc.want)
		}
	}
}

// TestJSONSkipsStopAtEveryByteTheyMustRead: the tests of eight bytes at a
// time that let Check skip text find every byte it must look at, wherever
// it is in the word, and no other.
func TestJSONSkipsStopAtEveryByteTheyMustRead(t *testing.T) {
	for _, c := range []struct {
		name    string
		marks   func(uint64) uint64
		special string
	}{{"quotesOrBackslashes", quotesOrBackslashes, `"\`}, {"jsonStructurals", jsonStructurals, `"{}[]`}} {
		for _, fill := range []byte{'a', ' ', 0x00, 0x01, 0x80, 0xff, '[' ^ 0x20, '{' ^ 0x20, '"' + 1, '"' - 1} {
			if strings.IndexByte(c.special, fill) >= 0 {
				continue
			}
			for at := range 8 {
				for b := range 256 {
					for _, then := range []byte{fill, c.special[0]} { // a special byte after it must not hide it
						word := [8]byte{fill, fill, fill, fill, fill, fill, fill, fill}
						word[at] = byte(b)
						if at < 7 {
							word[7] = then
						}
						want := 8 // none
						for k, w := range word {
							if strings.IndexByte(c.special, w) >= 0 {
								want = k
								break
							}
						}
						if got := bits.TrailingZeros64(c.marks(binary.LittleEndian.Uint64(word[:]))) >> 3; got != want {
							t.Fatalf("%s(%q) marks byte %d first, want %d", c.name, word, got, want)
						}
					}
				}
			}
		}
	}
}

// FuzzJSONFieldsCheck holds Check, which skips what it need not read, to an
// oracle that reads everything: encoding/json decodes the text into an any,
// and the oracle walks it with the fields of TaskRequestBody.
func FuzzJSONFieldsCheck(f *testing.F) {
	for _, s := range []string{`{"input":"a","INPUT":"b"}`, `{"steps":["a",{"NAME":"b"}]}`,
		`{"additional_input":{"a":"}\"{[\\","b":[{"c":"]"}]},"Input":"x"}`, `{"ſteps":[{"\u006eame":"a"}]}`, createTaskBody} {
		f.Add([]byte(s))
	}
	fields := JSONFieldsOf(reflect.TypeFor[TaskRequestBody]())
	f.Fuzz(func(t *testing.T, b []byte) {
		if CheckJSON(b, MaxJSONDepth) != nil {
			return
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("CheckJSON takes %q, encoding/json refuses it: %v", b, err)
		}
		err := checkFieldsBothWays(t, fields, b)
		if want := caseVariantIn(fields, v); (err != nil) != want {
			t.Fatalf("Check(%q) = %v; the oracle finds a name in another case: %v", b, err, want)
		}
		if err != nil && !utf8.ValidString(err.Error()) {
			t.Fatalf("Check(%q): the error is not UTF-8: %q", b, err)
		}
	})
}

// checkFieldsBothWays checks the names in b, JSON text CheckJSON takes, as
// f says, by f.Check and by CheckJSONFields: the two must give the same
// answer, whose error is a *JSONNameError.
func checkFieldsBothWays(t *testing.T, f *JSONFields, b []byte) error {
	t.Helper()
	err := f.Check(b)
	inPass := CheckJSONFields(b, MaxJSONDepth, f)
	if fmt.Sprint(err) != fmt.Sprint(inPass) {
		t.Fatalf("on %q, Check says %v and CheckJSONFields %v", b, err, inPass)
	}
	if _, ok := err.(*JSONNameError); err != nil && !ok {
		t.Fatalf("on %q, Check says %v, a %T", b, err, err)
	}
	return err
}

// caseVariantIn is the oracle: whether v, decoded, has a member that a
// struct of f's decodes by another name.
func caseVariantIn(f *JSONFields, v any) bool {
	if f == nil {
		return false
	}
	switch v := v.(type) {
	case []any:
		if f.kind != fieldsArray {
			return false
		}
		for _, e := range v {
			if caseVariantIn(f.elem, e) {
				return true
			}
		}
	case map[string]any:
		for name, e := range v {
			if f.kind == fieldsMap {
				if caseVariantIn(f.elem, e) {
					return true
				}
				continue
			}
			if f.kind != fieldsStruct {
				return false
			}
			exact := -1
			for k, n := range f.names {
				if n == name {
					exact = k
				}
			}
			if exact >= 0 {
				if caseVariantIn(f.values[exact], e) {
					return true
				}
				continue
			}
			for _, n := range f.names {
				if strings.EqualFold(n, name) {
					return true
				}
			}
		}
	}
	return false
}

// TestJSONFieldsCheckAllocatesNothingOnABodyItTakes: what it costs per
// request, at the edge and for every result.
func TestJSONFieldsCheckAllocatesNothingOnABodyItTakes(t *testing.T) {
	fields := JSONFieldsOf(reflect.TypeFor[TaskRequestBody]())
	body := []byte(`{"input":"x","title":"t","steps":["a",{"name":"b","additional_input":{"k":[1,{"s":"\"}"}]}}],"unknown":{"a":1}}`)
	if allocs := testing.AllocsPerRun(100, func() {
		if fields.Check(body) != nil {
			t.Fatal("refused")
		}
	}); allocs != 0 {
		t.Errorf("Check allocated %v times", allocs)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if CheckJSONFields(body, MaxJSONDepth, fields) != nil {
			t.Fatal("refused")
		}
	}); allocs != 0 {
		t.Errorf("CheckJSONFields allocated %v times", allocs)
	}
}

func BenchmarkCheckJSONFields(b *testing.B) {
	task := JSONFieldsOf(reflect.TypeFor[TaskRequestBody]())
	output := []byte(`{"output":` + string(mustJSON(string(stepOutput(1<<20)))) + `,"additional_output":` + string(stepOutput(1<<20)) + `}`)
	type stepResult struct {
		Output           *string         `json:"output"`
		AdditionalOutput json.RawMessage `json:"additional_output"`
	}
	step := JSONFieldsOf(reflect.TypeFor[stepResult]())
	text := mustJSON(stepResult{Output: new(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 1<<20/45))})
	for _, c := range []struct {
		name   string
		fields *JSONFields
		doc    []byte
	}{{"body", task, []byte(createTaskBody)}, {"planned_body", task, []byte(plannedTaskBody)},
		{"2MiB_step_result", step, output}, {"1MiB_text_output", step, text}} {
		b.Run(c.name+"/Check", func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if c.fields.Check(c.doc) != nil {
					b.Fatal("refused")
				}
			}
		})
		b.Run(c.name+"/CheckJSONFields", func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if CheckJSONFields(c.doc, MaxJSONDepth, c.fields) != nil {
					b.Fatal("refused")
				}
			}
		})
		b.Run(c.name+"/CheckJSON", func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if CheckJSON(c.doc, MaxJSONDepth) != nil {
					b.Fatal("refused")
				}
			}
		})
	}
}

// plannedTaskBody is a create-task body that plans steps, for the cost
// of checking names a level down.
const plannedTaskBody = `{"input":"Summarise the report","title":"Weekly report","description":"From the uploads",` +
	`"steps":["Fetch",{"name":"Summarise","input":"in 3 lines","additional_input":{"lang":"en"}},"Publish"],` +
	`"additional_input":{"model":"gpt-4o"}}`

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
