package protocol

import (
	"context"
	"time"
)

// Upload is a client's file on its way to becoming an artifact. Write the
// bytes, then Commit with the file's name and path, or Discard.
type Upload struct {
	agent  *Agent
	build  *served // held from NewUpload until Commit or Discard
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
	b, err := a.acquire()
	if err != nil {
		return nil, err
	}
	// Refused before the bytes are read; Commit checks again, under the
	// task's lock.
	use := artifactsOf(task)
	if err := b.Limits.checkArtifact(use, 0); err != nil {
		a.release(b)
		return nil, err
	}
	u := &Upload{agent: a, build: b, taskID: taskID, id: newID()}
	u.limit, u.quotaLimit = b.Limits.artifactRoom(use, b.Limits.MaxUploadBytes)
	if u.blob, err = a.store.StageArtifact(ctx, u.id); err != nil {
		a.release(b)
		return nil, err
	}
	return u, nil
}

// MaxSize is the upload limit: the most bytes any uploaded file may hold.
// The task's artifact quota may allow this file fewer; Write says so.
func (u *Upload) MaxSize() int64 { return u.build.Limits.MaxUploadBytes }

// Write writes the file's next bytes; ETOOLARGE past the upload limit or
// the task's artifact bytes quota.
func (u *Upload) Write(p []byte) (int, error) {
	if u.blob.Size()+int64(len(p)) > u.limit {
		if u.quotaLimit {
			return 0, Errorf(ETOOLARGE, "the file would put the task's artifacts over their quota of %d bytes", u.build.Limits.MaxTaskArtifactBytes)
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
//
// Like a step, a commit runs to completion even if ctx is cancelled.
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
	unlock, err := a.locks.enter(u.taskID)
	if err != nil {
		return nil, err
	}
	defer unlock()

	task, err := a.store.GetTask(ctx, u.taskID)
	if err != nil {
		return nil, err
	}
	b := u.build
	if err := b.Limits.checkArtifact(artifactsOf(task), art.Size); err != nil {
		return nil, err
	}
	placed, err := a.store.Workspace(u.taskID, b.Limits.workspaceQuota()).Place(ctx, art.WorkspacePath(), u.id)
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
	var call *Call
	if b.Plugin.HasHandler(HandlerArtifact) {
		if call, used, err = a.runArtifactHandler(ctx, b, task, art); err != nil {
			rollback()
			return nil, err
		}
		defer call.discard() // a no-op once recorded
		record, log = append(record, call.artifacts...), fitTaskLog(&b.Limits, task, call.logs)
	}
	if err := a.store.AddArtifacts(ctx, u.taskID, record, log, used); err != nil {
		rollback()
		return nil, err
	}
	if call != nil {
		call.recorded()
	}
	placed.Commit()
	u.finish()
	return art, nil
}

// runArtifactHandler runs the plugin's artifact handler on an upload placed
// in the workspace of task. It returns the call (whose artifacts and log
// the caller records) and the time it took, or why the upload must not be
// kept.
func (a *Agent) runArtifactHandler(ctx context.Context, b *served, task *Task, art *Artifact) (*Call, time.Duration, error) {
	if err := checkBudget(&b.Limits, task); err != nil {
		return nil, 0, err
	}
	call := a.newCall(b, &HandlerInput{Handler: HandlerArtifact, Task: task, Upload: art})
	code, elapsed, err := a.run(ctx, task, call)
	var res *ArtifactResult
	if err == nil {
		res, err = finish(call, code, call.codec.DecodeArtifactResult)
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
		return nil, 0, handlerError(HandlerArtifact, err)
	case res.Reject != "":
		call.discard()
		return nil, 0, Errorf(EREJECTED, "the agent rejected the upload: %s", cutText(res.Reject, maxPluginText))
	}
	return call, elapsed, nil
}

// Discard drops an upload that was not committed; after Commit it does
// nothing.
func (u *Upload) Discard() {
	if !u.done {
		u.blob.Discard()
		u.finish()
	}
}

// finish ends the upload's use of its build.
func (u *Upload) finish() {
	u.done = true
	u.agent.release(u.build)
}
