package protocol_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// fakeStore is a protocol.Store in memory, with the errors the real one
// returns. Tests inject failures through its fields and read what was
// recorded, and how, straight from its maps.
type fakeStore struct {
	mu    sync.Mutex
	tasks map[string]*protocol.Task
	order []string
	steps map[string][]*protocol.Step // by task, in creation order
	// staged are artifact bytes written but not recorded, by artifact id;
	// recorded are those whose artifact row exists.
	staged   map[string][]byte
	recorded map[string][]byte
	// discarded counts Blob.Discard calls that removed bytes.
	discarded int
	// plannedLooks counts NextPlannedStep calls.
	plannedLooks int
	files        map[string]map[string][]byte // workspace files, by task
	quotas       []protocol.WorkspaceQuota    // every quota a workspace was opened with
	placed       []*fakePlacement
	removed      []string // tasks whose workspace was removed
	deleted      []string // tasks deleted

	diskFull   bool  // CheckSpace answers EINSUFFICIENT
	failRecord error // what the next SaveStep, AddArtifacts or CreateTask returns
	// starts counts StartStep calls (running marks written); failStart is
	// what StartStep answers instead of writing.
	starts    int
	failStart error
}

var _ protocol.Store = (*fakeStore)(nil)

func newFakeStore() *fakeStore {
	return &fakeStore{
		tasks: map[string]*protocol.Task{}, steps: map[string][]*protocol.Step{},
		staged: map[string][]byte{}, recorded: map[string][]byte{}, files: map[string]map[string][]byte{},
	}
}

func notFound(kind, id string) error {
	return protocol.Errorf(protocol.ENOTFOUND, "no %s %s", kind, id)
}

// takeFailure returns the injected failure, once.
func (s *fakeStore) takeFailure() error {
	err := s.failRecord
	s.failRecord = nil
	return err
}

// record moves the bytes of artifacts from staged to recorded.
func (s *fakeStore) record(artifacts []protocol.Artifact) {
	for _, a := range artifacts {
		b, ok := s.staged[a.ArtifactID]
		if a.URI != "" {
			if ok {
				panic("recording URI artifact " + a.ArtifactID + " with staged bytes")
			}
			continue
		}
		if !ok {
			panic("recording artifact " + a.ArtifactID + " whose bytes were not staged")
		}
		delete(s.staged, a.ArtifactID)
		s.recorded[a.ArtifactID] = b
	}
}

func (s *fakeStore) CreateTask(ctx context.Context, t *protocol.Task, planned []protocol.Step, artifacts []protocol.Artifact) error {
	if ctx.Err() != nil {
		return ctx.Err() // as SaveStep
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.takeFailure(); err != nil {
		return err
	}
	s.record(artifacts)
	c := *t
	c.Artifacts = append([]protocol.Artifact{}, artifacts...)
	c.StepCount = len(planned)
	s.tasks[t.TaskID] = &c
	s.order = append(s.order, t.TaskID)
	for i := range planned {
		p := planned[i]
		s.steps[t.TaskID] = append(s.steps[t.TaskID], &p)
	}
	return nil
}

func (s *fakeStore) GetTask(ctx context.Context, taskID string) (*protocol.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, notFound("task", taskID)
	}
	c := *t
	c.Artifacts = append([]protocol.Artifact{}, t.Artifacts...)
	for _, st := range s.steps[taskID] {
		c.PlannedLeft = c.PlannedLeft || st.Planned && st.Status == protocol.StatusCreated
	}
	return &c, nil
}

func (s *fakeStore) ListTasks(ctx context.Context, p protocol.Page) ([]protocol.Task, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []protocol.Task
	for i := p.Offset(); i < len(s.order) && len(out) < p.Size; i++ {
		out = append(out, *s.tasks[s.order[i]])
	}
	return out, len(s.order), nil
}

func (s *fakeStore) TaskLogs(ctx context.Context, taskID string) ([]protocol.LogRecord, error) {
	t, err := s.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return t.Logs, nil
}

func (s *fakeStore) NextPlannedStep(ctx context.Context, taskID string) (*protocol.Step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plannedLooks++
	for _, st := range s.steps[taskID] {
		if st.Planned && st.Status == protocol.StatusCreated {
			c := *st
			return &c, nil
		}
	}
	return nil, nil
}

func (s *fakeStore) SaveStep(ctx context.Context, st *protocol.Step, artifacts []protocol.Artifact) error {
	if ctx.Err() != nil {
		return ctx.Err() // as SQLite does: a cancelled context records nothing
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.takeFailure(); err != nil {
		return err
	}
	t, ok := s.tasks[st.TaskID]
	if !ok {
		return notFound("task", st.TaskID)
	}
	s.record(artifacts)
	c := *st
	for i, old := range s.steps[st.TaskID] {
		if old.StepID == st.StepID {
			s.steps[st.TaskID][i] = &c
			c.Planned = old.Planned
			t.PluginTime += st.PluginTime
			t.Artifacts = append(t.Artifacts, artifacts...)
			return nil
		}
	}
	s.steps[st.TaskID] = append(s.steps[st.TaskID], &c)
	t.StepCount++
	t.PluginTime += st.PluginTime
	t.Artifacts = append(t.Artifacts, artifacts...)
	return nil
}

func (s *fakeStore) step(taskID, stepID string) (*protocol.Step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[taskID]; !ok {
		return nil, notFound("task", taskID)
	}
	for _, st := range s.steps[taskID] {
		if st.StepID == stepID {
			c := *st
			return &c, nil
		}
	}
	return nil, notFound("step", stepID)
}

func (s *fakeStore) GetStep(ctx context.Context, taskID, stepID string) (*protocol.Step, error) {
	return s.step(taskID, stepID)
}

func (s *fakeStore) ListSteps(ctx context.Context, taskID string, p protocol.Page) ([]protocol.Step, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[taskID]; !ok {
		return nil, 0, notFound("task", taskID)
	}
	all := s.steps[taskID]
	var out []protocol.Step
	for i := p.Offset(); i < len(all) && len(out) < p.Size; i++ {
		out = append(out, *all[i])
	}
	return out, len(all), nil
}

func (s *fakeStore) StartStep(ctx context.Context, st *protocol.Step) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failStart != nil {
		return s.failStart
	}
	s.starts++
	t, ok := s.tasks[st.TaskID]
	if !ok {
		return notFound("task", st.TaskID)
	}
	c := *st
	for i, old := range s.steps[st.TaskID] {
		if old.StepID == st.StepID {
			s.steps[st.TaskID][i] = &c
			return nil
		}
	}
	s.steps[st.TaskID] = append(s.steps[st.TaskID], &c)
	t.StepCount++
	return nil
}

func (s *fakeStore) AbandonStep(ctx context.Context, st *protocol.Step) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	steps := s.steps[st.TaskID]
	for i, old := range steps {
		if old.StepID != st.StepID {
			continue
		}
		if old.Planned {
			old.Status, old.Build = protocol.StatusCreated, nil
		} else {
			s.steps[st.TaskID] = append(steps[:i:i], steps[i+1:]...)
			s.tasks[st.TaskID].StepCount--
		}
		return nil
	}
	return nil
}

func (s *fakeStore) StepSummaries(ctx context.Context, taskIDs []string) (map[string]protocol.StepSummary, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]protocol.StepSummary{}
	for _, id := range taskIDs {
		if _, ok := s.tasks[id]; !ok {
			continue
		}
		sum := protocol.StepSummary{Planned: []string{}}
		for _, st := range s.steps[id] {
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

func (s *fakeStore) UpdateTask(ctx context.Context, taskID string, patch protocol.TaskPatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
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
	return nil
}

func (s *fakeStore) DeleteTask(ctx context.Context, taskID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return notFound("task", taskID)
	}
	for _, a := range t.Artifacts {
		delete(s.recorded, a.ArtifactID)
	}
	delete(s.tasks, taskID)
	delete(s.steps, taskID)
	delete(s.files, taskID)
	s.order = slices.DeleteFunc(s.order, func(id string) bool { return id == taskID })
	s.deleted = append(s.deleted, taskID)
	return nil
}

func (s *fakeStore) StepLogs(ctx context.Context, taskID, stepID string) ([]protocol.LogRecord, error) {
	st, err := s.step(taskID, stepID)
	if err != nil {
		return nil, err
	}
	return st.Logs, nil
}

func (s *fakeStore) AddArtifacts(ctx context.Context, taskID string, artifacts []protocol.Artifact, log protocol.TaskLog, pluginTime time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err() // as SaveStep
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(artifacts) > 0 {
		if err := s.takeFailure(); err != nil {
			return err
		}
	}
	t, ok := s.tasks[taskID]
	if !ok {
		return notFound("task", taskID)
	}
	s.record(artifacts)
	t.Artifacts = append(t.Artifacts, artifacts...)
	t.Logs = append(t.Logs, log.Records...)
	t.LogBytes += log.Bytes
	t.PluginTime += pluginTime
	return nil
}

func (s *fakeStore) GetArtifact(ctx context.Context, taskID, artifactID string) (*protocol.Artifact, error) {
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

func (s *fakeStore) ListArtifacts(ctx context.Context, taskID string, p protocol.Page) ([]protocol.Artifact, int, error) {
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

func (s *fakeStore) StageArtifact(ctx context.Context, artifactID string) (protocol.Blob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.staged[artifactID] = nil
	return &fakeBlob{s: s, id: artifactID}, nil
}

func (s *fakeStore) OpenArtifact(ctx context.Context, a *protocol.Artifact) (io.ReadSeekCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.recorded[a.ArtifactID]
	if !ok {
		return nil, errors.New("the bytes of a recorded artifact are missing")
	}
	return nopCloser{bytes.NewReader(b)}, nil
}

type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }

func (s *fakeStore) CheckSpace(ctx context.Context) error {
	if s.diskFull {
		return protocol.Errorf(protocol.EINSUFFICIENT, "the disk is full")
	}
	return nil
}

func (s *fakeStore) Workspace(taskID string, quota protocol.WorkspaceQuota) protocol.Workspace {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quotas = append(s.quotas, quota)
	return &fakeWorkspace{s: s, taskID: taskID, quota: quota}
}

// lastStepStatus is the status the store holds for the last step of a
// task, "" for none: for tests of one task.
func (s *fakeStore) lastStepStatus() protocol.StepStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.steps {
		if len(st) > 0 {
			return st[len(st)-1].Status
		}
	}
	return ""
}

// fakeBlob is staged bytes in a fakeStore.
type fakeBlob struct {
	s    *fakeStore
	id   string
	size int64
}

func (b *fakeBlob) Write(p []byte) (int, error) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	b.s.staged[b.id] = append(b.s.staged[b.id], p...)
	b.size += int64(len(p))
	return len(p), nil
}

func (b *fakeBlob) Size() int64  { return b.size }
func (b *fakeBlob) Close() error { return nil }

func (b *fakeBlob) SHA256() (string, error) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	sum := sha256.Sum256(b.s.staged[b.id])
	return hex.EncodeToString(sum[:]), nil
}

func (b *fakeBlob) Discard() {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if _, ok := b.s.staged[b.id]; ok {
		delete(b.s.staged, b.id)
		b.s.discarded++
	}
}

// fakeWorkspace is a task's files in a fakeStore: flat, its quota counted
// in bytes and files.
type fakeWorkspace struct {
	s      *fakeStore
	taskID string
	quota  protocol.WorkspaceQuota
}

func (w *fakeWorkspace) files() map[string][]byte {
	if w.s.files[w.taskID] == nil {
		w.s.files[w.taskID] = map[string][]byte{}
	}
	return w.s.files[w.taskID]
}

func (w *fakeWorkspace) check(name string, size int64) error {
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

func (w *fakeWorkspace) ReadInto(ctx context.Context, name string, buf []byte) (int64, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	b, ok := w.files()[name]
	if !ok {
		return 0, notFound("file", name)
	}
	if len(b) <= len(buf) {
		copy(buf, b)
	}
	return int64(len(b)), nil
}

func (w *fakeWorkspace) Write(ctx context.Context, name string, data []byte) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if err := w.check(name, int64(len(data))); err != nil {
		return err
	}
	w.files()[name] = append([]byte(nil), data...)
	return nil
}

func (w *fakeWorkspace) Stat(ctx context.Context, name string) (protocol.FileInfo, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	b, ok := w.files()[name]
	if !ok {
		return protocol.FileInfo{}, notFound("file", name)
	}
	return protocol.FileInfo{Path: name, Size: int64(len(b))}, nil
}

func (w *fakeWorkspace) Remove(ctx context.Context, name string) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if _, ok := w.files()[name]; !ok {
		return notFound("file", name)
	}
	delete(w.files(), name)
	return nil
}

func (w *fakeWorkspace) List(ctx context.Context, prefix string) ([]protocol.FileInfo, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	var out []protocol.FileInfo
	for n, b := range w.files() {
		if strings.HasPrefix(n, prefix) {
			out = append(out, protocol.FileInfo{Path: n, Size: int64(len(b))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (w *fakeWorkspace) Place(ctx context.Context, name, artifactID string) (protocol.Placement, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	b := w.s.staged[artifactID]
	if err := w.check(name, int64(len(b))); err != nil {
		return nil, err
	}
	old, had := w.files()[name]
	w.files()[name] = b
	p := &fakePlacement{w: w, name: name, old: old, had: had}
	w.s.placed = append(w.s.placed, p)
	return p, nil
}

func (w *fakeWorkspace) StageArtifact(ctx context.Context, name, artifactID string) (protocol.Blob, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	b, ok := w.files()[name]
	if !ok {
		return nil, notFound("file", name)
	}
	w.s.staged[artifactID] = b
	return &fakeBlob{s: w.s, id: artifactID, size: int64(len(b))}, nil
}

func (w *fakeWorkspace) RemoveAll(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err() // a store may stop at a cancelled context, removing nothing
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	delete(w.s.files, w.taskID)
	w.s.removed = append(w.s.removed, w.taskID)
	return nil
}

// fakePlacement is an upload placed in a fakeWorkspace; it says how it was
// settled.
type fakePlacement struct {
	w         *fakeWorkspace
	name      string
	old       []byte
	had       bool
	committed bool
	rolled    bool
}

func (p *fakePlacement) Commit() {
	if p.committed || p.rolled {
		panic("a placement settled twice")
	}
	p.committed = true
}

func (p *fakePlacement) Rollback() error {
	if p.committed || p.rolled {
		panic("a placement settled twice")
	}
	p.rolled = true
	p.w.s.mu.Lock()
	defer p.w.s.mu.Unlock()
	if p.had {
		p.w.files()[p.name] = p.old
	} else {
		delete(p.w.files(), p.name)
	}
	return nil
}

// fakePlugin runs handlers written in Go against the real wire format: a
// handler sets its result as JSON, as a plugin does.
type fakePlugin struct {
	handlers map[protocol.Handler]fakeHandler
	// elapsed is the plugin time each run reports.
	elapsed time.Duration

	mu      sync.Mutex
	runs    int
	running map[string]int // runs in progress, by task
	overlap bool           // two runs of one task were in progress at once
}

// fakeHandler is one handler: what it does with the call, and the return
// code or the failure (a *protocol.PluginFailure, as runtime reports a
// trap) it ends with.
type fakeHandler func(ctx context.Context, call *protocol.Call) (int32, error)

var _ protocol.Plugin = (*fakePlugin)(nil)

func newFakePlugin(handlers map[protocol.Handler]fakeHandler) *fakePlugin {
	return &fakePlugin{handlers: handlers, elapsed: time.Millisecond, running: map[string]int{}}
}

func (p *fakePlugin) HasHandler(h protocol.Handler) bool { return p.handlers[h] != nil }
func (p *fakePlugin) Codec() protocol.Codec              { return wire.V1 }

func (p *fakePlugin) Run(ctx context.Context, h protocol.Handler, call *protocol.Call) (int32, time.Duration, error) {
	var in struct {
		Task struct {
			TaskID string `json:"task_id"`
		} `json:"task"`
	}
	if err := jsonUnmarshal(call.Input(), &in); err != nil {
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
	return code, p.elapsed, err
}

func (p *fakePlugin) stats() (runs int, overlap bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs, p.overlap
}
