package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
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
	// held and heldBytes are how many artifacts the task held when the
	// call began, and their bytes, counting the upload an artifact handler
	// is handling; createdBytes are the bytes of the call's artifacts.
	held         int
	heldBytes    int64
	createdBytes int64

	// usage is the workspace's size, loaded at the first write or delete
	// and kept up to date by them (the task is locked during the call).
	usage *workspaceUsage
}

type workspaceUsage struct {
	bytes   int64
	entries int
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
	for _, art := range t.Artifacts {
		c.heldBytes += art.Size
	}
	if upload != nil {
		c.held++
		c.heldBytes += upload.Size
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
// It must be one JSON value agentrt can store and serve (checkJSON: UTF-8,
// no lone surrogates, nested at most MaxJSONDepth deep), within the result
// limit; otherwise it is refused and, unless a later one replaces it, the
// call fails.
func (c *Call) SetResult(b []byte) error {
	if max := c.agent.limits.MaxResultBytes; len(b) > max {
		c.resultErr = Errorf(ETOOLARGE, "result of %d bytes is over the limit of %d bytes", len(b), max)
		return c.resultErr
	}
	if err := checkJSON(b, MaxJSONDepth); err != nil {
		c.resultErr = Errorf(EUNPROCESSABLE, "result is not valid JSON: %v", err)
		return c.resultErr
	}
	c.result = append(c.result[:0], b...)
	c.hasResult, c.resultErr = true, nil
	return nil
}

// Log keeps one log line of the given level (abi.LevelDebug...). message
// may be the plugin's memory: it is checked against the call's log limit
// before anything is copied, and kept as UTF-8 (invalid bytes become
// U+FFFD). Past the limit, lines are dropped and ETOOLARGE returned; the
// log then ends with a line saying so.
func (c *Call) Log(level int32, message []byte) error {
	name := abi.LevelName(level)
	if name == "" {
		return Errorf(EUNPROCESSABLE, "unknown log level %d", level)
	}
	return c.addLog(name, message)
}

// addLog counts a record as LogRecordSize does: as it is stored, and
// with an overhead so that empty records are not free.
func (c *Call) addLog(level string, message []byte) error {
	max := c.agent.limits.MaxLogBytes
	if c.logFull {
		return Errorf(ETOOLARGE, "the log limit of %d bytes was reached", max)
	}
	size := LogRecordSize(message)
	if c.logBytes+size > max {
		c.logFull = true
		c.logs = append(c.logs, LogRecord{Time: time.Now(), Level: "warn",
			Message: fmt.Sprintf("log limit of %d bytes reached; later lines dropped", max)})
		return Errorf(ETOOLARGE, "the log limit of %d bytes was reached", max)
	}
	c.logBytes += size
	if !utf8.Valid(message) {
		message = bytes.ToValidUTF8(message, []byte("\uFFFD"))
	}
	c.logs = append(c.logs, LogRecord{Time: time.Now(), Level: level, Message: string(message)})
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
	if err := c.agent.limits.checkArtifactCount(c.held + len(c.artifacts)); err != nil {
		return "", err
	}
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
		// A hard link: no bytes are written before the size is known.
		if blob, err = c.agent.store.StageArtifactFromFile(c.task.TaskID, file, id); err != nil {
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
	c.createdBytes += a.Size
	return id, nil
}

// checkArtifactSize refuses a new artifact over the artifact limit, or
// that would put the task's artifacts over their byte quota.
func (c *Call) checkArtifactSize(size int64) error {
	l := &c.agent.limits
	if size > l.MaxArtifactBytes {
		return Errorf(ETOOLARGE, "artifact of %d bytes is over the limit of %d bytes", size, l.MaxArtifactBytes)
	}
	return l.checkArtifactBytes(c.heldBytes + c.createdBytes + size)
}

// Config is the operator's settings for the plugin, a JSON object of
// strings.
func (c *Call) Config() []byte { return c.agent.pluginConfig }

// WorkspaceReadInto reads a file of the task's workspace into buf (the
// plugin's memory) when it fits, and returns the file's size either way.
func (c *Call) WorkspaceReadInto(name string, buf []byte) (int64, error) {
	file, err := CleanFilePath(name)
	if err != nil {
		return 0, err
	}
	return c.agent.store.ReadFileInto(c.task.TaskID, file, buf)
}

// WorkspaceWrite creates or replaces a file of the task's workspace, within
// the workspace's quota of bytes and entries (the file, and each directory
// the write makes).
func (c *Call) WorkspaceWrite(name string, data []byte) error {
	file, u, err := c.fileToChange(name)
	if err != nil {
		return err
	}
	st, err := c.agent.store.PathState(c.task.TaskID, file)
	if err != nil {
		return err
	}
	bytes, entries := u.bytes+int64(len(data)), u.entries
	if st.Exists {
		bytes -= st.Size
	} else {
		entries += 1 + st.MissingDirs
	}
	if err := c.agent.limits.checkWorkspace(bytes, entries); err != nil {
		return err
	}
	if err := c.agent.store.WriteFile(c.task.TaskID, file, data); err != nil {
		c.usage = nil // it may have made directories: count again at the next change
		return err
	}
	u.bytes, u.entries = bytes, entries
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
	removedDirs, err := c.agent.store.RemoveFile(c.task.TaskID, file)
	if err != nil {
		c.usage = nil // count again at the next change
		return err
	}
	u.bytes, u.entries = u.bytes-old.Size, u.entries-1-removedDirs
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
		bytes, entries, err := c.agent.store.WorkspaceUsage(c.task.TaskID)
		if err != nil {
			return nil, err
		}
		c.usage = &workspaceUsage{bytes: bytes, entries: entries}
	}
	return c.usage, nil
}

// decodeResult reads the handler's result with decode after the handler
// returned code. A failing handler's message is read into *errMsg by
// decode.
func (c *Call) decodeResult(code int32, decode func([]byte) error, errMsg *string) error {
	c.flushOutput()
	if c.resultErr != nil {
		return Errorf(EPLUGIN, "its %s", ErrorMessage(c.resultErr))
	}
	if c.hasResult {
		if err := decode(c.result); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return err
			}
			return Errorf(EPLUGIN, "its result is not valid: %v", err)
		}
	}
	switch {
	case *errMsg != "":
		return Errorf(EPLUGIN, "%s", *errMsg) // cut by handlerError
	case code != 0:
		return Errorf(EPLUGIN, "it returned code %d", code)
	}
	return nil
}

// decodeInto returns a decode function for decodeResult that reads a
// result object into v.
func decodeInto(v any) func([]byte) error {
	return func(b []byte) error {
		if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
			return errors.New("it is not a JSON object")
		}
		return json.Unmarshal(b, v)
	}
}

// decodeTaskResult returns a decode function for decodeResult that reads
// a task handler's result into res, refusing more than max planned steps
// before decoding them: a result of 1 MiB can list 350,000 empty steps,
// and each costs the host far more than its bytes.
func decodeTaskResult(res *abi.TaskResult, max int) func([]byte) error {
	return func(b []byte) error {
		dec := json.NewDecoder(bytes.NewReader(b))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return errors.New("it is not a JSON object")
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			// Keys match as encoding/json matches them, ignoring case,
			// so that every handler's result reads the same way.
			switch {
			case strings.EqualFold(key, "steps"):
				res.Steps = nil
				if tok, err = dec.Token(); err != nil {
					return err
				} else if tok == nil {
					continue // null
				} else if tok != json.Delim('[') {
					return errors.New(`"steps" is not an array`)
				}
				for dec.More() {
					if len(res.Steps) == max {
						return Errorf(EPLUGIN, "it planned more than %d steps, the most a task may have planned", max)
					}
					var ps abi.PlannedStep
					if err := dec.Decode(&ps); err != nil {
						return err
					}
					res.Steps = append(res.Steps, ps)
				}
				if _, err := dec.Token(); err != nil { // ]
					return err
				}
			case strings.EqualFold(key, "error"):
				var msg *string
				if err := dec.Decode(&msg); err != nil {
					return err
				}
				res.Error = ""
				if msg != nil {
					res.Error = *msg
				}
			default:
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return err
				}
			}
		}
		_, err := dec.Token() // }
		return err
	}
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
	w.call.addLog(w.level, w.partial)
	w.partial = w.partial[:0]
}
