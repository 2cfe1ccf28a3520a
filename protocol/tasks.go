package protocol

import (
	"context"
	"fmt"
	"time"
)

// CreateTask creates a task and runs the plugin's task handler, if it has
// one, before recording the task with the steps it planned. When the
// handler fails nothing is recorded.
//
// The client may give the task a title, a description and a version, and
// plan steps of its own: they run first, before any the handler plans.
func (a *Agent) CreateTask(ctx context.Context, body TaskRequestBody) (*Task, error) {
	addl, err := ObjectOrEmpty("additional_input", body.AdditionalInput)
	if err != nil {
		return nil, err
	}
	meta := TaskPatch{Title: PatchField{true, body.Title}, Description: PatchField{true, body.Description}, Version: PatchField{true, body.Version}}
	if err := meta.check(); err != nil {
		return nil, err
	}
	t := &Task{
		TaskID:          newID(),
		Input:           body.Input,
		AdditionalInput: addl,
		Artifacts:       []Artifact{},
		Title:           body.Title,
		Description:     body.Description,
		Version:         body.Version,
		CreatedAt:       time.Now(),
	}
	planned, err := requestedSteps(t, body.Steps)
	if err != nil {
		return nil, err
	}
	b, err := a.acquire()
	if err != nil {
		return nil, err
	}
	defer a.release(b)
	if max := b.Limits.MaxTaskSteps; max > 0 && len(planned) > max {
		return nil, Errorf(EUNPROCESSABLE, "steps plans %d steps, more than the %d a task may hold", len(planned), max)
	}
	if b.Plugin.HasHandler(HandlerTask) {
		ctx, cancel := a.callContext(ctx, false)
		defer cancel(nil)
		call := a.newCall(b, &HandlerInput{Handler: HandlerTask, Task: t})
		// Whatever the handler writes to the workspace goes if the task
		// is not created.
		created := false
		defer func() {
			if !created {
				if err := call.workspace.RemoveAll(context.WithoutCancel(ctx)); err != nil {
					a.log.WarnContext(ctx, "removing the workspace of a task not created", "task_id", t.TaskID, "err", err)
				}
			}
		}()
		defer call.discard()
		code, elapsed, err := a.run(ctx, t, call)
		t.PluginTime = elapsed
		var res *TaskResult
		if err == nil {
			max := b.Limits.maxPlanned()
			if m := b.Limits.MaxTaskSteps; m > 0 {
				max = min(max, m-len(planned))
			}
			res, err = finish(call, code, func(b []byte) (*TaskResult, error) { return call.codec.DecodeTaskResult(b, max) })
		}
		a.observe(HandlerTask, elapsed, err)
		if stopped := stopCause(ctx); err != nil && stopped != nil {
			return nil, stopped // the server is stopping: no task was made
		}
		if err != nil && ctx.Err() != nil {
			// The client went away: the handler was stopped, through no
			// fault of the plugin's, and no task was made.
			return nil, Errorf(EABORTED, "the request was cancelled while the task handler ran")
		}
		if err != nil {
			a.logFailedTask(ctx, call, err)
			return nil, handlerError(HandlerTask, err)
		}
		more, err := plannedSteps(t, res.Steps)
		if err != nil {
			a.logFailedTask(ctx, call, err)
			return nil, handlerError(HandlerTask, err)
		}
		planned = append(planned, more...)
		log := fitTaskLog(&b.Limits, t, call.logs)
		t.Logs, t.LogBytes = log.Records, log.Bytes
		t.Artifacts = call.artifacts
		t.Events = createdEvents(t, planned)
		err = a.store.CreateTask(ctx, t, planned, t.Artifacts)
		t.Events = nil
		if err != nil {
			return nil, err
		}
		created = true
		call.recorded()
		return t, nil
	}
	if err := a.store.CreateTask(ctx, t, planned, nil); err != nil {
		return nil, err
	}
	return t, nil
}

// createdEvents are the events of task t created with its planned steps
// and its task handler's artifacts: nobody watches a task not yet made,
// but a client reading its log from the start sees them.
func createdEvents(t *Task, planned []Step) []Event {
	var evs []Event
	for i := range planned {
		evs = append(evs, StepEvent(EventStepCreated, &planned[i], nil))
	}
	for i := range t.Artifacts {
		evs = append(evs, ArtifactEvent(t.TaskID, &t.Artifacts[i]))
	}
	return evs
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
			return nil, NewPluginFailure(CauseBadResult, "planned a step with a bad value: %s", ErrorMessage(err))
		}
		steps = append(steps, plannedStep(t, p.Name, p.Input, addl))
	}
	return steps, nil
}

// plannedStep is a step of task t planned to run later: by the task
// handler, or by the client that created the task.
func plannedStep(t *Task, name string, input *string, additionalInput []byte) Step {
	return Step{
		TaskID:          t.TaskID,
		StepID:          newID(),
		Name:            &name,
		Status:          StatusCreated,
		Input:           input,
		AdditionalInput: additionalInput,
		Artifacts:       []Artifact{},
		Planned:         true,
		CreatedAt:       t.CreatedAt,
	}
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

// UpdateTask changes a task's metadata as patch says, and returns the
// task. ENOTFOUND when there is no such task; EUNPROCESSABLE for a value
// over its bound or with characters it may not hold.
func (a *Agent) UpdateTask(ctx context.Context, taskID string, patch TaskPatch) (*Task, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	if err := patch.check(); err != nil {
		return nil, err
	}
	if !patch.Empty() {
		if err := a.store.UpdateTask(ctx, taskID, patch); err != nil {
			return nil, err
		}
		a.feed.notify(ctx, taskID)
	}
	return a.store.GetTask(ctx, taskID)
}

// DeleteTask removes a task: its steps, artifacts, logs, workspace and
// their bytes on disk. A step running on it is stopped first (its client
// is answered ENOTFOUND); requests waiting for the task find it gone.
// Downloads already under way end with the bytes they started with.
// ENOTFOUND when there is no such task.
func (a *Agent) DeleteTask(ctx context.Context, taskID string) error {
	if err := checkID("task", &taskID); err != nil {
		return err
	}
	if _, err := a.store.GetTask(ctx, taskID); err != nil {
		return err
	}
	done := a.tasks.delete(taskID, Errorf(ENOTFOUND, "task %s was deleted while its step ran", taskID))
	defer done()
	unlock := a.locks.enterAlways(taskID)
	defer unlock()
	if err := a.store.DeleteTask(context.WithoutCancel(ctx), taskID); err != nil {
		return err
	}
	a.feed.deletedTask(taskID)
	return nil
}

// TaskSummaries summarises the steps of each task: see StepSummary.
func (a *Agent) TaskSummaries(ctx context.Context, tasks []Task) (map[string]StepSummary, error) {
	ids := make([]string, len(tasks))
	for i := range tasks {
		ids[i] = tasks[i].TaskID
	}
	return a.store.StepSummaries(ctx, ids)
}
