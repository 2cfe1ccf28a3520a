package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func ptr[T any](v T) *T { return &v }

// full sets every field, each kind of value in each of its forms.
const full = `{
  "name": "washington",
  "version": "1.2.0",
  "description": "Writes the word Washington to a file.",
  "limits": {
    "call_timeout": "1m30s",
    "memory": "64MiB",
    "max_upload": "1GiB",
    "max_artifact": "10MB",
    "max_result": 1048576,
    "max_log": "512KiB",
    "max_task_log": 0,
    "max_workspace": "100B",
    "max_workspace_files": 500,
    "max_call_artifacts": 8,
    "max_task_artifacts": 0,
    "max_task_artifact_bytes": "2GB",
    "max_planned_steps": 16,
    "max_task_steps": 1e3,
    "task_time": "1.5h",
    "max_host_calls": 5000,
    "max_table_entries": 4294967295,
    "max_instances": 4.0,
    "max_background_steps": 3,
    "http_timeout": "20s",
    "max_http_requests": 16,
    "max_http_request": "1MiB",
    "max_http_response": 2000000
  },
  "settings": {"greeting": "hello", "empty": "", "text": "h\u00e9llo \ud83d\ude00 \\ud800"},
  "capabilities": {"artifact_schemes": {"input": ["file", "s3", "git+ssh"], "output": []},
                   "http": ["https://api.openai.com/v1/", "https://*.example.com:8443", "http://localhost:8080"]}
}`

func TestParseDecodesAFullManifestToTheExactValues(t *testing.T) {
	want := &Manifest{
		Name:        "washington",
		Version:     "1.2.0",
		Description: "Writes the word Washington to a file.",
		Limits: Limits{
			CallTimeout:          ptr(90 * time.Second),
			Memory:               ptr[int64](64 << 20),
			MaxUpload:            ptr[int64](1 << 30),
			MaxArtifact:          ptr[int64](10_000_000),
			MaxResult:            ptr[int64](1 << 20),
			MaxLog:               ptr[int64](512 << 10),
			MaxTaskLog:           ptr[int64](0),
			MaxWorkspace:         ptr[int64](100),
			MaxWorkspaceFiles:    ptr(500),
			MaxCallArtifacts:     ptr(8),
			MaxTaskArtifacts:     ptr(0),
			MaxTaskArtifactBytes: ptr[int64](2_000_000_000),
			MaxPlannedSteps:      ptr(16),
			MaxTaskSteps:         ptr(1000),
			TaskTime:             ptr(90 * time.Minute),
			MaxHostCalls:         ptr(5000),
			MaxTableEntries:      ptr(math.MaxUint32),
			MaxInstances:         ptr(4),
			MaxBackgroundSteps:   ptr(3),
			HTTPTimeout:          ptr(20 * time.Second),
			MaxHTTPRequests:      ptr(16),
			MaxHTTPRequest:       ptr[int64](1 << 20),
			MaxHTTPResponse:      ptr[int64](2_000_000),
		},
		Settings: map[string]string{"greeting": "hello", "empty": "", "text": "héllo 😀 \\ud800"},
		Capabilities: Capabilities{ArtifactSchemes: &ArtifactSchemes{Input: []string{"file", "s3", "git+ssh"}, Output: []string{}},
			HTTP: []abi.Destination{
				{Scheme: "https", Host: "api.openai.com", Port: 443, Path: "/v1/"},
				{Scheme: "https", Host: "example.com", Wildcard: true, Port: 8443},
				{Scheme: "http", Host: "localhost", Port: 8080},
			}},
	}
	// Every limit is set, so that one added to Limits is added here.
	lv := reflect.ValueOf(want.Limits)
	for i := range lv.NumField() {
		if lv.Field(i).IsNil() {
			t.Fatalf("the test's manifest leaves Limits.%s unset", lv.Type().Field(i).Name)
		}
	}
	got, err := Parse("washington.json", strings.NewReader(full))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %s\nwant %s", show(got), show(want))
	}
}

// show writes m with the values its pointers point to.
func show(m *Manifest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{Name:%q Version:%q Description:%q Limits:{", m.Name, m.Version, m.Description)
	lv := reflect.ValueOf(m.Limits)
	for i := range lv.NumField() {
		if f := lv.Field(i); !f.IsNil() {
			fmt.Fprintf(&b, " %s:%v", lv.Type().Field(i).Name, f.Elem())
		}
	}
	fmt.Fprintf(&b, "} Settings:%#v Capabilities:{", m.Settings)
	if a := m.Capabilities.ArtifactSchemes; a != nil {
		fmt.Fprintf(&b, "ArtifactSchemes:%#v", *a)
	}
	if h := m.Capabilities.HTTP; h != nil {
		fmt.Fprintf(&b, " HTTP:%v", h)
	}
	b.WriteString("}}")
	return b.String()
}

func TestParseAcceptsEmptyManifests(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *Manifest
	}{
		{`{}`, &Manifest{}},
		{" \n\t{ }\r\n ", &Manifest{}},
		{`{"limits": {}, "settings": {}, "capabilities": {}}`, &Manifest{Settings: map[string]string{}}},
	} {
		got, err := Parse("empty.json", strings.NewReader(tc.in))
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
		} else if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q) = %s, want %s", tc.in, show(got), show(tc.want))
		}
	}
}

// Who refuses a manifest: the schema (and Parse's own checks, in the same
// words), Parse's checks alone (what the schema cannot say), or the
// reading of the JSON text, before the schema sees a value.
const (
	bySchema = "schema"
	byGo     = "go"
	byText   = "text"
)

var refusals = []struct {
	name string
	in   string
	by   string
	want string // the whole message
}{
	// Fields.
	{"unknown field", `{"limts": {}}`, bySchema, `manifest x.json: unknown field "limts" (did you mean "limits"?)`},
	{"unknown field far from any", `{"owner": "me"}`, bySchema, `manifest x.json: unknown field "owner"`},
	{"unknown limit", `{"limits": {"memry": "1MiB"}}`, bySchema, `manifest x.json: unknown field "limits.memry" (did you mean "memory"?)`},
	{"limit spelt as its flag", `{"limits": {"call-timeout": "1s"}}`, bySchema, `manifest x.json: unknown field "limits.call-timeout" (did you mean "call_timeout"?)`},
	{"limit of the server", `{"limits": {"max_uploads": 8}}`, bySchema, `manifest x.json: unknown field "limits.max_uploads": -max-uploads is a limit of the server, not of one agent`},
	{"unknown capability", `{"capabilities": {"sockets": ["example.com"]}}`, bySchema, `manifest x.json: unknown field "capabilities.sockets"`},
	{"http: not an array", `{"capabilities": {"http": "https://example.com"}}`, bySchema, `manifest x.json: capabilities.http: want an array of destinations such as "https://api.example.com/v1", got "https://example.com"`},
	{"http: no scheme", `{"capabilities": {"http": ["example.com"]}}`, bySchema, `manifest x.json: capabilities.http.0: want a destination such as https://api.example.com or https://*.example.com/v1, got "example.com"`},
	{"http: a number", `{"capabilities": {"http": [443]}}`, bySchema, `manifest x.json: capabilities.http.0: want a destination such as "https://api.example.com/v1", got 443`},
	{"http: a query", `{"capabilities": {"http": ["https://example.com/?q"]}}`, bySchema, `manifest x.json: capabilities.http.0: a destination has no query or fragment, got "https://example.com/?q"`},
	{"http: dot segment", `{"capabilities": {"http": ["https://example.com/v1/../admin"]}}`, byGo, `manifest x.json: capabilities.http.0: the path has a . or .. segment, got "https://example.com/v1/../admin"`},
	{"http: wildcard address", `{"capabilities": {"http": ["https://*.10.0.0.1"]}}`, byGo, `manifest x.json: capabilities.http.0: a wildcard (*.) is for names, not addresses, got "https://*.10.0.0.1"`},
	{"http: twice", `{"capabilities": {"http": ["https://a.test", "https://a.test"]}}`, bySchema, `manifest x.json: capabilities.http: want each destination once, got "https://a.test" twice`},
	{"http: another spelling", `{"capabilities": {"http": ["https://A.test:443"]}}`, byGo, `manifest x.json: capabilities.http.0: write the host as a.test (a name in lower case, an IPv6 address as RFC 5952 writes it), got "https://A.test:443"`},
	{"http: the scheme's port", `{"capabilities": {"http": ["https://a.test:443"]}}`, byGo, `manifest x.json: capabilities.http.0: leave the port out: 443 is https's, got "https://a.test:443"`},
	{"http: upper-case scheme", `{"capabilities": {"http": ["HTTPS://a.test"]}}`, bySchema, `manifest x.json: capabilities.http.0: write the scheme in lower case: https, got "HTTPS://a.test"`},
	{"http: IPv6 without brackets", `{"capabilities": {"http": ["http://::1:8080"]}}`, byGo, `manifest x.json: capabilities.http.0: the host holds a ':' (an IPv6 address is written in brackets: [::1]), got "http://::1:8080"`},
	{"unknown list of schemes", `{"capabilities": {"artifact_schemes": {"inputs": ["s3"]}}}`, bySchema, `manifest x.json: unknown field "capabilities.artifact_schemes.inputs" (did you mean "input"?)`},
	{"schemes: not an object", `{"capabilities": {"artifact_schemes": ["s3"]}}`, bySchema, `manifest x.json: capabilities.artifact_schemes: want an object of input and output schemes, got an array`},
	{"schemes: not an array", `{"capabilities": {"artifact_schemes": {"input": "s3"}}}`, bySchema, `manifest x.json: capabilities.artifact_schemes.input: want an array of URI schemes, got "s3"`},
	{"scheme: upper case", `{"capabilities": {"artifact_schemes": {"output": ["file", "S3"]}}}`, bySchema, `manifest x.json: capabilities.artifact_schemes.output.1: want a URI scheme in lower case, such as "https" or "s3", got "S3"`},
	{"scheme: with a colon", `{"capabilities": {"artifact_schemes": {"input": ["https:"]}}}`, bySchema, `manifest x.json: capabilities.artifact_schemes.input.0: want a URI scheme in lower case, such as "https" or "s3", got "https:"`},
	{"scheme: a number", `{"capabilities": {"artifact_schemes": {"input": [7]}}}`, bySchema, `manifest x.json: capabilities.artifact_schemes.input.0: want a URI scheme in lower case, such as "https" or "s3", got 7`},
	{"scheme: too long", `{"capabilities": {"artifact_schemes": {"input": ["` + strings.Repeat("s", 33) + `"]}}}`, bySchema, `manifest x.json: capabilities.artifact_schemes.input.0: want a URI scheme in lower case, such as "https" or "s3", got "` + strings.Repeat("s", 33) + `"`},
	{"scheme: twice", `{"capabilities": {"artifact_schemes": {"input": ["s3", "file", "s3"]}}}`, bySchema, `manifest x.json: capabilities.artifact_schemes.input: want each scheme once, got "s3" twice`},
	{"schemes: too many", `{"capabilities": {"artifact_schemes": {"input": ["a0"` + func() string {
		var b strings.Builder
		for i := 1; i <= 32; i++ {
			fmt.Fprintf(&b, `, "a%d"`, i)
		}
		return b.String()
	}() + `]}}}`, bySchema, `manifest x.json: capabilities.artifact_schemes.input: want at most 32 schemes, got 33`},
	{"the first in the file: unknown field", `{"zzz": 1, "name": "-x"}`, bySchema, `manifest x.json: unknown field "zzz"`},
	{"the first in the file: value", `{"name": "-x", "zzz": 1}`, bySchema, `manifest x.json: name: invalid agent name "-x": want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`},
	{"the first in the file: nested", `{"limits": {"max_log": "x", "memory": "y"}}`, bySchema, `manifest x.json: limits.max_log: want a size such as "64MiB" or a number of bytes, got "x"`},

	// Wrong types, each kind.
	{"not an object: array", `[{}]`, bySchema, `manifest x.json: want a JSON object, got an array`},
	{"not an object: null", `null`, bySchema, `manifest x.json: want a JSON object, got null`},
	{"not an object: string", `"{}"`, bySchema, `manifest x.json: want a JSON object, got "{}"`},
	{"string: number", `{"version": 1.2}`, bySchema, `manifest x.json: version: want a string, got 1.2`},
	{"name: number", `{"name": 7}`, bySchema, `manifest x.json: name: want a string, got 7`},
	{"object: array", `{"limits": []}`, bySchema, `manifest x.json: limits: want an object, got an array`},
	{"capabilities: true", `{"capabilities": true}`, bySchema, `manifest x.json: capabilities: want an object, got true`},
	{"settings: string", `{"settings": "a=b"}`, bySchema, `manifest x.json: settings: want an object of strings, got "a=b"`},
	{"setting: number", `{"settings": {"retries": 3}}`, bySchema, `manifest x.json: settings.retries: want a string, got 3`},
	{"setting: null", `{"settings": {"a b": null}}`, bySchema, `manifest x.json: settings["a b"]: want a string, got null`},
	{"setting: empty name", `{"settings": {"": "x"}}`, bySchema, `manifest x.json: settings: want a name for every setting, got ""`},
	{"size: bool", `{"limits": {"max_upload": true}}`, bySchema, `manifest x.json: limits.max_upload: want a size such as "64MiB" or a number of bytes, got true`},
	{"duration: number", `{"limits": {"call_timeout": 10}}`, bySchema, `manifest x.json: limits.call_timeout: want a duration such as "10s" or "1m30s", got 10`},
	{"count: string", `{"limits": {"max_task_steps": "5"}}`, bySchema, `manifest x.json: limits.max_task_steps: want an integer, got "5"`},
	{"count: object", `{"limits": {"max_instances": {}}}`, bySchema, `manifest x.json: limits.max_instances: want an integer, got an object`},

	// Values.
	{"bad size", `{"limits": {"memory": "lots"}}`, bySchema, `manifest x.json: limits.memory: want a size such as "64MiB" or a number of bytes, got "lots"`},
	{"size with a space", `{"limits": {"max_log": "64 KiB"}}`, bySchema, `manifest x.json: limits.max_log: want a size such as "64MiB" or a number of bytes, got "64 KiB"`},
	{"size with an unknown unit", `{"limits": {"max_log": "1TiB"}}`, bySchema, `manifest x.json: limits.max_log: want a size such as "64MiB" or a number of bytes, got "1TiB"`},
	{"size with a fraction", `{"limits": {"max_log": "1.5MiB"}}`, bySchema, `manifest x.json: limits.max_log: want a size such as "64MiB" or a number of bytes, got "1.5MiB"`},
	{"negative size", `{"limits": {"max_upload": -1}}`, bySchema, `manifest x.json: limits.max_upload: want 0 or more, got -1`},
	{"size over 2^62", `{"limits": {"max_upload": 4611686018427387905}}`, bySchema, `manifest x.json: limits.max_upload: want at most 4294967296GiB, got 4611686018427387905`},
	{"size over 2^62, with a unit", `{"limits": {"max_upload": "4294967297GiB"}}`, byGo, `manifest x.json: limits.max_upload: want at most 4294967296GiB, got "4294967297GiB"`},
	{"size over 2^63, with a unit", `{"limits": {"max_upload": "99999999999999999999"}}`, byGo, `manifest x.json: limits.max_upload: want at most 4294967296GiB, got "99999999999999999999"`},
	{"bad duration: no unit", `{"limits": {"task_time": "10"}}`, bySchema, `manifest x.json: limits.task_time: want a duration such as "10s" or "1m30s", got "10"`},
	{"bad duration: days", `{"limits": {"task_time": "1d"}}`, bySchema, `manifest x.json: limits.task_time: want a duration such as "10s" or "1m30s", got "1d"`},
	{"bad duration: negative", `{"limits": {"task_time": "-1s"}}`, bySchema, `manifest x.json: limits.task_time: want a duration such as "10s" or "1m30s", got "-1s"`},
	{"bad duration: no leading digit", `{"limits": {"task_time": ".5s"}}`, bySchema, `manifest x.json: limits.task_time: want a duration such as "10s" or "1m30s", got ".5s"`},
	{"duration that overflows", `{"limits": {"task_time": "2562048h"}}`, byGo, `manifest x.json: limits.task_time: want at most 2562047h47m16.854775807s, got "2562048h"`},
	{"call timeout of 0", `{"limits": {"call_timeout": "0s"}}`, byGo, `manifest x.json: limits.call_timeout: want more than 0s, got "0s"`},
	{"negative count", `{"limits": {"max_task_steps": -1}}`, bySchema, `manifest x.json: limits.max_task_steps: want 0 or more, got -1`},
	{"fractional count", `{"limits": {"max_planned_steps": 1.5}}`, bySchema, `manifest x.json: limits.max_planned_steps: want an integer, got 1.5`},
	{"count over 2^63", `{"limits": {"max_task_steps": 1e19}}`, bySchema, `manifest x.json: limits.max_task_steps: want at most 9223372036854775807, got 1e19`},
	{"count under -2^63", `{"limits": {"max_task_steps": -1e19}}`, bySchema, `manifest x.json: limits.max_task_steps: want 0 or more, got -1e19`},
	{"memory under 64KiB", `{"limits": {"memory": 65535}}`, bySchema, `manifest x.json: limits.memory: want from 64KiB to 4GiB, got 65535`},
	{"memory over 4GiB", `{"limits": {"memory": 4294967297}}`, bySchema, `manifest x.json: limits.memory: want from 64KiB to 4GiB, got 4294967297`},
	{"memory over 4GiB, with a unit", `{"limits": {"memory": "8GiB"}}`, byGo, `manifest x.json: limits.memory: want from 64KiB to 4GiB, got "8GiB"`},
	{"memory under 64KiB, with a unit", `{"limits": {"memory": "64KB"}}`, byGo, `manifest x.json: limits.memory: want from 64KiB to 4GiB, got "64KB"`},
	{"max_host_calls of 0", `{"limits": {"max_host_calls": 0}}`, bySchema, `manifest x.json: limits.max_host_calls: want 1 or more, got 0`},
	{"max_instances of 0", `{"limits": {"max_instances": 0}}`, bySchema, `manifest x.json: limits.max_instances: want 1 or more, got 0`},
	{"max_background_steps of 0", `{"limits": {"max_background_steps": 0}}`, bySchema, `manifest x.json: limits.max_background_steps: want 1 or more, got 0`},
	{"max_table_entries of 0", `{"limits": {"max_table_entries": 0}}`, bySchema, `manifest x.json: limits.max_table_entries: want from 1 to 4294967295, got 0`},
	{"max_table_entries over 2^32-1", `{"limits": {"max_table_entries": 4294967296}}`, bySchema, `manifest x.json: limits.max_table_entries: want from 1 to 4294967295, got 4294967296`},
	{"name invalid", `{"name": "my agent"}`, bySchema, `manifest x.json: name: invalid agent name "my agent": want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`},
	{"name empty", `{"name": ""}`, bySchema, `manifest x.json: name: invalid agent name "": want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`},
	{"version too long", `{"version": "` + strings.Repeat("é", 65) + `"}`, bySchema, `manifest x.json: version: want at most 64 characters, got 65`},
	{"description too long", `{"description": "` + strings.Repeat("x", 1025) + `"}`, bySchema, `manifest x.json: description: want at most 1024 characters, got 1025`},

	// The JSON text.
	{"too big", `{"description": "` + strings.Repeat("x", MaxSize) + `"}`, byText, `manifest x.json: larger than 64 KiB, the most a manifest may hold`},
	{"invalid UTF-8", "{\"settings\": {\"greeting\": \"caf\xe9\"}}", byText, `manifest x.json: settings.greeting: not valid UTF-8`},
	{"invalid UTF-8 in a name", "{\"caf\xe9\": 1}", byText, "manifest x.json: [\"caf\uFFFD\"]: field name: not valid UTF-8"},
	{"invalid UTF-8 outside strings", "{\xe9}", byText, `manifest x.json: invalid JSON at line 1, column 2: not valid UTF-8`},
	{"a character outside strings", "{\n  é: 1}", byText, `manifest x.json: invalid JSON at line 2, column 3: invalid character 'é'`},
	{"lone surrogate", `{"settings": {"k": "a\ud800b"}}`, byText, `manifest x.json: settings.k: \ud800 is half of a UTF-16 surrogate pair, not a character`},
	{"lone low surrogate", `{"description": "\udc00"}`, byText, `manifest x.json: description: \udc00 is half of a UTF-16 surrogate pair, not a character`},
	{"duplicate field", `{"name": "a", "name": "b"}`, byText, `manifest x.json: duplicate field "name"`},
	{"duplicate limit", "{\"limits\": {\n  \"memory\": \"1MiB\",\n  \"memory\": \"2MiB\"}}", byText, `manifest x.json: duplicate field "limits.memory"`},
	{"trailing data", "{}\n}", byText, `manifest x.json: data after the JSON object, at line 2, column 1`},
	{"two objects", `{} {}`, byText, `manifest x.json: data after the JSON object, at line 1, column 4`},
	{"syntax error", "{\n  \"name\": \"a\",\n}", byText, `manifest x.json: invalid JSON at line 3, column 1: invalid character '}' looking for beginning of object key string`},
	{"cut short", `{"name": "a"`, byText, `manifest x.json: invalid JSON: unexpected end of file`},
	{"empty", " \n", byText, `manifest x.json: empty: want a JSON object such as {}`},
	{"byte order mark", "\xef\xbb\xbf{}", byText, `manifest x.json: starts with a byte order mark: save it as UTF-8 without one`},
	{"nested too deep", `{"settings": {"a": ` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}`, byText, `manifest x.json: settings.a.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0: nested deeper than 32 levels`},
	{"huge exponent", `{"limits": {"max_task_steps": 1e1000000}}`, byText, `manifest x.json: limits.max_task_steps: number 1e1000000 is out of range`},
	{"huge negative exponent", `{"limits": {"max_task_steps": 1e-401}}`, byText, `manifest x.json: limits.max_task_steps: number 1e-401 is out of range`},
	{"number beyond a double", `{"limits": {"max_task_steps": 1.8e308}}`, byText, `manifest x.json: limits.max_task_steps: number 1.8e308 is out of range: beyond ±1.7976931348623157e308, the largest IEEE 754 double`},
	{"number beyond a double, no exponent", `{"settings": {"a": [` + "1" + strings.Repeat("0", 90) + `e220]}}`, byText,
		`manifest x.json: settings.a.0: number 1000000000000000000000000000000000000000… is out of range: beyond ±1.7976931348623157e308, the largest IEEE 754 double`},
	{"number too long", `{"limits": {"memory": ` + strings.Repeat("9", 100000)[:60000] + `}}`, byText,
		`manifest x.json: limits.memory: number 9999999999999999999999999999999999999999… is too long: 60000 bytes, over the 400 a number may take`},
	{"duplicate field, escaped", `{"name": "a", "n\u0061me": "b"}`, byText, `manifest x.json: duplicate field "name"`},
}

func TestParseRefusesWithOneLineNamingTheFileAndTheField(t *testing.T) {
	sch := mustCompile(t, Schema)
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.json", strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("Parse(%.60q) accepted it", tc.in)
			}
			if err.Error() != tc.want {
				t.Errorf("Parse(%.60q):\n got %s\nwant %s", tc.in, err, tc.want)
			}
			if tc.by == byText {
				return
			}
			doc, err := scan([]byte(tc.in))
			if err != nil {
				t.Fatalf("scan: %v", err)
			}
			// Who refuses it is as the table says, and Parse's own checks
			// say it in the same words without the schema.
			schemaErr := sch.Validate(doc.value)
			if tc.by == bySchema && schemaErr == nil {
				t.Errorf("the schema accepts it; Parse alone refuses it")
			}
			if tc.by == byGo && schemaErr != nil {
				t.Errorf("the schema refuses it, the table says only Parse does: %v", schemaErr)
			}
			if _, err := decode(doc); err == nil {
				t.Errorf("Parse's own checks accept it")
			} else if got := wrap("x.json", err).Error(); got != tc.want {
				t.Errorf("Parse's own checks say:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestPropertyNamesRefusalNamesItsObject pins where a refused setting
// name is reported. The validator reports a propertyNames error at a
// location that a field validated after it may overwrite, depending on
// map order; read naively, the refusal named that field instead (one run
// in five) and fell back on the schema's multi-line words.
func TestPropertyNamesRefusalNamesItsObject(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"description":"","settings":{"":"2"},"version":"1"}`,
			`manifest x.json: settings: want a name for every setting, got ""`},
		{`{"description":"","10":{},"settings":{"":"2"},"8":{}}`,
			`manifest x.json: unknown field "10"`},
	} {
		// Map order decides what the validator overwrites: enough runs
		// that an order that breaks it comes up.
		for range 200 {
			_, err := Parse("x.json", strings.NewReader(tc.in))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Parse(%s):\n got %v\nwant %s", tc.in, err, tc.want)
			}
		}
	}
	// propertyNamesLocation reads the location from the keyword's path
	// in the schema, which holds only where no $ref leads to it.
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, sub := range obj {
			if k == "propertyNames" {
				for i, tok := range path {
					if i%2 == 0 && tok != "properties" {
						t.Errorf("propertyNames at /%s is not reached through properties alone", strings.Join(path, "/"))
					}
				}
			}
			walk(sub, append(path[:len(path):len(path)], k))
		}
	}
	var doc any
	if err := json.Unmarshal(Schema, &doc); err != nil {
		t.Fatal(err)
	}
	walk(doc, nil)
}

func TestParseEnforcesTheSchema(t *testing.T) {
	// A schema that asks more than Parse's own checks: its refusal still
	// refuses, in its words, at its field.
	var doc map[string]any
	if err := json.Unmarshal(Schema, &doc); err != nil {
		t.Fatal(err)
	}
	props := doc["properties"].(map[string]any)
	props["version"].(map[string]any)["pattern"] = `^[0-9]+(\.[0-9]+)*$`
	stricter, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	in := `{"version": "beta"}`
	if _, err := Parse("x.json", strings.NewReader(in)); err != nil {
		t.Fatalf("Parse(%s): %v", in, err)
	}
	_, err = parse("x.json", strings.NewReader(in), mustCompile(t, stricter))
	want := `manifest x.json: version: does not match the manifest schema: 'beta' does not match pattern '^[0-9]+(\\.[0-9]+)*$'`
	if err == nil || err.Error() != want {
		t.Errorf("parse with a stricter schema:\n got %v\nwant %s", err, want)
	}
}

func TestParseReadsAtMostMaxSizeAndOneMore(t *testing.T) {
	r := &countingReader{}
	_, err := Parse("big.json", r)
	if want := "manifest big.json: larger than 64 KiB, the most a manifest may hold"; err == nil || err.Error() != want {
		t.Errorf("Parse of an endless manifest: %v, want %s", err, want)
	}
	if r.n > MaxSize+1 {
		t.Errorf("Parse read %d bytes, want at most %d", r.n, MaxSize+1)
	}

	exact := `{"settings": {"a": "` + strings.Repeat("x", MaxSize-len(`{"settings": {"a": ""}}`)) + `"}}`
	if _, err := Parse("exact.json", strings.NewReader(exact)); err != nil || len(exact) != MaxSize {
		t.Errorf("Parse of %d bytes: %v", len(exact), err)
	}

	failing := errors.New("disk on fire")
	_, err = Parse("broken.json", io.MultiReader(strings.NewReader("{"), errReader{failing}))
	if !errors.Is(err, failing) || err.Error() != "manifest broken.json: disk on fire" {
		t.Errorf("Parse of a failing reader: %v", err)
	}
}

// countingReader is an endless manifest: "{" and spaces.
type countingReader struct{ n int }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	if r.n == 0 && len(p) > 0 {
		p[0] = '{'
	}
	r.n += len(p)
	return len(p), nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestValidName(t *testing.T) {
	sch := mustCompile(t, Schema)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"washington", true},
		{"A", true},
		{"0", true},
		{"echo-go_v1.2", true},
		{"a..b", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{".", false},
		{"..", false},
		{".hidden", false},
		{"-flag", false},
		{"_x", false},
		{"my agent", false},
		{"a/b", false},
		{`a\b`, false},
		{"café", false},
		{"a\x00", false},
		{"a\n", false},
	} {
		err := ValidName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		// The schema's pattern says the same of a manifest's name.
		in, _ := json.Marshal(map[string]string{"name": tc.name})
		doc, scanErr := scan(in)
		if scanErr != nil {
			t.Fatal(scanErr)
		}
		if schemaErr := sch.Validate(doc.value); (schemaErr == nil) != tc.ok {
			t.Errorf("the schema on name %q: %v, want ok=%v", tc.name, schemaErr, tc.ok)
		}
	}
	want := `invalid agent name "-flag": want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`
	if err := ValidName("-flag"); err == nil || err.Error() != want {
		t.Errorf("ValidName(-flag) = %v, want %s", err, want)
	}
}

func TestSchemaIsAValidDraft202012Schema(t *testing.T) {
	c := jsonschema.NewCompiler()
	meta, err := c.Compile("https://json-schema.org/draft/2020-12/schema")
	if err != nil {
		t.Fatal(err)
	}
	doc := unmarshalSchema(t, Schema)
	if err := meta.Validate(doc); err != nil {
		t.Fatalf("schema.json against the draft 2020-12 meta-schema: %v", err)
	}
	if got := doc["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema is %v", got)
	}
	// Editors show descriptions: every property has one; every object
	// says what other members it takes.
	var walk func(at string, s map[string]any)
	walk = func(at string, s map[string]any) {
		if s["type"] == "object" {
			if _, ok := s["additionalProperties"]; !ok {
				t.Errorf("%s: an object without additionalProperties", at)
			}
		}
		for _, key := range []string{"properties", "$defs"} {
			members, _ := s[key].(map[string]any)
			for name, m := range members {
				m := m.(map[string]any)
				if d, _ := m["description"].(string); d == "" {
					t.Errorf("%s/%s/%s has no description", at, key, name)
				}
				walk(at+"/"+key+"/"+name, m)
			}
		}
	}
	walk("#", doc)
}

func TestSchemaAgreesWithManifestAndLimits(t *testing.T) {
	doc := unmarshalSchema(t, Schema)
	props := member(t, doc, "properties")
	defs := member(t, doc, "$defs")

	// Field names: the structs' json tags, the schema's properties.
	for _, tc := range []struct {
		at     string
		typ    reflect.Type
		schema map[string]any
	}{
		{"manifest", reflect.TypeFor[Manifest](), doc},
		{"limits", reflect.TypeFor[Limits](), member(t, props, "limits")},
		{"capabilities", reflect.TypeFor[Capabilities](), member(t, props, "capabilities")},
		{"capabilities.artifact_schemes", reflect.TypeFor[ArtifactSchemes](), member(t, member(t, member(t, props, "capabilities"), "properties"), "artifact_schemes")},
	} {
		var tags []string
		for i := range tc.typ.NumField() {
			tags = append(tags, tc.typ.Field(i).Tag.Get("json"))
		}
		var names []string
		for name := range member(t, tc.schema, "properties") {
			names = append(names, name)
		}
		slices.Sort(tags)
		slices.Sort(names)
		if !slices.Equal(tags, names) {
			t.Errorf("%s: the struct has %q,\nthe schema %q", tc.at, tags, names)
		}
		if ap, ok := tc.schema["additionalProperties"]; !ok || ap != false {
			t.Errorf("%s: additionalProperties is %v, want false", tc.at, ap)
		}
	}

	// Each limit: its kind (the Go type, the schema's $ref) and its range
	// (Parse's, the schema's minimum and maximum of an integer).
	refOf := map[limitKind]string{sizeKind: "#/$defs/size", durationKind: "#/$defs/duration", countKind: "#/$defs/count"}
	limits := member(t, member(t, props, "limits"), "properties")
	for _, s := range limitSpecs {
		p, ok := limits[s.name].(map[string]any)
		if !ok {
			continue // reported above
		}
		if p["$ref"] != refOf[s.kind] {
			t.Errorf("limits.%s: the schema's $ref is %v, the Go type's kind %v", s.name, p["$ref"], refOf[s.kind])
			continue
		}
		if s.kind == durationKind {
			if _, ok := p["minimum"]; ok {
				t.Errorf("limits.%s: a duration with a minimum, which a string never meets", s.name)
			}
			continue
		}
		def := member(t, defs, strings.TrimPrefix(p["$ref"].(string), "#/$defs/"))
		if s.kind == sizeKind {
			def = def["anyOf"].([]any)[0].(map[string]any)
		}
		lo := max(bound(t, def, "minimum", math.MinInt64), bound(t, p, "minimum", math.MinInt64))
		hi := min(bound(t, def, "maximum", math.MaxInt64), bound(t, p, "maximum", math.MaxInt64))
		if lo != s.min || hi != s.max {
			t.Errorf("limits.%s: the schema takes integers from %d to %d, Parse from %d to %d", s.name, lo, hi, s.min, s.max)
		}
	}

	// The forms of strings: the schema's patterns, Parse's.
	size := member(t, defs, "size")["anyOf"].([]any)[1].(map[string]any)
	for _, tc := range []struct {
		what   string
		schema any
		goRE   *regexp.Regexp
	}{
		{"size", size["pattern"], sizePattern},
		{"duration", member(t, defs, "duration")["pattern"], durationPattern},
	} {
		if tc.schema != tc.goRE.String() {
			t.Errorf("%s: the schema's pattern is %v, Parse's %s", tc.what, tc.schema, tc.goRE)
		}
	}
}

func TestLimitRangesAreTheSchemasAtEveryBound(t *testing.T) {
	sch := mustCompile(t, Schema)
	for _, s := range limitSpecs {
		if s.kind == durationKind {
			continue // a string: the schema has no bounds for it
		}
		for _, n := range []int64{s.min - 1, s.min, s.max, s.max + 1} {
			if (n == s.min-1 && s.min == math.MinInt64) || (n == s.max+1 && s.max == math.MaxInt64) {
				continue
			}
			in := fmt.Sprintf(`{"limits": {%q: %d}}`, s.name, n)
			inRange := s.min <= n && n <= s.max
			doc, err := scan([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(doc.value); (err == nil) != inRange {
				t.Errorf("the schema on %s: %v, want ok=%v", in, err, inRange)
			}
			m, err := Parse("x.json", strings.NewReader(in))
			if (err == nil) != inRange {
				t.Errorf("Parse(%s): %v, want ok=%v", in, err, inRange)
				continue
			}
			if err == nil {
				if got := reflect.ValueOf(m.Limits).Field(s.field).Elem().Int(); got != n {
					t.Errorf("Parse(%s) = %d", in, got)
				}
			}
		}
	}
}

func TestManifestDocumentationHoldsEveryFieldAndAValidExample(t *testing.T) {
	text, err := os.ReadFile("../MANIFEST.md")
	if err != nil {
		t.Fatal(err)
	}
	// Each field has a row of a table: | `limits.memory` | ...
	for _, name := range append(fieldsAt(nil), prefixed("limits.", fieldsAt([]string{"limits"}))...) {
		if !bytes.Contains(text, []byte("| `"+name+"`")) {
			t.Errorf("MANIFEST.md has no row for %s", name)
		}
	}
	// Its examples are manifests that Parse accepts.
	examples := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(text, -1)
	if len(examples) == 0 {
		t.Fatal("MANIFEST.md has no json example")
	}
	for _, ex := range examples {
		if _, err := Parse("MANIFEST.md", bytes.NewReader(ex[1])); err != nil {
			t.Errorf("the example\n%s\n%v", ex[1], err)
		}
	}
}

func prefixed(prefix string, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, prefix+n)
	}
	return out
}

// FuzzParse checks that Parse never panics, always answers in one line
// naming the file, and that its own checks refuse all the schema does:
// its words, not the schema's, are what a user reads.
func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	for _, tc := range refusals {
		f.Add([]byte(tc.in))
	}
	sch := mustCompile(f, Schema)
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Parse("f.json", bytes.NewReader(in))
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "manifest f.json: ") || strings.ContainsAny(msg, "\r\n") {
				t.Errorf("Parse(%q): %q is not one line naming the file", in, msg)
			}
			if strings.Contains(err.Error(), "does not match the manifest schema") {
				t.Errorf("Parse(%q): %v: the schema refuses what Parse's checks accept", in, err)
			}
		}
		doc, scanErr := scan(in)
		if scanErr != nil || len(in) > MaxSize || bytes.HasPrefix(in, []byte("\xef\xbb\xbf")) {
			return
		}
		if sch.Validate(doc.value) != nil && err == nil {
			t.Errorf("Parse(%q) accepts what the schema refuses", in)
		}
		if err == nil && m == nil {
			t.Errorf("Parse(%q) = nil, nil", in)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	if _, err := Parse("washington.json", strings.NewReader(full)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		Parse("washington.json", strings.NewReader(full))
	}
}

func BenchmarkCompileSchema(b *testing.B) {
	for b.Loop() {
		mustCompile(b, Schema)
	}
}

func mustCompile(tb testing.TB, schema []byte) *jsonschema.Schema {
	tb.Helper()
	sch, err := compileSchema(schema)
	if err != nil {
		tb.Fatal(err)
	}
	return sch
}

func unmarshalSchema(t *testing.T, schema []byte) map[string]any {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	return doc.(map[string]any)
}

func member(t *testing.T, obj map[string]any, name string) map[string]any {
	t.Helper()
	m, ok := obj[name].(map[string]any)
	if !ok {
		t.Fatalf("the schema has no object %q", name)
	}
	return m
}

// bound is the integer obj has as name, or def if it has none.
func bound(t *testing.T, obj map[string]any, name string, def int64) int64 {
	t.Helper()
	v, ok := obj[name]
	if !ok {
		return def
	}
	n, err := v.(json.Number).Int64()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}
