package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ExecuteStep runs the task's oldest planned step, or else a new step with
// the request's input, through the plugin's step handler and records it.
// When the plugin fails, the failure is recorded on the step and returned:
// a *PluginFailure carrying the step's id.
//
// The step runs to completion even if ctx is cancelled (the client went
// away): what it does is recorded and can be read later. It is stopped
// when the task is deleted (ENOTFOUND, nothing more recorded) or the
// agent interrupted (EINTERRUPTED, recorded on the step). It is marked
// running (StartStep) once its handler has run a moment or before the
// handler does what outlasts its call (runningMark), so that a step whose
// process dies is marked failed at the next start.
func (a *Agent) ExecuteStep(ctx context.Context, taskID string, body StepRequestBody) (*Step, error) {
	req, err := a.stepRequest(&taskID, body)
	if err != nil {
		return nil, err
	}
	b, err := a.acquire()
	if err != nil {
		return nil, err
	}
	defer a.release(b)
	unlock, err := a.locks.enter(taskID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	reqCtx := ctx
	ctx, stop, err := a.tasks.start(ctx, a, taskID)
	if err != nil {
		return nil, err
	}
	defer stop()
	task, step, err := a.nextStep(ctx, b, taskID, req)
	if err != nil {
		return nil, err
	}
	a.tasks.setStep(taskID, step.StepID)
	if a.cancelOnDisconnect {
		// The operator's choice: a client that went away cancels its
		// step, as a cancel request would.
		defer context.AfterFunc(reqCtx, func() {
			a.tasks.cancel(taskID, step.StepID, Errorf(ECANCELLED, "the step was cancelled: its client went away before its answer"))
		})()
	}
	run, err := a.runStep(ctx, b, task, step, req)
	if err != nil {
		return nil, err
	}
	defer run.call.discard() // a no-op once recorded
	return a.recordStep(ctx, run)
}

// stepRequest checks an execute-step request for the task *taskID (its
// id made canonical) and returns the body its handler gets. ECONFLICT
// when a step of the task runs in the background: it holds its task for
// minutes, so a request is refused, not made to wait.
func (a *Agent) stepRequest(taskID *string, body StepRequestBody) (*StepRequestBody, error) {
	if err := checkID("task", taskID); err != nil {
		return nil, err
	}
	addl, err := ObjectOrEmpty("additional_input", body.AdditionalInput)
	if err != nil {
		return nil, err
	}
	if id := a.bg.stepOf(*taskID); id != "" {
		return nil, busyError(*taskID, id)
	}
	return &StepRequestBody{Input: body.Input, AdditionalInput: addl}, nil
}

// nextStep returns the task taskID and the step to execute on it: its
// oldest planned step, else a new one with the request's input. ELIMIT
// when the task holds the most steps it may, or has used up its plugin
// time.
func (a *Agent) nextStep(ctx context.Context, b *served, taskID string, req *StepRequestBody) (*Task, *Step, error) {
	task, err := a.store.GetTask(ctx, taskID)
	if err != nil {
		return nil, nil, err
	}
	var step *Step
	if task.PlannedLeft { // most tasks have none: no look for one
		if step, err = a.store.NextPlannedStep(ctx, taskID); err != nil {
			return nil, nil, err
		}
	}
	if step == nil {
		if max := b.Limits.MaxTaskSteps; max > 0 && task.StepCount >= max {
			return nil, nil, Errorf(ELIMIT, "task %s holds %d steps, the most a task may hold", taskID, task.StepCount)
		}
		step = &Step{
			TaskID:          taskID,
			StepID:          newID(),
			Status:          StatusCreated,
			Input:           req.Input,
			AdditionalInput: req.AdditionalInput,
			Artifacts:       []Artifact{},
			CreatedAt:       time.Now(),
		}
	}
	if err := checkBudget(&b.Limits, task); err != nil {
		return nil, nil, err
	}
	return task, step, nil
}

// stepRun is a step whose handler ran, as it ended: what recordStep
// records.
type stepRun struct {
	step *Step // its result applied, when it succeeded
	call *Call
	// failure is the step's failure as it is recorded and its client
	// told, nil when it succeeded: the plugin's (a *PluginFailure naming
	// the handler), or the *Error the agent was interrupted with.
	failure error
	// err is the failure as the server log tells it: the plugin's own,
	// before it was named and cut.
	err error
	// background is set for a step run in the background, whose client
	// was told it runs: every end is recorded.
	background bool
}

// events are the events recorded with the step of run as it ends: those
// of its call not yet recorded, the artifacts it created and its end
// (ev). A step that ended before it was marked running (within the
// mark's delay, having done nothing that outlasts its call: most quick
// steps) has no step.created or step.running event: its end says it
// all, and costs its save one row where three cost it twice its time
// (bench/README.md, "The event log's cost").
func (run *stepRun) events(ev Event) []Event {
	evs := run.call.events.finish()
	for i := range run.call.artifacts {
		if run.failure == nil {
			evs = append(evs, ArtifactEvent(run.step.TaskID, &run.call.artifacts[i]))
		}
	}
	return append(evs, ev)
}

// runStep runs step, of task, through the step handler of build b, with
// the execute-step request req, and reads its result onto the step. An
// error leaves nothing to record: the task is being deleted (ENOTFOUND),
// or the handler did not run through no fault of the plugin's (busy, the
// disk at its floor), the step's running mark then undone.
func (a *Agent) runStep(ctx context.Context, b *served, task *Task, step *Step, req *StepRequestBody) (run *stepRun, err error) {
	return a.runStepWith(ctx, b, task, step, req, nil)
}

// runStepWith is runStep, for a step run in the background when started
// is not nil: the step is marked running before its handler runs, and
// started told once it is (or why it could not be: the error returned
// then too); it runs with the agent's StepTimeout; and a handler that
// could not run through no fault of the plugin's fails the step, which
// its client was told runs, rather than leaving nothing to record.
func (a *Agent) runStepWith(ctx context.Context, b *served, task *Task, step *Step, req *StepRequestBody, started chan<- startResult) (run *stepRun, err error) {
	step.Build = &StepBuild{Agent: a.name, SHA256: b.ID}
	step.Status = StatusRunning
	events := newStepEvents(ctx, a, step)
	defer func() {
		if run == nil {
			events.finish() // nothing of the call is recorded
		}
	}()
	delay := a.markDelay
	if started != nil {
		delay = -1
	}
	mark, err := markRunning(ctx, a.store, step, events, delay, func(err error) {
		a.log.WarnContext(ctx, "marking a step running failed; the next effect of its handler tries again", "task_id", task.TaskID, "step_id", step.StepID, "err", err)
	})
	if started != nil {
		// A copy: the step is this goroutine's from now on.
		answer := *step
		answer.Artifacts, answer.Events = []Artifact{}, nil
		started <- startResult{&answer, err}
	}
	if err != nil {
		return nil, err
	}
	defer mark.end() // whatever happens, no mark is written after the step
	call := a.newCall(b, &HandlerInput{Handler: HandlerStep, Task: task, Step: step, Request: req})
	call.mark, call.events = mark, events
	if started != nil {
		call.timeout = a.stepTimeout
	}
	defer func() {
		if run == nil {
			call.discard() // nothing of the call is recorded
		}
	}()
	code, elapsed, err := a.run(ctx, task, call)
	marked := mark.end()
	step.PluginTime = elapsed
	if err == nil {
		err = readStepResult(call, code, step)
	}
	a.observe(HandlerStep, elapsed, err)
	run = &stepRun{step: step, call: call, background: started != nil}
	stopped := stopCause(ctx)
	if err := run.end(err, stopped); err != nil {
		if marked && stopped == nil {
			a.abandonStep(ctx, step) // it did not run
		}
		return nil, err
	}
	return run, nil
}

// end says how the run ended, its handler having ended with err and the
// step stopped for stopped's reason (nil if it was not): it sets the
// failure to record, if any, or returns an error that leaves nothing to
// record: stopped, when the task is being deleted; err, when it was not
// the plugin's doing (busy, say: nothing ran).
func (run *stepRun) end(err error, stopped *Error) error {
	run.err = err
	switch f, failed := errors.AsType[*PluginFailure](err); {
	case stopped != nil && stopped.Code == ENOTFOUND:
		return stopped
	case stopped != nil:
		// The agent was interrupted: the step fails with why.
		run.failure = &Error{Code: stopped.Code, Message: stopped.Message, RetryAfter: stopped.RetryAfter}
	case failed:
		run.failure = f.of(HandlerStep)
	case err != nil && run.background:
		// Not the plugin's doing (no instance was free, the disk is at
		// its floor), but its client was told the step runs: it fails
		// with why.
		e, ok := errors.AsType[*Error](err)
		if !ok {
			e = &Error{Code: EINTERNAL, Message: "internal error"}
		}
		run.failure = &Error{Code: e.Code, Message: e.Message, RetryAfter: e.RetryAfter}
	case err != nil:
		return err
	}
	if run.err == nil {
		run.err = run.failure
	}
	return nil
}

// readStepResult reads the result of call, a step handler's that returned
// code, onto step.
func readStepResult(call *Call, code int32, step *Step) error {
	res, err := finish(call, code, call.codec.DecodeStepResult)
	if err != nil {
		return err
	}
	return applyStepResult(step, res)
}

// abandonStep undoes the running mark of a step whose handler did not run.
func (a *Agent) abandonStep(ctx context.Context, step *Step) {
	if err := a.store.AbandonStep(context.WithoutCancel(ctx), step); err != nil {
		a.log.WarnContext(ctx, "undoing the mark of a step that did not run", "task_id", step.TaskID, "step_id", step.StepID, "err", err)
		return
	}
	a.feed.notify(ctx, step.TaskID)
}

// recordStep records the step of run, with its log, and returns it; or,
// when it failed, records the failure and returns it.
func (a *Agent) recordStep(ctx context.Context, run *stepRun) (*Step, error) {
	step, call := run.step, run.call
	call.flushOutput()
	step.Status = StatusCompleted
	step.Logs = call.logs
	if run.failure != nil {
		return nil, a.recordFailure(ctx, run)
	}
	step.Artifacts = call.artifacts
	evs := run.events(StepEvent(EventStepCompleted, step, nil))
	step.Events = evs
	err := a.store.SaveStep(context.WithoutCancel(ctx), step, call.artifacts)
	step.Events = nil
	if err != nil {
		return nil, err
	}
	call.recorded()
	a.ended(step, evs)
	return step, nil
}

// recordFailure records the step of run as failed, without its output or
// artifacts, its failure in its additional_output (FailureOutput), and
// returns the failure, naming the step.
func (a *Agent) recordFailure(ctx context.Context, run *stepRun) error {
	step := run.step
	e, _ := errors.AsType[*Error](run.failure) // a *PluginFailure is one
	if run.call.stderr.wrote {
		e.Message += "; what it wrote to stderr is in the step's log"
	}
	step.Output = nil
	step.IsLast = false
	step.AdditionalOutput = FailureOutput(e)
	end := EventStepFailed
	if e.Code == ECANCELLED {
		end = EventStepCancelled
	}
	evs := run.events(StepEvent(end, step, e))
	step.Events = evs
	err := a.store.SaveStep(context.WithoutCancel(ctx), step, nil)
	step.Events = nil
	if err != nil {
		return err
	}
	a.ended(step, evs)
	a.log.WarnContext(ctx, "step handler failed", "task_id", step.TaskID, "step_id", step.StepID, "err", logText(run.err))
	e.StepID = step.StepID
	return run.failure
}

// ended tells of step, recorded with its events evs: its task is free
// for the next step before its watchers hear of its end (a client that
// sends the next step as soon as it does is not refused), and they hear
// of it.
func (a *Agent) ended(step *Step, evs []Event) {
	if step.Background {
		a.bg.ended(step.TaskID, step.StepID)
	}
	a.feed.publish(context.Background(), step.TaskID, evs)
}

// applyStepResult copies a step handler's result onto the step.
func applyStepResult(step *Step, res *StepResult) error {
	if len(res.AdditionalOutput) > 0 && !bytes.Equal(res.AdditionalOutput, []byte("null")) {
		if !isObject(res.AdditionalOutput) {
			return NewPluginFailure(CauseBadResult, "the result's additional_output is not a JSON object")
		}
		step.AdditionalOutput = res.AdditionalOutput
	}
	step.Output = res.Output
	if res.Name != nil {
		step.Name = res.Name
	}
	step.IsLast = res.IsLast
	return nil
}

// FailureOutput is the additional_output recorded on a failed step:
// {"error": {"code": ..., "message": ...}}.
func FailureOutput(e *Error) json.RawMessage {
	b, _ := MarshalJSON(map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
	return b
}

// GetStep returns a step of a task.
func (a *Agent) GetStep(ctx context.Context, taskID, stepID string) (*Step, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	if err := checkID("step", &stepID); err != nil {
		return nil, err
	}
	return a.store.GetStep(ctx, taskID, stepID)
}

// ListSteps returns a page of a task's steps in creation order.
func (a *Agent) ListSteps(ctx context.Context, taskID string, p Page) (*StepList, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	steps, total, err := a.store.ListSteps(ctx, taskID, p)
	if err != nil {
		return nil, err
	}
	return &StepList{Steps: steps, Pagination: p.Pagination(total)}, nil
}

// StepLogs returns what the plugin logged while running a step.
func (a *Agent) StepLogs(ctx context.Context, taskID, stepID string) ([]LogRecord, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	if err := checkID("step", &stepID); err != nil {
		return nil, err
	}
	return a.store.StepLogs(ctx, taskID, stepID)
}
