package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentrt/agentrt/protocol"
)

// A task's workspace is the directory workspaces/<task>, opened as an
// os.Root so that no name can resolve outside it. Its files are under
// files/; .tmp/ holds files being written and the previous version of a
// file an upload is replacing; quarantine/ holds a replaced file that an
// upload's rollback could not put back (see rollbackPlacement). Paths
// reach here cleaned by protocol.CleanFilePath; os.Root is the second line
// of defence.
//
// This file holds the handle (protocol.Workspace) and its quota
// accounting. Reading, writing and removing files is in files.go,
// describing them (stat, list) in fileinfo.go, the sweep of .tmp/ at
// start-up in sweep.go, and an upload placed in a workspace in
// placement.go.

const (
	filesDir      = "files"
	tmpDir        = ".tmp"
	quarantineDir = "quarantine"
)

// Workspace returns the workspace of a task, held to quota. Its usage is
// counted at its first change and kept up to date by its own changes: it
// is meant for one handler call, or one upload, while the task is locked.
func (s *Store) Workspace(taskID string, quota protocol.WorkspaceQuota) protocol.Workspace {
	return &workspace{s: s, taskID: taskID, quota: quota}
}

// workspace is a task's workspace as protocol.Workspace.
type workspace struct {
	s      *Store
	taskID string
	quota  protocol.WorkspaceQuota
	// usage is what the workspace holds, loaded at the first change and
	// kept up to date by each; nil to count again.
	usage *usage
}

// usage is what a workspace holds against its quota.
type usage struct {
	bytes   int64
	entries int
}

var _ protocol.Workspace = (*workspace)(nil)

func (w *workspace) ReadInto(ctx context.Context, name string, buf []byte) (int64, error) {
	return w.s.readFileInto(w.taskID, name, buf)
}

func (w *workspace) Stat(ctx context.Context, name string) (protocol.FileInfo, error) {
	return w.s.statFile(w.taskID, name)
}

func (w *workspace) List(ctx context.Context, prefix string) ([]protocol.FileInfo, error) {
	return w.s.listFiles(w.taskID, prefix)
}

func (w *workspace) RemoveAll(ctx context.Context) error {
	w.usage = nil
	return w.s.removeWorkspace(w.taskID)
}

func (w *workspace) StageArtifact(ctx context.Context, name, artifactID string) (protocol.Blob, error) {
	return w.s.stageArtifactFromFile(w.taskID, name, artifactID)
}

// Write checks the quota for the file as it would be after the write (the
// file replaced, the directories made) before writing anything.
func (w *workspace) Write(ctx context.Context, name string, data []byte) error {
	after, err := w.after(name, int64(len(data)))
	if err != nil {
		return err
	}
	if err := w.s.writeFile(w.taskID, name, data); err != nil {
		w.usage = nil // it may have made directories: count again at the next change
		return err
	}
	*w.usage = after
	return nil
}

func (w *workspace) Remove(ctx context.Context, name string) error {
	u, err := w.current()
	if err != nil {
		return err
	}
	old, err := w.s.statFile(w.taskID, name)
	if err != nil {
		return err
	}
	removedDirs, err := w.s.removeFile(w.taskID, name)
	if err != nil {
		w.usage = nil // count again at the next change
		return err
	}
	u.bytes, u.entries = u.bytes-old.Size, u.entries-1-removedDirs
	return nil
}

// Place checks the quota for the upload's bytes in place before placing
// them.
func (w *workspace) Place(ctx context.Context, name, artifactID string) (protocol.Placement, error) {
	fi, err := os.Stat(w.s.stagingPath(artifactID))
	if err != nil {
		return nil, storageError("place upload", err)
	}
	if _, err := w.after(name, fi.Size()); err != nil {
		return nil, err
	}
	w.usage = nil // an artifact handler changes the workspace next: count again
	return w.s.placeUpload(w.taskID, name, artifactID)
}

// current is the workspace's usage, counted at the first call.
func (w *workspace) current() (*usage, error) {
	if w.usage == nil {
		bytes, entries, err := w.s.workspaceUsage(w.taskID)
		if err != nil {
			return nil, err
		}
		w.usage = &usage{bytes: bytes, entries: entries}
	}
	return w.usage, nil
}

// after is the workspace's usage once the file name holds size bytes;
// ETOOLARGE when that is over the quota.
func (w *workspace) after(name string, size int64) (usage, error) {
	u, err := w.current()
	if err != nil {
		return usage{}, err
	}
	st, err := w.s.pathState(w.taskID, name)
	if err != nil {
		return usage{}, err
	}
	next := usage{bytes: u.bytes + size, entries: u.entries}
	if st.exists {
		next.bytes -= st.size
	} else {
		next.entries += 1 + st.missingDirs
	}
	if next.bytes > w.quota.Bytes {
		return usage{}, protocol.Errorf(protocol.ETOOLARGE, "the task's workspace would hold %d bytes, over its quota of %d bytes", next.bytes, w.quota.Bytes)
	}
	if next.entries > w.quota.Entries {
		return usage{}, protocol.Errorf(protocol.ETOOLARGE, "the task's workspace would hold %d files and directories, over its quota of %d files and directories", next.entries, w.quota.Entries)
	}
	return next, nil
}

// pathState is what a workspace path holds before a file is written
// there: whether a file is there already and its size, and how many of the
// directories above it do not exist yet (the write makes them).
type pathState struct {
	exists      bool
	size        int64
	missingDirs int
}

// pathState says what writing the workspace file name would change: the
// file it replaces, if any, and the directories it would make. A directory
// at name, or a file where one of its directories should be, is EBADPATH:
// the write would fail.
func (s *Store) pathState(taskID, name string) (pathState, error) {
	var st pathState
	root, err := s.openWorkspace(taskID, false)
	if errors.Is(err, fs.ErrNotExist) {
		st.missingDirs = strings.Count(name, "/")
		return st, nil
	} else if err != nil {
		return st, workspaceError(name, err)
	}
	defer root.Close()
	if fi, err := root.Lstat(filesDir + "/" + name); err == nil {
		if !fi.Mode().IsRegular() {
			return st, protocol.Errorf(protocol.EBADPATH, "%q is a directory, not a file", name)
		}
		st.exists, st.size = true, fi.Size()
		return st, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return st, workspaceError(name, err)
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		fi, err := root.Lstat(filesDir + "/" + dir)
		if errors.Is(err, fs.ErrNotExist) {
			st.missingDirs++
			continue
		} else if err != nil {
			return st, workspaceError(name, err)
		}
		if !fi.IsDir() {
			return st, protocol.Errorf(protocol.EBADPATH, "a directory in %q is a file", name)
		}
		break
	}
	return st, nil
}

// workspaceUsage is what a task's workspace holds against its quota: the
// bytes of its files, and its entries, files and directories alike (a
// directory takes an inode and a block like a file). Files an upload's
// rollback set aside in quarantine/ count too: they are the task's.
func (s *Store) workspaceUsage(taskID string) (bytes int64, entries int, err error) {
	root, err := s.openWorkspace(taskID, false)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil // nothing written yet
	} else if err != nil {
		return 0, 0, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	for _, top := range []string{filesDir, quarantineDir} {
		err = fs.WalkDir(root.FS(), top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == top {
					return fs.SkipDir
				}
				return err
			}
			if p == top {
				return nil
			}
			entries++
			if d.Type().IsRegular() {
				fi, err := d.Info()
				if err != nil {
					return err
				}
				bytes += fi.Size()
			}
			return nil
		})
		if err != nil {
			return 0, 0, fmt.Errorf("walk workspace: %w", err)
		}
	}
	return bytes, entries, nil
}

func (s *Store) workspaceDir(taskID string) string {
	return filepath.Join(s.dir, "workspaces", taskID)
}

// openWorkspace opens a task's workspace, creating it if asked.
func (s *Store) openWorkspace(taskID string, create bool) (*os.Root, error) {
	dir := s.workspaceDir(taskID)
	if create {
		if _, err := os.Stat(filepath.Join(dir, tmpDir)); err != nil {
			for _, sub := range []string{filesDir, tmpDir} {
				if err := os.MkdirAll(filepath.Join(dir, sub), 0o750); err != nil {
					return nil, storageError("create workspace", err)
				}
			}
			// The new directories' entries must be durable before any
			// file in them is acknowledged.
			for _, d := range []string{dir, filepath.Dir(dir)} {
				if err := syncDir(d); err != nil {
					return nil, storageError("create workspace", err)
				}
			}
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return root, nil
}

// removeWorkspace removes a task's whole workspace (used when the task's
// creation failed).
func (s *Store) removeWorkspace(taskID string) error {
	return os.RemoveAll(s.workspaceDir(taskID))
}

// workspaceError explains a file system error on a workspace path.
func workspaceError(name string, err error) error {
	var perr *protocol.Error
	switch {
	case errors.As(err, &perr):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return protocol.Errorf(protocol.ENOTFOUND, "no file %q in the task's workspace", name)
	case errors.Is(err, syscall.ENOTDIR):
		return protocol.Errorf(protocol.EBADPATH, "a directory in %q is a file", name)
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.ENOTEMPTY):
		return protocol.Errorf(protocol.EBADPATH, "%q is a directory, not a file", name)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return protocol.Errorf(protocol.EBADPATH, "%q is too long", name)
	case strings.Contains(err.Error(), "path escapes from parent"):
		return protocol.Errorf(protocol.EBADPATH, "%q leads outside the task's workspace", name)
	}
	return storageError("workspace "+name, err)
}
