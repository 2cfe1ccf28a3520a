package protocol

import (
	"context"
	"path"
	"time"
)

// Upload is a client's artifact on its way to being recorded: a file (its
// bytes written, then Commit with its name and path) or a URI (CommitURI),
// or Discard.
type Upload struct {
	agent  *Agent
	build  *served // held from NewUpload until Commit or Discard
	taskID string
	id     string
	blob   Blob // staged at the first byte, or at Commit
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
	return u, nil
}

// MaxSize is the upload limit: the most bytes any uploaded file may hold.
// The task's artifact quota may allow this file fewer; Write says so.
func (u *Upload) MaxSize() int64 { return u.build.Limits.MaxUploadBytes }

// CheckFile refuses a file (EUNPROCESSABLE) when the agent takes no bytes:
// its input schemes leave out SchemeFile. Called before the bytes are read.
func (u *Upload) CheckFile() error {
	if in := u.build.schemes.Input; !accepts(in, SchemeFile) {
		return Errorf(EUNPROCESSABLE, "this agent takes no uploaded files, only URIs (its input schemes: %s)", schemeList(in))
	}
	return nil
}

// CheckURI cleans a URI for CommitURI (CleanURI) and refuses it
// (EUNPROCESSABLE) unless the agent accepts its scheme.
func (u *Upload) CheckURI(uri string) (string, error) {
	uri, scheme, err := CleanURI(uri)
	if err != nil {
		return "", err
	}
	if in := u.build.schemes.Input; !accepts(in, scheme) {
		return "", Errorf(EUNPROCESSABLE, "this agent does not accept %s URIs (its input schemes: %s)", scheme, schemeList(in))
	}
	return uri, nil
}

// Write writes the file's next bytes; ETOOLARGE past the upload limit or
// the task's artifact bytes quota.
func (u *Upload) Write(p []byte) (int, error) {
	var size int64
	if u.blob != nil {
		size = u.blob.Size()
	}
	if size+int64(len(p)) > u.limit {
		if u.quotaLimit {
			return 0, Errorf(ETOOLARGE, "the file would put the task's artifacts over their quota of %d bytes", u.build.Limits.MaxTaskArtifactBytes)
		}
		return 0, Errorf(ETOOLARGE, "the file is larger than the upload limit of %d bytes", u.limit)
	}
	if err := u.stage(context.Background()); err != nil {
		return 0, err
	}
	return u.blob.Write(p)
}

// stage stages the file's bytes, once.
func (u *Upload) stage(ctx context.Context) error {
	if u.blob != nil {
		return nil
	}
	blob, err := u.agent.store.StageArtifact(ctx, u.id)
	if err != nil {
		return err
	}
	u.blob = blob
	return nil
}

// Commit records the upload as an artifact of its task, named fileName in
// the workspace directory relativePath, and puts it in the task's workspace
// at relativePath/fileName. Names are cleaned or refused (EBADPATH); the
// workspace quota and the task's artifact quotas apply (ETOOLARGE). If the
// plugin has an artifact handler, it runs first and may reject the upload
// (EREJECTED) or fail (a *PluginFailure); either way no artifact is kept
// (files the handler wrote to the workspace stay, as a failed step's do).
//
// Like a step, a commit runs to completion even if ctx is cancelled.
func (u *Upload) Commit(ctx context.Context, fileName, relativePath string) (*Artifact, error) {
	if err := u.CheckFile(); err != nil {
		return nil, err
	}
	name, dir, err := cleanNames(fileName, relativePath)
	if err != nil {
		return nil, err
	}
	if err := u.stage(ctx); err != nil {
		return nil, err
	}
	if err := u.blob.Close(); err != nil {
		return nil, err
	}
	sum, err := u.blob.SHA256()
	if err != nil {
		return nil, err
	}
	art := &Artifact{ArtifactID: u.id, FileName: name, RelativePath: dir, TaskID: u.taskID,
		Size: u.blob.Size(), SHA256: sum, CreatedAt: time.Now()}
	return u.commit(ctx, art)
}

// CommitURI records the upload as a URI artifact of its task: uri
// (checked as CheckURI checks it), named fileName (or, when "", after the
// URI's last path segment) in the workspace directory relativePath. It is
// not put in the workspace: agentrt holds no bytes of it, and fetches
// nothing. The artifact handler, if there is one, runs first and may
// accept it, reject it (EREJECTED), replace it (another URI, or a
// workspace file's bytes), or fail (a *PluginFailure). Otherwise as Commit.
func (u *Upload) CommitURI(ctx context.Context, uri, fileName, relativePath string) (*Artifact, error) {
	uri, err := u.CheckURI(uri)
	if err != nil {
		return nil, err
	}
	if fileName == "" {
		fileName = uriFileName(uri)
	}
	name, dir, err := cleanNames(fileName, relativePath)
	if err != nil {
		return nil, err
	}
	art := &Artifact{ArtifactID: u.id, FileName: name, RelativePath: dir, URI: uri, TaskID: u.taskID, CreatedAt: time.Now()}
	return u.commit(ctx, art)
}

// cleanNames cleans an upload's file name and directory (CleanFileName,
// CleanDir).
func cleanNames(fileName, relativePath string) (name, dir string, err error) {
	if name, err = CleanFileName(fileName); err != nil {
		return "", "", err
	}
	if dir, err = CleanDir(relativePath); err != nil {
		return "", "", err
	}
	return name, dir, nil
}

// commit records art, the upload, as Commit and CommitURI say.
func (u *Upload) commit(ctx context.Context, art *Artifact) (*Artifact, error) {
	a := u.agent
	unlock, err := a.locks.enter(u.taskID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Detached from the request, as a step is; stopped when the task is
	// deleted or the server interrupted.
	ctx, stop, err := a.tasks.start(ctx, a, u.taskID)
	if err != nil {
		return nil, err
	}
	defer stop()

	task, err := a.store.GetTask(ctx, u.taskID)
	if err != nil {
		return nil, err
	}
	b := u.build
	if err := b.Limits.checkArtifact(artifactsOf(task), art.Size); err != nil {
		return nil, err
	}
	rollback := func() {}
	var placed Placement
	if art.URI == "" {
		placed, err = a.store.Workspace(u.taskID, b.Limits.WorkspaceQuota()).Place(ctx, art.WorkspacePath(), u.id)
		if err != nil {
			return nil, err
		}
		rollback = func() {
			if err := placed.Rollback(); err != nil {
				a.log.ErrorContext(ctx, "rolling back an upload failed; the next start finishes it",
					"task_id", u.taskID, "path", art.WorkspacePath(), "err", err)
			}
		}
	}
	var log TaskLog
	var used time.Duration
	var call *Call
	if b.Plugin.HasHandler(HandlerArtifact) {
		var res *ArtifactResult
		if call, res, used, err = a.runArtifactHandler(ctx, b, task, art); err != nil {
			rollback()
			return nil, err
		}
		defer call.discard() // a no-op once recorded
		if res.Replace != nil {
			if err := u.replace(ctx, call, art, res.Replace); err != nil {
				a.recordTime(ctx, u.taskID, used, fitTaskLog(&b.Limits, task, call.logs))
				rollback()
				return nil, handlerError(HandlerArtifact, err)
			}
		}
		log = fitTaskLog(&b.Limits, task, call.logs)
	}
	record := []Artifact{*art}
	if call != nil {
		record = append(record, call.artifacts...)
	}
	if err := a.store.AddArtifacts(context.WithoutCancel(ctx), u.taskID, record, log, used); err != nil {
		rollback()
		return nil, err
	}
	a.feed.notify(ctx, u.taskID)
	if call != nil {
		call.recorded()
	}
	if placed != nil {
		placed.Commit()
	}
	u.finish()
	return art, nil
}

// errReplacedFile is the failure of an artifact handler that replaced an
// uploaded file: only URI uploads are replaced.
func errReplacedFile() error {
	return NewPluginFailure(CauseBadResult, "it replaced an uploaded file; only URI uploads are replaced")
}

// replace makes art, a URI upload, what the artifact handler of call put
// in its place: another URI the agent accepts, or the bytes of a
// workspace file (the artifact is then that file, named by its path, held
// to the upload limit and the task's artifact quotas). A bad replacement
// is the plugin's failure (a *PluginFailure, CauseBadResult).
func (u *Upload) replace(ctx context.Context, call *Call, art *Artifact, r *Replacement) error {
	if art.URI == "" {
		return errReplacedFile()
	}
	switch {
	case (r.URI == "") == (r.WorkspacePath == ""):
		return NewPluginFailure(CauseBadResult, "its replacement names neither or both of uri and workspace_path")
	case r.URI != "":
		uri, err := u.CheckURI(r.URI)
		if err != nil {
			return NewPluginFailure(CauseBadResult, "it replaced the upload with a URI that is refused: %s", ErrorMessage(err))
		}
		art.URI = uri
		return nil
	}
	file, err := CleanFilePath(r.WorkspacePath)
	if err != nil {
		return NewPluginFailure(CauseBadResult, "it replaced the upload with a workspace path that is refused: %s", ErrorMessage(err))
	}
	if err := u.CheckFile(); err != nil {
		return NewPluginFailure(CauseBadResult, "it replaced the upload with bytes: %s", ErrorMessage(err))
	}
	blob, err := call.workspace.StageArtifact(ctx, file, art.ArtifactID)
	if err != nil {
		if code := ErrorCode(err); code == ENOTFOUND || code == EBADPATH {
			return NewPluginFailure(CauseBadResult, "it replaced the upload with the workspace file %q: %s", file, ErrorMessage(err))
		}
		return err
	}
	// call.use counts what the task's artifacts hold with the upload (a
	// URI: no bytes) and what the call created.
	if size := blob.Size(); size > u.MaxSize() {
		blob.Discard()
		return NewPluginFailure(CauseBadResult, "it replaced the upload with %q, of %d bytes, over the upload limit of %d bytes", file, size, u.MaxSize())
	} else if err := u.build.Limits.checkArtifactBytes(call.use, size); err != nil {
		blob.Discard()
		return NewPluginFailure(CauseBadResult, "it replaced the upload with %q: %s", file, ErrorMessage(err))
	}
	sum, err := blob.SHA256()
	if err != nil {
		blob.Discard()
		return err
	}
	u.blob = blob
	art.URI, art.Size, art.SHA256 = "", blob.Size(), sum
	art.RelativePath, art.FileName = path.Dir(file), path.Base(file)
	if art.RelativePath == "." {
		art.RelativePath = ""
	}
	return nil
}

// runArtifactHandler runs the plugin's artifact handler on an upload (a
// file placed in the workspace of task, or a URI). It returns the call
// (whose artifacts and log the caller records), its result and the time
// it took, or why the upload must not be kept.
func (a *Agent) runArtifactHandler(ctx context.Context, b *served, task *Task, art *Artifact) (*Call, *ArtifactResult, time.Duration, error) {
	if err := checkBudget(&b.Limits, task); err != nil {
		return nil, nil, 0, err
	}
	call := a.newCall(b, &HandlerInput{Handler: HandlerArtifact, Task: task, Artifact: art})
	code, elapsed, err := a.run(ctx, task, call)
	var res *ArtifactResult
	if err == nil {
		res, err = finish(call, code, call.codec.DecodeArtifactResult)
	}
	a.observe(HandlerArtifact, elapsed, err)
	if err != nil || res.Reject != "" {
		// The upload is not kept, but the time the plugin took counts
		// against the task's budget all the same, and what it logged (why
		// it rejected the upload, say) is kept in the task's log.
		call.flushOutput()
		a.recordTime(ctx, art.TaskID, elapsed, fitTaskLog(&b.Limits, task, call.logs))
	}
	switch {
	case err != nil && stopCause(ctx) != nil:
		call.discard()
		return nil, nil, 0, stopCause(ctx) // the task is being deleted, or the server stopping
	case err != nil:
		call.discard()
		a.log.WarnContext(ctx, "artifact handler failed", "task_id", art.TaskID, "err", logText(err))
		return nil, nil, 0, handlerError(HandlerArtifact, err)
	case res.Reject != "":
		call.discard()
		return nil, nil, 0, Errorf(EREJECTED, "the agent rejected the upload: %s", cutText(res.Reject, maxPluginText))
	}
	return call, res, elapsed, nil
}

// recordTime counts plugin time a handler call used against its task's
// budget, with what it logged, when nothing else of the call is recorded.
func (a *Agent) recordTime(ctx context.Context, taskID string, used time.Duration, log TaskLog) {
	if err := a.store.AddArtifacts(context.WithoutCancel(ctx), taskID, nil, log, used); err != nil {
		a.log.WarnContext(ctx, "recording plugin time", "task_id", taskID, "err", err)
	}
}

// Discard drops an upload that was not committed; after Commit it does
// nothing.
func (u *Upload) Discard() {
	if !u.done {
		if u.blob != nil {
			u.blob.Discard()
		}
		u.finish()
	}
}

// finish ends the upload's use of its build.
func (u *Upload) finish() {
	u.done = true
	u.agent.release(u.build)
}
