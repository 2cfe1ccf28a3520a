package protocol

import (
	"context"
	"io"
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

// OpenArtifact returns an artifact of a task and its bytes. The caller
// closes them.
func (a *Agent) OpenArtifact(ctx context.Context, taskID, artifactID string) (*Artifact, io.ReadSeekCloser, error) {
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
	f, err := a.store.OpenArtifact(ctx, art)
	if err != nil {
		return nil, nil, err
	}
	return art, f, nil
}
