// Package protocoltest holds fakes of what the domain (package protocol)
// reaches through its interfaces, for tests of the domain and of the
// front ends over it, in memory: a Store (and its Blob, Workspace and
// Placement) that answers with the errors the SQLite store answers, and
// a Plugin that runs handlers written in Go against the real wire
// format. As net/http/httptest is for handlers, so that a test of the
// HTTP API needs no SQLite and no WebAssembly.
//
// The fakes' fields are exported for tests: set one to inject a failure
// (DiskFull, FailRecord, FailStart), read the maps to see what was
// recorded and how. Hold Store.Mu while reading them beside calls in
// progress.
package protocoltest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/wire"
)

// Store is one agent's protocol.Store in memory, with the errors the
// real one returns (ENOTFOUND for an unknown task, step or artifact;
// EINSUFFICIENT for a full disk; the context's error for a cancelled
// write, which records nothing). Tests inject failures through its
// fields and read what was recorded, and how, straight from its maps.
type Store struct {
	// Mu guards every field.
	Mu    sync.Mutex
	Tasks map[string]*protocol.Task
	Order []string                    // task ids, in creation order
	Steps map[string][]*protocol.Step // by task, in creation order
	// Staged are artifact bytes written but not recorded, by artifact id;
	// Recorded are those whose artifact row exists.
	Staged   map[string][]byte
	Recorded map[string][]byte
	// Discarded counts Blob.Discard calls that removed bytes.
	Discarded int
	// PlannedLooks counts NextPlannedStep calls.
	PlannedLooks int
	Files        map[string]map[string][]byte // workspace files, by task
	Quotas       []protocol.WorkspaceQuota    // every quota a workspace was opened with
	Placed       []*Placement
	Removed      []string // tasks whose workspace was removed
	Deleted      []string // tasks deleted

	DiskFull   bool  // CheckSpace answers EINSUFFICIENT
	FailRecord error // what the next SaveStep, AddArtifacts or CreateTask returns
	// Starts counts StartStep calls (running marks written); FailStart is
	// what StartStep answers instead of writing.
	Starts    int
	FailStart error
	// Log is each task's event log, every event kept (the real
	// store's trimming is its own to test).
	Log map[string][]protocol.Event
}

var _ protocol.Store = (*Store)(nil)

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		Tasks: map[string]*protocol.Task{}, Steps: map[string][]*protocol.Step{},
		Staged: map[string][]byte{}, Recorded: map[string][]byte{}, Files: map[string]map[string][]byte{},
	}
}

func notFound(kind, id string) error {
	return protocol.Errorf(protocol.ENOTFOUND, "no %s %s", kind, id)
}

// takeFailure returns the injected failure, once.
func (s *Store) takeFailure() error {
	err := s.FailRecord
	s.FailRecord = nil
	return err
}

// record moves the bytes of artifacts from staged to recorded.
func (s *Store) record(artifacts []protocol.Artifact) {
	for _, a := range artifacts {
		b, ok := s.Staged[a.ArtifactID]
		if a.URI != "" {
			if ok {
				panic("recording URI artifact " + a.ArtifactID + " with staged bytes")
			}
			continue
		}
		if !ok {
			panic("recording artifact " + a.ArtifactID + " whose bytes were not staged")
		}
		delete(s.Staged, a.ArtifactID)
		s.Recorded[a.ArtifactID] = b
	}
}

func (s *Store) CreateTask(ctx context.Context, t *protocol.Task, planned []protocol.Step, artifacts []protocol.Artifact) error {
	if ctx.Err() != nil {
		return ctx.Err() // as SaveStep
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if err := s.takeFailure(); err != nil {
		return err
	}
	s.record(artifacts)
	c := *t
	c.Artifacts = append([]protocol.Artifact{}, artifacts...)
	c.StepCount = len(planned)
	s.Tasks[t.TaskID] = &c
	s.Order = append(s.Order, t.TaskID)
	s.addEvents(t.TaskID, t.Events)
	for i := range planned {
		p := planned[i]
		s.Steps[t.TaskID] = append(s.Steps[t.TaskID], &p)
	}
	return nil
}

func (s *Store) GetTask(ctx context.Context, taskID string) (*protocol.Task, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	t, ok := s.Tasks[taskID]
	if !ok {
		return nil, notFound("task", taskID)
	}
	c := *t
	c.Artifacts = append([]protocol.Artifact{}, t.Artifacts...)
	for _, st := range s.Steps[taskID] {
		c.PlannedLeft = c.PlannedLeft || st.Planned && st.Status == protocol.StatusCreated
	}
	return &c, nil
}

func (s *Store) ListTasks(ctx context.Context, p protocol.Page) ([]protocol.Task, int, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	var out []protocol.Task
	for i := p.Offset(); i < len(s.Order) && len(out) < p.Size; i++ {
		out = append(out, *s.Tasks[s.Order[i]])
	}
	return out, len(s.Order), nil
}

func (s *Store) TaskLogs(ctx context.Context, taskID string) ([]protocol.LogRecord, error) {
	t, err := s.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return t.Logs, nil
}

func (s *Store) NextPlannedStep(ctx context.Context, taskID string) (*protocol.Step, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.PlannedLooks++
	for _, st := range s.Steps[taskID] {
		if st.Planned && st.Status == protocol.StatusCreated {
			c := *st
			return &c, nil
		}
	}
	return nil, nil
}

func (s *Store) SaveStep(ctx context.Context, st *protocol.Step, artifacts []protocol.Artifact) error {
	if ctx.Err() != nil {
		return ctx.Err() // as SQLite does: a cancelled context records nothing
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if err := s.takeFailure(); err != nil {
		return err
	}
	t, ok := s.Tasks[st.TaskID]
	if !ok {
		return notFound("task", st.TaskID)
	}
	s.record(artifacts)
	s.addEvents(st.TaskID, st.Events)
	c := *st
	c.Events = nil
	for i, old := range s.Steps[st.TaskID] {
		if old.StepID == st.StepID {
			s.Steps[st.TaskID][i] = &c
			c.Planned = old.Planned
			t.PluginTime += st.PluginTime
			t.Artifacts = append(t.Artifacts, artifacts...)
			return nil
		}
	}
	s.Steps[st.TaskID] = append(s.Steps[st.TaskID], &c)
	t.StepCount++
	t.PluginTime += st.PluginTime
	t.Artifacts = append(t.Artifacts, artifacts...)
	return nil
}

func (s *Store) step(taskID, stepID string) (*protocol.Step, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if _, ok := s.Tasks[taskID]; !ok {
		return nil, notFound("task", taskID)
	}
	for _, st := range s.Steps[taskID] {
		if st.StepID == stepID {
			c := *st
			return &c, nil
		}
	}
	return nil, notFound("step", stepID)
}

func (s *Store) GetStep(ctx context.Context, taskID, stepID string) (*protocol.Step, error) {
	return s.step(taskID, stepID)
}

func (s *Store) ListSteps(ctx context.Context, taskID string, p protocol.Page) ([]protocol.Step, int, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if _, ok := s.Tasks[taskID]; !ok {
		return nil, 0, notFound("task", taskID)
	}
	all := s.Steps[taskID]
	var out []protocol.Step
	for i := p.Offset(); i < len(all) && len(out) < p.Size; i++ {
		out = append(out, *all[i])
	}
	return out, len(all), nil
}

func (s *Store) StartStep(ctx context.Context, st *protocol.Step) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.FailStart != nil {
		return s.FailStart
	}
	s.Starts++
	t, ok := s.Tasks[st.TaskID]
	if !ok {
		return notFound("task", st.TaskID)
	}
	s.addEvents(st.TaskID, st.Events)
	c := *st
	c.Events = nil
	for i, old := range s.Steps[st.TaskID] {
		if old.StepID == st.StepID {
			s.Steps[st.TaskID][i] = &c
			return nil
		}
	}
	s.Steps[st.TaskID] = append(s.Steps[st.TaskID], &c)
	t.StepCount++
	return nil
}

func (s *Store) AbandonStep(ctx context.Context, st *protocol.Step) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	steps := s.Steps[st.TaskID]
	for i, old := range steps {
		if old.StepID != st.StepID {
			continue
		}
		if old.Planned {
			old.Status, old.Build = protocol.StatusCreated, nil
		} else {
			s.Steps[st.TaskID] = append(steps[:i:i], steps[i+1:]...)
			s.Tasks[st.TaskID].StepCount--
		}
		return nil
	}
	return nil
}

func (s *Store) StepSummaries(ctx context.Context, taskIDs []string) (map[string]protocol.StepSummary, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	out := map[string]protocol.StepSummary{}
	for _, id := range taskIDs {
		if _, ok := s.Tasks[id]; !ok {
			continue
		}
		sum := protocol.StepSummary{Planned: []string{}}
		for _, st := range s.Steps[id] {
			switch {
			case st.Status == protocol.StatusCreated:
				sum.Planned = append(sum.Planned, *st.Name)
			case st.Status == protocol.StatusRunning:
				sum.Running++
			case bytes.Contains(st.AdditionalOutput, []byte(`"error"`)):
				sum.Failed++
			default:
				sum.Completed++
			}
		}
		out[id] = sum
	}
	return out, nil
}

func (s *Store) UpdateTask(ctx context.Context, taskID string, patch protocol.TaskPatch) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	t, ok := s.Tasks[taskID]
	if !ok {
		return notFound("task", taskID)
	}
	for _, f := range []struct {
		p   protocol.PatchField
		dst **string
	}{{patch.Title, &t.Title}, {patch.Description, &t.Description}, {patch.Version, &t.Version}} {
		if f.p.Set {
			*f.dst = f.p.Value
		}
	}
	s.addEvents(taskID, []protocol.Event{protocol.TaskUpdatedEvent(taskID, patch)})
	return nil
}

func (s *Store) DeleteTask(ctx context.Context, taskID string) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	t, ok := s.Tasks[taskID]
	if !ok {
		return notFound("task", taskID)
	}
	for _, a := range t.Artifacts {
		delete(s.Recorded, a.ArtifactID)
	}
	delete(s.Tasks, taskID)
	delete(s.Steps, taskID)
	delete(s.Files, taskID)
	delete(s.Log, taskID)
	s.Order = slices.DeleteFunc(s.Order, func(id string) bool { return id == taskID })
	s.Deleted = append(s.Deleted, taskID)
	return nil
}

func (s *Store) StepLogs(ctx context.Context, taskID, stepID string) ([]protocol.LogRecord, error) {
	st, err := s.step(taskID, stepID)
	if err != nil {
		return nil, err
	}
	return st.Logs, nil
}

func (s *Store) AddArtifacts(ctx context.Context, taskID string, artifacts []protocol.Artifact, log protocol.TaskLog, pluginTime time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err() // as SaveStep
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if len(artifacts) > 0 {
		if err := s.takeFailure(); err != nil {
			return err
		}
	}
	t, ok := s.Tasks[taskID]
	if !ok {
		return notFound("task", taskID)
	}
	s.record(artifacts)
	for i := range artifacts {
		s.addEvents(taskID, []protocol.Event{protocol.ArtifactEvent(taskID, &artifacts[i])})
	}
	t.Artifacts = append(t.Artifacts, artifacts...)
	t.Logs = append(t.Logs, log.Records...)
	t.LogBytes += log.Bytes
	t.PluginTime += pluginTime
	return nil
}

func (s *Store) GetArtifact(ctx context.Context, taskID, artifactID string) (*protocol.Artifact, error) {
	t, err := s.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	for _, a := range t.Artifacts {
		if a.ArtifactID == artifactID {
			return &a, nil
		}
	}
	return nil, notFound("artifact", artifactID)
}

func (s *Store) ListArtifacts(ctx context.Context, taskID string, p protocol.Page) ([]protocol.Artifact, int, error) {
	t, err := s.GetTask(ctx, taskID)
	if err != nil {
		return nil, 0, err
	}
	var out []protocol.Artifact
	for i := p.Offset(); i < len(t.Artifacts) && len(out) < p.Size; i++ {
		out = append(out, t.Artifacts[i])
	}
	return out, len(t.Artifacts), nil
}

func (s *Store) StageArtifact(ctx context.Context, artifactID string) (protocol.Blob, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Staged[artifactID] = nil
	return &Blob{s: s, id: artifactID}, nil
}

func (s *Store) OpenArtifact(ctx context.Context, a *protocol.Artifact) (io.ReadSeekCloser, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	b, ok := s.Recorded[a.ArtifactID]
	if !ok {
		return nil, errors.New("the bytes of a recorded artifact are missing")
	}
	return nopCloser{bytes.NewReader(b)}, nil
}

type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }

func (s *Store) CheckSpace(ctx context.Context) error {
	if s.DiskFull {
		return protocol.Errorf(protocol.EINSUFFICIENT, "the disk is full")
	}
	return nil
}

func (s *Store) Workspace(taskID string, quota protocol.WorkspaceQuota) protocol.Workspace {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Quotas = append(s.Quotas, quota)
	return &Workspace{s: s, taskID: taskID, quota: quota}
}

// LastStepStatus is the status the store holds for the last step of a
// task, "" for none: for tests of one task.
func (s *Store) LastStepStatus() protocol.StepStatus {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	for _, st := range s.Steps {
		if len(st) > 0 {
			return st[len(st)-1].Status
		}
	}
	return ""
}

// Blob is staged bytes in a Store.
type Blob struct {
	s    *Store
	id   string
	size int64
}

func (b *Blob) Write(p []byte) (int, error) {
	b.s.Mu.Lock()
	defer b.s.Mu.Unlock()
	b.s.Staged[b.id] = append(b.s.Staged[b.id], p...)
	b.size += int64(len(p))
	return len(p), nil
}

func (b *Blob) Size() int64  { return b.size }
func (b *Blob) Close() error { return nil }

func (b *Blob) SHA256() (string, error) {
	b.s.Mu.Lock()
	defer b.s.Mu.Unlock()
	sum := sha256.Sum256(b.s.Staged[b.id])
	return hex.EncodeToString(sum[:]), nil
}

func (b *Blob) Discard() {
	b.s.Mu.Lock()
	defer b.s.Mu.Unlock()
	if _, ok := b.s.Staged[b.id]; ok {
		delete(b.s.Staged, b.id)
		b.s.Discarded++
	}
}

// Workspace is a task's files in a Store: flat, its quota counted
// in bytes and files.
type Workspace struct {
	s      *Store
	taskID string
	quota  protocol.WorkspaceQuota
}

func (w *Workspace) files() map[string][]byte {
	if w.s.Files[w.taskID] == nil {
		w.s.Files[w.taskID] = map[string][]byte{}
	}
	return w.s.Files[w.taskID]
}

func (w *Workspace) check(name string, size int64) error {
	var bytes int64
	entries := 0
	for n, b := range w.files() {
		if n != name {
			bytes += int64(len(b))
			entries++
		}
	}
	if bytes+size > w.quota.Bytes || entries+1 > w.quota.Entries {
		return protocol.Errorf(protocol.ETOOLARGE, "the task's workspace would be over its quota")
	}
	return nil
}

func (w *Workspace) ReadInto(ctx context.Context, name string, buf []byte) (int64, error) {
	w.s.Mu.Lock()
	defer w.s.Mu.Unlock()
	b, ok := w.files()[name]
	if !ok {
		return 0, notFound("file", name)
	}
	if len(b) <= len(buf) {
		copy(buf, b)
	}
	return int64(len(b)), nil
}

func (w *Workspace) Write(ctx context.Context, name string, data []byte) error {
	w.s.Mu.Lock()
	defer w.s.Mu.Unlock()
	if err := w.check(name, int64(len(data))); err != nil {
		return err
	}
	w.files()[name] = append([]byte(nil), data...)
	return nil
}

func (w *Workspace) Stat(ctx context.Context, name string) (protocol.FileInfo, error) {
	w.s.Mu.Lock()
	defer w.s.Mu.Unlock()
	b, ok := w.files()[name]
	if !ok {
		return protocol.FileInfo{}, notFound("file", name)
	}
	return protocol.FileInfo{Path: name, Size: int64(len(b))}, nil
}

func (w *Workspace) Remove(ctx context.Context, name string) error {
	w.s.Mu.Lock()
	defer w.s.Mu.Unlock()
	if _, ok := w.files()[name]; !ok {
		return notFound("file", name)
	}
	delete(w.files(), name)
	return nil
}

func (w *Workspace) List(ctx context.Context, prefix string) ([]protocol.FileInfo, error) {
	w.s.Mu.Lock()
	defer w.s.Mu.Unlock()
	var out []protocol.FileInfo
	for n, b := range w.files() {
		if strings.HasPrefix(n, prefix) {
			out = append(out, protocol.FileInfo{Path: n, Size: int64(len(b))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (w *Workspace) Place(ctx context.Context, name, artifactID string) (protocol.Placement, error) {
	w.s.Mu.Lock()
	defer w.s.Mu.Unlock()
	b := w.s.Staged[artifactID]
	if err := w.check(name, int64(len(b))); err != nil {
		return nil, err
	}
	old, had := w.files()[name]
	w.files()[name] = b
	p := &Placement{w: w, name: name, old: old, had: had}
	w.s.Placed = append(w.s.Placed, p)
	return p, nil
}

func (w *Workspace) StageArtifact(ctx context.Context, name, artifactID string) (protocol.Blob, error) {
	w.s.Mu.Lock()
	defer w.s.Mu.Unlock()
	b, ok := w.files()[name]
	if !ok {
		return nil, notFound("file", name)
	}
	w.s.Staged[artifactID] = b
	return &Blob{s: w.s, id: artifactID, size: int64(len(b))}, nil
}

func (w *Workspace) RemoveAll(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err() // a store may stop at a cancelled context, removing nothing
	}
	w.s.Mu.Lock()
	defer w.s.Mu.Unlock()
	delete(w.s.Files, w.taskID)
	w.s.Removed = append(w.s.Removed, w.taskID)
	return nil
}

// Placement is an upload placed in a Workspace; it says how it was
// settled.
type Placement struct {
	w    *Workspace
	name string
	old  []byte
	had  bool
	// Committed and Rolled say how it was settled.
	Committed bool
	Rolled    bool
}

func (p *Placement) Commit() {
	if p.Committed || p.Rolled {
		panic("a placement settled twice")
	}
	p.Committed = true
}

func (p *Placement) Rollback() error {
	if p.Committed || p.Rolled {
		panic("a placement settled twice")
	}
	p.Rolled = true
	p.w.s.Mu.Lock()
	defer p.w.s.Mu.Unlock()
	if p.had {
		p.w.files()[p.name] = p.old
	} else {
		delete(p.w.files(), p.name)
	}
	return nil
}

// Plugin runs handlers written in Go against the real wire format: a
// handler sets its result as JSON, as a plugin does.
type Plugin struct {
	handlers map[protocol.Handler]Handler
	// Elapsed is the plugin time each run reports.
	Elapsed time.Duration

	mu      sync.Mutex
	runs    int
	running map[string]int // runs in progress, by task
	overlap bool           // two runs of one task were in progress at once
}

// Handler is one handler: what it does with the call, and the return
// code or the failure (a *protocol.PluginFailure, as runtime reports a
// trap) it ends with.
type Handler func(ctx context.Context, call *protocol.Call) (int32, error)

var _ protocol.Plugin = (*Plugin)(nil)

// NewPlugin returns a Plugin with the handlers given (the others it does
// not have), each run reporting a millisecond of plugin time.
func NewPlugin(handlers map[protocol.Handler]Handler) *Plugin {
	return &Plugin{handlers: handlers, Elapsed: time.Millisecond, running: map[string]int{}}
}

func (p *Plugin) HasHandler(h protocol.Handler) bool { return p.handlers[h] != nil }
func (p *Plugin) Codec() protocol.Codec              { return wire.V1 }

func (p *Plugin) Run(ctx context.Context, h protocol.Handler, call *protocol.Call) (int32, time.Duration, error) {
	var in struct {
		Task struct {
			TaskID string `json:"task_id"`
		} `json:"task"`
	}
	if err := json.Unmarshal(call.Input(), &in); err != nil {
		panic("the handler's input does not decode: " + err.Error())
	}
	p.mu.Lock()
	p.runs++
	p.running[in.Task.TaskID]++
	if p.running[in.Task.TaskID] > 1 {
		p.overlap = true
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running[in.Task.TaskID]--
		p.mu.Unlock()
	}()
	code, err := p.handlers[h](ctx, call)
	return code, p.Elapsed, err
}

// Stats are the runs the plugin made, and whether two runs of one task
// were ever in progress at once.
func (p *Plugin) Stats() (runs int, overlap bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs, p.overlap
}
