package protocol

import (
	"context"
	"fmt"
	"time"
)

// CreateTask creates a task and runs the plugin's task handler, if it has
// one, before recording the task with the steps it planned. When the
// handler fails nothing is recorded.
func (a *Agent) CreateTask(ctx context.Context, body TaskRequestBody) (*Task, error) {
	addl, err := ObjectOrEmpty("additional_input", body.AdditionalInput)
	if err != nil {
		return nil, err
	}
	t := &Task{
		TaskID:          newID(),
		Input:           body.Input,
		AdditionalInput: addl,
		Artifacts:       []Artifact{},
		CreatedAt:       time.Now(),
	}
	b, err := a.acquire()
	if err != nil {
		return nil, err
	}
	defer a.release(b)
	var planned []Step
	if b.Plugin.HasHandler(HandlerTask) {
		call := a.newCall(b, &HandlerInput{Handler: HandlerTask, Task: t})
		// Whatever the handler writes to the workspace goes if the task
		// is not created.
		created := false
		defer func() {
			if !created {
				if err := call.workspace.RemoveAll(context.WithoutCancel(ctx)); err != nil {
					a.log.Warn("removing the workspace of a task not created", "task_id", t.TaskID, "err", err)
				}
			}
		}()
		defer call.discard()
		code, elapsed, err := a.run(ctx, t, call)
		t.PluginTime = elapsed
		var res *TaskResult
		if err == nil {
			max := b.Limits.maxPlanned()
			res, err = finish(call, code, func(b []byte) (*TaskResult, error) { return call.codec.DecodeTaskResult(b, max) })
		}
		if err != nil && ctx.Err() != nil {
			// The client went away: the handler was stopped, through no
			// fault of the plugin's, and no task was made.
			return nil, Errorf(EABORTED, "the request was cancelled while the task handler ran")
		}
		if err != nil {
			a.log.Warn("task handler failed", "task_id", t.TaskID, "err", logText(err))
			return nil, handlerError(HandlerTask, err)
		}
		if planned, err = plannedSteps(t, res.Steps); err != nil {
			return nil, handlerError(HandlerTask, err)
		}
		log := fitTaskLog(&b.Limits, t, call.logs)
		t.Logs, t.LogBytes = log.Records, log.Bytes
		t.Artifacts = call.artifacts
		if err := a.store.CreateTask(ctx, t, planned, t.Artifacts); err != nil {
			return nil, err
		}
		created = true
		call.recorded()
		return t, nil
	}
	if err := a.store.CreateTask(ctx, t, nil, nil); err != nil {
		return nil, err
	}
	return t, nil
}

// fitTaskLog returns what of a call's log records fits in what is left of
// the task's log limit. When some do not, the last kept record says so,
// and the call counts as filling the log: nothing more is kept, not even
// another notice, so the task's log never holds more than its limit and
// one notice.
func fitTaskLog(l *Limits, t *Task, logs []LogRecord) TaskLog {
	max := l.MaxTaskLogBytes
	size := LogSize(logs)
	if max <= 0 || t.LogBytes+size <= max {
		return TaskLog{Records: logs, Bytes: size}
	}
	room := max - t.LogBytes
	if room <= 0 {
		return TaskLog{}
	}
	kept := 0
	for _, r := range logs {
		n := int64(LogRecordSize([]byte(r.Message)))
		if n > room {
			break
		}
		room -= n
		kept++
	}
	notice := LogRecord{Time: time.Now(), Level: "warn",
		Message: fmt.Sprintf("the task's log limit of %d bytes was reached; later lines are dropped", max)}
	return TaskLog{Records: append(logs[:kept:kept], notice), Bytes: max - t.LogBytes}
}

// plannedSteps turns the task handler's plan into steps awaiting execution.
func plannedSteps(t *Task, plan []PlannedStep) ([]Step, error) {
	steps := make([]Step, 0, len(plan))
	for i, p := range plan {
		addl, err := ObjectOrEmpty(fmt.Sprintf("steps[%d].additional_input", i), p.AdditionalInput)
		if err != nil {
			return nil, Errorf(EPLUGIN, "planned a step with a bad value: %s", ErrorMessage(err))
		}
		name := p.Name
		steps = append(steps, Step{
			TaskID:          t.TaskID,
			StepID:          newID(),
			Name:            &name,
			Status:          StatusCreated,
			Input:           p.Input,
			AdditionalInput: addl,
			Artifacts:       []Artifact{},
			Planned:         true,
			CreatedAt:       t.CreatedAt,
		})
	}
	return steps, nil
}

// GetTask returns a task with its artifacts.
func (a *Agent) GetTask(ctx context.Context, taskID string) (*Task, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	return a.store.GetTask(ctx, taskID)
}

// ListTasks returns a page of tasks in creation order.
func (a *Agent) ListTasks(ctx context.Context, p Page) (*TaskList, error) {
	tasks, total, err := a.store.ListTasks(ctx, p)
	if err != nil {
		return nil, err
	}
	return &TaskList{Tasks: tasks, Pagination: p.Pagination(total)}, nil
}

// TaskLogs returns what the task handler logged.
func (a *Agent) TaskLogs(ctx context.Context, taskID string) ([]LogRecord, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	return a.store.TaskLogs(ctx, taskID)
}
