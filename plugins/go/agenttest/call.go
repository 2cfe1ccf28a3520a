package agenttest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
)

// A call is one handler call: it answers the kit's host functions over its
// task, as agentrt's host does (plugins/ABI.md), and keeps what the call
// logged and created until the caller records it.

// file is a workspace file.
type file struct {
	data    []byte
	modTime time.Time
}

// calls serializes handler calls: the kit has one host at a time.
var calls sync.Mutex

type call struct {
	task    *Task
	handler string // abi.HandlerStep, ...
	stepID  string
	input   []byte

	res       []byte
	hasResult bool
	lastErr   string
	logs      []Log
	artifacts []Artifact
	// progress are the step handler's reports; logBytes is what the logs
	// and reports count against the log limit, and logFull is set once a
	// line did not fit (progress.go).
	progress []Progress
	logBytes int
	logFull  bool
	// download is set for the download handler's call, which changes
	// nothing; downloaded is what it wrote.
	download   bool
	downloaded []byte
	// resp is the last outbound response (http.go); requests counts the
	// call's outbound requests, each redirect followed one.
	resp     *sentResponse
	requests int
}

func (t *Task) call(in abi.Input, stepID string) *call {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("agenttest: encode a handler's input: %v", err)) // abi.Input always marshals
	}
	return &call{task: t, handler: in.Handler, stepID: stepID, input: b}
}

// run calls export with c as the kit's host.
func (c *call) run(export func() int32) int32 {
	calls.Lock()
	defer calls.Unlock()
	k, _ := kit()
	k.Use(c)
	defer k.Use(nil)
	return export()
}

// result decodes the handler's result into res, and returns why the call
// failed, "" when it did not: the result's error, a result that does not
// decode, or a code other than 0.
func (c *call) result(code int32, res any) string {
	if c.hasResult {
		if why := readResult(c.res, res); why != "" {
			return "its result is not valid: " + why
		}
		var e struct{ Error string }
		json.Unmarshal(c.res, &e)
		if e.Error != "" {
			return e.Error
		}
	}
	if code != 0 {
		return fmt.Sprintf("it returned code %d", code)
	}
	return ""
}

// fail leaves msg for last_error and returns code.
func (c *call) fail(code int32, format string, args ...any) int32 {
	c.lastErr = fmt.Sprintf(format, args...)
	return code
}

// sized answers a sized read: data is copied into buf when it fits, and
// its length returned either way.
func sized(buf, data []byte) int32 {
	if len(data) <= len(buf) {
		copy(buf, data)
	}
	return int32(len(data))
}

func (c *call) Input(buf []byte) int32 { return sized(buf, c.input) }

func (c *call) SetResult(result []byte) int32 {
	if !json.Valid(result) {
		return c.fail(abi.ErrInvalid, "result is not valid JSON")
	}
	c.res, c.hasResult = append([]byte(nil), result...), true
	return 0
}

func (c *call) LastError(buf []byte) int32 { return sized(buf, []byte(c.lastErr)) }

// readOnly refuses a change from the download handler, as agentrt does.
func (c *call) readOnly() (int32, bool) {
	if c.download {
		return c.fail(abi.ErrNotAllowed, "the download handler cannot change the task: serving a download changes nothing"), true
	}
	return 0, false
}

func (c *call) DownloadWrite(data []byte) int32 {
	if !c.download {
		return c.fail(abi.ErrNotAllowed, "only the download handler writes a download")
	}
	c.downloaded = append(c.downloaded, data...)
	return 0
}

func (c *call) ArtifactCreate(meta, data, idOut []byte) int32 {
	if code, refused := c.readOnly(); refused {
		return code
	}
	var m abi.ArtifactMeta
	if len(meta) > abi.MaxArtifactMetaBytes {
		return c.fail(abi.ErrInvalid, "meta of %d bytes is over the limit of %d bytes", len(meta), abi.MaxArtifactMetaBytes)
	}
	if err := json.Unmarshal(meta, &m); err != nil {
		return c.fail(abi.ErrInvalid, "meta is not a JSON object: %v", err)
	}
	if m.URI != "" {
		if len(data) != 0 || m.WorkspacePath != "" {
			return c.fail(abi.ErrInvalid, "a URI artifact has no bytes: give no data or workspace_path with a uri")
		}
		if m.FileName == "" {
			m.FileName = uriFileName(m.URI)
		}
	}
	name, dir, err := cleanArtifactName(m.FileName, m.RelativePath)
	if err != nil {
		return c.fail(abi.ErrBadPath, "%v", err)
	}
	if m.WorkspacePath != "" {
		if len(data) != 0 {
			return c.fail(abi.ErrInvalid, "give either data or workspace_path, not both")
		}
		p, err := cleanFilePath(m.WorkspacePath)
		if err != nil {
			return c.fail(abi.ErrBadPath, "%v", err)
		}
		f, ok := c.task.files[p]
		if !ok {
			return c.fail(abi.ErrNotFound, "no file %q in the task's workspace", p)
		}
		data = f.data
	}
	a := Artifact{ID: c.task.newID(), AgentCreated: true, FileName: name, RelativePath: dir, StepID: c.stepID,
		Data: append([]byte(nil), data...), URI: m.URI}
	c.artifacts = append(c.artifacts, a)
	copy(idOut, a.ID)
	return 0
}

func (c *call) Config(buf []byte) int32 {
	b, _ := json.Marshal(c.task.host.Config)
	if c.task.host.Config == nil {
		b = []byte("{}")
	}
	return sized(buf, b)
}

func (c *call) WorkspaceRead(path, buf []byte) int32 {
	p, err := cleanFilePath(string(path))
	if err != nil {
		return c.fail(abi.ErrBadPath, "%v", err)
	}
	f, ok := c.task.files[p]
	if !ok {
		return c.fail(abi.ErrNotFound, "no file %q in the task's workspace", p)
	}
	return sized(buf, f.data)
}

func (c *call) WorkspaceWrite(path, data []byte) int32 {
	if code, refused := c.readOnly(); refused {
		return code
	}
	p, err := cleanFilePath(string(path))
	if err != nil {
		return c.fail(abi.ErrBadPath, "%v", err)
	}
	if err := c.task.checkWrite(p); err != nil {
		return c.fail(abi.ErrBadPath, "%v", err)
	}
	c.task.files[p] = file{data: append([]byte(nil), data...), modTime: time.Now()}
	return 0
}

func (c *call) WorkspaceList(prefix, buf []byte) int32 {
	infos := []abi.FileInfo{}
	for p, f := range c.task.files {
		if strings.HasPrefix(p, string(prefix)) {
			infos = append(infos, info(p, f))
		}
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Path < infos[j].Path })
	b, _ := json.Marshal(infos)
	return sized(buf, b)
}

func (c *call) WorkspaceStat(path, buf []byte) int32 {
	p, err := cleanFilePath(string(path))
	if err != nil {
		return c.fail(abi.ErrBadPath, "%v", err)
	}
	f, ok := c.task.files[p]
	if !ok {
		return c.fail(abi.ErrNotFound, "no file %q in the task's workspace", p)
	}
	b, _ := json.Marshal(info(p, f))
	return sized(buf, b)
}

func (c *call) WorkspaceDelete(path []byte) int32 {
	if code, refused := c.readOnly(); refused {
		return code
	}
	p, err := cleanFilePath(string(path))
	if err != nil {
		return c.fail(abi.ErrBadPath, "%v", err)
	}
	if _, ok := c.task.files[p]; !ok {
		return c.fail(abi.ErrNotFound, "no file %q in the task's workspace", p)
	}
	delete(c.task.files, p)
	return 0
}

func info(path string, f file) abi.FileInfo {
	return abi.FileInfo{Path: path, Size: int64(len(f.data)), ModTime: f.modTime.UnixMilli()}
}
