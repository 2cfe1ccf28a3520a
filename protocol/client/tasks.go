package client

import (
	"context"
	"encoding/json"
	"fmt"
)

// TaskRequestBody is what a task is created from. Both fields are
// optional; AdditionalInput, when set, is a JSON object.
type TaskRequestBody struct {
	Input           *string         `json:"input,omitempty"`
	AdditionalInput json.RawMessage `json:"additional_input,omitempty"`
}

// Task is a task as a server reports it.
type Task struct {
	TaskID string `json:"task_id"`
	// Input is the task's prompt; nil when there is none.
	Input           *string         `json:"input"`
	AdditionalInput json.RawMessage `json:"additional_input,omitempty"`
	// Artifacts are the task's artifacts: uploaded, or created by the agent.
	Artifacts []Artifact `json:"artifacts"`
}

// TaskListResponse is one page of a server's tasks.
type TaskListResponse struct {
	Tasks      []Task     `json:"tasks"`
	Pagination Pagination `json:"pagination"`
}

// CreateTask creates a task (POST /agent/tasks).
func (c *Client) CreateTask(ctx context.Context, body TaskRequestBody) (*Task, error) {
	var t Task
	if err := c.doJSON(ctx, "POST", "/agent/tasks", body, &t); err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	return &t, nil
}

// ListTasks returns one page of the server's tasks (GET /agent/tasks).
func (c *Client) ListTasks(ctx context.Context, page Page) (*TaskListResponse, error) {
	var l TaskListResponse
	if err := c.doJSON(ctx, "GET", "/agent/tasks"+page.query(), nil, &l); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return &l, nil
}

// AllTasks returns every task of the server, reading page after page.
func (c *Client) AllTasks(ctx context.Context) ([]Task, error) {
	return allPages(ctx, func(ctx context.Context, p Page) ([]Task, Pagination, error) {
		l, err := c.ListTasks(ctx, p)
		if err != nil {
			return nil, Pagination{}, err
		}
		return l.Tasks, l.Pagination, nil
	})
}

// GetTask returns a task (GET /agent/tasks/{task_id}).
func (c *Client) GetTask(ctx context.Context, taskID string) (*Task, error) {
	var t Task
	if err := c.getJSON(ctx, "get task", taskID, "", "", &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// getJSON GETs a task's route, or with sub ("/steps", "/artifacts") a
// route below it, with tail (a page's query, or an escaped id below sub)
// appended; op names the operation in errors.
func (c *Client) getJSON(ctx context.Context, op, taskID, sub, tail string, out any) error {
	task, err := pathID("task", taskID)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := c.doJSON(ctx, "GET", "/agent/tasks"+task+sub+tail, nil, out); err != nil {
		return fmt.Errorf("%s %s: %w", op, taskID, err)
	}
	return nil
}
