package abi

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var inputSeeds = []string{
	`{"abi":1,"handler":"step","task":{"task_id":"t","input":"hi","additional_input":{},"artifacts":[]},"step":{"step_id":"s","name":null,"input":"hi","additional_input":{"a":[1,2,{"b":null}]},"planned":false},"request":{"input":"hi","additional_input":{}}}`,
	`{"abi":1,"handler":"task","task":{"task_id":"t","input":null,"additional_input":{"x":"y"},"artifacts":[{"artifact_id":"a","agent_created":true,"file_name":"f.txt","relative_path":"d","workspace_path":"d/f.txt"}]}}`,
	`{"abi":1,"handler":"artifact","task":{"task_id":"t"},"artifact":{"artifact_id":"a","agent_created":false,"file_name":"ü.txt","relative_path":""},"unknown":{"deep":[[[]]]},"more":-1.5e3}`,
	` { "handler" : "step" , "step" : null , "request" : null , "artifact" : null } `,
	`{"task":{"input":"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00 \ud800 \udc00 \ud800\u0041"}}`,
	"{\"task\":{\"input\":\"raw \xff\xfe bytes and \xe2\x82 cut\"}}",
	`{"abi":1,"abi":2}`, "{\"abi\" :\n 1 , \"task\": {\"task_id\": \"t\"}}",
	`{}`,
	`{"step":{"name":"n","input":"","additional_input":null}}`,
	`[]`, `{`, `{"abi":}`, `{"handler":"x",}`, `{"task":{"input":"\x01"}}`, `{"abi":1} x`, `{"abi":01}`, `{"abi":1.5}`,
	`{"task":{"input":"\u12"}}`, `{"step":{"planned":tru}}`, strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000),
}

// TestDecodeInputAgreesWithEncodingJSON: whatever encoding/json accepts,
// DecodeInput decodes to the same value; what it refuses, DecodeInput
// refuses too (except for nesting past its own limit).
func TestDecodeInputAgreesWithEncodingJSON(t *testing.T) {
	for _, seed := range inputSeeds {
		checkDecodeInput(t, []byte(seed))
	}
}

func FuzzDecodeInput(f *testing.F) {
	for _, seed := range inputSeeds {
		f.Add([]byte(seed))
	}
	// The golden inputs (golden_test.go), as the host would send them.
	paths, _ := filepath.Glob(filepath.Join(goldenDir, "input", "*.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(checkDecodeInput)
}

// fields are the names DecodeInput knows.
var fields = strings.Fields(`abi handler task step request artifact task_id input additional_input artifacts
	step_id name planned artifact_id agent_created file_name relative_path workspace_path`)

// foldedKey reports whether data has a key that matches a field only
// case-insensitively: encoding/json takes those, the host never sends them
// and DecodeInput ignores them.
func foldedKey(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if k, ok := tok.(string); ok {
			for _, f := range fields {
				if k != f && strings.EqualFold(k, f) {
					return true
				}
			}
		}
	}
}

func checkDecodeInput(t *testing.T, data []byte) {
	if foldedKey(data) {
		return
	}
	var want Input
	wantErr := json.Unmarshal(data, &want)
	got, err := DecodeInput(data)
	if wantErr != nil {
		if err == nil && !strings.Contains(wantErr.Error(), "exceeded max depth") {
			t.Errorf("DecodeInput(%.100q) accepted what encoding/json refuses (%v)", data, wantErr)
		}
		return
	}
	if err != nil {
		if json.Valid(data) && bytes.Count(data, []byte("{")) < maxDepth {
			t.Errorf("DecodeInput(%.100q) = %v; encoding/json accepts it", data, err)
		}
		return
	}
	normalizeInput(&want)
	normalizeInput(got)
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("DecodeInput(%.200q)\n got %+v\nwant %+v", data, *got, want)
	}
}

// normalizeInput makes in's raw JSON comparable (see compact).
func normalizeInput(in *Input) {
	in.Task.AdditionalInput = compact(in.Task.AdditionalInput)
	if in.Step != nil {
		in.Step.AdditionalInput = compact(in.Step.AdditionalInput)
	}
	if in.Request != nil {
		in.Request.AdditionalInput = compact(in.Request.AdditionalInput)
	}
}

// compact makes raw JSON comparable; null and absent are the same.
func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var b bytes.Buffer
	json.Compact(&b, raw)
	return b.Bytes()
}

func TestResultsEncodeAsEncodingJSONReadsThem(t *testing.T) {
	strs := []string{"", "plain", `quote " backslash \ slash /`, "ctrl \x00\x01\x1f\x7f nl\n tab\t cr\r", "é 日本 😀", "bad \xff\xfe utf8 \xe2\x82", "<html>&"}
	for _, s := range strs {
		s := s
		checkRoundTrip(t, &StepResult{Output: &s, Name: &s, IsLast: true, Error: s, AdditionalOutput: json.RawMessage(`{"k":[1,"v"]}`)}, &StepResult{})
		checkRoundTrip(t, &TaskResult{Steps: []PlannedStep{{Name: s, Input: &s, AdditionalInput: json.RawMessage(`{"n":1}`)}, {Name: "b"}}, Error: s}, &TaskResult{})
		checkRoundTrip(t, &ArtifactResult{Reject: s, Error: s}, &ArtifactResult{})
		checkRoundTrip(t, &ArtifactMeta{FileName: s, RelativePath: s, WorkspacePath: s}, &ArtifactMeta{})
	}
	checkRoundTrip(t, &StepResult{}, &StepResult{})
	checkRoundTrip(t, &TaskResult{}, &TaskResult{})
}

type appender interface{ AppendJSON([]byte) []byte }

// checkRoundTrip: what AppendJSON writes, encoding/json reads back as it
// reads what encoding/json itself writes.
func checkRoundTrip(t *testing.T, v appender, into any) {
	t.Helper()
	b := v.AppendJSON(nil)
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	std, _ := json.Marshal(v)
	want := reflect.New(reflect.TypeOf(into).Elem()).Interface()
	if err := json.Unmarshal(std, want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(into, want) {
		t.Errorf("AppendJSON wrote %s\nwhich reads back as %+v\nwant %+v (from %s)", b, into, want, std)
	}
}

func TestDecodeFileInfosAndStrings(t *testing.T) {
	infos, err := DecodeFileInfos([]byte(`[{"path":"a/b.txt","size":12,"mod_time":1700000000000},{"path":"c","size":0,"mod_time":0,"new":true}]`))
	if err != nil || len(infos) != 2 || infos[0] != (FileInfo{"a/b.txt", 12, 1700000000000}) || infos[1].Path != "c" {
		t.Errorf("DecodeFileInfos = %+v, %v", infos, err)
	}
	if infos, err := DecodeFileInfos([]byte(`[]`)); err != nil || len(infos) != 0 {
		t.Errorf("empty list: %+v, %v", infos, err)
	}
	if fi, err := DecodeFileInfo([]byte(`{"path":"x","size":3}`)); err != nil || fi.Size != 3 {
		t.Errorf("DecodeFileInfo = %+v, %v", fi, err)
	}
	m, err := DecodeStrings([]byte(`{"model":"small","empty":"","esc":"a\"b"}`))
	if err != nil || m["model"] != "small" || m["empty"] != "" || m["esc"] != `a"b` || len(m) != 3 {
		t.Errorf("DecodeStrings = %v, %v", m, err)
	}
	for _, bad := range []string{`{"a":1}`, `[`, `{"a":"b"`, `[{"size":"x"}]`} {
		if _, err := DecodeStrings([]byte(bad)); err == nil {
			if _, err := DecodeFileInfos([]byte(bad)); err == nil {
				t.Errorf("%s decoded without error", bad)
			}
		}
	}
}

// TestAStringsPlainRunIsFoundAsAByteByByteLookFindsIt: plainRun, which
// looks at eight bytes at a time, ends the run where a look at each byte
// ends it, and says it is ASCII only when every byte of the run (and none
// after it) is: each special byte at each offset, runs of every length
// around a word's, and every byte value.
func TestAStringsPlainRunIsFoundAsAByteByByteLookFindsIt(t *testing.T) {
	byBytes := func(b []byte) (int, bool) {
		n := 0
		for n < len(b) && b[n] != '"' && b[n] != '\\' && b[n] >= 0x20 {
			n++
		}
		return n, !bytes.ContainsFunc(b[:n], func(r rune) bool { return r >= 0x80 || r == 0xfffd })
	}
	check := func(b []byte) {
		t.Helper()
		n, ascii := plainRun(b)
		wn, wascii := byBytes(b)
		if n != wn || ascii != wascii {
			t.Fatalf("plainRun(%q) = %d, %v; want %d, %v", b, n, ascii, wn, wascii)
		}
	}
	fillers := []byte{'a', 0x20, 0x21, '#', '[', ']', 0x7f, 0x80, 0xc3, 0xff}
	specials := []byte{'"', '\\', 0x00, 0x01, 0x1f}
	for _, fill := range fillers {
		for n := 0; n <= 33; n++ {
			plain := bytes.Repeat([]byte{fill}, n)
			check(plain)
			for at := range n {
				for _, special := range specials {
					b := bytes.Clone(plain)
					b[at] = special
					// What follows the first special byte moves nothing:
					// specials, and high bytes (ascii is the run's).
					for after := at + 1; after < n; after++ {
						b[after] = []byte{'"', 0x80, '\\', 0xff, 0x00}[(after+at)%5]
					}
					check(b)
				}
			}
		}
	}
	for c := range 256 {
		check(append([]byte{byte(c)}, "plain text, longer than a word"...))
		check(append([]byte("a word: "), byte(c), '"'))
	}
}
