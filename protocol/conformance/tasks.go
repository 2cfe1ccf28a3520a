package conformance

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// What the official suite sends: the task it asks for, and the bodies it
// creates tasks with (as it writes them).
const (
	washingtonInput = "Write the word 'Washington' to a .txt file"
	// officialTaskBody is the body of "Basic User Experience / Create a
	// new task".
	officialTaskBody = "{\n    \"input\": \"Write the word 'Washington' to a .txt file\",\n    \"additional_input\": {\"test_run_id\": \"123\"}\n}"
	// officialPlainTaskBody is the body of the other folders' "Create a
	// new task" (and of the GETs of "Tasks", which send one).
	officialPlainTaskBody = "{\n    \"input\": \"Write the word 'Washington' to a .txt file\"\n}"
)

// officialResponseTime is what the official suite allows a GET of tasks;
// a check gives each GET responseTimeTries tries to make it.
const (
	officialResponseTime = 500 * time.Millisecond
	responseTimeTries    = 3
)

var taskChecks = []Check{{
	ID: "tasks.create", Group: "tasks", Level: LevelSpec,
	Asserts: "create-task answers 200 with a Task (a task_id, an artifacts array) for each body the official suite sends, a new task_id each",
	Official: []string{
		"Basic User Experience / Create a new task: Response status code is 200",
		"Tasks / Create a new task: Response status code is 200",
		"Tasks / Create a second task: Response status code is 200",
		"Artifacts / Create a new task: Response status code is 200",
	},
	run: checkCreateTask,
}, {
	ID: "tasks.create-without-body", Group: "tasks", Level: LevelSpec,
	Asserts: "create-task without a body, and with {}, answers 200 with a Task whose input is null (the body is optional)",
	run:     checkCreateTaskWithoutBody,
}, {
	ID: "tasks.round-trip", Group: "tasks", Level: LevelSpec,
	Asserts: "a task's input and additional_input come back as sent, from create-task and get-task: Unicode, escapes and nesting included",
	run:     checkTaskRoundTrip,
}, {
	ID: "tasks.get", Group: "tasks", Level: LevelSpec,
	Asserts: "get-task answers 200 application/json with the task asked for: task_id, input, additional_input and artifacts present",
	Official: []string{
		"Tasks / Get the task: Response status code is 200",
		"Tasks / Get the task: Content-Type is present",
		"Tasks / Get the task: Content-Type is application/json",
		"Tasks / Get the task: Response has all required properties",
	},
	run: checkGetTask,
}, {
	ID: "tasks.list", Group: "tasks", Level: LevelSpec,
	Asserts: "list-tasks answers 200 application/json with an object whose tasks are Tasks",
	Official: []string{
		"Basic User Experience / Get all the tasks: Response status code is 200",
		"Tasks / Get all the tasks: Response status code is 200",
		"Tasks / Get all the tasks: Content-Type is present",
		"Tasks / Get all the tasks: Content-Type is application/json",
	},
	run: checkListTasks,
}, {
	ID: "tasks.response-time", Group: "tasks", Level: LevelSpec,
	Asserts: "get-task, list-tasks and list-tasks?page_size=1&current_page=1 each answer within 500 ms (the best of 3 tries)",
	Official: []string{
		"Tasks / Get the task: Response time is less than 500ms",
		"Tasks / Get all the tasks: Response time is less than 500ms",
		"Tasks / Get all the tasks with Pagination: Response time is less than 500ms",
	},
	run: checkTaskResponseTime,
}}

// createTask creates a task with body ("" sends none) and returns it.
func (s *session) createTask(body string) (object, *exchange, error) {
	r := &request{method: "POST", path: "/agent/tasks"}
	if body != "" {
		r = postJSON("/agent/tasks", body)
	}
	ex, err := s.do(r)
	if err != nil {
		return nil, ex, err
	}
	task, err := ex.wantObject("a Task")
	if err != nil {
		return nil, ex, err
	}
	if err := taskShape(task); err != nil {
		return nil, ex, ex.failf("want a Task (%v)", err)
	}
	return task, ex, nil
}

// newTask creates a task for a check to work on and returns its id.
func (s *session) newTask(input string) (string, error) {
	task, _, err := s.createTask(fmt.Sprintf(`{"input": %s}`, strconv.Quote(input)))
	if err != nil {
		return "", setup(err, "create a task to check with")
	}
	return task.str("task_id"), nil
}

func checkCreateTask(s *session) error {
	seen := map[string]bool{}
	for _, body := range []string{officialTaskBody, officialPlainTaskBody} {
		task, ex, err := s.createTask(body)
		if err != nil {
			return err
		}
		id := task.str("task_id")
		if seen[id] {
			return ex.failf("want a new task_id, not %q again", id)
		}
		seen[id] = true
	}
	return nil
}

func checkCreateTaskWithoutBody(s *session) error {
	for _, body := range []string{"", "{}"} {
		task, ex, err := s.createTask(body)
		if err != nil {
			return err
		}
		if v := task["input"]; v != nil {
			return ex.failf("want input null or absent, not %s", kind(v))
		}
	}
	return nil
}

// roundTripInput is text that a careless encoder mangles: quotes and
// backslashes, controls, non-ASCII letters, an emoji outside the BMP, and
// U+2028, which JavaScript once could not hold in a string literal.
const roundTripInput = "Ünïcødé \"quoted\" \\ back\\slash\nline two\ttab \u2028 😀 <b>&amp;</b>"

func checkTaskRoundTrip(s *session) error {
	additional := map[string]any{
		"nested": map[string]any{"list": []any{1, 2.5, "three", nil, true, map[string]any{}}},
		"empty":  map[string]any{},
		"text":   "ø 😀",
	}
	body, _ := json.Marshal(map[string]any{"input": roundTripInput, "additional_input": additional})
	task, ex, err := s.createTask(string(body))
	if err != nil {
		return err
	}
	if err := sameTask(task, additional); err != nil {
		return ex.failf("want the input and additional_input sent (%v)", err)
	}
	ex, err = s.do(get(taskPath(task.str("task_id"))))
	if err != nil {
		return err
	}
	got, err := ex.wantObject("the Task")
	if err != nil {
		return err
	}
	if err := sameTask(got, additional); err != nil {
		return ex.failf("want the input and additional_input sent (%v)", err)
	}
	return nil
}

// sameTask says how task differs from the round-trip task sent.
func sameTask(task object, additional map[string]any) error {
	if in := task.str("input"); in != roundTripInput {
		return fmt.Errorf("input is %q, not %q", in, roundTripInput)
	}
	if !sameJSON(task["additional_input"], additional) {
		b, _ := json.Marshal(task["additional_input"])
		return fmt.Errorf("additional_input is %s", b)
	}
	return nil
}

// sameJSON says whether two decoded JSON values are equal, numbers by
// value.
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		fa, err := a.Float64()
		return err == nil && reflect.DeepEqual(fa, toFloat(b))
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if w, ok := bm[k]; !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], bs[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// toFloat is a Go number as float64, NaN for anything else.
func toFloat(v any) float64 {
	switch v := v.(type) {
	case int:
		return float64(v)
	case float64:
		return v
	case json.Number:
		f, _ := v.Float64()
		return f
	}
	return math.NaN()
}

func checkGetTask(s *session) error {
	inputs := []string{washingtonInput, "a second task, to tell them apart"}
	var taskIDs []string
	for _, in := range inputs {
		id, err := s.newTask(in)
		if err != nil {
			return err
		}
		taskIDs = append(taskIDs, id)
	}
	for i, id := range taskIDs {
		// The official suite sends its GETs with the body it creates tasks with.
		ex, err := s.do(get(taskPath(id)).withJSONBody(officialPlainTaskBody))
		if err != nil {
			return err
		}
		if ex.header.Get("Content-Type") == "" {
			return ex.failf("want a Content-Type")
		}
		task, err := ex.wantObject("the Task")
		if err != nil {
			return err
		}
		if err := taskShape(task); err != nil {
			return ex.failf("want a Task (%v)", err)
		}
		for _, p := range []string{"task_id", "input", "additional_input", "artifacts"} {
			if _, ok := task[p]; !ok {
				return ex.failf("want the property %s (the official suite requires task_id, input, additional_input, artifacts)", p)
			}
		}
		if got := task.str("task_id"); got != id {
			return ex.failf("want task_id %q, not %q", id, got)
		}
		if got := task.str("input"); got != inputs[i] {
			return ex.failf("want input %q, not %q", inputs[i], got)
		}
	}
	return nil
}

func checkListTasks(s *session) error {
	if _, err := s.newTask(washingtonInput); err != nil {
		return err
	}
	ex, err := s.do(get("/agent/tasks").withJSONBody(officialPlainTaskBody))
	if err != nil {
		return err
	}
	if ex.header.Get("Content-Type") == "" {
		return ex.failf("want a Content-Type")
	}
	o, err := ex.wantObject("an object with tasks")
	if err != nil {
		return err
	}
	tasks, ok := o["tasks"].([]any)
	if !ok {
		return ex.failf("want tasks, an array (it is %s)", describeAbsent(o, "tasks"))
	}
	if len(tasks) == 0 {
		return ex.failf("want at least the task just created")
	}
	for i, v := range tasks {
		t, ok := v.(map[string]any)
		if !ok {
			return ex.failf("want tasks[%d] a Task, not a JSON %s", i, kind(v))
		}
		if err := taskShape(t); err != nil {
			return ex.failf("want tasks[%d] a Task (%v)", i, err)
		}
	}
	return nil
}

func checkTaskResponseTime(s *session) error {
	id, err := s.newTask(washingtonInput)
	if err != nil {
		return err
	}
	for _, path := range []string{taskPath(id), "/agent/tasks", "/agent/tasks?page_size=1&current_page=1"} {
		// The best of a few tries: a moment's load on the machine running
		// the checks is not the server's to answer for.
		var times []string
		for range responseTimeTries {
			ex, err := s.do(get(path).withJSONBody(officialPlainTaskBody))
			if err != nil {
				return err
			}
			if ex.elapsed < officialResponseTime {
				break
			}
			times = append(times, ex.elapsed.Round(time.Millisecond).String())
			if len(times) == responseTimeTries {
				return ex.failf("want an answer within %s, not after %s (%d tries)", officialResponseTime, strings.Join(times, ", "), responseTimeTries)
			}
		}
	}
	return nil
}
