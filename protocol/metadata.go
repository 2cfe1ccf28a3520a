package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A task's metadata (title, description, version) and the steps a client
// plans are additions to the specification: the client's text, stored
// and served back exactly as it was sent, within these bounds.
const (
	MaxTitleBytes       = 1024
	MaxDescriptionBytes = 64 << 10
	MaxVersionBytes     = 256
	// MaxStepNameBytes bounds the name of a step a client plans.
	MaxStepNameBytes = 1024
	// MaxRequestedSteps bounds the steps one create-task may plan.
	MaxRequestedSteps = 256
)

// RequestedStep is a step a client plans when it creates a task: in JSON
// its name alone ("Fetch model"), or an object with a name and, if it
// likes, the step's input and additional_input.
type RequestedStep struct {
	Name            string          `json:"name"`
	Input           *string         `json:"input,omitempty"`
	AdditionalInput json.RawMessage `json:"additional_input,omitempty"`
}

// UnmarshalJSON reads a step's name, or a step object.
func (s *RequestedStep) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &s.Name)
	}
	type plain RequestedStep
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = RequestedStep(p)
	return nil
}

// decodesAsStruct says that UnmarshalJSON reads a step object as
// encoding/json reads it into RequestedStep's fields: JSONFieldsOf checks
// its names.
func (*RequestedStep) decodesAsStruct() {}

// TaskPatch is the body of update-task, a JSON merge patch (RFC 7396) of
// the task's metadata: a field absent is left as it is, null removes it,
// a string replaces it. No other field of a task can be changed.
type TaskPatch struct {
	Title, Description, Version PatchField
}

// PatchField is one field of a TaskPatch.
type PatchField struct {
	Set   bool    // the patch names the field
	Value *string // its new value; nil removes it
}

// patchFields are a TaskPatch's fields by their JSON names.
func (p *TaskPatch) fields() map[string]*PatchField {
	return map[string]*PatchField{"title": &p.Title, "description": &p.Description, "version": &p.Version}
}

// UnmarshalJSON reads a patch, refusing fields that cannot be changed.
func (p *TaskPatch) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	fields := p.fields()
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f := fields[name]
		for field := range fields {
			// Refused as any name but these three, with what was meant.
			if f == nil && strings.EqualFold(name, field) {
				return Errorf(EUNPROCESSABLE, "%v", &JSONNameError{Name: name, Field: field})
			}
		}
		if f == nil {
			return Errorf(EUNPROCESSABLE, "field %q cannot be changed: a task's title, description and version can", name)
		}
		f.Set = true
		if v := bytes.TrimSpace(raw[name]); !bytes.Equal(v, []byte("null")) {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return Errorf(EUNPROCESSABLE, "field %q must be a string or null", name)
			}
			f.Value = &s
		}
	}
	return nil
}

// Empty reports whether the patch changes nothing.
func (p *TaskPatch) Empty() bool {
	return !p.Title.Set && !p.Description.Set && !p.Version.Set
}

// check refuses metadata over its bounds or with characters it may not
// hold (EUNPROCESSABLE).
func (p *TaskPatch) check() error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"title", p.Title.Value}, {"description", p.Description.Value}, {"version", p.Version.Value}} {
		if f.v != nil {
			if err := checkMetadata(f.name, *f.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMetadata checks one metadata field: UTF-8 within its bound, and
// no control character but, in a description, line breaks and tabs.
func checkMetadata(field, v string) error {
	max := map[string]int{"title": MaxTitleBytes, "description": MaxDescriptionBytes, "version": MaxVersionBytes, "step name": MaxStepNameBytes}[field]
	if len(v) > max {
		return Errorf(EUNPROCESSABLE, "%s is %d bytes, over the limit of %d", field, len(v), max)
	}
	if !utf8.ValidString(v) {
		return Errorf(EUNPROCESSABLE, "%s is not valid UTF-8", field)
	}
	for _, r := range v {
		if unicode.IsControl(r) && !(field == "description" && (r == '\n' || r == '\r' || r == '\t')) {
			return Errorf(EUNPROCESSABLE, "%s contains the control character %U", field, r)
		}
	}
	return nil
}

// requestedSteps turns the steps a client plans into steps awaiting
// execution.
func requestedSteps(t *Task, req []RequestedStep) ([]Step, error) {
	if len(req) > MaxRequestedSteps {
		return nil, Errorf(EUNPROCESSABLE, "steps plans %d steps, more than the %d one request may", len(req), MaxRequestedSteps)
	}
	steps := make([]Step, 0, len(req))
	for i, r := range req {
		if r.Name == "" {
			return nil, Errorf(EUNPROCESSABLE, "steps[%d] has no name", i)
		}
		if err := checkMetadata("step name", r.Name); err != nil {
			return nil, Errorf(EUNPROCESSABLE, "steps[%d]: %s", i, ErrorMessage(err))
		}
		addl, err := ObjectOrEmpty(fmt.Sprintf("steps[%d].additional_input", i), r.AdditionalInput)
		if err != nil {
			return nil, err
		}
		steps = append(steps, plannedStep(t, r.Name, r.Input, addl))
	}
	return steps, nil
}
