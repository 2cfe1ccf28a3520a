package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/plugins/abi"
)

// Call is the state of one handler call: the input the plugin reads, the
// result it sets, its log, and the artifacts it creates. The host API
// (package hostapi) acts on it; a Call is used by one goroutine at a time.
type Call struct {
	agent   *Agent
	handler string
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
	// held is how many artifacts the task held when the call began,
	// counting the upload an artifact handler is handling.
	held int

	// usage is the workspace's size, loaded at the first write or delete
	// and kept up to date by them (the task is locked during the call).
	usage *workspaceUsage
}

type workspaceUsage struct {
	bytes int64
	files int
}

func (a *Agent) newCall(handler string, t *Task, s *Step, req *abi.Request, upload *Artifact) *Call {
	in := abi.Input{ABI: abi.Version, Handler: handler, Task: taskView(t), Request: req}
	if upload != nil {
		v := artifactView(upload)
		in.Artifact = &v
	}
	if s != nil {
		in.Step = &abi.Step{
			StepID:          s.StepID,
			Name:            s.Name,
			Input:           s.Input,
			AdditionalInput: s.AdditionalInput,
			Planned:         s.Planned,
		}
	}
	input, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("encode handler input: %v", err)) // all fields are JSON-safe
	}
	c := &Call{agent: a, handler: handler, task: t, step: s, input: input, artifacts: []Artifact{}, held: len(t.Artifacts)}
	if upload != nil {
		c.held++
	}
	c.stdout = lineWriter{call: c, level: "stdout"}
	c.stderr = lineWriter{call: c, level: "stderr"}
	return c
}

func taskView(t *Task) abi.Task {
	v := abi.Task{TaskID: t.TaskID, Input: t.Input, AdditionalInput: t.AdditionalInput, Artifacts: []abi.Artifact{}}
	for _, a := range t.Artifacts {
		v.Artifacts = append(v.Artifacts, artifactView(&a))
	}
	return v
}

func artifactView(a *Artifact) abi.Artifact {
	return abi.Artifact{
		ArtifactID:    a.ArtifactID,
		AgentCreated:  a.AgentCreated,
		FileName:      a.FileName,
		RelativePath:  a.RelativePath,
		WorkspacePath: a.WorkspacePath(),
	}
}

// Handler is the handler being called (abi.HandlerTask, ...).
func (c *Call) Handler() string { return c.handler }

// Input is the message the handler reads (abi.Input as JSON).
func (c *Call) Input() []byte { return c.input }

// SetResult keeps the handler's result message, replacing an earlier one.
func (c *Call) SetResult(b []byte) error {
	if max := c.agent.limits.MaxResultBytes; len(b) > max {
		c.resultErr = Errorf(ETOOLARGE, "result of %d bytes is over the limit of %d bytes", len(b), max)
		return c.resultErr
	}
	c.result = append(c.result[:0], b...)
	c.hasResult, c.resultErr = true, nil
	return nil
}

// Log keeps one log line of the given level (abi.LevelDebug...). Past the
// call's log limit, lines are dropped and ETOOLARGE returned; the log then
// ends with a line saying so.
func (c *Call) Log(level int32, message string) error {
	name := abi.LevelName(level)
	if name == "" {
		return Errorf(EUNPROCESSABLE, "unknown log level %d", level)
	}
	return c.addLog(name, message)
}

func (c *Call) addLog(level, message string) error {
	if c.logFull {
		return Errorf(ETOOLARGE, "the log limit of %d bytes was reached", c.agent.limits.MaxLogBytes)
	}
	if !utf8.ValidString(message) {
		message = strings.ToValidUTF8(message, "\uFFFD")
	}
	if c.logBytes+len(message) > c.agent.limits.MaxLogBytes {
		c.logFull = true
		c.logs = append(c.logs, LogRecord{Time: time.Now(), Level: "warn",
			Message: fmt.Sprintf("log limit of %d bytes reached; later lines dropped", c.agent.limits.MaxLogBytes)})
		return Errorf(ETOOLARGE, "the log limit of %d bytes was reached", c.agent.limits.MaxLogBytes)
	}
	c.logBytes += len(message)
	c.logs = append(c.logs, LogRecord{Time: time.Now(), Level: level, Message: message})
	return nil
}

// Stdout and Stderr receive what the plugin writes to its standard output
// and error; each line becomes a log record of level "stdout" or "stderr".
func (c *Call) Stdout() io.Writer { return &c.stdout }

// Stderr: see Stdout.
func (c *Call) Stderr() io.Writer { return &c.stderr }

// CreateArtifact stages a new artifact with the given bytes and returns its
// id. It is recorded, linked to the step being executed, only if the
// handler succeeds.
func (c *Call) CreateArtifact(meta abi.ArtifactMeta, data []byte) (string, error) {
	name, err := CleanFileName(meta.FileName)
	if err != nil {
		return "", err
	} else if name != meta.FileName {
		return "", Errorf(EBADPATH, "file name %q is not a plain name; put directories in relative_path", meta.FileName)
	}
	dir, err := CleanDir(meta.RelativePath)
	if err != nil {
		return "", err
	}
	if max := c.agent.limits.MaxCallArtifacts; len(c.artifacts) >= max {
		return "", Errorf(ETOOLARGE, "a call may create at most %d artifacts", max)
	}
	if max := c.agent.limits.MaxTaskArtifacts; max > 0 && c.held+len(c.artifacts) >= max {
		return "", tooManyArtifacts(c.held+len(c.artifacts), max)
	}
	max := c.agent.limits.MaxArtifactBytes
	id := newID()
	var blob Blob
	if meta.WorkspacePath != "" {
		file, err := CleanFilePath(meta.WorkspacePath)
		if err != nil {
			return "", err
		}
		if len(data) != 0 {
			return "", Errorf(EUNPROCESSABLE, "give either data or workspace_path, not both")
		}
		if blob, err = c.agent.store.StageArtifactFromFile(c.task.TaskID, file, id); err != nil {
			return "", err
		}
		if blob.Size() > max {
			blob.Discard()
			return "", Errorf(ETOOLARGE, "artifact of %d bytes is over the limit of %d bytes", blob.Size(), max)
		}
	} else {
		if int64(len(data)) > max {
			return "", Errorf(ETOOLARGE, "artifact of %d bytes is over the limit of %d bytes", len(data), max)
		}
		if blob, err = c.agent.store.StageArtifact(id); err != nil {
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
	return id, nil
}

// Config is the operator's settings for the plugin, a JSON object of
// strings.
func (c *Call) Config() []byte { return c.agent.pluginConfig }

// WorkspaceRead returns the bytes of a file of the task's workspace.
func (c *Call) WorkspaceRead(name string) ([]byte, error) {
	file, err := CleanFilePath(name)
	if err != nil {
		return nil, err
	}
	return c.agent.store.ReadFile(c.task.TaskID, file, c.agent.limits.MaxWorkspaceBytes)
}

// WorkspaceWrite creates or replaces a file of the task's workspace, within
// the workspace's quota.
func (c *Call) WorkspaceWrite(name string, data []byte) error {
	file, u, err := c.fileToChange(name)
	if err != nil {
		return err
	}
	bytes, files := u.bytes+int64(len(data)), u.files+1
	if old, err := c.agent.store.StatFile(c.task.TaskID, file); err == nil {
		bytes, files = bytes-old.Size, files-1
	} else if ErrorCode(err) != ENOTFOUND {
		return err
	}
	if err := c.agent.limits.checkWorkspace(bytes, files); err != nil {
		return err
	}
	if err := c.agent.store.WriteFile(c.task.TaskID, file, data); err != nil {
		return err
	}
	u.bytes, u.files = bytes, files
	return nil
}

// WorkspaceStat describes a file of the task's workspace.
func (c *Call) WorkspaceStat(name string) (FileInfo, error) {
	file, err := CleanFilePath(name)
	if err != nil {
		return FileInfo{}, err
	}
	return c.agent.store.StatFile(c.task.TaskID, file)
}

// WorkspaceDelete removes a file of the task's workspace.
func (c *Call) WorkspaceDelete(name string) error {
	file, u, err := c.fileToChange(name)
	if err != nil {
		return err
	}
	old, err := c.agent.store.StatFile(c.task.TaskID, file)
	if err != nil {
		return err
	}
	if err := c.agent.store.RemoveFile(c.task.TaskID, file); err != nil {
		return err
	}
	u.bytes, u.files = u.bytes-old.Size, u.files-1
	return nil
}

// WorkspaceList lists the files of the task's workspace whose path starts
// with prefix.
func (c *Call) WorkspaceList(prefix string) ([]FileInfo, error) {
	if err := checkChars(prefix); err != nil {
		return nil, err
	}
	if len(prefix) > MaxPathBytes {
		return nil, Errorf(EBADPATH, "prefix is longer than %d bytes", MaxPathBytes)
	}
	return c.agent.store.ListFiles(c.task.TaskID, prefix)
}

// fileToChange cleans the path of a workspace file about to be written or
// deleted and returns it with the workspace's usage, for the quota.
func (c *Call) fileToChange(name string) (string, *workspaceUsage, error) {
	file, err := CleanFilePath(name)
	if err != nil {
		return "", nil, err
	}
	u, err := c.workspaceUsage()
	return file, u, err
}

func (c *Call) workspaceUsage() (*workspaceUsage, error) {
	if c.usage == nil {
		bytes, files, err := c.agent.store.WorkspaceUsage(c.task.TaskID)
		if err != nil {
			return nil, err
		}
		c.usage = &workspaceUsage{bytes: bytes, files: files}
	}
	return c.usage, nil
}

// decodeResult reads the handler's result into v after the handler
// returned code. A failing handler's message is read into *errMsg.
func (c *Call) decodeResult(code int32, v any, errMsg *string) error {
	c.flushOutput()
	if c.resultErr != nil {
		return Errorf(EPLUGIN, "its %s", ErrorMessage(c.resultErr))
	}
	if c.hasResult {
		dec := json.NewDecoder(bytes.NewReader(c.result))
		if err := dec.Decode(v); err != nil {
			return Errorf(EPLUGIN, "its result is not valid: %v", err)
		}
		if dec.More() {
			return Errorf(EPLUGIN, "its result has data after the JSON value")
		}
	}
	switch {
	case *errMsg != "":
		return Errorf(EPLUGIN, "%s", *errMsg)
	case code != 0:
		return Errorf(EPLUGIN, "it returned code %d", code)
	}
	return nil
}

// flushOutput logs what the plugin printed without a final newline.
func (c *Call) flushOutput() {
	c.stdout.flush()
	c.stderr.flush()
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

// lineWriter turns a byte stream into log records, one per line.
type lineWriter struct {
	call    *Call
	level   string
	partial []byte
	wrote   bool
}

// maxLine caps a line held while waiting for its newline.
const maxLine = 4096

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	w.wrote = w.wrote || n > 0
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLine - len(w.partial)
			if len(p) <= room {
				w.partial = append(w.partial, p...)
				break
			}
			w.partial = append(w.partial, p[:room]...)
			p = p[room:]
			w.flush()
			continue
		}
		w.partial = append(w.partial, p[:i]...)
		p = p[i+1:]
		w.flush()
	}
	// Writes never fail: a plugin printing past its log limit loses the
	// lines, not its step.
	return n, nil
}

func (w *lineWriter) flush() {
	if len(w.partial) == 0 {
		return
	}
	w.call.addLog(w.level, string(w.partial))
	w.partial = w.partial[:0]
}
