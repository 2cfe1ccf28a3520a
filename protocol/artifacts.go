package protocol

import (
	"context"
	"io"
	"slices"
)

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

// ArtifactSchemes returns the URI schemes the agent accepts in uploads
// and may produce. ECONFLICT when the agent is gone.
func (a *Agent) ArtifactSchemes() (*ArtifactSchemes, error) {
	b, err := a.acquire()
	if err != nil {
		return nil, err
	}
	defer a.release(b)
	return &ArtifactSchemes{Input: slices.Clone(b.schemes.Input), Output: slices.Clone(b.schemes.Output)}, nil
}

// Download is how an artifact's download is answered (DownloadArtifact):
// exactly one of its fields besides Artifact is set.
type Download struct {
	Artifact *Artifact
	// Served is set when the agent's download handler wrote the answer.
	Served bool
	// Bytes are the artifact's stored bytes, to serve; the caller closes
	// them.
	Bytes io.ReadSeekCloser
	// Redirect is the http or https URI of a URI artifact, to redirect to.
	Redirect string
}

// DownloadArtifact serves the download of an artifact of a task.
//
// When the agent's plugin has a download handler, it runs first, in the
// sandbox under the agent's limits, with the task locked: it may write
// the download's bytes to w (Call.DownloadWrite), and the answer is then
// what it wrote (Served), or leave the download to the host. A handler
// that fails is a *PluginFailure, after w was written to or not (the
// caller tells which). Its time counts against the task's budget and its
// log goes to the task's, as the artifact handler's do.
//
// The host's own answer is the artifact's stored bytes (Bytes); for a URI
// artifact, a redirect to it (Redirect) when it is http or https, and
// EREFERENCE otherwise: agentrt holds none of its bytes and fetches
// nothing. A gone agent's artifacts are served by the host.
func (a *Agent) DownloadArtifact(ctx context.Context, taskID, artifactID string, w DownloadWriter) (*Download, error) {
	if err := checkID("task", &taskID); err != nil {
		return nil, err
	}
	if err := checkID("artifact", &artifactID); err != nil {
		return nil, err
	}
	art, err := a.store.GetArtifact(ctx, taskID, artifactID)
	if err != nil {
		return nil, err
	}
	d := &Download{Artifact: art}
	b, err := a.acquire()
	switch {
	case err == nil:
		defer a.release(b)
		if b.Plugin.HasHandler(HandlerDownload) {
			if d.Served, err = a.runDownloadHandler(ctx, b, art, w); err != nil || d.Served {
				return d, err
			}
		}
	case ErrorCode(err) != ECONFLICT:
		return nil, err
	}
	if art.URI != "" {
		switch URIScheme(art.URI) {
		case "http", "https":
			d.Redirect = art.URI
			return d, nil
		}
		return nil, Errorf(EREFERENCE, "artifact %s is a reference to %s: agentrt holds none of its bytes, and the agent serves no download of it", art.ArtifactID, art.URI)
	}
	if d.Bytes, err = a.store.OpenArtifact(ctx, art); err != nil {
		return nil, err
	}
	return d, nil
}

// runDownloadHandler runs the download handler of build b on art, its
// bytes going to w, and reports whether it served the download.
func (a *Agent) runDownloadHandler(ctx context.Context, b *served, art *Artifact, w DownloadWriter) (bool, error) {
	unlock, err := a.locks.enter(art.TaskID)
	if err != nil {
		return false, err
	}
	defer unlock()
	task, err := a.store.GetTask(ctx, art.TaskID)
	if err != nil {
		return false, err
	}
	if err := checkBudget(&b.Limits, task); err != nil {
		return false, err
	}
	call := a.newCall(b, &HandlerInput{Handler: HandlerDownload, Task: task, Artifact: art})
	call.download = w
	// The client may go away (ctx ends) and stop the handler; what it did
	// is recorded all the same.
	code, elapsed, err := a.run(ctx, task, call)
	var res *DownloadResult
	if err == nil {
		res, err = finish(call, code, call.codec.DecodeDownloadResult)
	}
	if err == nil && res.Default && call.downloaded > 0 {
		err = NewPluginFailure(CauseBadResult, "it wrote %d bytes of the download, then left the download to the host", call.downloaded)
	}
	if log := fitTaskLog(&b.Limits, task, call.logs); elapsed > 0 || len(log.Records) > 0 {
		if rerr := a.store.AddArtifacts(context.WithoutCancel(ctx), art.TaskID, nil, log, elapsed); rerr != nil {
			a.log.Warn("recording a download handler's time and log", "task_id", art.TaskID, "err", rerr)
		}
	}
	if err != nil {
		a.log.Warn("download handler failed", "task_id", art.TaskID, "artifact_id", art.ArtifactID,
			"written", call.downloaded, "err", logText(err))
		return false, handlerError(HandlerDownload, err)
	}
	return !res.Default, nil
}
