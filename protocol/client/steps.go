package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// StepRequestBody is what a step is executed with. Both fields are
// optional; AdditionalInput, when set, is a JSON object.
type StepRequestBody struct {
	Input           *string         `json:"input,omitempty"`
	AdditionalInput json.RawMessage `json:"additional_input,omitempty"`
}

// StepStatus is a step's state.
type StepStatus string

// The step states of the specification.
const (
	StatusCreated   StepStatus = "created"
	StatusRunning   StepStatus = "running"
	StatusCompleted StepStatus = "completed"
)

// Step is a step as a server reports it.
type Step struct {
	TaskID string `json:"task_id"`
	StepID string `json:"step_id"`
	// Name is the step's name; nil when it has none.
	Name            *string         `json:"name"`
	Status          StepStatus      `json:"status"`
	Input           *string         `json:"input"`
	AdditionalInput json.RawMessage `json:"additional_input,omitempty"`
	// Output is what the step produced; nil when nothing.
	Output *string `json:"output"`
	// AdditionalOutput is a JSON object, or null.
	AdditionalOutput json.RawMessage `json:"additional_output,omitempty"`
	// Artifacts are the artifacts the step created.
	Artifacts []Artifact `json:"artifacts"`
	// IsLast is set on the step that ends the task.
	IsLast bool `json:"is_last"`
}

// TaskStepsListResponse is one page of a task's steps.
type TaskStepsListResponse struct {
	Steps      []Step     `json:"steps"`
	Pagination Pagination `json:"pagination"`
}

// ExecuteStep executes the task's next step (POST
// /agent/tasks/{task_id}/steps) and returns it when it is done: as long
// as the agent takes.
func (c *Client) ExecuteStep(ctx context.Context, taskID string, body StepRequestBody) (*Step, error) {
	task, err := pathID("task", taskID)
	if err != nil {
		return nil, fmt.Errorf("execute step: %w", err)
	}
	var s Step
	if err := c.doJSON(ctx, "POST", "/agent/tasks"+task+"/steps", body, &s); err != nil {
		return nil, fmt.Errorf("execute step of task %s: %w", taskID, err)
	}
	return &s, nil
}

// ExecuteStepAsync asks the server to run the task's next step in the
// background (POST /agent/tasks/{task_id}/steps with "Prefer:
// respond-async", an agentrt addition) and returns it as soon as it is
// recorded, running, with location, the absolute URL of the step (the
// answer's Location): GetStep shows it running until it ends, WatchEvents
// tells each change, CancelStep stops it.
//
// A server that does not run steps in the background ignores the
// preference and answers as ExecuteStep does, once the step has ended:
// the step is then returned with location "". While a step of the task
// runs in the background, another is refused with 409, the *Error's
// StepID naming the one running.
func (c *Client) ExecuteStepAsync(ctx context.Context, taskID string, body StepRequestBody) (*Step, string, error) {
	task, err := pathID("task", taskID)
	if err != nil {
		return nil, "", fmt.Errorf("execute step in the background: %w", err)
	}
	var s Step
	res, err := c.callJSON(ctx, jsonCall{method: "POST", path: "/agent/tasks" + task + "/steps", in: body, out: &s,
		header: http.Header{"Prefer": {"respond-async"}}})
	if err != nil {
		return nil, "", fmt.Errorf("execute step of task %s in the background: %w", taskID, err)
	}
	if res.StatusCode != http.StatusAccepted {
		return &s, "", nil
	}
	loc, err := res.Request.URL.Parse(res.Header.Get("Location"))
	if err != nil || res.Header.Get("Location") == "" {
		return &s, "", fmt.Errorf("execute step of task %s in the background: the server answered 202 without the step's Location", taskID)
	}
	return &s, loc.String(), nil
}

// CancelStep cancels a step while it runs (POST
// /agent/tasks/{task_id}/steps/{step_id}/cancel, an agentrt addition):
// the server stops its handler and records it as failed, its
// additional_output {"error": {"code": "cancelled", ...}}, and returns
// it so recorded. Cancelling a cancelled step returns it again; one that
// ended otherwise, or has not run, is a 409 *Error. A refusal for now
// (503 with Retry-After: the step is starting or ending) is sent again,
// as a cancel done twice is done once.
func (c *Client) CancelStep(ctx context.Context, taskID, stepID string) (*Step, error) {
	task, err := pathID("task", taskID)
	if err != nil {
		return nil, fmt.Errorf("cancel step: %w", err)
	}
	step, err := pathID("step", stepID)
	if err != nil {
		return nil, fmt.Errorf("cancel step: %w", err)
	}
	var s Step
	_, err = c.callJSON(ctx, jsonCall{method: "POST", path: "/agent/tasks" + task + "/steps" + step + "/cancel", out: &s,
		again: func(*Error) bool { return true }})
	if err != nil {
		return nil, fmt.Errorf("cancel step %s of task %s: %w", stepID, taskID, err)
	}
	return &s, nil
}

// Cancelled reports whether a step ended cancelled: its
// additional_output holds the error code "cancelled".
func (s *Step) Cancelled() bool {
	var v struct {
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(s.AdditionalOutput, &v) == nil && v.Error != nil && v.Error.Code == "cancelled"
}

// ListSteps returns one page of a task's steps (GET
// /agent/tasks/{task_id}/steps).
func (c *Client) ListSteps(ctx context.Context, taskID string, page Page) (*TaskStepsListResponse, error) {
	var l TaskStepsListResponse
	if err := c.getJSON(ctx, "list steps of task", taskID, "/steps", page.query(), &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// AllSteps returns every step of a task, reading page after page.
func (c *Client) AllSteps(ctx context.Context, taskID string) ([]Step, error) {
	return allPages(ctx, func(ctx context.Context, p Page) ([]Step, Pagination, error) {
		l, err := c.ListSteps(ctx, taskID, p)
		if err != nil {
			return nil, Pagination{}, err
		}
		return l.Steps, l.Pagination, nil
	})
}

// GetStep returns one step of a task (GET
// /agent/tasks/{task_id}/steps/{step_id}).
func (c *Client) GetStep(ctx context.Context, taskID, stepID string) (*Step, error) {
	step, err := pathID("step", stepID)
	if err != nil {
		return nil, fmt.Errorf("get step: %w", err)
	}
	var s Step
	if err := c.getJSON(ctx, "get step "+stepID+" of task", taskID, "/steps", step, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
