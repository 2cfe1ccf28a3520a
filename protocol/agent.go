package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/google/uuid"
)

// Store is the persistence an Agent needs; storage.Store implements it.
// Every method that records something returns only once it is on disk.
type Store interface {
	CreateTask(ctx context.Context, t *Task, planned []Step, artifacts []Artifact) error
	GetTask(ctx context.Context, taskID string) (*Task, error)
	ListTasks(ctx context.Context, p Page) ([]Task, int, error)
	TaskLogs(ctx context.Context, taskID string) ([]LogRecord, error)

	NextPlannedStep(ctx context.Context, taskID string) (*Step, error)
	SaveStep(ctx context.Context, s *Step, artifacts []Artifact) error
	GetStep(ctx context.Context, taskID, stepID string) (*Step, error)
	ListSteps(ctx context.Context, taskID string, p Page) ([]Step, int, error)
	StepLogs(ctx context.Context, taskID, stepID string) ([]LogRecord, error)

	StageArtifact(artifactID string) (Blob, error)
	StageArtifactFromFile(taskID, name, artifactID string) (Blob, error)
	AddArtifacts(ctx context.Context, taskID string, artifacts []Artifact, log TaskLog, pluginTime time.Duration) error
	GetArtifact(ctx context.Context, taskID, artifactID string) (*Artifact, error)
	ListArtifacts(ctx context.Context, taskID string, p Page) ([]Artifact, int, error)
	OpenArtifact(a *Artifact) (*os.File, error)

	ReadFileInto(taskID, name string, buf []byte) (size int64, err error)
	WriteFile(taskID, name string, data []byte) error
	StatFile(taskID, name string) (FileInfo, error)
	PathState(taskID, name string) (PathState, error)
	RemoveFile(taskID, name string) (removedDirs int, err error)
	ListFiles(taskID, prefix string) ([]FileInfo, error)
	WorkspaceUsage(taskID string) (bytes int64, entries int, err error)
	RemoveWorkspace(taskID string) error
	PlaceUpload(taskID, name, artifactID string) (Placement, error)
	// CheckSpace is EINSUFFICIENT when the disk is at the floor it keeps
	// free: nothing new can be recorded.
	CheckSpace() error
}

// Placement is an upload put into its task's workspace before the artifact
// is recorded. Exactly one of Commit and Rollback is called.
type Placement interface {
	// Commit keeps the file: the artifact was recorded.
	Commit()
	// Rollback removes the file and restores what the path held before,
	// or, where the artifact handler put something else there, keeps the
	// replaced file aside. An error means the rollback is left for the
	// next start; nothing is lost.
	Rollback() error
}

// Blob is the bytes of a new artifact on their way to disk. They become
// visible only when the artifact is recorded.
type Blob interface {
	io.Writer
	// Size is the number of bytes written.
	Size() int64
	// Close syncs the bytes to disk.
	Close() error
	// Discard removes the bytes of an artifact that will not be recorded.
	Discard()
}

// Plugin runs the agent's handlers; runtime.Plugin implements it (through
// a small adapter in cmd/agentrt that connects the host API).
type Plugin interface {
	// HasHandler reports whether the plugin defines a handler
	// (abi.HandlerTask, abi.HandlerStep, abi.HandlerArtifact).
	HasHandler(handler string) bool
	// Run runs the handler in a fresh instance whose host functions act on
	// call, and returns the handler's return code and how long the plugin
	// ran. An error is a *Error: EPLUGIN or ETIMEOUT when the plugin failed
	// (trap, timeout, exit, limit), naming the cause; EUNAVAILABLE when it
	// could not run.
	Run(ctx context.Context, handler string, call *Call) (int32, time.Duration, error)
}

// Limits bound what one plugin call may produce, and what one task may
// hold. docs/SECURITY.md gives each with its flag and the test that holds
// it.
type Limits struct {
	MaxResultBytes int // the handler's result message
	// MaxLogBytes bounds one call's log: log lines, stdout and stderr, each
	// record counted as LogRecordSize counts it (as stored, plus 64 bytes).
	MaxLogBytes int
	// MaxTaskLogBytes bounds a task's log (its task handler's and artifact
	// handlers' records, counted as MaxLogBytes counts them); 0 for no limit.
	MaxTaskLogBytes  int64
	MaxArtifactBytes int64 // one artifact a plugin creates
	MaxCallArtifacts int   // artifacts one call may create
	MaxTaskArtifacts int   // artifacts one task may hold, uploaded and created; 0 for no limit
	// MaxTaskArtifactBytes bounds the bytes of all of a task's artifacts,
	// uploaded and created; 0 for no limit.
	MaxTaskArtifactBytes int64
	MaxUploadBytes       int64 // one uploaded file
	MaxWorkspaceBytes    int64 // all files of one task's workspace
	// MaxWorkspaceFiles bounds the entries of one task's workspace: files
	// and directories alike.
	MaxWorkspaceFiles int
	// MaxPlannedSteps bounds the steps a task handler may plan.
	MaxPlannedSteps int
	// MaxTaskSteps bounds the steps one task may hold, planned ones
	// included; 0 for no limit.
	MaxTaskSteps int
	// MaxTaskTime is the wall-clock time all handler calls of one task may
	// use together; 0 for no limit.
	MaxTaskTime time.Duration
}

// DefaultLimits are the limits used where none are configured.
var DefaultLimits = Limits{
	MaxResultBytes:       1 << 20,
	MaxLogBytes:          64 << 10,
	MaxTaskLogBytes:      4 << 20,
	MaxArtifactBytes:     64 << 20,
	MaxCallArtifacts:     64,
	MaxTaskArtifacts:     10000,
	MaxTaskArtifactBytes: 1 << 30,
	MaxUploadBytes:       256 << 20,
	MaxWorkspaceBytes:    512 << 20,
	MaxWorkspaceFiles:    10000,
	MaxPlannedSteps:      256,
	MaxTaskSteps:         10000,
	MaxTaskTime:          time.Hour,
}

// AgentConfig configures an Agent.
type AgentConfig struct {
	Limits Limits
	// PluginConfig is the operator's settings the plugin reads with the
	// host API's config function. Not for secrets: plugins log freely.
	PluginConfig map[string]string
	Log          *slog.Logger
}

// Agent is the Agent Protocol's behaviour over a Store and a Plugin: it
// creates tasks, executes steps through the plugin and records everything.
// Steps of one task run one at a time; different tasks run concurrently.
type Agent struct {
	store        Store
	plugin       Plugin
	limits       Limits
	pluginConfig []byte // JSON
	log          *slog.Logger
	locks        taskLocks
}

// NewAgent returns an Agent serving plugin's agent from store.
func NewAgent(store Store, plugin Plugin, cfg AgentConfig) *Agent {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.PluginConfig == nil {
		cfg.PluginConfig = map[string]string{}
	}
	conf, _ := json.Marshal(cfg.PluginConfig) // strings always marshal
	return &Agent{store: store, plugin: plugin, limits: cfg.Limits, pluginConfig: conf, log: cfg.Log}
}

// CreateTask creates a task and runs the plugin's task handler, if it has
// one, before recording the task with the steps it planned. When the
// handler fails nothing is recorded.
func (a *Agent) CreateTask(ctx context.Context, body TaskRequestBody) (*Task, error) {
	addl, err := objectOrEmpty("additional_input", body.AdditionalInput)
	if err != nil {
		return nil, err
	}
	t := &Task{
		TaskID:          newID(),
		Input:           body.Input,
		AdditionalInput: addl,
		Artifacts:       []Artifact{},
		CreatedAt:       time.Now(),
	}
	var planned []Step
	var call *Call
	if a.plugin.HasHandler(abi.HandlerTask) {
		// Whatever the handler writes to the workspace goes if the task
		// is not created.
		created := false
		defer func() {
			if !created {
				a.store.RemoveWorkspace(t.TaskID)
			}
		}()
		call = a.newCall(abi.HandlerTask, t, nil, nil, nil)
		defer call.discard()
		code, elapsed, err := a.run(ctx, t, abi.HandlerTask, call)
		t.PluginTime = elapsed
		var res abi.TaskResult
		if err == nil {
			err = call.decodeResult(code, decodeTaskResult(&res, a.maxPlanned()), &res.Error)
		}
		if err != nil && ctx.Err() != nil {
			// The client went away: the handler was stopped, through no
			// fault of the plugin's, and no task was made.
			return nil, Errorf(EABORTED, "the request was cancelled while the task handler ran")
		}
		if err != nil {
			a.log.Warn("task handler failed", "task_id", t.TaskID, "err", logText(err))
			return nil, handlerError("task", err)
		}
		if planned, err = plannedSteps(t, res.Steps); err != nil {
			return nil, handlerError("task", err)
		}
		log := a.fitTaskLog(t, call.logs)
		t.Logs, t.LogBytes = log.Records, log.Bytes
		t.Artifacts = call.artifacts
		if err := a.store.CreateTask(ctx, t, planned, t.Artifacts); err != nil {
			return nil, err
		}
		created = true
		call.recorded()
		return t, nil
	}
	if err := a.store.CreateTask(ctx, t, nil, nil); err != nil {
		return nil, err
	}
	return t, nil
}

// maxPlanned is how many steps a task handler may plan.
func (a *Agent) maxPlanned() int {
	if l := a.limits; l.MaxTaskSteps > 0 && l.MaxTaskSteps < l.MaxPlannedSteps {
		return l.MaxTaskSteps
	}
	return a.limits.MaxPlannedSteps
}

// fitTaskLog returns what of a call's log records fits in what is left of
// the task's log limit. When some do not, the last kept record says so,
// and the call counts as filling the log: nothing more is kept, not even
// another notice, so the task's log never holds more than its limit and
// one notice.
func (a *Agent) fitTaskLog(t *Task, logs []LogRecord) TaskLog {
	max := a.limits.MaxTaskLogBytes
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
func plannedSteps(t *Task, plan []abi.PlannedStep) ([]Step, error) {
	steps := make([]Step, 0, len(plan))
	for i, p := range plan {
		addl, err := objectOrEmpty(fmt.Sprintf("steps[%d].additional_input", i), p.AdditionalInput)
		if err != nil {
			return nil, Errorf(EPLUGIN, "planned a step with a bad value: %s", ErrorMessage(err))
		}
		name := p.Name
		steps = append(steps, Step{
			TaskID:          t.TaskID,
			StepID:          newID(),
			Name:            &name,
			Status:          StatusCreated,
			Input:           p.Input,
			AdditionalInput: addl,
			Artifacts:       []Artifact{},
			Planned:         true,
			CreatedAt:       t.CreatedAt,
		})
	}
	return steps, nil
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
	reqAddl, err := objectOrEmpty("additional_input", body.AdditionalInput)
	if err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	unlock := a.locks.lock(taskID)
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
		if max := a.limits.MaxTaskSteps; max > 0 && task.StepCount >= max {
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
	if err := a.checkBudget(task); err != nil {
		return nil, err
	}
	call := a.newCall(abi.HandlerStep, task, step, &abi.Request{Input: body.Input, AdditionalInput: reqAddl}, nil)
	defer call.discard()
	code, elapsed, runErr := a.run(ctx, task, abi.HandlerStep, call)
	step.PluginTime = elapsed
	var res abi.StepResult
	if runErr == nil {
		runErr = call.decodeResult(code, decodeInto(&res), &res.Error)
	}
	if runErr == nil {
		runErr = applyStepResult(step, &res)
	}
	if code := ErrorCode(runErr); code != "" && code != EPLUGIN && code != ETIMEOUT {
		return nil, runErr // not the plugin's doing (busy, say): nothing ran, nothing to record
	}
	call.flushOutput()
	step.Status = StatusCompleted
	step.Logs = call.logs
	if runErr != nil {
		failure := handlerError("step", runErr)
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
func applyStepResult(step *Step, res *abi.StepResult) error {
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
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
	return b
}

// handlerError names the handler in a plugin failure. Failures of our own
// (a full disk, say) pass through unchanged.
func handlerError(handler string, err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		return &Error{Code: EINTERNAL, Message: "internal error"}
	}
	switch e.Code {
	case EPLUGIN, ETIMEOUT:
		// The cause may be the plugin's own text (its error, or its
		// function names in wazero's account of a trap): a client sees,
		// and a step records, at most maxPluginText of it.
		return &Error{Code: e.Code, Message: fmt.Sprintf("%s handler failed: %s", handler, cutText(e.Message, maxPluginText))}
	}
	return e
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

// ListArtifacts returns a page of a task's artifacts in creation order.
func (a *Agent) ListArtifacts(ctx context.Context, taskID string, p Page) (*ArtifactList, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	artifacts, total, err := a.store.ListArtifacts(ctx, taskID, p)
	if err != nil {
		return nil, err
	}
	return &ArtifactList{Artifacts: artifacts, Pagination: p.Pagination(total)}, nil
}

// OpenArtifact returns an artifact of a task and its bytes. The caller
// closes the file.
func (a *Agent) OpenArtifact(ctx context.Context, taskID, artifactID string) (*Artifact, *os.File, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, nil, err
	}
	if err := checkID("artifact", &artifactID); err != nil {
		return nil, nil, err
	}
	art, err := a.store.GetArtifact(ctx, taskID, artifactID)
	if err != nil {
		return nil, nil, err
	}
	f, err := a.store.OpenArtifact(art)
	if err != nil {
		return nil, nil, err
	}
	return art, f, nil
}

// Upload is a client's file on its way to becoming an artifact. Write the
// bytes, then Commit with the file's name and path, or Discard.
type Upload struct {
	agent  *Agent
	taskID string
	id     string
	blob   Blob
	done   bool
	// limit is what the file may hold: the upload limit, or less when the
	// task's artifacts are near their byte quota.
	limit      int64
	quotaLimit bool
}

// NewUpload starts an upload to a task; ENOTFOUND when there is no such
// task, ETOOLARGE when the task holds all the artifacts (or artifact
// bytes) it may.
func (a *Agent) NewUpload(ctx context.Context, taskID string) (*Upload, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	task, err := a.store.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	// Refused before the bytes are read; Commit checks again, under the
	// task's lock.
	held, heldBytes := artifactsHeld(task)
	if err := a.limits.checkArtifactCount(held); err != nil {
		return nil, err
	}
	if err := a.limits.checkArtifactBytes(heldBytes); err != nil {
		return nil, err
	}
	u := &Upload{agent: a, taskID: taskID, id: newID(), limit: a.limits.MaxUploadBytes}
	if max := a.limits.MaxTaskArtifactBytes; max > 0 && max-heldBytes < u.limit {
		u.limit, u.quotaLimit = max-heldBytes, true
	}
	if u.blob, err = a.store.StageArtifact(u.id); err != nil {
		return nil, err
	}
	return u, nil
}

// artifactsHeld is how many artifacts a task holds, and their bytes.
func artifactsHeld(t *Task) (int, int64) {
	var n int64
	for _, art := range t.Artifacts {
		n += art.Size
	}
	return len(t.Artifacts), n
}

// Write writes the file's next bytes; ETOOLARGE past the upload limit or
// the task's artifact bytes quota.
func (u *Upload) Write(p []byte) (int, error) {
	if u.blob.Size()+int64(len(p)) > u.limit {
		if u.quotaLimit {
			return 0, Errorf(ETOOLARGE, "the file would put the task's artifacts over their quota of %d bytes", u.agent.limits.MaxTaskArtifactBytes)
		}
		return 0, Errorf(ETOOLARGE, "the file is larger than the upload limit of %d bytes", u.limit)
	}
	return u.blob.Write(p)
}

// Commit records the upload as an artifact of its task, named fileName in
// the workspace directory relativePath, and puts it in the task's workspace
// at relativePath/fileName. Names are cleaned or refused (EBADPATH); the
// workspace quota and the task's artifact quotas apply (ETOOLARGE). If the
// plugin has an artifact handler, it runs first and may reject the upload
// (EREJECTED) or fail (EPLUGIN); either way no artifact is kept (files the
// handler wrote to the workspace stay, as a failed step's do).
func (u *Upload) Commit(ctx context.Context, fileName, relativePath string) (*Artifact, error) {
	a := u.agent
	name, err := CleanFileName(fileName)
	if err != nil {
		return nil, err
	}
	dir, err := CleanDir(relativePath)
	if err != nil {
		return nil, err
	}
	if err := u.blob.Close(); err != nil {
		return nil, err
	}
	art := &Artifact{
		ArtifactID:   u.id,
		AgentCreated: false,
		FileName:     name,
		RelativePath: dir,
		TaskID:       u.taskID,
		Size:         u.blob.Size(),
		CreatedAt:    time.Now(),
	}
	ctx = context.WithoutCancel(ctx)
	unlock := a.locks.lock(u.taskID)
	defer unlock()

	task, err := a.store.GetTask(ctx, u.taskID)
	if err != nil {
		return nil, err
	}
	held, heldBytes := artifactsHeld(task)
	if err := a.limits.checkArtifactCount(held); err != nil {
		return nil, err
	}
	if err := a.limits.checkArtifactBytes(heldBytes + art.Size); err != nil {
		return nil, err
	}
	if err := a.checkQuota(u.taskID, art.WorkspacePath(), art.Size); err != nil {
		return nil, err
	}
	placed, err := a.store.PlaceUpload(u.taskID, art.WorkspacePath(), u.id)
	if err != nil {
		return nil, err
	}
	rollback := func() {
		if err := placed.Rollback(); err != nil {
			a.log.Error("rolling back an upload failed; the next start finishes it",
				"task_id", u.taskID, "path", art.WorkspacePath(), "err", err)
		}
	}
	record := []Artifact{*art}
	var log TaskLog
	var used time.Duration
	var created *Call
	if a.plugin.HasHandler(abi.HandlerArtifact) {
		var elapsed time.Duration
		created, elapsed, err = a.runArtifactHandler(ctx, task, art)
		if err != nil {
			rollback()
			return nil, err
		}
		record, log, used = append(record, created.artifacts...), a.fitTaskLog(task, created.logs), elapsed
		defer created.discard() // a no-op once recorded
	}
	if err := a.store.AddArtifacts(ctx, u.taskID, record, log, used); err != nil {
		rollback()
		return nil, err
	}
	if created != nil {
		created.recorded()
	}
	placed.Commit()
	u.done = true
	return art, nil
}

// runArtifactHandler runs the plugin's artifact handler on an upload placed
// in the workspace of task. It returns the call (whose artifacts and log
// the caller records) and the time it took, or why the upload must not be
// kept.
func (a *Agent) runArtifactHandler(ctx context.Context, task *Task, art *Artifact) (*Call, time.Duration, error) {
	if err := a.checkBudget(task); err != nil {
		return nil, 0, err
	}
	call := a.newCall(abi.HandlerArtifact, task, nil, nil, art)
	code, elapsed, err := a.run(ctx, task, abi.HandlerArtifact, call)
	var res abi.ArtifactResult
	if err == nil {
		err = call.decodeResult(code, decodeInto(&res), &res.Error)
	}
	if err != nil || res.Reject != "" {
		// The upload is not kept, but the time the plugin took counts
		// against the task's budget all the same.
		if serr := a.store.AddArtifacts(ctx, art.TaskID, nil, TaskLog{}, elapsed); serr != nil {
			a.log.Warn("recording plugin time", "task_id", art.TaskID, "err", serr)
		}
	}
	switch {
	case err != nil:
		call.discard()
		a.log.Warn("artifact handler failed", "task_id", art.TaskID, "err", logText(err))
		return nil, 0, handlerError("artifact", err)
	case res.Reject != "":
		call.discard()
		return nil, 0, Errorf(EREJECTED, "the agent rejected the upload: %s", cutText(res.Reject, maxPluginText))
	}
	return call, elapsed, nil
}

// tooManyArtifacts is the error for a task that holds all the artifacts
// it may.
func tooManyArtifacts(held, max int) error {
	return Errorf(ETOOLARGE, "the task holds %d artifacts, the most a task may hold (%d)", held, max)
}

// checkArtifactCount refuses one more artifact for a task that holds held.
func (l *Limits) checkArtifactCount(held int) error {
	if l.MaxTaskArtifacts > 0 && held >= l.MaxTaskArtifacts {
		return tooManyArtifacts(held, l.MaxTaskArtifacts)
	}
	return nil
}

// checkArtifactBytes refuses artifacts of a task that would hold n bytes
// in all, over the task's artifact bytes quota.
func (l *Limits) checkArtifactBytes(n int64) error {
	if l.MaxTaskArtifactBytes > 0 && n > l.MaxTaskArtifactBytes {
		return Errorf(ETOOLARGE, "the task's artifacts would hold %d bytes, over their quota of %d bytes", n, l.MaxTaskArtifactBytes)
	}
	return nil
}

// checkBudget refuses to run a handler for a task that has used up its
// plugin time (ELIMIT).
func (a *Agent) checkBudget(t *Task) error {
	if max := a.limits.MaxTaskTime; max > 0 && t.PluginTime >= max {
		return Errorf(ELIMIT, "task %s has used up its plugin time budget of %s", t.TaskID, max)
	}
	return nil
}

// run runs a handler for task t within what is left of the task's time
// budget, and returns how long it ran. No handler runs while the disk is at
// its floor (EINSUFFICIENT): what it did could not be recorded, its time
// not counted against the task's budget.
func (a *Agent) run(ctx context.Context, t *Task, handler string, call *Call) (int32, time.Duration, error) {
	if err := a.store.CheckSpace(); err != nil {
		return 0, 0, err
	}
	remaining := a.limits.MaxTaskTime - t.PluginTime
	if a.limits.MaxTaskTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, remaining)
		defer cancel()
	}
	code, elapsed, err := a.plugin.Run(ctx, handler, call)
	if ErrorCode(err) == ETIMEOUT && a.limits.MaxTaskTime > 0 && elapsed >= remaining {
		err = Errorf(ETIMEOUT, "the task used up its plugin time budget of %s", a.limits.MaxTaskTime)
	}
	return code, elapsed, err
}

// checkQuota refuses a workspace write that would put a task's workspace
// over its quota of bytes or entries. name is the file written, size its
// new size.
func (a *Agent) checkQuota(taskID, name string, size int64) error {
	bytes, entries, err := a.store.WorkspaceUsage(taskID)
	if err != nil {
		return err
	}
	st, err := a.store.PathState(taskID, name)
	if err != nil {
		return err
	}
	if st.Exists {
		bytes -= st.Size
	} else {
		entries += 1 + st.MissingDirs
	}
	return a.limits.checkWorkspace(bytes+size, entries)
}

// checkWorkspace refuses workspace contents over the quota.
func (l *Limits) checkWorkspace(bytes int64, entries int) error {
	if bytes > l.MaxWorkspaceBytes {
		return Errorf(ETOOLARGE, "the task's workspace would hold %d bytes, over its quota of %d bytes", bytes, l.MaxWorkspaceBytes)
	}
	if entries > l.MaxWorkspaceFiles {
		return Errorf(ETOOLARGE, "the task's workspace would hold %d files and directories, over its quota of %d files and directories", entries, l.MaxWorkspaceFiles)
	}
	return nil
}

// Discard drops an upload that was not committed; after Commit it does
// nothing.
func (u *Upload) Discard() {
	if !u.done {
		u.done = true
		u.blob.Discard()
	}
}

// newID returns a new task, step or artifact id: a UUIDv7, whose first 48
// bits are the Unix time in milliseconds and whose other bits are random
// (62 bits) or a counter that keeps ids made in one millisecond in order.
// Time-ordered ids land at the end of the id indexes instead of on a
// random page, so a commit of many new rows writes a few pages rather than
// one per row: a quarter more tasks created per second, measured.
func newID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// checkID accepts a canonical UUID, in either case, and lowercases it; any
// other id names nothing (ENOTFOUND).
func checkID(kind string, id *string) error {
	u, err := uuid.Parse(*id)
	if err != nil || len(*id) != 36 {
		return notFound(kind, *id)
	}
	*id = u.String()
	return nil
}

// objectOrEmpty checks that v is absent, null or a JSON object, and returns
// it with absent and null as {}.
func objectOrEmpty(field string, v json.RawMessage) (json.RawMessage, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || bytes.Equal(v, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if !isObject(v) {
		return nil, Errorf(EUNPROCESSABLE, "%s must be a JSON object", field)
	}
	return v, nil
}

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{' && json.Valid(v)
}

// taskLocks serialises work on one task while leaving other tasks free.
type taskLocks struct {
	mu sync.Mutex
	m  map[string]*taskLock
}

type taskLock struct {
	sync.Mutex
	refs int
}

// lock locks the task and returns its unlock function.
func (l *taskLocks) lock(taskID string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*taskLock)
	}
	tl := l.m[taskID]
	if tl == nil {
		tl = &taskLock{}
		l.m[taskID] = tl
	}
	tl.refs++
	l.mu.Unlock()

	tl.Lock()
	return func() {
		tl.Unlock()
		l.mu.Lock()
		if tl.refs--; tl.refs == 0 {
			delete(l.m, taskID)
		}
		l.mu.Unlock()
	}
}
