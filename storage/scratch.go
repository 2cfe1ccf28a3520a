package storage

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentrt/agentrt/protocol"
)

// Scratch is a directory laid out as a data directory's workspaces and
// staged artifact bytes, without a database: what one handler call outside
// a server ("agentrt call") works on. It records nothing; the artifacts a
// call creates stay staged, readable with OpenArtifact, until Close
// removes the directory.
type Scratch struct{ s *Store }

// OpenScratch makes a scratch directory dir, keeping minFreeDisk bytes
// free on its disk as a Store does (AutoMinFreeDisk, 0: no floor).
func OpenScratch(dir string, minFreeDisk int64) (*Scratch, error) {
	for _, sub := range []string{"staging", "workspaces"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o750); err != nil {
			return nil, fmt.Errorf("create scratch directory %s: %w", dir, err)
		}
	}
	floor, err := newDiskFloor(dir, minFreeDisk)
	if err != nil {
		return nil, err
	}
	return &Scratch{s: &Store{core: &core{dir: dir, floor: floor, log: slog.New(slog.NewTextHandler(io.Discard, nil))}}}, nil
}

// Workspace implements protocol.WorkspaceStore.
func (x *Scratch) Workspace(taskID string, quota protocol.WorkspaceQuota) protocol.Workspace {
	return x.s.Workspace(taskID, quota)
}

// StageArtifact implements protocol.BlobStore.
func (x *Scratch) StageArtifact(ctx context.Context, artifactID string) (protocol.Blob, error) {
	return x.s.StageArtifact(ctx, artifactID)
}

// OpenArtifact implements protocol.BlobStore: the bytes of an artifact a
// call staged.
func (x *Scratch) OpenArtifact(ctx context.Context, a *protocol.Artifact) (io.ReadSeekCloser, error) {
	return x.s.OpenArtifact(ctx, a)
}

// CheckSpace implements protocol.DiskFloor.
func (x *Scratch) CheckSpace(ctx context.Context) error { return x.s.CheckSpace(ctx) }

// Close removes the scratch directory and everything in it.
func (x *Scratch) Close() error { return os.RemoveAll(x.s.dir) }
