// Package manifest reads an agent's manifest: the JSON file NAME.json
// beside NAME.wasm in the directory that agentrt serve --plugins DIR
// serves, which names the agent, describes it, and sets its limits,
// settings and capabilities. plugins/MANIFEST.md documents it field by
// field; schema.json (Schema) is its contract, for editors and tools as
// much as for Parse.
//
// A manifest is checked strictly, since what is wrong in one is found
// only when an agent misbehaves: unknown fields, wrong types, values out
// of range, duplicate fields, invalid UTF-8, numbers that are not I-JSON
// (RFC 7493) and trailing data are all refused, with one line naming the
// file and the field.
package manifest

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is the manifest's JSON Schema (draft 2020-12), the file
// plugins/manifest/schema.json.
//
//go:embed schema.json
var Schema []byte

// MaxSize is the most bytes a manifest may hold.
const MaxSize = 64 << 10

// Manifest is an agent's manifest. A field the manifest leaves out is
// the zero value.
//
// The json tags name the manifest's fields; decode a manifest only with
// Parse, which also reads sizes and durations written as strings.
type Manifest struct {
	// Name, when not empty, is the agent's name instead of the plugin
	// file's base name. It is valid (ValidName).
	Name string `json:"name"`
	// Version is the agent's version as its author writes it: at most
	// 64 characters.
	Version string `json:"version"`
	// Description says what the agent does: at most 1024 characters.
	Description string `json:"description"`
	// Limits are the limits the manifest sets for the agent.
	Limits Limits `json:"limits"`
	// Settings are what the plugin reads as its configuration: what
	// agentrt run's -config KEY=VALUE gives it. Nil when the manifest
	// has none; names are not empty.
	Settings map[string]string `json:"settings"`
	// Capabilities are what the agent may reach beyond its sandbox.
	Capabilities Capabilities `json:"capabilities"`
}

// Capabilities are what an agent may reach beyond its sandbox, and what
// it says of itself to clients.
type Capabilities struct {
	// ArtifactSchemes are the URI schemes of artifacts the agent takes and
	// makes; nil when the manifest names none.
	ArtifactSchemes *ArtifactSchemes `json:"artifact_schemes"`
	// HTTP are the destinations the agent asks to reach with outbound
	// HTTP (abi.ParseDestination's syntax, at most MaxDestinations, none
	// twice); the operator grants all of them, some or none. Nil when the
	// manifest names none.
	HTTP []abi.Destination `json:"http"`
}

// MaxDestinations is the most destinations capabilities.http holds.
const MaxDestinations = 64

// ArtifactSchemes are the URI schemes an agent accepts in uploads (Input)
// and may produce (Output), "file" standing for bytes held by agentrt. A
// list the manifest leaves out is nil (agentrt's default); one it gives
// replaces the default, narrowing or extending it: at most MaxSchemes
// schemes in lower case, none twice.
type ArtifactSchemes struct {
	Input  []string `json:"input"`
	Output []string `json:"output"`
}

// MaxSchemes is the most schemes a list of ArtifactSchemes holds.
const MaxSchemes = 32

// Limits are the per-agent limits of agentrt run, each named in a
// manifest as its flag is, with '_' for '-', and meaning what the flag
// means. A nil field is not set: the operator's value applies. A set
// one is in the range its comment gives (sizes from 0 to 2^62 bytes,
// durations and counts from 0, unless it says otherwise); the
// operator's caps are the caller's to apply over it. Sizes are bytes.
type Limits struct {
	CallTimeout          *time.Duration `json:"call_timeout"`            // one handler call; more than 0
	Memory               *int64         `json:"memory"`                  // one instance; 64KiB to 4GiB
	MaxUpload            *int64         `json:"max_upload"`              // one uploaded file
	MaxArtifact          *int64         `json:"max_artifact"`            // one artifact a plugin creates
	MaxResult            *int64         `json:"max_result"`              // a handler's result message
	MaxLog               *int64         `json:"max_log"`                 // what one handler call logs
	MaxTaskLog           *int64         `json:"max_task_log"`            // one task's log; 0 for no limit
	MaxWorkspace         *int64         `json:"max_workspace"`           // one task's workspace files
	MaxWorkspaceFiles    *int           `json:"max_workspace_files"`     // entries of one task's workspace
	MaxCallArtifacts     *int           `json:"max_call_artifacts"`      // artifacts one call may create
	MaxTaskArtifacts     *int           `json:"max_task_artifacts"`      // artifacts of one task; 0 for no limit
	MaxTaskArtifactBytes *int64         `json:"max_task_artifact_bytes"` // bytes of one task's artifacts; 0 for no limit
	MaxPlannedSteps      *int           `json:"max_planned_steps"`       // steps a task handler may plan
	MaxTaskSteps         *int           `json:"max_task_steps"`          // steps of one task; 0 for no limit
	TaskTime             *time.Duration `json:"task_time"`               // plugin time of one task; 0 for no limit
	MaxHostCalls         *int           `json:"max_host_calls"`          // host calls of one handler call; 1 or more
	MaxTableEntries      *int           `json:"max_table_entries"`       // table entries of one instance; 1 to 2^32-1
	MaxInstances         *int           `json:"max_instances"`           // instances of the plugin at once; 1 or more
	MaxBackgroundSteps   *int           `json:"max_background_steps"`    // steps run in the background at once; 1 or more
	HTTPTimeout          *time.Duration `json:"http_timeout"`            // one outbound request; more than 0
	MaxHTTPRequests      *int           `json:"max_http_requests"`       // outbound requests of one handler call
	MaxHTTPRequest       *int64         `json:"max_http_request"`        // the body of an outbound request
	MaxHTTPResponse      *int64         `json:"max_http_response"`       // the body of an outbound request's response
}

// Parse reads the manifest in r, named file in its errors, checks it
// against Schema and what the schema cannot say (a duration that
// parses, a size in range), and returns it. It reads at most MaxSize
// bytes and one more. Every error is one line, "manifest FILE: FIELD:
// what is wrong", the field a dotted path such as limits.memory.
//
// What it costs: a manifest that sets every field (750 bytes) takes 0.2
// to 0.4 ms and 44 KB; the first call also compiles the schema, 2 to
// 5 ms and 0.5 MB (BenchmarkParse, BenchmarkCompileSchema, on 2 cores).
func Parse(file string, r io.Reader) (*Manifest, error) {
	sch, err := compiled()
	if err != nil {
		return nil, wrap(file, err)
	}
	return parse(file, r, sch)
}

// parse is Parse, against the schema sch.
func parse(file string, r io.Reader, sch *jsonschema.Schema) (*Manifest, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, wrap(file, err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("manifest %s: larger than %d KiB, the most a manifest may hold", file, MaxSize>>10)
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, fmt.Errorf("manifest %s: starts with a byte order mark: save it as UTF-8 without one", file)
	}
	doc, err := scan(data)
	if err != nil {
		return nil, wrap(file, err)
	}
	if err := validate(sch, doc); err != nil {
		return nil, wrap(file, err)
	}
	m, err := decode(doc)
	if err != nil {
		return nil, wrap(file, err)
	}
	return m, nil
}

// wrap names file in err.
func wrap(file string, err error) error {
	return fmt.Errorf("manifest %s: %w", file, err)
}

// decode reads the manifest in doc. It checks all that the schema does,
// and what the schema cannot say; of what is wrong, it reports what
// comes first in the file.
func decode(doc *document) (*Manifest, error) {
	if err := problem(nil, doc.value); err != nil {
		return nil, err
	}
	m := &Manifest{}
	obj := as[map[string]any](doc.value)
	for _, key := range doc.keys(nil, obj) {
		loc, v := []string{key}, obj[key]
		if !slices.Contains(fieldsAt(nil), key) {
			return nil, unknownField(loc)
		}
		if err := problem(loc, v); err != nil {
			return nil, fmt.Errorf("%s: %w", path(loc), err)
		}
		var err error
		switch key {
		case "name":
			m.Name = as[string](v)
		case "version":
			m.Version = as[string](v)
		case "description":
			m.Description = as[string](v)
		case "limits":
			m.Limits, err = decodeLimits(doc.keys(loc, as[map[string]any](v)), as[map[string]any](v))
		case "settings":
			m.Settings, err = decodeSettings(doc.keys(loc, as[map[string]any](v)), as[map[string]any](v))
		case "capabilities":
			m.Capabilities, err = decodeCapabilities(doc, as[map[string]any](v))
		}
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// as is v as a T, which problem has checked it is; never a panic, were
// it wrong.
func as[T any](v any) T {
	t, _ := v.(T)
	return t
}

// decodeSettings reads the settings obj, its names in file order.
func decodeSettings(names []string, obj map[string]any) (map[string]string, error) {
	settings := make(map[string]string, len(obj))
	for _, name := range names {
		loc := []string{"settings", name}
		if err := problem(loc, obj[name]); err != nil {
			return nil, fmt.Errorf("%s: %w", path(loc), err)
		}
		settings[name] = as[string](obj[name])
	}
	return settings, nil
}

// problem says what is wrong with the value v at loc, a location of a
// field the manifest has; nil if nothing is, or if loc is no such
// location. Its words are Parse's, for what the schema refuses too.
func problem(loc []string, v any) error {
	switch len(loc) {
	case 0:
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("want a JSON object, got %s", describe(v))
		}
	case 1:
		switch loc[0] {
		case "name":
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("want a string, got %s", describe(v))
			}
			return ValidName(s)
		case "version":
			return text(v, 64)
		case "description":
			return text(v, 1024)
		case "limits", "capabilities":
			if _, ok := v.(map[string]any); !ok {
				return fmt.Errorf("want an object, got %s", describe(v))
			}
		case "settings":
			obj, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("want an object of strings, got %s", describe(v))
			}
			if _, ok := obj[""]; ok {
				return errors.New(`want a name for every setting, got ""`)
			}
		}
	case 2:
		switch loc[0] {
		case "limits":
			if s, ok := limitSpecOf(loc[1]); ok {
				_, err := s.parse(v)
				return err
			}
		case "settings":
			if _, ok := v.(string); !ok {
				return fmt.Errorf("want a string, got %s", describe(v))
			}
		case "capabilities":
			return capabilityProblem(loc[1:], v)
		}
	default:
		if loc[0] == "capabilities" {
			return capabilityProblem(loc[1:], v)
		}
	}
	return nil
}

// text checks v is a string of at most max characters.
func text(v any, max int) error {
	s, ok := v.(string)
	switch {
	case !ok:
		return fmt.Errorf("want a string, got %s", describe(v))
	case utf8.RuneCountInString(s) > max:
		return fmt.Errorf("want at most %d characters, got %d", max, utf8.RuneCountInString(s))
	}
	return nil
}

// fieldsAt are the names of the fields of the object at loc: the json
// tags of the type that holds it.
func fieldsAt(loc []string) []string {
	var t reflect.Type
	switch {
	case len(loc) == 0:
		t = reflect.TypeFor[Manifest]()
	case len(loc) == 1 && loc[0] == "limits":
		t = reflect.TypeFor[Limits]()
	case len(loc) == 1 && loc[0] == "capabilities":
		t = reflect.TypeFor[Capabilities]()
	case len(loc) == 2 && loc[0] == "capabilities" && loc[1] == "artifact_schemes":
		t = reflect.TypeFor[ArtifactSchemes]()
	default:
		return nil
	}
	var names []string
	for i := range t.NumField() {
		names = append(names, t.Field(i).Tag.Get("json"))
	}
	return names
}

// ValidName returns an error unless name is a valid agent name: 1 to 64
// ASCII letters, digits, '.', '_' or '-', starting with a letter or
// digit. The rule is the same for a manifest's name and for a plugin
// file's base name (NAME of NAME.wasm).
func ValidName(name string) error {
	ok := len(name) >= 1 && len(name) <= 64 && isAlnum(name[0])
	for i := 1; ok && i < len(name); i++ {
		c := name[i]
		ok = isAlnum(c) || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("invalid agent name %s: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", quote(name))
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
