package protocol

import (
	"context"
	"errors"
	"io"
	"time"
)

// Trying one handler call outside any agent's tasks: what "agentrt call"
// runs to try a plugin without a server. The call runs as an agent runs
// it (the same input, limits, checks and failures) on a workspace and
// staging of the caller's, and nothing is recorded.

// Scratch is what a handler call outside an agent's tasks needs of
// storage: the task's workspace, where the artifacts it creates are
// staged, and the disk floor.
type Scratch interface {
	WorkspaceStore
	BlobStore
	DiskFloor
}

// Try is one handler call to try.
type Try struct {
	Handler Handler
	// Task is the task the handler works on: its id, input, additional
	// input (a JSON object) and artifacts.
	Task *Task
	// Request is, for the step handler, the execute-step request; the
	// step is a new one with its input.
	Request StepRequestBody
	// StepName, when set, makes the step one the task handler planned,
	// with this name (and the request's input).
	StepName string
	// Upload is, for the artifact handler, the file uploaded: placed in
	// the workspace at RelativePath/FileName before the handler runs.
	Upload *TryUpload
}

// TryUpload is a file an artifact handler is tried on.
type TryUpload struct {
	FileName, RelativePath string
	Data                   io.Reader
}

// Tried is what a tried call did.
type Tried struct {
	// Err is the handler's failure as a client would get it, nil when it
	// succeeded.
	Err *PluginFailure
	// Elapsed is how long the plugin ran.
	Elapsed time.Duration
	// Planned is what the task handler planned.
	Planned []Step
	// Step is the step the step handler ran, as it would be recorded
	// (failed, its failure in AdditionalOutput).
	Step *Step
	// Upload is the artifact the artifact handler was tried on; Rejected
	// is why the handler refused it ("" when it did not).
	Upload   *Artifact
	Rejected string
	// Logs is what the handler logged and printed.
	Logs []LogRecord
	// Artifacts are those the call created, their bytes staged in the
	// scratch until Discard (none when it failed).
	Artifacts []Artifact

	call *Call
}

// Discard removes the staged bytes of the call's artifacts.
func (t *Tried) Discard() {
	if t.call != nil {
		t.call.discard()
	}
}

// TryHandler runs one handler of build b as an agent would, on scratch,
// and records nothing. Its error is one that is not the plugin's doing
// (the disk at its floor, the plugin closing, an upload's bad name); a
// plugin's failure is the Tried's Err.
func TryHandler(ctx context.Context, scratch Scratch, b *Build, try Try) (*Tried, error) {
	if !b.Plugin.HasHandler(try.Handler) {
		return nil, Errorf(EUNPROCESSABLE, "the plugin defines no %s handler", try.Handler)
	}
	s := newServed(b)
	task := try.Task
	in := &HandlerInput{Handler: try.Handler, Task: task}
	ws := scratch.Workspace(task.TaskID, s.Limits.WorkspaceQuota())
	tried := &Tried{}
	var placed Placement
	switch try.Handler {
	case HandlerStep:
		addl, err := ObjectOrEmpty("additional_input", try.Request.AdditionalInput)
		if err != nil {
			return nil, err
		}
		tried.Step = &Step{TaskID: task.TaskID, StepID: newID(), Status: StatusCreated, Input: try.Request.Input,
			AdditionalInput: addl, Artifacts: []Artifact{}, CreatedAt: time.Now()}
		if try.StepName != "" {
			name := try.StepName
			tried.Step.Name, tried.Step.Planned = &name, true
		}
		in.Step, in.Request = tried.Step, &StepRequestBody{Input: try.Request.Input, AdditionalInput: addl}
	case HandlerArtifact:
		art, p, err := placeTry(ctx, scratch, ws, s, try.Upload, task.TaskID)
		if err != nil {
			return nil, err
		}
		defer p.discard()
		placed, in.Artifact, tried.Upload = p.placement, art, art
	}
	if err := scratch.CheckSpace(ctx); err != nil {
		if placed != nil {
			placed.Rollback()
		}
		return nil, err
	}
	call := startCall(s, scratch, ws, in)
	tried.call = call
	code, elapsed, err := b.Plugin.Run(ctx, try.Handler, call)
	err = call.explainFailure(err)
	tried.Elapsed = elapsed
	if err == nil {
		err = tried.finish(call, code)
	}
	f, failed := errors.AsType[*PluginFailure](err)
	if err != nil && !failed {
		call.discard()
		if placed != nil {
			placed.Rollback()
		}
		return nil, err // not the plugin's doing
	}
	call.flushOutput()
	tried.Logs = call.logs
	if failed {
		tried.Err = f.of(try.Handler)
		if call.stderr.wrote {
			tried.Err.Message += "; what it wrote to stderr is in the call's log"
		}
		if tried.Step != nil {
			tried.Step.Status, tried.Step.Output, tried.Step.AdditionalOutput = StatusCompleted, nil, FailureOutput(tried.Err.clientError)
		}
	}
	if placed != nil {
		if tried.Err != nil || tried.Rejected != "" {
			placed.Rollback()
		} else {
			placed.Commit()
		}
	}
	if tried.Err != nil || tried.Rejected != "" {
		call.discard()
		return tried, nil
	}
	tried.Artifacts = call.artifacts
	if tried.Step != nil {
		tried.Step.Artifacts = call.artifacts
	}
	return tried, nil
}

// finish reads the result of a call that returned code.
func (t *Tried) finish(call *Call, code int32) error {
	switch call.handler {
	case HandlerTask:
		max := call.build.Limits.maxPlanned()
		res, err := finish(call, code, func(b []byte) (*TaskResult, error) { return call.codec.DecodeTaskResult(b, max) })
		if err != nil {
			return err
		}
		t.Planned, err = plannedSteps(call.task, res.Steps)
		return err
	case HandlerStep:
		t.Step.Status = StatusCompleted
		return readStepResult(call, code, t.Step)
	default:
		res, err := finish(call, code, call.codec.DecodeArtifactResult)
		if err == nil && res.Replace != nil {
			return errReplacedFile() // a tried upload is a file
		}
		if err == nil {
			t.Rejected = cutText(res.Reject, maxPluginText)
		}
		return err
	}
}

// tryPlacement is an upload placed in a tried call's workspace.
type tryPlacement struct {
	placement Placement
	blob      Blob
}

// discard removes the upload's staged bytes (the workspace keeps its own
// link to them when it was committed).
func (p *tryPlacement) discard() { p.blob.Discard() }

// placeTry stages an upload's bytes, within the upload limit, and places
// them in the workspace as an upload is before its artifact handler runs.
func placeTry(ctx context.Context, scratch Scratch, ws Workspace, s *served, up *TryUpload, taskID string) (*Artifact, *tryPlacement, error) {
	if up == nil {
		return nil, nil, Errorf(EUNPROCESSABLE, "the artifact handler needs a file to handle")
	}
	name, err := CleanFileName(up.FileName)
	if err != nil {
		return nil, nil, err
	}
	dir, err := CleanDir(up.RelativePath)
	if err != nil {
		return nil, nil, err
	}
	art := &Artifact{ArtifactID: newID(), FileName: name, RelativePath: dir, TaskID: taskID, CreatedAt: time.Now()}
	blob, err := scratch.StageArtifact(ctx, art.ArtifactID)
	if err != nil {
		return nil, nil, err
	}
	max := s.Limits.MaxUploadBytes
	n, err := io.Copy(blob, io.LimitReader(up.Data, max+1))
	if err == nil && n > max {
		err = Errorf(ETOOLARGE, "the file is larger than the upload limit of %d bytes", max)
	}
	if err == nil {
		err = blob.Close()
	}
	if err != nil {
		blob.Discard()
		return nil, nil, err
	}
	art.Size = n
	placed, err := ws.Place(ctx, art.WorkspacePath(), art.ArtifactID)
	if err != nil {
		blob.Discard()
		return nil, nil, err
	}
	return art, &tryPlacement{placement: placed, blob: blob}, nil
}
