package conformance

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// object is a JSON object as a check decoded it; numbers are json.Number.
type object map[string]any

// str is the string at key, or "" when it is not a string.
func (o object) str(key string) string {
	s, _ := o[key].(string)
	return s
}

// objects is the array at key as objects, skipping what is not one.
func (o object) objects(key string) []object {
	arr, _ := o[key].([]any)
	out := make([]object, 0, len(arr))
	for _, v := range arr {
		if m, ok := v.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// kind names the JSON type of a decoded value.
func kind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// field is a property of a schema: its name, the JSON kinds it may have
// ("string", "string|null"), and whether it is required.
type field struct {
	name     string
	kinds    string
	required bool
}

// The specification's schemas, as fields.
var (
	taskFields = []field{
		{"task_id", "string", true},
		{"input", "string|null", false},
		{"additional_input", "object", false},
		{"artifacts", "array", true},
	}
	stepFields = []field{
		{"task_id", "string", true},
		{"step_id", "string", true},
		{"name", "string|null", false},
		{"status", "string", true},
		{"input", "string|null", false},
		{"additional_input", "object", false},
		{"output", "string|null", false},
		{"additional_output", "object|null", false},
		{"artifacts", "array", true},
		{"is_last", "boolean", true},
	}
	artifactFields = []field{
		{"artifact_id", "string", true},
		{"agent_created", "boolean", true},
		{"file_name", "string", true},
		{"relative_path", "string|null", false},
	}
	paginationFields = []field{
		{"total_items", "integer", true},
		{"total_pages", "integer", true},
		{"current_page", "integer", true},
		{"page_size", "integer", true},
	}
)

// stepStatuses are the statuses the specification lists.
var stepStatuses = []string{"created", "running", "completed"}

// shape checks o's fields against a schema's.
func shape(o object, fields []field) error {
	for _, f := range fields {
		v, present := o[f.name]
		if !present {
			if f.required {
				return fmt.Errorf("%s is missing", f.name)
			}
			continue
		}
		if k := kind(v); !slices.Contains(strings.Split(f.kinds, "|"), k) &&
			!(k == "integer" && slices.Contains(strings.Split(f.kinds, "|"), "number")) {
			return fmt.Errorf("%s is a JSON %s, not %s", f.name, k, strings.ReplaceAll(f.kinds, "|", " or "))
		}
	}
	return nil
}

// taskShape checks that o is a Task as the specification's schema says.
func taskShape(o object) error {
	if err := shape(o, taskFields); err != nil {
		return fmt.Errorf("not a Task: %w", err)
	}
	if o.str("task_id") == "" {
		return fmt.Errorf("not a Task: task_id is empty")
	}
	if err := artifactsShape(o); err != nil {
		return fmt.Errorf("not a Task: %w", err)
	}
	return nil
}

// stepShape checks that o is a Step as the specification's schema says.
func stepShape(o object) error {
	if err := shape(o, stepFields); err != nil {
		return fmt.Errorf("not a Step: %w", err)
	}
	if o.str("step_id") == "" {
		return fmt.Errorf("not a Step: step_id is empty")
	}
	if st := o.str("status"); !slices.Contains(stepStatuses, st) {
		return fmt.Errorf("not a Step: status %q is none of %s", st, strings.Join(stepStatuses, ", "))
	}
	if err := artifactsShape(o); err != nil {
		return fmt.Errorf("not a Step: %w", err)
	}
	return nil
}

// artifactShape checks that o is an Artifact as the specification's
// schema says.
func artifactShape(o object) error {
	if err := shape(o, artifactFields); err != nil {
		return fmt.Errorf("not an Artifact: %w", err)
	}
	if o.str("artifact_id") == "" {
		return fmt.Errorf("not an Artifact: artifact_id is empty")
	}
	return nil
}

// artifactsShape checks o's artifacts array: Artifacts, each.
func artifactsShape(o object) error {
	for i, v := range o["artifacts"].([]any) {
		a, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("artifacts[%d] is a JSON %s, not an Artifact", i, kind(v))
		}
		if err := artifactShape(a); err != nil {
			return fmt.Errorf("artifacts[%d]: %w", i, err)
		}
	}
	return nil
}

// pagination is a list's Pagination.
type pagination struct {
	totalItems, totalPages, currentPage, pageSize int
}

// list is one page of a list, as a list operation answered it.
type list struct {
	items []object
	page  pagination
}

// listShape checks that o is one of the specification's list responses:
// an array of items under key, each of the item schema, and a
// pagination.
func listShape(o object, key string, item func(object) error) (list, error) {
	arr, ok := o[key].([]any)
	if !ok {
		if _, present := o[key]; !present {
			return list{}, fmt.Errorf("%s is missing", key)
		}
		return list{}, fmt.Errorf("%s is a JSON %s, not an array", key, kind(o[key]))
	}
	var l list
	for i, v := range arr {
		m, ok := v.(map[string]any)
		if !ok {
			return list{}, fmt.Errorf("%s[%d] is a JSON %s, not an object", key, i, kind(v))
		}
		if err := item(m); err != nil {
			return list{}, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		l.items = append(l.items, m)
	}
	p, ok := o["pagination"].(map[string]any)
	if !ok {
		return list{}, fmt.Errorf("pagination is %s, not an object", describeAbsent(o, "pagination"))
	}
	if err := shape(p, paginationFields); err != nil {
		return list{}, fmt.Errorf("pagination: %w", err)
	}
	num := func(k string) int {
		n, _ := p[k].(json.Number).Int64()
		return int(n)
	}
	l.page = pagination{totalItems: num("total_items"), totalPages: num("total_pages"), currentPage: num("current_page"), pageSize: num("page_size")}
	return l, nil
}

// describeAbsent says what o holds at key when it is not what was wanted.
func describeAbsent(o object, key string) string {
	v, present := o[key]
	if !present {
		return "missing"
	}
	return "a JSON " + kind(v)
}

// ids are the values of key in objects, in order.
func ids(objs []object, key string) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.str(key)
	}
	return out
}
