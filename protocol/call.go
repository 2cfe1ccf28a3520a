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
	staging BlobStore // where the artifacts it creates are staged
	build   *served
	codec   Codec
	handler Handler
	task    *Task
	step    *Step
	// artifact is the artifact handler's upload, or the download
	// handler's artifact.
	artifact *Artifact
	input    []byte
	// deadline is when the task's time budget runs out (Agent.run); zero
	// for a task without one.
	deadline time.Time
	// timeout is the call's own time limit, zero for the plugin's.
	timeout time.Duration

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
	// download is where the download handler's bytes go; downloaded counts
	// them, and downloadErr is why the client will take no more.
	download    DownloadWriter
	downloaded  int64
	downloadErr error
	// mark is a step call's running mark, written before what outlasts
	// the call (BeforeEffect); nil for other calls.
	mark *runningMark
	// events are a step call's progress and log events; nil for other
	// calls.
	events *stepEvents
}

// newCall starts a call of the handler in.Handler of build b.
func (a *Agent) newCall(b *served, in *HandlerInput) *Call {
	return startCall(b, a.store, a.store.Workspace(in.Task.TaskID, b.Limits.WorkspaceQuota()), in)
}

// startCall starts a call of the handler in.Handler of build b on the
// task's workspace ws, staging the artifacts it creates in staging.
func startCall(b *served, staging BlobStore, ws Workspace, in *HandlerInput) *Call {
	codec := b.Plugin.Codec()
	c := &Call{
		staging:   staging,
		build:     b,
		codec:     codec,
		handler:   in.Handler,
		task:      in.Task,
		step:      in.Step,
		artifact:  in.Artifact,
		input:     codec.EncodeInput(in),
		artifacts: []Artifact{},
		use:       artifactsOf(in.Task),
		workspace: ws,
	}
	if in.Handler == HandlerArtifact && in.Artifact != nil {
		c.use.add(in.Artifact.Size) // the upload, not yet recorded
	}
	c.stdout = lineWriter{call: c, level: "stdout"}
	c.stderr = lineWriter{call: c, level: "stderr"}
	return c
}

// Handler is the handler being called.
func (c *Call) Handler() Handler { return c.handler }

// Input is the message the handler reads, in the plugin's wire format.
func (c *Call) Input() []byte { return c.input }

// Deadline is when the task's time budget runs out, zero if it has none:
// the plugin must end the call by then (Plugin.Run).
func (c *Call) Deadline() time.Time { return c.deadline }

// Timeout is the call's own time limit in place of the plugin's call
// timeout, zero for that: a step run in the background has its own
// (AgentConfig.StepTimeout).
func (c *Call) Timeout() time.Duration { return c.timeout }

// SetResult keeps the handler's result message, replacing an earlier one.
// It must be one JSON value agentrt can store and serve (CheckJSON: I-JSON,
// so UTF-8, no lone surrogates, no duplicate names, numbers a double holds;
// nested at most MaxJSONDepth deep), within the result limit; otherwise it
// is refused and, unless a later one replaces it, the call fails.
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
	// FileName is the artifact's name; for a URI artifact, "" names it
	// after the URI's last path segment.
	FileName     string
	RelativePath string
	// WorkspacePath, when set, names the workspace file whose bytes the
	// artifact takes.
	WorkspacePath string
	// URI, when set, makes a URI artifact: a reference, with no bytes.
	// Its scheme must be one the agent may produce.
	URI string
}

// readOnly refuses what would change the task from a download handler:
// serving a download changes nothing (EMETHOD).
func (c *Call) readOnly(what string) error {
	if c.handler == HandlerDownload {
		return Errorf(EMETHOD, "the download handler cannot %s: serving a download changes nothing", what)
	}
	return nil
}

// CreateArtifact stages a new artifact with the given bytes, or those of
// the workspace file spec.WorkspacePath, or a URI artifact, and returns
// its id. It is recorded, linked to the step being executed, only if the
// handler succeeds.
func (c *Call) CreateArtifact(ctx context.Context, spec ArtifactSpec, data []byte) (string, error) {
	if err := c.readOnly("create artifacts"); err != nil {
		return "", err
	}
	var uri string
	if spec.URI != "" {
		var scheme string
		var err error
		if uri, scheme, err = CleanURI(spec.URI); err != nil {
			return "", err
		}
		if out := c.build.schemes.Output; !accepts(out, scheme) {
			return "", Errorf(EMETHOD, "the agent may not produce %s URIs (its output schemes: %s; a manifest may list more)", scheme, schemeList(out))
		}
		if spec.WorkspacePath != "" || len(data) != 0 {
			return "", Errorf(EUNPROCESSABLE, "a URI artifact has no bytes: give no data or workspace_path with a uri")
		}
		if spec.FileName == "" {
			spec.FileName = uriFileName(uri)
		}
	} else if out := c.build.schemes.Output; !accepts(out, SchemeFile) {
		return "", Errorf(EMETHOD, "the agent may produce only URIs (its output schemes: %s)", schemeList(out))
	}
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
	switch {
	case uri != "":
	case spec.WorkspacePath != "":
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
	default:
		if err := c.checkArtifactSize(int64(len(data))); err != nil {
			return "", err
		}
		if blob, err = c.staging.StageArtifact(ctx, id); err != nil {
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
		URI:          uri,
		TaskID:       c.task.TaskID,
		CreatedAt:    time.Now(),
	}
	if blob != nil {
		sum, err := blob.SHA256()
		if err != nil {
			blob.Discard()
			return "", err
		}
		a.Size, a.SHA256 = blob.Size(), sum
		c.blobs = append(c.blobs, blob)
	}
	if c.step != nil {
		a.StepID = c.step.StepID
	}
	c.artifacts = append(c.artifacts, a)
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

// BeforeEffect is called before the handler does what outlasts its call:
// a workspace write or removal, an outbound request. A step's call marks
// the step running first (runningMark), so that a process that dies
// after the effect leaves the step to be marked failed; an error (the
// mark could not be written) refuses the effect.
func (c *Call) BeforeEffect(ctx context.Context) error {
	if c.mark == nil {
		return nil
	}
	return c.mark.write()
}

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
	if err := c.readOnly("write to the workspace"); err != nil {
		return err
	}
	file, err := CleanFilePath(name)
	if err != nil {
		return err
	}
	if err := c.BeforeEffect(ctx); err != nil {
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
	if err := c.readOnly("delete workspace files"); err != nil {
		return err
	}
	file, err := CleanFilePath(name)
	if err != nil {
		return err
	}
	if err := c.BeforeEffect(ctx); err != nil {
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
func (r *DownloadResult) failure() string { return r.Error }

// finish reads the result of a call whose handler returned code, with
// decode (one of the codec's). A handler that set no result returns an
// empty one. A handler fails (a *PluginFailure) when its last result was
// refused, cannot be decoded, carries an error message, or it returned a
// code other than 0.
func finish[R any, P interface {
	*R
	result
}](c *Call, code int32, decode func([]byte) (P, error)) (P, error) {
	c.flushOutput()
	if c.resultErr != nil {
		return nil, NewPluginFailure(CauseBadResult, "its %s", ErrorMessage(c.resultErr))
	}
	res := P(new(R))
	if c.hasResult {
		r, err := decode(c.result)
		if err != nil {
			return nil, badResult(err)
		}
		res = r
	}
	switch {
	case res.failure() != "":
		return nil, NewPluginFailure(CauseHandlerError, "%s", res.failure()) // cut by handlerError
	case code != 0:
		return nil, NewPluginFailure(CauseReturnCode, "it returned code %d", code)
	}
	return res, nil
}

// badResult is the failure of a plugin whose result the codec could not
// decode, err saying why: an *Error's message is the client's as it is;
// another error's is quoted.
func badResult(err error) *PluginFailure {
	if f, ok := errors.AsType[*PluginFailure](err); ok {
		return f
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return NewPluginFailure(CauseBadResult, "%s", e.Message)
	}
	return NewPluginFailure(CauseBadResult, "its result is not valid: %v", err)
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

// DownloadWriter is where a download handler's bytes go: the answer to
// the client; httpapi implements it.
type DownloadWriter interface {
	// WriteDownload writes the next bytes of the download of artifact a,
	// and returns by ctx's deadline. An error means the client will not
	// take them (it went away, or took them too slowly): the download
	// cannot go on.
	WriteDownload(ctx context.Context, a *Artifact, p []byte) (int, error)
}

// DownloadWrite writes the next bytes of the download the download
// handler serves, straight from p (the plugin's memory: nothing is copied
// or held). The download may hold at most the artifact limit: past it,
// ETOOLARGE before anything is written. Once the client took no more
// (EABORTED), every later write fails the same way.
func (c *Call) DownloadWrite(ctx context.Context, p []byte) error {
	if c.handler != HandlerDownload || c.download == nil {
		return Errorf(EMETHOD, "only the download handler writes a download")
	}
	if c.downloadErr != nil {
		return c.downloadErr
	}
	if max := c.build.Limits.MaxArtifactBytes; int64(len(p)) > max-c.downloaded {
		return Errorf(ETOOLARGE, "the download would hold more than %d bytes, the limit of an artifact the agent makes", max)
	}
	n, err := c.download.WriteDownload(ctx, c.artifact, p)
	c.downloaded += int64(n)
	if err != nil {
		c.downloadErr = Errorf(EABORTED, "the client is not taking the download (it went away, or took it too slowly) after %d bytes", c.downloaded)
		return c.downloadErr
	}
	return nil
}
