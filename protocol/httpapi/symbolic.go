package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/protocol"
)

// The symbolic form of the task routes: the emoji-keyed JSON of the
// Introspector notes, asked for by media type. A client that sends
// Content-Type: SymbolicType writes its body in it; one that sends
// Accept: SymbolicType reads answers in it, each an outcome: {"✅": the
// answer} or {"❌": the error}. Plain JSON stays the default. Both forms
// are the same tasks: a task created in one reads the same in the other.
// docs/SYMBOLIC.md has the table; symbols below are its truth.

// SymbolicType is the media type of the symbolic form.
const SymbolicType = "application/vnd.agentrt.symbolic+json"

// symbol is one field of the symbolic form.
type symbol struct {
	plain, sym string
}

// The symbols of a task's fields, in the order answers give them.
var (
	taskSymbols = []symbol{
		{"task_id", "🆔"},
		{"title", "🏷️"},
		{"description", "📖"},
		{"version", "🔄"},
		{"input", "💬"},
		{"additional_input", "🧩"},
		{"steps", "🚶"}, // in a request the steps to plan; in an answer those still planned
		{"running", "🏃"},
		{"completed", "🏁"},
		{"failed", "💥"},
		{"artifacts", "📦"},
	}
	stepSymbols     = []symbol{{"name", "🏷️"}, {"input", "💬"}, {"additional_input", "🧩"}}
	artifactSymbols = []symbol{{"artifact_id", "🆔"}, {"file_name", "📄"}, {"relative_path", "📁"}, {"agent_created", "🤖"}}
	listSymbols     = []symbol{{"tasks", "📋"}, {"pagination", "📑"}}
	pageSymbols     = []symbol{{"total_items", "🔢"}, {"total_pages", "📚"}, {"current_page", "👉"}, {"page_size", "📏"}}
	errorSymbols    = []symbol{{"message", "💬"}, {"code", "🔖"}, {"step_id", "👣"}}
	// The outcome of every symbolic answer.
	symOK, symFailed = "✅", "❌"
)

// normalSymbol is sym as symbols are compared: without the variation
// selectors, joiners and gender and skin-tone modifiers that the same
// emoji is written with or without ("🚶♂️", "🚶‍♂️" and "🚶" are one
// symbol; so are "🏷️" and "🏷").
func normalSymbol(sym string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\uFE0F', r == '\uFE0E', r == '\u200D', r == '♂', r == '♀', r >= 0x1F3FB && r <= 0x1F3FF:
			return -1
		}
		return r
	}, sym)
}

// plainName is the plain field a symbol names among syms, "" for none.
func plainName(syms []symbol, key string) string {
	key = normalSymbol(key)
	for _, s := range syms {
		if normalSymbol(s.sym) == key {
			return s.plain
		}
	}
	return ""
}

// symbolList lists syms for a message.
func symbolList(syms []symbol) string {
	var out []string
	for _, s := range syms {
		out = append(out, s.sym+" "+s.plain)
	}
	return strings.Join(out, ", ")
}

// sentSymbolic reports whether r's body is in the symbolic form.
func sentSymbolic(r *http.Request) bool {
	t, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && t == SymbolicType
}

// wantsSymbolic reports whether r's client asks for symbolic answers: its
// Accept names SymbolicType, with a quality above 0, and plain JSON, if
// it names it, not above it.
func wantsSymbolic(r *http.Request) bool {
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return false
	}
	sym, plain := -1.0, -1.0
	for _, h := range accept {
		for _, item := range strings.Split(h, ",") {
			t, params, err := mime.ParseMediaType(strings.TrimSpace(item))
			if err != nil {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
			switch t {
			case SymbolicType:
				sym = max(sym, q)
			case "application/json":
				plain = max(plain, q)
			}
		}
	}
	return sym > 0 && sym >= plain
}

// symbolicKey marks a request whose answers, errors included, are
// symbolic.
type symbolicKey struct{}

// symbolic reports whether r's answers are symbolic: a task route whose
// client asked for them.
func symbolic(r *http.Request) bool {
	v, _ := r.Context().Value(symbolicKey{}).(bool)
	return v
}

// taskRoute matches the paths of the task routes, which serve the
// symbolic form.
var taskRoute = regexp.MustCompile(`^(/agents/[^/]+)?` + Prefix + `/agent/tasks(/[^/]+)?/?$`)

// markSymbolic marks r, when it is for a task route and its client asks
// for the symbolic form, so that every answer to it, errors included,
// is symbolic.
func markSymbolic(r *http.Request) *http.Request {
	if wantsSymbolic(r) && taskRoute.MatchString(r.URL.Path) {
		return r.WithContext(context.WithValue(r.Context(), symbolicKey{}, true))
	}
	return r
}

// decodeTaskBody decodes a task route's request body into v (a
// TaskRequestBody or a TaskPatch), from plain JSON or, when the client
// sent it so, the symbolic form.
func (s *Server) decodeTaskBody(w http.ResponseWriter, r *http.Request, v any) error {
	if !sentSymbolic(r) {
		return s.decodeBody(w, r, v)
	}
	// Its names are symbols; the plain body plainTask writes has the
	// fields' names exactly.
	body, err := s.readBody(w, r, nil)
	if err != nil || body == nil {
		return err
	}
	if body, err = plainTask(body); err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// plainTask rewrites a symbolic task body (create or update) as plain
// JSON: every key must be a symbol of a task's fields.
func plainTask(body []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, protocol.Errorf(protocol.EUNPROCESSABLE, "the request body is not a JSON object: %v", err)
	}
	plain := make(map[string]json.RawMessage, len(fields))
	by := map[string]string{} // the key each field was given by
	for _, key := range sortedKeys(fields) {
		name := plainName(taskSymbols, key)
		if err := givenOnce(by, name, key, ""); err != nil {
			return nil, err
		}
		switch name {
		case "":
			return nil, protocol.Errorf(protocol.EUNPROCESSABLE, "%q is not a symbol of a task; the symbols are %s", key, symbolList(taskSymbols[1:7]))
		case "task_id", "running", "completed", "failed", "artifacts":
			return nil, protocol.Errorf(protocol.EUNPROCESSABLE, "%s (%s) is the server's to say, not a client's", key, name)
		case "steps":
			steps, err := plainSteps(fields[key])
			if err != nil {
				return nil, err
			}
			plain[name] = steps
		default:
			plain[name] = fields[key]
		}
	}
	return json.Marshal(plain)
}

// plainSteps rewrites the steps a symbolic body plans: each a name, or an
// object of a step's symbols.
func plainSteps(raw json.RawMessage) (json.RawMessage, error) {
	var steps []json.RawMessage
	if err := json.Unmarshal(raw, &steps); err != nil {
		return nil, protocol.Errorf(protocol.EUNPROCESSABLE, "🚶 (steps) must be a list of step names or steps")
	}
	out := make([]json.RawMessage, len(steps))
	for i, st := range steps {
		st = bytes.TrimSpace(st)
		if len(st) == 0 || st[0] != '{' {
			out[i] = st
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(st, &fields); err != nil {
			return nil, protocol.Errorf(protocol.EUNPROCESSABLE, "🚶[%d] is not a step: %v", i, err)
		}
		plain := map[string]json.RawMessage{}
		by := map[string]string{}
		for _, key := range sortedKeys(fields) {
			name := plainName(stepSymbols, key)
			if name == "" {
				return nil, protocol.Errorf(protocol.EUNPROCESSABLE, "🚶[%d]: %q is not a symbol of a step; the symbols are %s", i, key, symbolList(stepSymbols))
			}
			if err := givenOnce(by, name, key, fmt.Sprintf("🚶[%d]: ", i)); err != nil {
				return nil, err
			}
			plain[name] = fields[key]
		}
		b, err := json.Marshal(plain)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return json.Marshal(out)
}

// givenOnce refuses key, a symbol of the field name, when an earlier key
// of the same object (in by, which it updates) named that field too: two
// ways of writing one emoji ("🏷️" and "🏷", with and without its
// variation selector) are two members to every JSON reader, and one of
// them would quietly replace the other here. where starts the message.
func givenOnce(by map[string]string, name, key, where string) error {
	if name == "" {
		return nil
	}
	if first, ok := by[name]; ok {
		return protocol.Errorf(protocol.EUNPROCESSABLE, "%s%s and %s both name %s: give each field once", where, symbolShown(first), symbolShown(key), name)
	}
	by[name] = key
	return nil
}

// maxSymbolShown bounds the code points symbolShown lists.
const maxSymbolShown = 8

// symbolShown is key for a message, with its code points, which tell
// apart what looks the same: "🏷️" (U+1F3F7 U+FE0F).
func symbolShown(key string) string {
	runes := []rune(key)
	if len(runes) > maxSymbolShown {
		runes = runes[:maxSymbolShown]
	}
	codes := make([]string, len(runes))
	for i, r := range runes {
		codes[i] = fmt.Sprintf("%U", r)
	}
	if shown := string(runes); shown != key {
		return fmt.Sprintf("%q (%s …)", shown+"…", strings.Join(codes, " "))
	}
	return fmt.Sprintf("%q (%s)", key, strings.Join(codes, " "))
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// symObject is a JSON object whose members keep their order.
type symObject []symMember

type symMember struct {
	key   string
	value any
}

func (o symObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := protocol.MarshalJSON(m.key)
		v, err := protocol.MarshalJSON(m.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// sym is the symbol of the plain field among syms.
func sym(syms []symbol, plain string) string {
	for _, s := range syms {
		if s.plain == plain {
			return s.sym
		}
	}
	panic("no symbol for " + plain)
}

// symbolicTask is a task in the symbolic form, with a summary of its
// steps.
func symbolicTask(t *protocol.Task, sum protocol.StepSummary) symObject {
	planned := sum.Planned
	if planned == nil {
		planned = []string{}
	}
	arts := make([]symObject, len(t.Artifacts))
	for i, a := range t.Artifacts {
		arts[i] = symObject{
			{sym(artifactSymbols, "artifact_id"), a.ArtifactID},
			{sym(artifactSymbols, "file_name"), a.FileName},
			{sym(artifactSymbols, "relative_path"), a.RelativePath},
			{sym(artifactSymbols, "agent_created"), a.AgentCreated},
		}
	}
	values := map[string]any{
		"task_id": t.TaskID, "input": t.Input, "additional_input": t.AdditionalInput,
		"steps": planned, "running": sum.Running, "completed": sum.Completed, "failed": sum.Failed, "artifacts": arts,
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"title", t.Title}, {"description", t.Description}, {"version", t.Version}} {
		if f.v != nil {
			values[f.name] = *f.v // absent when unset, as in plain JSON
		}
	}
	o := symObject{}
	for _, s := range taskSymbols {
		if v, ok := values[s.plain]; ok {
			o = append(o, symMember{s.sym, v})
		}
	}
	return o
}

// writeTask answers a task: plain JSON, or the symbolic form with its
// steps summed up.
func (s *Server) writeTask(w http.ResponseWriter, r *http.Request, a *protocol.Agent, t *protocol.Task) error {
	if !symbolic(r) {
		s.writeJSON(w, http.StatusOK, t)
		return nil
	}
	sums, err := a.TaskSummaries(r.Context(), []protocol.Task{*t})
	if err != nil {
		return err
	}
	s.writeSymbolic(w, http.StatusOK, symObject{{symOK, symbolicTask(t, sums[t.TaskID])}})
	return nil
}

// writeTaskList answers a page of tasks, plain or symbolic.
func (s *Server) writeTaskList(w http.ResponseWriter, r *http.Request, a *protocol.Agent, list *protocol.TaskList) error {
	if !symbolic(r) {
		s.writeJSON(w, http.StatusOK, list)
		return nil
	}
	sums, err := a.TaskSummaries(r.Context(), list.Tasks)
	if err != nil {
		return err
	}
	tasks := make([]symObject, len(list.Tasks))
	for i := range list.Tasks {
		tasks[i] = symbolicTask(&list.Tasks[i], sums[list.Tasks[i].TaskID])
	}
	p := list.Pagination
	page := symObject{
		{sym(pageSymbols, "total_items"), p.TotalItems},
		{sym(pageSymbols, "total_pages"), p.TotalPages},
		{sym(pageSymbols, "current_page"), p.CurrentPage},
		{sym(pageSymbols, "page_size"), p.PageSize},
	}
	s.writeSymbolic(w, http.StatusOK, symObject{{symOK, symObject{
		{sym(listSymbols, "tasks"), tasks},
		{sym(listSymbols, "pagination"), page},
	}}})
	return nil
}

// symbolicError is an error body in the symbolic form.
func symbolicError(body errorBody) symObject {
	e := symObject{{sym(errorSymbols, "message"), body.Message}, {sym(errorSymbols, "code"), body.Code}}
	if body.StepID != "" {
		e = append(e, symMember{sym(errorSymbols, "step_id"), body.StepID})
	}
	return symObject{{symFailed, e}}
}

// writeSymbolic writes v as a symbolic answer.
func (s *Server) writeSymbolic(w http.ResponseWriter, status int, v any) {
	s.writeJSONAs(w, status, v, SymbolicType)
}
