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
// away): what it does is recorded and can be read later.
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
	ctx = context.WithoutCancel(ctx)
	unlock, err := a.locks.enter(taskID)
	if err != nil {
		return nil, err
	}
	defer unlock()

	task, err := a.store.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	step, err := a.store.NextPlannedStep(ctx, taskID)
	if err != nil {
		return nil, err
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
	call := a.newCall(b, &HandlerInput{Handler: HandlerStep, Task: task, Step: step,
		Request: &StepRequestBody{Input: body.Input, AdditionalInput: reqAddl}})
	defer call.discard()
	code, elapsed, runErr := a.run(ctx, task, call)
	step.PluginTime = elapsed
	var res *StepResult
	if runErr == nil {
		res, runErr = finish(call, code, call.codec.DecodeStepResult)
	}
	if runErr == nil {
		runErr = applyStepResult(step, res)
	}
	if code := ErrorCode(runErr); code != "" && code != EPLUGIN && code != ETIMEOUT {
		return nil, runErr // not the plugin's doing (busy, say): nothing ran, nothing to record
	}
	call.flushOutput()
	step.Status = StatusCompleted
	step.Build = &StepBuild{Agent: a.name, SHA256: b.ID}
	step.Logs = call.logs
	if runErr != nil {
		failure := handlerError(HandlerStep, runErr)
		if call.stderr.wrote && failure.Code != EINTERNAL {
			failure.Message += "; what it wrote to stderr is in the step's log"
		}
		step.Output = nil
		step.IsLast = false
		step.AdditionalOutput = failureOutput(failure)
		if err := a.store.SaveStep(ctx, step, nil); err != nil {
			return nil, err
		}
		a.log.Warn("step handler failed", "task_id", taskID, "step_id", step.StepID, "err", logText(runErr))
		failure.StepID = step.StepID
		return nil, failure
	}
	step.Artifacts = call.artifacts
	if err := a.store.SaveStep(ctx, step, call.artifacts); err != nil {
		return nil, err
	}
	call.recorded()
	return step, nil
}

// applyStepResult copies a step handler's result onto the step.
func applyStepResult(step *Step, res *StepResult) error {
	if len(res.AdditionalOutput) > 0 && !bytes.Equal(res.AdditionalOutput, []byte("null")) {
		if !isObject(res.AdditionalOutput) {
			return Errorf(EPLUGIN, "the result's additional_output is not a JSON object")
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

// failureOutput is the additional_output recorded on a failed step.
func failureOutput(e *Error) json.RawMessage {
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
