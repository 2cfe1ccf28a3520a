package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

// A task's workspace is the directory workspaces/<task>, opened as an
// os.Root so that no name can resolve outside it. Its files are under
// files/; .tmp/ holds files being written and the previous version of a
// file an upload is replacing; quarantine/ holds a replaced file that an
// upload's rollback could not put back (see rollbackPlacement). Paths
// reach here cleaned by protocol.CleanFilePath; os.Root is the second line
// of defence.
//
// Files are written whole and swapped in with a rename, never modified in
// place: an artifact's bytes may be a hard link to a workspace file (or the
// other way round), and must not change when the file does.

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

// readFileInto reads the workspace file name into buf if it fits, and
// returns its size either way: a file larger than buf is not read. The host
// allocates nothing for the bytes; buf is typically the plugin's own
// memory. Workspace files are replaced whole, never changed in place, so
// the size read is the size of the bytes read.
func (s *Store) readFileInto(taskID, name string, buf []byte) (int64, error) {
	root, err := s.openWorkspace(taskID, false)
	if err != nil {
		return 0, workspaceError(name, err)
	}
	defer root.Close()
	f, err := root.Open(filesDir + "/" + name)
	if err != nil {
		return 0, workspaceError(name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, workspaceError(name, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, protocol.Errorf(protocol.EBADPATH, "%q is a directory, not a file", name)
	}
	size := fi.Size()
	if size > int64(len(buf)) {
		return size, nil
	}
	if _, err := io.ReadFull(f, buf[:size]); err != nil {
		return 0, workspaceError(name, err)
	}
	return size, nil
}

// writeFile creates or replaces a workspace file, making its directories,
// and syncs it.
func (s *Store) writeFile(taskID, name string, data []byte) error {
	done, err := s.floor.reserve(int64(len(data)))
	if err != nil {
		return err
	}
	defer done()
	root, err := s.openWorkspace(taskID, true)
	if err != nil {
		return workspaceError(name, err)
	}
	defer root.Close()
	tmp := tmpDir + "/" + uuid.NewString()
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return workspaceError(name, err)
	}
	err = writeClose(f, data)
	if err == nil {
		err = swapIn(root, tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
		return workspaceError(name, err)
	}
	return nil
}

// swapIn renames tmp (in .tmp/) over the workspace file name, making its
// directories, and syncs the directory.
func swapIn(root *os.Root, tmp, name string) error {
	dst := filesDir + "/" + name
	if err := mkdirAllSynced(root, path.Dir(dst)); err != nil {
		return err
	}
	if fi, err := root.Lstat(dst); err == nil && !fi.Mode().IsRegular() {
		return protocol.Errorf(protocol.EBADPATH, "%q is a directory, not a file", name)
	}
	if err := root.Rename(tmp, dst); err != nil {
		return err
	}
	return syncRootDir(root, path.Dir(dst))
}

// mkdirAllSynced makes dir and its missing parents in root, and syncs the
// parent of each directory it makes, so that a file acknowledged in it is
// not lost with its directory's entry.
func mkdirAllSynced(root *os.Root, dir string) error {
	var made []string
	for d := dir; d != "." && d != filesDir; d = path.Dir(d) {
		if _, err := root.Lstat(d); err == nil {
			break
		}
		made = append(made, d)
	}
	for i := len(made) - 1; i >= 0; i-- {
		if err := root.Mkdir(made[i], 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := syncRootDir(root, path.Dir(made[i])); err != nil {
			return err
		}
	}
	return nil
}

func syncRootDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// statFile describes a workspace file.
func (s *Store) statFile(taskID, name string) (protocol.FileInfo, error) {
	root, err := s.openWorkspace(taskID, false)
	if err != nil {
		return protocol.FileInfo{}, workspaceError(name, err)
	}
	defer root.Close()
	fi, err := regularFile(root, name)
	if err != nil {
		return protocol.FileInfo{}, err
	}
	return protocol.FileInfo{Path: name, Size: fi.Size(), ModTime: fi.ModTime()}, nil
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

// regularFile describes the workspace file name, refusing anything that is
// not a regular file (a directory, or a link planted in the workspace).
func regularFile(root *os.Root, name string) (fs.FileInfo, error) {
	fi, err := root.Lstat(filesDir + "/" + name)
	if err != nil {
		return nil, workspaceError(name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, protocol.Errorf(protocol.EBADPATH, "%q is a directory, not a file", name)
	}
	return fi, nil
}

// removeFile removes a workspace file, and the directories it leaves
// empty, and returns how many directories it removed.
func (s *Store) removeFile(taskID, name string) (removedDirs int, err error) {
	root, err := s.openWorkspace(taskID, false)
	if err != nil {
		return 0, workspaceError(name, err)
	}
	defer root.Close()
	if _, err := regularFile(root, name); err != nil {
		return 0, err
	}
	if err := root.Remove(filesDir + "/" + name); err != nil {
		return 0, workspaceError(name, err)
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if root.Remove(filesDir+"/"+dir) != nil {
			break // not empty
		}
		removedDirs++
	}
	return removedDirs, syncRootDir(root, filesDir)
}

// listFiles lists the workspace files whose path starts with prefix, in
// path order.
func (s *Store) listFiles(taskID, prefix string) ([]protocol.FileInfo, error) {
	files := []protocol.FileInfo{}
	err := s.walkWorkspace(taskID, func(name string, fi fs.FileInfo) {
		if strings.HasPrefix(name, prefix) {
			files = append(files, protocol.FileInfo{Path: name, Size: fi.Size(), ModTime: fi.ModTime()})
		}
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, err
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

// walkWorkspace calls fn for every regular file of a task's workspace.
func (s *Store) walkWorkspace(taskID string, fn func(name string, fi fs.FileInfo)) error {
	root, err := s.openWorkspace(taskID, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing written yet
	} else if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), filesDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == filesDir {
				return fs.SkipDir
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fn(strings.TrimPrefix(p, filesDir+"/"), fi)
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk workspace: %w", err)
	}
	return nil
}

// sweepWorkspaceTemps removes what a killed process left in the .tmp/ of
// every workspace: files it was writing, and the replaced files of
// placements that recoverStaging has just settled. What belongs to a
// placement it could not settle (unsettled, by artifact id) stays for the
// next start. Nothing in this process uses .tmp/ before the store is open.
// It costs one directory read per workspace at start-up; entries of
// workspaces/ that are not directories are not workspaces and are left
// alone.
func (s *Store) sweepWorkspaceTemps(unsettled map[string]bool) error {
	workspaces, err := os.ReadDir(filepath.Join(s.dir, "workspaces"))
	if err != nil {
		return fmt.Errorf("read workspaces: %w", err)
	}
	for _, w := range workspaces {
		if !w.IsDir() {
			continue
		}
		if err := sweepTemps(filepath.Join(s.dir, "workspaces", w.Name()), unsettled); err != nil {
			return fmt.Errorf("sweep %s: %w", filepath.Join("workspaces", w.Name(), tmpDir), err)
		}
	}
	return nil
}

func sweepTemps(workspace string, unsettled map[string]bool) error {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return err
	}
	defer root.Close()
	if fi, err := root.Lstat(tmpDir); errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
		return nil
	} else if err != nil {
		return err
	}
	dir, err := root.Open(tmpDir)
	if err != nil {
		return err
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if unsettled[strings.TrimPrefix(name, "backup-")] {
			continue
		}
		if err := root.RemoveAll(tmpDir + "/" + name); err != nil {
			return err
		}
	}
	return nil
}

// removeWorkspace removes a task's whole workspace (used when the task's
// creation failed).
func (s *Store) removeWorkspace(taskID string) error {
	return os.RemoveAll(s.workspaceDir(taskID))
}

// stageArtifactFromFile stages a workspace file's current bytes as the new
// artifact artifactID: a hard link, no copy (workspace files are never
// changed in place, so the artifact keeps these bytes).
func (s *Store) stageArtifactFromFile(taskID, name, artifactID string) (protocol.Blob, error) {
	root, err := s.openWorkspace(taskID, true)
	if err != nil {
		return nil, workspaceError(name, err)
	}
	defer root.Close()
	fi, err := regularFile(root, name)
	if err != nil {
		return nil, err
	}
	tmp := tmpDir + "/" + artifactID
	if err := root.Link(filesDir+"/"+name, tmp); err != nil {
		return nil, workspaceError(name, err)
	}
	staged := s.stagingPath(artifactID)
	if err := os.Rename(filepath.Join(s.workspaceDir(taskID), tmp), staged); err != nil {
		root.Remove(tmp)
		return nil, storageError("stage artifact", err)
	}
	if err := syncDir(filepath.Dir(staged)); err != nil {
		os.Remove(staged)
		return nil, storageError("stage artifact", err)
	}
	return &blob{path: staged, size: fi.Size(), done: true}, nil
}

// writeSynced creates or replaces a file outside any workspace, durably.
func writeSynced(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if err := writeClose(f, data); err != nil {
		return err
	}
	return syncDir(filepath.Dir(name))
}

// writeClose writes data to f, syncs and closes it.
func writeClose(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
