package abi

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The ABI's messages as golden files (testdata/golden, its README says
// who reads them): the Go kit's codec against them here, the host's wire
// format in protocol/wire, the Rust kit in plugins/rust.

const goldenDir = "testdata/golden"

// goldenTypes is the message type of the files of each directory of
// goldenDir.
var goldenTypes = map[string]reflect.Type{
	"input":           reflect.TypeOf(Input{}),
	"task_result":     reflect.TypeOf(TaskResult{}),
	"step_result":     reflect.TypeOf(StepResult{}),
	"artifact_result": reflect.TypeOf(ArtifactResult{}),
	"download_result": reflect.TypeOf(DownloadResult{}),
	"artifact_meta":   reflect.TypeOf(ArtifactMeta{}),
	"file_info":       reflect.TypeOf(FileInfo{}),
	"file_list":       reflect.TypeOf([]FileInfo{}),
	"config":          reflect.TypeOf(map[string]string{}),
	"http_request":    reflect.TypeOf(HTTPRequest{}),
	"http_response":   reflect.TypeOf(HTTPResponse{}),
}

// futurePrefix starts the keys that stand for fields a later version 1
// may add: readers ignore them, writers never write them.
const futurePrefix = "future_"

type golden struct {
	name string // dir/file.json
	data []byte
}

// goldens returns the files of a directory of goldenDir; it has some.
func goldens(t *testing.T, dir string) []golden {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(goldenDir, dir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden messages in %s/%s (%v)", goldenDir, dir, err)
	}
	var gs []golden
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, golden{name: dir + "/" + filepath.Base(p), data: data})
	}
	return gs
}

// TestGoldenMessagesCoverEveryField: every field of every message type is
// set (not zero) in some golden file of its directory, every optional
// field (a pointer, json.RawMessage or omitempty) is absent or null in
// some file, and no file has a key that is no field. A field added to
// abi.go fails here until the goldens show it, and so reach every kit's
// tests.
func TestGoldenMessagesCoverEveryField(t *testing.T) {
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := goldenTypes[e.Name()]; e.IsDir() && !ok {
			t.Errorf("%s/%s: no message type for this directory in goldenTypes", goldenDir, e.Name())
		}
	}
	for dir, typ := range goldenTypes {
		cov := coverage{set: map[string]bool{}, unset: map[string]bool{}}
		for _, g := range goldens(t, dir) {
			typed := reflect.New(typ).Interface()
			if err := json.Unmarshal(g.data, typed); err != nil {
				t.Errorf("%s: not a %s: %v", g.name, typ, err)
				continue
			}
			var v any
			if err := json.Unmarshal(g.data, &v); err != nil {
				t.Fatal(err)
			}
			cov.walk(t, g.name, "", typ, v)
		}
		for _, f := range fieldPaths(typ, "") {
			if !cov.set[f.path] && neverSet[dir+":"+f.path] == "" {
				t.Errorf("no golden message in %s sets %s", dir, f.path)
			}
			if f.optional && !cov.unset[f.path] {
				t.Errorf("no golden message in %s leaves out %s (it is optional)", dir, f.path)
			}
		}
	}
}

// neverSet are the fields no host sets, each with the reason; the same
// type is read with the field set elsewhere.
var neverSet = map[string]string{}

// fieldPath is a field of a message, as a path of JSON names
// ("task.artifacts[].file_name"), and whether it may be left out.
type fieldPath struct {
	path     string
	optional bool
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

// jsonName is a struct field's JSON name ("" for none) and whether it is
// omitempty.
func jsonName(f reflect.StructField) (string, bool) {
	name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" || !f.IsExported() {
		return "", false
	}
	if name == "" {
		name = f.Name
	}
	return name, strings.Contains(","+opts+",", ",omitempty,")
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// fieldPaths lists the fields of typ, recursing into nested messages. A
// map (config) is one field, "{entries}", set when it has some.
func fieldPaths(typ reflect.Type, prefix string) []fieldPath {
	switch {
	case typ.Kind() == reflect.Map:
		return []fieldPath{{path: join(prefix, "{entries}"), optional: true}}
	case typ.Kind() == reflect.Slice && typ != rawMessage:
		return fieldPaths(typ.Elem(), prefix+"[]")
	case typ.Kind() != reflect.Struct:
		return nil
	}
	var out []fieldPath
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, omitempty := jsonName(f)
		if name == "" {
			continue
		}
		path := join(prefix, name)
		ft := f.Type
		optional := omitempty || ft.Kind() == reflect.Pointer || ft == rawMessage
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		out = append(out, fieldPath{path: path, optional: optional})
		if ft.Kind() == reflect.Struct || (ft.Kind() == reflect.Slice && ft != rawMessage) {
			out = append(out, fieldPaths(ft, path)...)
		}
	}
	return out
}

// coverage records the field paths some golden sets and some leaves out.
type coverage struct{ set, unset map[string]bool }

// walk records what v, a golden's decoded JSON of type typ, sets and
// leaves out, and reports keys that are no field of typ.
func (c coverage) walk(t *testing.T, file, prefix string, typ reflect.Type, v any) {
	t.Helper()
	switch {
	case typ.Kind() == reflect.Map:
		m, _ := v.(map[string]any)
		if len(m) > 0 {
			c.set[join(prefix, "{entries}")] = true
		} else {
			c.unset[join(prefix, "{entries}")] = true
		}
		return
	case typ.Kind() == reflect.Slice && typ != rawMessage:
		list, _ := v.([]any)
		for _, e := range list {
			c.walk(t, file, prefix+"[]", typ.Elem(), e)
		}
		return
	case typ.Kind() != reflect.Struct:
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		t.Errorf("%s: %s is %T, want an object", file, prefix, v)
		return
	}
	known := map[string]bool{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _ := jsonName(f)
		if name == "" {
			continue
		}
		known[name] = true
		path := join(prefix, name)
		val, present := obj[name]
		if !present || val == nil {
			c.unset[path] = true
			continue
		}
		if nonZero(val) {
			c.set[path] = true
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		c.walk(t, file, path, ft, val)
	}
	for key := range obj {
		if !known[key] && !strings.HasPrefix(key, futurePrefix) {
			t.Errorf("%s: %s has key %q, which is no field of %s (a field to come is spelled %s...)", file, prefix, key, typ, futurePrefix)
		}
	}
}

func nonZero(v any) bool {
	switch v := v.(type) {
	case string:
		return v != ""
	case bool:
		return v
	case float64:
		return v != 0
	case map[string]any:
		return len(v) > 0
	case []any:
		return len(v) > 0
	}
	return false
}

// TestKitDecodesTheGoldenHostMessagesAsEncodingJSON: what the host writes
// (input, file info, file list, config), the Go kit's codec decodes to the
// same values as encoding/json.
func TestKitDecodesTheGoldenHostMessagesAsEncodingJSON(t *testing.T) {
	for _, g := range goldens(t, "input") {
		var want Input
		if err := json.Unmarshal(g.data, &want); err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		got, err := DecodeInput(g.data)
		if err != nil {
			t.Errorf("%s: DecodeInput: %v", g.name, err)
			continue
		}
		normalizeInput(&want)
		normalizeInput(got)
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: DecodeInput gives\n%+v\nencoding/json\n%+v", g.name, *got, want)
		}
	}
	checkDecoder(t, "file_info", func(b []byte) (any, error) { return DecodeFileInfo(b) })
	checkDecoder(t, "file_list", func(b []byte) (any, error) { return DecodeFileInfos(b) })
	checkDecoder(t, "config", func(b []byte) (any, error) { return DecodeStrings(b) })
	checkDecoder(t, "http_response", func(b []byte) (any, error) { r, err := DecodeHTTPResponse(b); return derefResponse(r), err })
}

func derefResponse(r *HTTPResponse) any {
	if r == nil {
		return nil
	}
	return *r
}

// checkDecoder checks decode against encoding/json on the goldens of dir;
// an empty list and no list are the same.
func checkDecoder(t *testing.T, dir string, decode func([]byte) (any, error)) {
	t.Helper()
	for _, g := range goldens(t, dir) {
		got, err := decode(g.data)
		if err != nil {
			t.Errorf("%s: %v", g.name, err)
			continue
		}
		want := reflect.New(reflect.TypeOf(got))
		if err := json.Unmarshal(g.data, want.Interface()); err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		gv := reflect.ValueOf(got)
		if gv.Kind() == reflect.Slice && gv.Len() == 0 && want.Elem().Len() == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want.Elem().Interface()) {
			t.Errorf("%s: the kit decodes %+v, encoding/json %+v", g.name, got, want.Elem().Interface())
		}
	}
}

// TestKitWritesTheGoldenKitMessages: each message a kit writes (results,
// artifact meta), read into its Go type and written again by the Go kit's
// codec, has the golden's JSON meaning, and encoding/json reads it back
// as the same value.
func TestKitWritesTheGoldenKitMessages(t *testing.T) {
	for _, dir := range []string{"task_result", "step_result", "artifact_result", "download_result", "artifact_meta", "http_request"} {
		for _, g := range goldens(t, dir) {
			msg := reflect.New(goldenTypes[dir])
			if err := json.Unmarshal(g.data, msg.Interface()); err != nil {
				t.Fatalf("%s: %v", g.name, err)
			}
			b := msg.Interface().(appender).AppendJSON(nil)
			if !sameJSON(t, b, g.data) {
				t.Errorf("%s: the kit writes %s", g.name, b)
			}
			back := reflect.New(goldenTypes[dir])
			if err := json.Unmarshal(b, back.Interface()); err != nil {
				t.Errorf("%s: encoding/json refuses %s: %v", g.name, b, err)
			} else if !reflect.DeepEqual(back.Interface(), msg.Interface()) {
				t.Errorf("%s: %s reads back as %+v, want %+v", g.name, b, back.Interface(), msg.Interface())
			}
		}
	}
}

// sameJSON reports whether got and the golden want have the same JSON
// meaning, ignoring the golden's future_ keys.
func sameJSON(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("not JSON: %s: %v", got, err)
		return false
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("golden: %v", err)
	}
	return reflect.DeepEqual(g, withoutFuture(w))
}

func withoutFuture(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if !strings.HasPrefix(k, futurePrefix) {
				out[k] = withoutFuture(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutFuture(e)
		}
		return out
	}
	return v
}

// messageTypes are the ABI's top-level messages; every struct type of
// abi.go is one of them or a part of one.
var messageTypes = []reflect.Type{
	reflect.TypeOf(Input{}), reflect.TypeOf(FileInfo{}),
	reflect.TypeOf(TaskResult{}), reflect.TypeOf(StepResult{}), reflect.TypeOf(ArtifactResult{}), reflect.TypeOf(DownloadResult{}),
	reflect.TypeOf(ArtifactMeta{}), reflect.TypeOf(HTTPRequest{}), reflect.TypeOf(HTTPResponse{}),
}

// TestKitCodecRoundTripsEveryField fills every field of every message
// with a value no other field has: what the host writes with
// encoding/json, the kit decodes to the same value; what the kit writes,
// encoding/json reads back as the same value. A field the kit's codec
// does not know fails here.
func TestKitCodecRoundTripsEveryField(t *testing.T) {
	decoders := map[reflect.Type]func([]byte) (any, error){
		reflect.TypeOf(Input{}):    func(b []byte) (any, error) { in, err := DecodeInput(b); return deref(in), err },
		reflect.TypeOf(FileInfo{}): func(b []byte) (any, error) { return DecodeFileInfo(b) },
		reflect.TypeOf(HTTPResponse{}): func(b []byte) (any, error) {
			r, err := DecodeHTTPResponse(b)
			return derefResponse(r), err
		},
	}
	for _, typ := range messageTypes {
		v := reflect.New(typ)
		fillValue(v.Elem(), typ.Name())
		if decode, ok := decoders[typ]; ok {
			b, err := json.Marshal(v.Interface())
			if err != nil {
				t.Fatal(err)
			}
			got, err := decode(b)
			if err != nil {
				t.Errorf("%s: decoding %s: %v", typ.Name(), b, err)
			} else if !reflect.DeepEqual(got, v.Elem().Interface()) {
				t.Errorf("%s: the kit decodes %s as\n%+v\nwant\n%+v", typ.Name(), b, got, v.Elem().Interface())
			}
			continue
		}
		enc, ok := v.Interface().(appender)
		if !ok {
			t.Errorf("%s has neither a decoder in the kit's codec nor AppendJSON", typ.Name())
			continue
		}
		b := enc.AppendJSON(nil)
		back := reflect.New(typ)
		if err := json.Unmarshal(b, back.Interface()); err != nil {
			t.Errorf("%s: encoding/json refuses %s: %v", typ.Name(), b, err)
		} else if !reflect.DeepEqual(back.Interface(), v.Interface()) {
			t.Errorf("%s: the kit writes %s, which reads back as\n%+v\nwant\n%+v", typ.Name(), b, back.Elem().Interface(), v.Elem().Interface())
		}
	}
	// The lists and maps the host answers with.
	list := []FileInfo{{}, {}}
	fillValue(reflect.ValueOf(list).Index(0), "list[0]")
	fillValue(reflect.ValueOf(list).Index(1), "list[1]")
	b, _ := json.Marshal(list)
	if got, err := DecodeFileInfos(b); err != nil || !reflect.DeepEqual(got, list) {
		t.Errorf("DecodeFileInfos(%s) = %+v, %v", b, got, err)
	}
	strs := map[string]string{"a": "1", "b \"é\"": "2\n", "": ""}
	b, _ = json.Marshal(strs)
	if got, err := DecodeStrings(b); err != nil || !reflect.DeepEqual(got, strs) {
		t.Errorf("DecodeStrings(%s) = %v, %v", b, got, err)
	}
}

func deref(in *Input) any {
	if in == nil {
		return nil
	}
	return *in
}

// fillValue sets every field of v to a value no two fields share, with two
// elements in each slice.
func fillValue(v reflect.Value, name string) {
	switch {
	case v.Type() == rawMessage:
		v.SetBytes([]byte(`{"` + name + `":[1,"x",null]}`))
	case v.Kind() == reflect.String:
		v.SetString(name + " \"é\"\n")
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		v.SetInt(int64(len(name)) << 33)
	case v.Kind() == reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillValue(v.Elem(), name)
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fillValue(v.Index(0), name+"[0]")
		fillValue(v.Index(1), name+"[1]")
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			fillValue(v.Field(i), name+"."+v.Type().Field(i).Name)
		}
	default:
		panic("fillValue: no value for " + v.Type().String())
	}
}

// TestEveryStructOfABIGoIsAMessage: each struct type declared in abi.go is
// reached from messageTypes, so that the round trip and the goldens cover
// it.
func TestEveryStructOfABIGoIsAMessage(t *testing.T) {
	reached := map[string]bool{}
	var reach func(reflect.Type)
	reach = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || (typ.Kind() == reflect.Slice && typ != rawMessage) {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || reached[typ.Name()] {
			return
		}
		reached[typ.Name()] = true
		for i := range typ.NumField() {
			reach(typ.Field(i).Type)
		}
	}
	for _, typ := range messageTypes {
		reach(typ)
	}
	for _, typ := range goldenTypes {
		reach(typ)
	}
	declared := goStructs(t)
	for _, name := range declared {
		if !reached[name] {
			t.Errorf("abi.go declares struct %s, which no message in messageTypes holds", name)
		}
	}
	if len(declared) < len(messageTypes) {
		t.Errorf("found only %d structs in abi.go: %v", len(declared), declared)
	}
}

// goStructs lists the struct types declared in abi.go.
func goStructs(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "abi.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if _, ok := ts.Type.(*ast.StructType); ok {
				names = append(names, ts.Name.Name)
			}
		}
		return true
	})
	sort.Strings(names)
	return names
}
