package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
)

// ExecuteStep runs the task's oldest planned step, or else a new step with
// the request's input, through the plugin's step handler and records it.
// When the plugin fails, the failure is recorded on the step and returned as
// an *Error carrying the step's id.
//
// The step runs to completion even if ctx is cancelled (the client went
// away): what it does is recorded and can be read later. It is stopped
// when the task is deleted (ENOTFOUND, nothing more recorded) or the
// agent interrupted (EINTERRUPTED, recorded on the step). It is marked
// running (StartStep) once its handler has run a moment or before the
// handler does what outlasts its call (runningMark), so that a step whose
// process dies is marked failed at the next start.
func (a *Agent) ExecuteStep(ctx context.Context, taskID string, body StepRequestBody) (*Step, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	reqAddl, err := ObjectOrEmpty("additional_input", body.AdditionalInput)
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
	ctx, stop, err := a.tasks.start(ctx, a, taskID)
	if err != nil {
		return nil, err
	}
	defer stop()

	task, err := a.store.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	var step *Step
	if task.PlannedLeft { // most tasks have none: no look for one
		if step, err = a.store.NextPlannedStep(ctx, taskID); err != nil {
			return nil, err
		}
	}
	if step == nil {
		if max := b.Limits.MaxTaskSteps; max > 0 && task.StepCount >= max {
			return nil, Errorf(ELIMIT, "task %s holds %d steps, the most a task may hold", taskID, task.StepCount)
		}
		step = &Step{
			TaskID:          taskID,
			StepID:          newID(),
			Status:          StatusCreated,
			Input:           body.Input,
			AdditionalInput: reqAddl,
			Artifacts:       []Artifact{},
			CreatedAt:       time.Now(),
		}
	}
	if err := checkBudget(&b.Limits, task); err != nil {
		return nil, err
	}
	step.Build = &StepBuild{Agent: a.name, SHA256: b.ID}
	step.Status = StatusRunning
	mark, err := markRunning(ctx, a.store, step, a.markDelay, func(err error) {
		a.log.WarnContext(ctx, "marking a step running failed; the next effect of its handler tries again", "task_id", taskID, "step_id", step.StepID, "err", err)
	})
	if err != nil {
		return nil, err
	}
	defer mark.end() // whatever happens, no mark is written after the step
	call := a.newCall(b, &HandlerInput{Handler: HandlerStep, Task: task, Step: step,
		Request: &StepRequestBody{Input: body.Input, AdditionalInput: reqAddl}})
	call.mark = mark
	defer call.discard()
	code, elapsed, runErr := a.run(ctx, task, call)
	marked := mark.end()
	step.PluginTime = elapsed
	var res *StepResult
	if runErr == nil {
		res, runErr = finish(call, code, call.codec.DecodeStepResult)
	}
	if runErr == nil {
		runErr = applyStepResult(step, res)
	}
	a.observe(HandlerStep, elapsed, runErr)
	stopped := stopCause(ctx)
	if stopped != nil && stopped.Code == ENOTFOUND {
		return nil, stopped // the task is being deleted: nothing to record
	}
	if code := ErrorCode(runErr); code != "" && code != EPLUGIN && code != ETIMEOUT && stopped == nil {
		// Not the plugin's doing (busy, say): nothing ran, nothing to
		// record.
		if !marked {
			return nil, runErr
		}
		if err := a.store.AbandonStep(context.WithoutCancel(ctx), step); err != nil {
			a.log.WarnContext(ctx, "undoing the mark of a step that did not run", "task_id", taskID, "step_id", step.StepID, "err", err)
		}
		return nil, runErr
	}
	call.flushOutput()
	step.Status = StatusCompleted
	step.Logs = call.logs
	if runErr != nil || stopped != nil {
		failure := handlerError(HandlerStep, runErr)
		if stopped != nil {
			failure = &Error{Code: stopped.Code, Message: stopped.Message, Cause: CauseCancelled, RetryAfter: stopped.RetryAfter}
		}
		if call.stderr.wrote && failure.Code != EINTERNAL {
			failure.Message += "; what it wrote to stderr is in the step's log"
		}
		step.Output = nil
		step.IsLast = false
		step.AdditionalOutput = FailureOutput(failure)
		if err := a.store.SaveStep(context.WithoutCancel(ctx), step, nil); err != nil {
			return nil, err
		}
		why := runErr
		if why == nil {
			why = failure
		}
		a.log.WarnContext(ctx, "step handler failed", "task_id", taskID, "step_id", step.StepID, "err", logText(why))
		failure.StepID = step.StepID
		return nil, failure
	}
	step.Artifacts = call.artifacts
	if err := a.store.SaveStep(context.WithoutCancel(ctx), step, call.artifacts); err != nil {
		return nil, err
	}
	call.recorded()
	return step, nil
}

// applyStepResult copies a step handler's result onto the step.
func applyStepResult(step *Step, res *StepResult) error {
	if len(res.AdditionalOutput) > 0 && !bytes.Equal(res.AdditionalOutput, []byte("null")) {
		if !isObject(res.AdditionalOutput) {
			return &Error{Code: EPLUGIN, Cause: CauseBadResult, Message: "the result's additional_output is not a JSON object"}
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
