package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// schemaURL names Schema for the validator; nothing is fetched.
const schemaURL = "urn:agentrt:plugin-manifest"

// compiled is Schema, compiled on first use (a few ms).
var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	sch, err := compileSchema(Schema)
	if err != nil {
		return nil, fmt.Errorf("the manifest schema does not compile: %w", err)
	}
	return sch, nil
})

// compileSchema compiles the JSON Schema text schema.
func compileSchema(schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// validate checks doc against Schema. Of what the schema refuses, it
// reports what comes first in the file, with the message Parse gives it
// (problem).
func validate(sch *jsonschema.Schema, doc *document) error {
	err := sch.Validate(doc.value)
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	var first *refusal
	for _, leaf := range leaves(verr, nil) {
		for _, r := range doc.refusals(leaf) {
			if first == nil || r.at < first.at {
				first = &r
			}
		}
	}
	if first == nil { // no leaf: cannot be, but say something true
		return fmt.Errorf("does not match the manifest schema: %v", verr)
	}
	return doc.explain(first)
}

// refusal is one thing the schema refuses: the value at loc, or, if
// unknown, the field at loc.
type refusal struct {
	at      int64 // where in the file
	loc     []string
	unknown bool
	leaf    *jsonschema.ValidationError
}

// refusals are the refusals of one leaf error of the schema: one for
// each field additionalProperties refuses, else one for its value.
func (d *document) refusals(leaf *jsonschema.ValidationError) []refusal {
	loc := leaf.InstanceLocation
	if _, ok := leaf.ErrorKind.(*kind.PropertyNames); ok {
		loc = propertyNamesLocation(leaf.SchemaURL)
	}
	ap, ok := leaf.ErrorKind.(*kind.AdditionalProperties)
	if !ok {
		return []refusal{{d.at[pointer(loc)], loc, false, leaf}}
	}
	var rs []refusal
	for _, name := range ap.Properties {
		field := append(loc[:len(loc):len(loc)], name)
		rs = append(rs, refusal{d.at[pointer(field)], field, true, leaf})
	}
	return rs
}

// propertyNamesLocation is the location of the object whose names the
// propertyNames keyword at schemaURL checks, read from the keyword's own
// location ("…#/properties/settings/propertyNames" is settings).
//
// The validator's InstanceLocation cannot be used for such an error:
// jsonschema v6.0.3 stores the slice it is still appending to, so a
// sibling value validated after it overwrites it (the error then names
// another field, depending on map order). The schema has no propertyNames
// reached through a $ref, where this reading would not hold;
// TestPropertyNamesRefusalNamesItsObject pins both.
func propertyNamesLocation(schemaURL string) []string {
	_, frag, _ := strings.Cut(schemaURL, "#")
	toks := strings.Split(strings.TrimPrefix(frag, "/"), "/")
	var loc []string
	for i := 0; i+1 < len(toks); i++ {
		if toks[i] == "properties" {
			i++
			loc = append(loc, strings.NewReplacer("~1", "/", "~0", "~").Replace(toks[i]))
		}
	}
	return loc
}

// explain says what is wrong, as Parse reports it: an unknown field, or
// what Parse's own checks say of the value (problem); were they to find
// nothing wrong, the schema's own words.
func (d *document) explain(r *refusal) error {
	if r.unknown {
		return unknownField(r.loc)
	}
	err := problem(r.loc, d.lookup(r.loc))
	if err == nil {
		err = fmt.Errorf("does not match the manifest schema: %s", leafText(r.leaf))
	}
	if len(r.loc) > 0 {
		err = fmt.Errorf("%s: %w", path(r.loc), err)
	}
	return err
}

// leafText is what the schema says of one leaf error, without its
// location.
func leafText(leaf *jsonschema.ValidationError) string {
	s := leaf.Error()
	if _, after, ok := strings.Cut(s, ": "); ok && strings.HasPrefix(s, "at ") {
		return after
	}
	return s
}

// lookup is the value at loc, whose tokens are an object's field names
// or an array's indexes.
func (d *document) lookup(loc []string) any {
	v := d.value
	for _, tok := range loc {
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// leaves are the errors of e that have no causes. A propertyNames error
// is a leaf: its causes are about the name, which it names.
func leaves(e *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if _, ok := e.ErrorKind.(*kind.PropertyNames); ok || len(e.Causes) == 0 {
		return append(out, e)
	}
	for _, c := range e.Causes {
		out = leaves(c, out)
	}
	return out
}

// unknownField is the error for the field at loc, which the manifest
// does not have; it suggests the name meant, if one is near.
func unknownField(loc []string) error {
	parent, name := loc[:len(loc)-1], loc[len(loc)-1]
	if len(parent) == 1 && parent[0] == "limits" {
		flag := strings.ReplaceAll(name, "_", "-")
		if slices.Contains(serverFlags, flag) {
			return fmt.Errorf("unknown field %s: -%s is a limit of the server, not of one agent", quotePath(loc), flag)
		}
	}
	if near := nearest(name, fieldsAt(parent)); near != "" {
		return fmt.Errorf("unknown field %s (did you mean %q?)", quotePath(loc), near)
	}
	return fmt.Errorf("unknown field %s", quotePath(loc))
}

// serverFlags are the flags of agentrt run whose limits are the
// server's, not one agent's: a manifest cannot set them.
var serverFlags = []string{
	"addr", "data", "cache", "max-body", "max-uploads", "max-uploads-per-client",
	"min-free-disk", "body-timeout", "min-body-rate", "max-queue", "queue-wait",
	"max-plugin-size", "log-level", "debug-addr",
}

// nearest is the name of names nearest to s, if it is one or two edits
// away from it (a typo); "" if none is.
func nearest(s string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
