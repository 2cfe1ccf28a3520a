package conformance

import (
	"fmt"
	"slices"
	"strconv"
)

// maxSteps is how many steps a check executes waiting for the agent to
// finish a task: the official suite's limit.
const maxSteps = 10

var stepChecks = []Check{{
	ID: "steps.execute", Group: "steps", Level: LevelSpec,
	Asserts: "execute-step with the task's input answers 200 with a Step of that task (step_id, status created/running/completed, is_last, artifacts)",
	Official: []string{
		"Basic User Experience / Execute a step: Response status code is 200",
	},
	run: checkExecuteStep,
}, {
	ID: "steps.execute-again", Group: "steps", Level: LevelSpec,
	Asserts: `a second execute-step ({"input": "y"}, as the official suite sends it) answers 200 with a new Step`,
	Official: []string{
		"Basic User Experience / Execute step after completion: Response status code is 200",
	},
	run: checkExecuteStepAgain,
}, {
	ID: "steps.execute-without-body", Group: "steps", Level: LevelSpec,
	Asserts: "execute-step without a body answers 200 with a Step (the body is optional)",
	run:     checkExecuteStepWithoutBody,
}, {
	ID: "steps.get", Group: "steps", Level: LevelSpec,
	Asserts: "get-step answers 200 with the Step asked for, of its task",
	run:     checkGetStep,
}, {
	ID: "steps.list", Group: "steps", Level: LevelSpec,
	Asserts: "list-steps answers 200 with an object whose steps are Steps, the steps executed among them",
	run:     checkListSteps,
}, {
	ID: "steps.list-order", Group: "steps", Level: LevelStrict,
	Asserts: "list-steps lists the steps executed in the order they were executed",
	run:     checkStepOrder,
}, {
	ID: "steps.after-last", Group: "steps", Level: LevelStrict,
	Asserts: "after a step marked is_last, another execute-step still answers 200 with a Step",
	Needs:   "an agent that marks a step is_last within 10 steps of the official suite's task",
	run:     checkStepAfterLast,
}}

// executeStep executes a step of the task with body ("" sends none) and
// returns it.
func (s *session) executeStep(taskID, body string) (object, *exchange, error) {
	r := &request{method: "POST", path: taskPath(taskID, "steps")}
	if body != "" {
		r = postJSON(taskPath(taskID, "steps"), body)
	}
	ex, err := s.do(r)
	if err != nil {
		return nil, ex, err
	}
	step, err := ex.wantObject("a Step")
	if err != nil {
		return nil, ex, err
	}
	if err := stepShape(step); err != nil {
		return nil, ex, ex.failf("want a Step (%v)", err)
	}
	if got := step.str("task_id"); got != taskID {
		return nil, ex, ex.failf("want a Step of task %q, not of %q", taskID, got)
	}
	return step, ex, nil
}

// stepBody is an execute-step body with input.
func stepBody(input string) string { return fmt.Sprintf(`{"input": %s}`, strconv.Quote(input)) }

// newSteps creates a task and executes n steps of it, returning the
// task's id and the steps' ids.
func (s *session) newSteps(n int) (string, []string, error) {
	taskID, err := s.newTask("a task to execute steps of")
	if err != nil {
		return "", nil, err
	}
	var stepIDs []string
	for i := range n {
		step, _, err := s.executeStep(taskID, stepBody(fmt.Sprintf("step %d", i+1)))
		if err != nil {
			return "", nil, setup(err, "execute a step to check with")
		}
		stepIDs = append(stepIDs, step.str("step_id"))
	}
	return taskID, stepIDs, nil
}

func checkExecuteStep(s *session) error {
	task, _, err := s.createTask(officialTaskBody)
	if err != nil {
		return setup(err, "create the task to execute a step of")
	}
	_, _, err = s.executeStep(task.str("task_id"), stepBody(washingtonInput))
	return err
}

func checkExecuteStepAgain(s *session) error {
	task, _, err := s.createTask(officialTaskBody)
	if err != nil {
		return setup(err, "create the task to execute steps of")
	}
	taskID := task.str("task_id")
	first, _, err := s.executeStep(taskID, stepBody(washingtonInput))
	if err != nil {
		return setup(err, "execute the first step")
	}
	second, ex, err := s.executeStep(taskID, "{\n    \"input\": \"y\"\n}")
	if err != nil {
		return err
	}
	if second.str("step_id") == first.str("step_id") {
		return ex.failf("want a new step_id, not the first step's %q", first.str("step_id"))
	}
	return nil
}

func checkExecuteStepWithoutBody(s *session) error {
	taskID, err := s.newTask(washingtonInput)
	if err != nil {
		return err
	}
	_, _, err = s.executeStep(taskID, "")
	return err
}

func checkGetStep(s *session) error {
	taskID, stepIDs, err := s.newSteps(1)
	if err != nil {
		return err
	}
	ex, err := s.do(get(taskPath(taskID, "steps", stepIDs[0])))
	if err != nil {
		return err
	}
	step, err := ex.wantObject("the Step")
	if err != nil {
		return err
	}
	if err := stepShape(step); err != nil {
		return ex.failf("want a Step (%v)", err)
	}
	if step.str("step_id") != stepIDs[0] || step.str("task_id") != taskID {
		return ex.failf("want step %q of task %q", stepIDs[0], taskID)
	}
	return nil
}

// listSteps gets a page of a task's steps.
func (s *session) listSteps(taskID, query string) (list, *exchange, error) {
	return s.list(taskPath(taskID, "steps")+query, "steps", stepShape)
}

func checkListSteps(s *session) error {
	taskID, stepIDs, err := s.newSteps(2)
	if err != nil {
		return err
	}
	ex, err := s.do(get(taskPath(taskID, "steps")))
	if err != nil {
		return err
	}
	o, err := ex.wantObject("an object with steps")
	if err != nil {
		return err
	}
	arr, ok := o["steps"].([]any)
	if !ok {
		return ex.failf("want steps, an array (it is %s)", describeAbsent(o, "steps"))
	}
	var listed []string
	for i, v := range arr {
		st, ok := v.(map[string]any)
		if !ok {
			return ex.failf("want steps[%d] a Step, not a JSON %s", i, kind(v))
		}
		if err := stepShape(st); err != nil {
			return ex.failf("want steps[%d] a Step (%v)", i, err)
		}
		listed = append(listed, object(st).str("step_id"))
	}
	for _, id := range stepIDs {
		if !slices.Contains(listed, id) {
			return ex.failf("want the executed step %q listed", id)
		}
	}
	return nil
}

func checkStepOrder(s *session) error {
	taskID, stepIDs, err := s.newSteps(3)
	if err != nil {
		return err
	}
	l, ex, err := s.listSteps(taskID, "")
	if err != nil {
		return err
	}
	var order []string
	for _, id := range ids(l.items, "step_id") {
		if slices.Contains(stepIDs, id) {
			order = append(order, id)
		}
	}
	if !slices.Equal(order, stepIDs) {
		return ex.failf("want the steps executed listed in that order: %q", stepIDs)
	}
	return nil
}

// washingtonRun is what asking the agent to write Washington to a .txt
// file did, as the official suite asks it: the task, then steps (the
// first with the task's input, the next ones with "y") until one is
// marked is_last or maxSteps were executed.
type washingtonRun struct {
	taskID string
	steps  []object
	// last is the index in steps of the step marked is_last, or -1.
	last int
	// artifacts are those the steps created.
	artifacts []object
	err       error
}

// washington runs the official suite's task once per session.
// washingtonWithArtifacts is the official suite's task once it has run,
// for the checks that need the agent to have created an artifact: they
// are skipped, saying so, when it created none.
func (s *session) washingtonWithArtifacts() (*washingtonRun, error) {
	w, err := s.washington()
	if err != nil {
		return nil, err
	}
	if len(w.artifacts) == 0 {
		return nil, skipf("needs an agent that creates an artifact: none of %d steps of the official suite's task (%q) created one", len(w.steps), washingtonInput)
	}
	return w, nil
}

func (s *session) washington() (*washingtonRun, error) {
	if s.officialRun != nil {
		return s.officialRun, s.officialRun.err
	}
	w := &washingtonRun{last: -1}
	s.officialRun = w
	task, _, err := s.createTask(officialTaskBody)
	if err != nil {
		w.err = setup(err, "create the official suite's task")
		return w, w.err
	}
	w.taskID = task.str("task_id")
	for i := range maxSteps {
		body := stepBody(washingtonInput)
		if i > 0 {
			body = stepBody("y")
		}
		step, _, err := s.executeStep(w.taskID, body)
		if err != nil {
			w.err = setup(err, "execute the official suite's task")
			return w, w.err
		}
		w.steps = append(w.steps, step)
		w.artifacts = append(w.artifacts, step.objects("artifacts")...)
		if step["is_last"] == true {
			w.last = i
			break
		}
	}
	return w, nil
}

func checkStepAfterLast(s *session) error {
	w, err := s.washington()
	if err != nil {
		return err
	}
	if w.last < 0 {
		return skipf("needs an agent that marks a step is_last: none of %d steps of the official suite's task was", len(w.steps))
	}
	_, _, err = s.executeStep(w.taskID, stepBody("y"))
	return err
}
