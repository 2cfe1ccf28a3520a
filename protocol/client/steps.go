package client

import (
	"context"
	"encoding/json"
	"fmt"
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
