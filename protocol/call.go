package protocol

import (
	"context"
	"errors"
	"time"
)

// Call is the state of one handler call: the input the plugin reads, the
// result it sets, its log, and the artifacts it creates. The host API
// (package hostapi) acts on it; a Call is used by one goroutine at a time,
// while its task is locked.
type Call struct {
	agent   *Agent
	build   *served
	codec   Codec
	handler Handler
	task    *Task
	step    *Step
	input   []byte

	result    []byte
	hasResult bool
	resultErr error // why the last set_result was refused

	logs      []LogRecord
	logBytes  int
	logFull   bool
	stdout    lineWriter
	stderr    lineWriter
	artifacts []Artifact
	blobs     []Blob
	done      bool
	// artifacts is what the task's artifacts use against its quotas: those
	// it held when the call began, the upload an artifact handler is
	// handling, and those the call created.
	use artifactUse
	// workspace is the task's, held to its quota.
	workspace Workspace
}

// newCall starts a call of the handler in.Handler of build b.
func (a *Agent) newCall(b *served, in *HandlerInput) *Call {
	codec := b.Plugin.Codec()
	c := &Call{
		agent:     a,
		build:     b,
		codec:     codec,
		handler:   in.Handler,
		task:      in.Task,
		step:      in.Step,
		input:     codec.EncodeInput(in),
		artifacts: []Artifact{},
		use:       artifactsOf(in.Task),
		workspace: a.store.Workspace(in.Task.TaskID, b.Limits.workspaceQuota()),
	}
	if in.Upload != nil {
		c.use.add(in.Upload.Size)
	}
	c.stdout = lineWriter{call: c, level: "stdout"}
	c.stderr = lineWriter{call: c, level: "stderr"}
	return c
}

// Handler is the handler being called.
func (c *Call) Handler() Handler { return c.handler }

// Input is the message the handler reads, in the plugin's wire format.
func (c *Call) Input() []byte { return c.input }

// SetResult keeps the handler's result message, replacing an earlier one.
// It must be one JSON value agentrt can store and serve (CheckJSON: UTF-8,
// no lone surrogates, nested at most MaxJSONDepth deep), within the result
// limit; otherwise it is refused and, unless a later one replaces it, the
// call fails.
func (c *Call) SetResult(b []byte) error {
	if max := c.build.Limits.MaxResultBytes; len(b) > max {
		c.resultErr = Errorf(ETOOLARGE, "result of %d bytes is over the limit of %d bytes", len(b), max)
		return c.resultErr
	}
	if err := CheckJSON(b, MaxJSONDepth); err != nil {
		c.resultErr = Errorf(EUNPROCESSABLE, "result is not valid JSON: %v", err)
		return c.resultErr
	}
	c.result = append(c.result[:0], b...)
	c.hasResult, c.resultErr = true, nil
	return nil
}

// ArtifactSpec names an artifact a handler creates.
type ArtifactSpec struct {
	FileName     string
	RelativePath string
	// WorkspacePath, when set, names the workspace file whose bytes the
	// artifact takes.
	WorkspacePath string
}

// CreateArtifact stages a new artifact with the given bytes, or those of
// the workspace file spec.WorkspacePath, and returns its id. It is
// recorded, linked to the step being executed, only if the handler
// succeeds.
func (c *Call) CreateArtifact(ctx context.Context, spec ArtifactSpec, data []byte) (string, error) {
	name, err := CleanFileName(spec.FileName)
	if err != nil {
		return "", err
	} else if name != spec.FileName {
		return "", Errorf(EBADPATH, "file name %q is not a plain name; put directories in relative_path", spec.FileName)
	}
	dir, err := CleanDir(spec.RelativePath)
	if err != nil {
		return "", err
	}
	l := &c.build.Limits
	if max := l.MaxCallArtifacts; len(c.artifacts) >= max {
		return "", Errorf(ETOOLARGE, "a call may create at most %d artifacts", max)
	}
	if err := l.checkArtifactCount(c.use); err != nil {
		return "", err
	}
	id := newID()
	var blob Blob
	if spec.WorkspacePath != "" {
		file, err := CleanFilePath(spec.WorkspacePath)
		if err != nil {
			return "", err
		}
		if len(data) != 0 {
			return "", Errorf(EUNPROCESSABLE, "give either data or workspace_path, not both")
		}
		// A hard link: no bytes are written before the size is known.
		if blob, err = c.workspace.StageArtifact(ctx, file, id); err != nil {
			return "", err
		}
		if err := c.checkArtifactSize(blob.Size()); err != nil {
			blob.Discard()
			return "", err
		}
	} else {
		if err := c.checkArtifactSize(int64(len(data))); err != nil {
			return "", err
		}
		if blob, err = c.agent.store.StageArtifact(ctx, id); err != nil {
			return "", err
		}
		_, err := blob.Write(data)
		if err == nil {
			err = blob.Close()
		}
		if err != nil {
			blob.Discard()
			return "", err
		}
	}
	a := Artifact{
		ArtifactID:   id,
		AgentCreated: true,
		FileName:     name,
		RelativePath: dir,
		TaskID:       c.task.TaskID,
		Size:         blob.Size(),
		CreatedAt:    time.Now(),
	}
	if c.step != nil {
		a.StepID = c.step.StepID
	}
	c.artifacts = append(c.artifacts, a)
	c.blobs = append(c.blobs, blob)
	c.use.add(a.Size)
	return id, nil
}

// checkArtifactSize refuses a new artifact over the artifact limit, or
// that would put the task's artifacts over their byte quota.
func (c *Call) checkArtifactSize(size int64) error {
	l := &c.build.Limits
	if size > l.MaxArtifactBytes {
		return Errorf(ETOOLARGE, "artifact of %d bytes is over the limit of %d bytes", size, l.MaxArtifactBytes)
	}
	return l.checkArtifactBytes(c.use, size)
}

// Config is the operator's settings for the plugin, a JSON object of
// strings.
func (c *Call) Config() []byte { return c.build.config }

// WorkspaceReadInto reads a file of the task's workspace into buf (the
// plugin's memory) when it fits, and returns the file's size either way.
func (c *Call) WorkspaceReadInto(ctx context.Context, name string, buf []byte) (int64, error) {
	file, err := CleanFilePath(name)
	if err != nil {
		return 0, err
	}
	return c.workspace.ReadInto(ctx, file, buf)
}

// WorkspaceWrite creates or replaces a file of the task's workspace, within
// the workspace's quota of bytes and entries (the file, and each directory
// the write makes).
func (c *Call) WorkspaceWrite(ctx context.Context, name string, data []byte) error {
	file, err := CleanFilePath(name)
	if err != nil {
		return err
	}
	return c.workspace.Write(ctx, file, data)
}

// WorkspaceStat describes a file of the task's workspace.
func (c *Call) WorkspaceStat(ctx context.Context, name string) (FileInfo, error) {
	file, err := CleanFilePath(name)
	if err != nil {
		return FileInfo{}, err
	}
	return c.workspace.Stat(ctx, file)
}

// WorkspaceDelete removes a file of the task's workspace.
func (c *Call) WorkspaceDelete(ctx context.Context, name string) error {
	file, err := CleanFilePath(name)
	if err != nil {
		return err
	}
	return c.workspace.Remove(ctx, file)
}

// WorkspaceList lists the files of the task's workspace whose path starts
// with prefix.
func (c *Call) WorkspaceList(ctx context.Context, prefix string) ([]FileInfo, error) {
	if err := checkChars(prefix); err != nil {
		return nil, err
	}
	if len(prefix) > MaxPathBytes {
		return nil, Errorf(EBADPATH, "prefix is longer than %d bytes", MaxPathBytes)
	}
	return c.workspace.List(ctx, prefix)
}

// result is a handler's result message, decoded.
type result interface {
	failure() string
}

func (r *TaskResult) failure() string     { return r.Error }
func (r *StepResult) failure() string     { return r.Error }
func (r *ArtifactResult) failure() string { return r.Error }

// finish reads the result of a call whose handler returned code, with
// decode (one of the codec's). A handler that set no result returns an
// empty one. A handler fails (EPLUGIN) when its last result was refused,
// cannot be decoded, carries an error message, or it returned a code
// other than 0.
func finish[R any, P interface {
	*R
	result
}](c *Call, code int32, decode func([]byte) (P, error)) (P, error) {
	c.flushOutput()
	if c.resultErr != nil {
		return nil, Errorf(EPLUGIN, "its %s", ErrorMessage(c.resultErr))
	}
	res := P(new(R))
	if c.hasResult {
		r, err := decode(c.result)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				return nil, err
			}
			return nil, Errorf(EPLUGIN, "its result is not valid: %v", err)
		}
		res = r
	}
	switch {
	case res.failure() != "":
		return nil, Errorf(EPLUGIN, "%s", res.failure()) // cut by handlerError
	case code != 0:
		return nil, Errorf(EPLUGIN, "it returned code %d", code)
	}
	return res, nil
}

// recorded marks the call's artifacts as recorded: discard keeps them.
func (c *Call) recorded() { c.done = true }

// discard removes the bytes of artifacts that were not recorded.
func (c *Call) discard() {
	if c.done {
		return
	}
	c.done = true
	for _, b := range c.blobs {
		b.Discard()
	}
}
