package protocol

import (
	"context"
	"io"
	"time"
)

// Store is the persistence an Agent needs, as the small interfaces below;
// storage.Store implements them all. Every method that records something
// returns only once it is on disk. Errors are *Error values with the codes
// each method names, or internal errors (whose text never reaches a
// client); any method that writes may also return EINSUFFICIENT when the
// disk is at the floor it keeps free.
type Store interface {
	TaskStore
	StepStore
	ArtifactStore
	BlobStore
	WorkspaceStore
	DiskFloor
	EventStore
}

// TaskStore records tasks.
type TaskStore interface {
	// CreateTask records a new task with the steps its task handler
	// planned, the artifacts it created (whose bytes are staged), its log
	// (t.Logs) and plugin time, in one transaction.
	CreateTask(ctx context.Context, t *Task, planned []Step, artifacts []Artifact) error
	// GetTask returns a task with all its artifacts, its step count, log
	// size and plugin time, and whether it has planned steps left.
	// ENOTFOUND when there is no such task.
	GetTask(ctx context.Context, taskID string) (*Task, error)
	// ListTasks returns a page of tasks in creation order, and how many
	// tasks there are.
	ListTasks(ctx context.Context, p Page) ([]Task, int, error)
	// TaskLogs returns the task's log: what its task handler and artifact
	// handlers logged. ENOTFOUND when there is no such task.
	TaskLogs(ctx context.Context, taskID string) ([]LogRecord, error)
	// UpdateTask changes the metadata patch names, in one transaction.
	// ENOTFOUND when there is no such task.
	UpdateTask(ctx context.Context, taskID string, patch TaskPatch) error
	// DeleteTask removes a task with its steps, artifacts and logs, and
	// their bytes on disk (artifact bytes, the workspace). The rows go in
	// one transaction; once it returns, so have the bytes, or they are
	// removed at the next start (a process that dies in between leaves
	// nothing a client can see). ENOTFOUND when there is no such task.
	// The caller makes sure nothing else uses the task meanwhile.
	DeleteTask(ctx context.Context, taskID string) error
}

// StepStore records steps.
type StepStore interface {
	// NextPlannedStep returns the task's oldest planned step not yet
	// executed, or nil when there is none.
	NextPlannedStep(ctx context.Context, taskID string) (*Step, error)
	// SaveStep records an executed step: a new one, or a planned one
	// (Planned set) now run, with the artifacts it created (whose bytes are
	// staged), its log (s.Logs) and plugin time, in one transaction. A new
	// step that was never marked (s.Marked unset) has no row yet.
	// ENOTFOUND when the task is gone, or a planned step is not the task's.
	SaveStep(ctx context.Context, s *Step, artifacts []Artifact) error
	// GetStep returns a step of a task. ENOTFOUND when there is no such
	// task, or the step is not the task's.
	GetStep(ctx context.Context, taskID, stepID string) (*Step, error)
	// ListSteps returns a page of a task's steps in creation order, and how
	// many there are. ENOTFOUND when there is no such task.
	ListSteps(ctx context.Context, taskID string, p Page) ([]Step, int, error)
	// StepLogs returns what the plugin logged while running a step.
	// ENOTFOUND as GetStep.
	StepLogs(ctx context.Context, taskID, stepID string) ([]LogRecord, error)
	// StartStep records that a step is running: a new step (with its
	// input, counted in its task's steps) or a planned one, with status
	// "running" and the build that runs it, so that a process that dies
	// while the handler runs leaves it marked. The mark need survive the
	// process, not the machine: StartStep returns once it is written,
	// without waiting for the disk (the SaveStep that follows waits for
	// both). A step left running is marked failed, with the error code
	// EINTERRUPTED, when the store next opens. ENOTFOUND when the task is
	// gone. It sets s.Marked first, whether or not the mark is written.
	StartStep(ctx context.Context, s *Step) error
	// AbandonStep undoes StartStep for a step whose handler never ran: a
	// new step is removed, a planned one is planned again. Like
	// StartStep, it does not wait for the disk.
	AbandonStep(ctx context.Context, s *Step) error
	// StepSummaries summarises the steps of each of the tasks: the names
	// of those still planned, in order, and how many have run to an end,
	// well or failed. Tasks that do not exist are missing from the map.
	StepSummaries(ctx context.Context, taskIDs []string) (map[string]StepSummary, error)
}

// StepSummary summarises a task's steps.
type StepSummary struct {
	// Planned are the names of the steps still waiting to run, in the
	// order they run.
	Planned []string
	// Running counts the steps running; Completed those that ended well,
	// Failed those whose handler failed (their additional_output holds
	// the error).
	Running, Completed, Failed int
}

// ArtifactStore records artifacts.
type ArtifactStore interface {
	// AddArtifacts records artifacts of a task made outside a step (an
	// upload, and what its artifact handler created, whose bytes are
	// staged), adds log to the task's log and pluginTime to its plugin
	// time, in one transaction. ENOTFOUND when the task is gone.
	AddArtifacts(ctx context.Context, taskID string, artifacts []Artifact, log TaskLog, pluginTime time.Duration) error
	// GetArtifact returns an artifact of a task. ENOTFOUND when there is
	// no such task, or the artifact is not the task's.
	GetArtifact(ctx context.Context, taskID, artifactID string) (*Artifact, error)
	// ListArtifacts returns a page of a task's artifacts in creation order,
	// and how many there are. ENOTFOUND when there is no such task.
	ListArtifacts(ctx context.Context, taskID string, p Page) ([]Artifact, int, error)
}

// BlobStore holds artifacts' bytes.
type BlobStore interface {
	// StageArtifact starts writing the bytes of a new artifact. They become
	// the artifact's when a row naming artifactID is recorded; until then
	// nothing serves them, and Discard (or the next start) removes them.
	StageArtifact(ctx context.Context, artifactID string) (Blob, error)
	// OpenArtifact opens a recorded artifact's bytes. That they cannot be
	// read is an internal error: a recorded artifact's bytes are on disk.
	OpenArtifact(ctx context.Context, a *Artifact) (io.ReadSeekCloser, error)
}

// WorkspaceStore gives each task a workspace: the files its handlers share.
type WorkspaceStore interface {
	// Workspace returns the workspace of a task, held to quota. It is used
	// by one goroutine at a time, while the task is locked, and holds
	// nothing that needs closing.
	Workspace(taskID string, quota WorkspaceQuota) Workspace
}

// DiskFloor is the free disk space the store keeps.
type DiskFloor interface {
	// CheckSpace is EINSUFFICIENT when the disk is at the floor it keeps
	// free: nothing new can be recorded.
	CheckSpace(ctx context.Context) error
}

// WorkspaceQuota bounds what one task's workspace holds.
type WorkspaceQuota struct {
	Bytes int64 // the bytes of its files
	// Entries bounds its files and directories alike (a directory takes an
	// inode and a block like a file).
	Entries int
}

// Workspace is one task's files. Names are paths cleaned by CleanFilePath
// ("a/b.txt"); the workspace refuses anything that would resolve outside
// it (EBADPATH). Changes are held to the workspace's quota: a write or a
// placement that would put it over is refused with ETOOLARGE and changes
// nothing.
type Workspace interface {
	// ReadInto reads the file name into buf if it fits, and returns its
	// size either way: a file larger than buf is not read, and nothing is
	// allocated for its bytes. ENOTFOUND when there is no such file,
	// EBADPATH when name is a directory.
	ReadInto(ctx context.Context, name string, buf []byte) (size int64, err error)
	// Write creates or replaces the file name, making its directories.
	// EBADPATH when name is a directory or under a file; ETOOLARGE over
	// the quota.
	Write(ctx context.Context, name string, data []byte) error
	// Stat describes the file name. ENOTFOUND, EBADPATH as ReadInto.
	Stat(ctx context.Context, name string) (FileInfo, error)
	// Remove removes the file name and the directories it leaves empty.
	// ENOTFOUND, EBADPATH as ReadInto.
	Remove(ctx context.Context, name string) error
	// List lists the files whose path starts with prefix, in path order.
	List(ctx context.Context, prefix string) ([]FileInfo, error)
	// Place puts the staged bytes of artifact artifactID at name (an
	// upload arriving in the workspace), keeping whatever it replaces
	// until the Placement is settled. EBADPATH and ETOOLARGE as Write.
	Place(ctx context.Context, name, artifactID string) (Placement, error)
	// StageArtifact stages the current bytes of the file name as the
	// bytes of the new artifact artifactID, without copying them (see
	// BlobStore.StageArtifact). ENOTFOUND, EBADPATH as ReadInto.
	StageArtifact(ctx context.Context, name, artifactID string) (Blob, error)
	// RemoveAll removes the whole workspace (a task that was not created).
	RemoveAll(ctx context.Context) error
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
	// SHA256 is the sha256 of the bytes, in hex, once they are all
	// written.
	SHA256() (string, error)
	// Close syncs the bytes to disk.
	Close() error
	// Discard removes the bytes of an artifact that will not be recorded.
	Discard()
}
