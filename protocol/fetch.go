package protocol

import (
	"context"
	"strings"
)

// FetchArtifact writes the bytes a URI artifact of the task refers to
// into the workspace file name, and returns their size: the agent asks,
// the host fetches, through get (the agent's outbound HTTP, under its
// policy and limits). The artifact is one the task holds, the upload an
// artifact handler is handed, or one the call created; its URI is
// http or https. ENOTFOUND when there is no such artifact,
// EUNPROCESSABLE for an artifact of bytes (they are in the workspace
// already), EMETHOD for another scheme and in the download handler, which
// changes nothing; get's errors as they are; the workspace's as
// WorkspaceWrite's.
func (c *Call) FetchArtifact(ctx context.Context, artifactID, name string, get func(ctx context.Context, uri string) ([]byte, error)) (int64, error) {
	if err := c.readOnly("fetch artifacts into the workspace"); err != nil {
		return 0, err
	}
	file, err := CleanFilePath(name)
	if err != nil {
		return 0, err
	}
	a := c.findArtifact(artifactID)
	switch {
	case a == nil:
		return 0, Errorf(ENOTFOUND, "the task has no artifact %q", cutText(artifactID, 64))
	case a.URI == "":
		return 0, Errorf(EUNPROCESSABLE, "artifact %s is bytes, in the workspace at %q already: read it there", a.ArtifactID, a.WorkspacePath())
	}
	scheme, _, _ := strings.Cut(a.URI, ":")
	if scheme != "http" && scheme != "https" {
		return 0, Errorf(EMETHOD, "artifact %s is a %s URI: only http and https ones are fetched", a.ArtifactID, scheme)
	}
	if err := c.BeforeEffect(ctx); err != nil {
		return 0, err
	}
	data, err := get(ctx, a.URI)
	if err != nil {
		return 0, err
	}
	if err := c.workspace.Write(ctx, file, data); err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}

// findArtifact is the artifact id among those the call can see: the
// task's, the upload the artifact handler handles, and those the call
// created.
func (c *Call) findArtifact(id string) *Artifact {
	if c.artifact != nil && c.artifact.ArtifactID == id {
		return c.artifact
	}
	for i := range c.task.Artifacts {
		if c.task.Artifacts[i].ArtifactID == id {
			return &c.task.Artifacts[i]
		}
	}
	for i := range c.artifacts {
		if c.artifacts[i].ArtifactID == id {
			return &c.artifacts[i]
		}
	}
	return nil
}
