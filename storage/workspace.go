package storage

import (
	"encoding/json"
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
	"time"

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

// ReadFileInto reads the workspace file name into buf if it fits, and
// returns its size either way: a file larger than buf is not read. The host
// allocates nothing for the bytes; buf is typically the plugin's own
// memory. Workspace files are replaced whole, never changed in place, so
// the size read is the size of the bytes read.
func (s *Store) ReadFileInto(taskID, name string, buf []byte) (int64, error) {
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

// WriteFile creates or replaces a workspace file, making its directories,
// and syncs it.
func (s *Store) WriteFile(taskID, name string, data []byte) error {
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

// StatFile describes a workspace file.
func (s *Store) StatFile(taskID, name string) (protocol.FileInfo, error) {
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

// PathState says what writing the workspace file name would change: the
// file it replaces, if any, and the directories it would make. A directory
// at name, or a file where one of its directories should be, is EBADPATH:
// the write would fail.
func (s *Store) PathState(taskID, name string) (protocol.PathState, error) {
	var st protocol.PathState
	root, err := s.openWorkspace(taskID, false)
	if errors.Is(err, fs.ErrNotExist) {
		st.MissingDirs = strings.Count(name, "/")
		return st, nil
	} else if err != nil {
		return st, workspaceError(name, err)
	}
	defer root.Close()
	if fi, err := root.Lstat(filesDir + "/" + name); err == nil {
		if !fi.Mode().IsRegular() {
			return st, protocol.Errorf(protocol.EBADPATH, "%q is a directory, not a file", name)
		}
		st.Exists, st.Size = true, fi.Size()
		return st, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return st, workspaceError(name, err)
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		fi, err := root.Lstat(filesDir + "/" + dir)
		if errors.Is(err, fs.ErrNotExist) {
			st.MissingDirs++
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

// RemoveFile removes a workspace file, and the directories it leaves
// empty, and returns how many directories it removed.
func (s *Store) RemoveFile(taskID, name string) (removedDirs int, err error) {
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

// ListFiles lists the workspace files whose path starts with prefix, in
// path order.
func (s *Store) ListFiles(taskID, prefix string) ([]protocol.FileInfo, error) {
	files := []protocol.FileInfo{}
	err := s.walkWorkspace(taskID, func(name string, fi fs.FileInfo) {
		if strings.HasPrefix(name, prefix) {
			files = append(files, protocol.FileInfo{Path: name, Size: fi.Size(), ModTime: fi.ModTime()})
		}
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, err
}

// WorkspaceUsage is what a task's workspace holds against its quota: the
// bytes of its files, and its entries, files and directories alike (a
// directory takes an inode and a block like a file). Files an upload's
// rollback set aside in quarantine/ count too: they are the task's.
func (s *Store) WorkspaceUsage(taskID string) (bytes int64, entries int, err error) {
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

// RemoveWorkspace removes a task's whole workspace (used when the task's
// creation failed).
func (s *Store) RemoveWorkspace(taskID string) error {
	return os.RemoveAll(s.workspaceDir(taskID))
}

// StageArtifactFromFile stages a workspace file's current bytes as the new
// artifact artifactID: a hard link, no copy (workspace files are never
// changed in place, so the artifact keeps these bytes).
func (s *Store) StageArtifactFromFile(taskID, name, artifactID string) (protocol.Blob, error) {
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

// placement is an upload put into a workspace before its artifact is
// recorded: Commit keeps it, Rollback restores what the path held before.
// A journal in staging/ lets the next Open finish either after a crash.
type placement struct {
	s          *Store
	taskID     string
	name       string
	artifactID string
	hadBackup  bool
}

type placementJournal struct {
	TaskID string `json:"task_id"`
	Path   string `json:"path"`
}

func (s *Store) journalPath(artifactID string) string {
	return s.stagingPath(artifactID) + ".ws"
}

func backupName(artifactID string) string { return tmpDir + "/backup-" + artifactID }

// PlaceUpload puts the staged bytes of artifact artifactID at name in the
// task's workspace (a hard link: no copy), keeping any file it replaces
// until Commit.
func (s *Store) PlaceUpload(taskID, name, artifactID string) (protocol.Placement, error) {
	j, err := json.Marshal(placementJournal{TaskID: taskID, Path: name})
	if err != nil {
		return nil, err
	}
	if err := writeSynced(s.journalPath(artifactID), j); err != nil {
		return nil, storageError("place upload", err)
	}
	p := &placement{s: s, taskID: taskID, name: name, artifactID: artifactID}
	if err := p.place(); err != nil {
		p.Rollback()
		return nil, err
	}
	return p, nil
}

func (p *placement) place() error {
	root, err := p.s.openWorkspace(p.taskID, true)
	if err != nil {
		return workspaceError(p.name, err)
	}
	defer root.Close()
	dst := filesDir + "/" + p.name
	if fi, err := root.Lstat(dst); err == nil {
		if !fi.Mode().IsRegular() {
			return protocol.Errorf(protocol.EBADPATH, "%q is a directory in the task's workspace", p.name)
		}
		if err := root.Rename(dst, backupName(p.artifactID)); err != nil {
			return workspaceError(p.name, err)
		}
		p.hadBackup = true
	}
	tmp := tmpDir + "/" + p.artifactID
	if err := os.Link(p.s.stagingPath(p.artifactID), filepath.Join(p.s.workspaceDir(p.taskID), tmp)); err != nil {
		return storageError("place upload", err)
	}
	if err := swapIn(root, tmp, p.name); err != nil {
		root.Remove(tmp)
		return workspaceError(p.name, err)
	}
	return nil
}

// Commit keeps the placed file: the artifact was recorded.
func (p *placement) Commit() {
	if root, err := p.s.openWorkspace(p.taskID, false); err == nil {
		root.Remove(backupName(p.artifactID))
		root.Close()
	}
	os.Remove(p.s.journalPath(p.artifactID))
}

// Rollback removes the placed file and restores what was there before (see
// rollbackPlacement). An error means the journal stays and the next Open
// tries again; nothing is lost either way.
func (p *placement) Rollback() error {
	return p.s.rollbackPlacement(p.taskID, p.name, p.artifactID)
}

// rollbackPlacement undoes a placement: the upload leaves the workspace,
// the file it replaced comes back, and the journal goes.
//
// An artifact handler runs between placement and rollback and may change
// the path: its work stays, as a failed step's does. So the replaced file
// comes back only where the place is free (the upload still there, or
// nothing); where the handler put something else in its way (its own file,
// a directory, a file where a directory of the path was), the replaced
// file is quarantined instead: moved to the workspace's quarantine/ with a
// note of its path, and logged once. Any other failure (the host's I/O)
// returns an error and keeps the journal, so the next Open tries again:
// the replaced file, kept in .tmp/ meanwhile, is never lost.
func (s *Store) rollbackPlacement(taskID, name, artifactID string) error {
	root, err := s.openWorkspace(taskID, false)
	if errors.Is(err, fs.ErrNotExist) {
		return removeIfExists(s.journalPath(artifactID)) // nothing was placed
	} else if err != nil {
		return fmt.Errorf("roll back the upload at %q: %w", name, err)
	}
	defer root.Close()
	dst := filesDir + "/" + name
	placed := s.isPlaced(root, name, artifactID)
	if placed {
		if err := root.Remove(dst); err != nil {
			return fmt.Errorf("remove the upload at %q: %w", name, err)
		}
	}
	if _, err := root.Lstat(backupName(artifactID)); err == nil {
		if err := restoreBackup(root, name, artifactID); err != nil {
			if !blockedBy(err) {
				return fmt.Errorf("restore %q: %w", name, err)
			}
			if err := s.quarantine(root, taskID, name, artifactID, err); err != nil {
				return fmt.Errorf("restore %q: %w", name, err)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore %q: %w", name, err)
	}
	if err := root.Remove(tmpDir + "/" + artifactID); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the upload at %q: %w", name, err)
	}
	return removeIfExists(s.journalPath(artifactID))
}

// restoreBackup puts the file a placement replaced back at name, making
// the directories the handler may have removed, but never over anything
// that stands there now.
func restoreBackup(root *os.Root, name, artifactID string) error {
	dst := filesDir + "/" + name
	if _, err := root.Lstat(dst); err == nil {
		return syscall.EEXIST // the handler's own file or directory
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := mkdirAllSynced(root, path.Dir(dst)); err != nil {
		return err
	}
	if err := root.Rename(backupName(artifactID), dst); err != nil {
		return err
	}
	return syncRootDir(root, path.Dir(dst))
}

// blockedBy reports whether a restore failed because something stands in
// the way (the plugin's doing), rather than because the host failed.
func blockedBy(err error) bool {
	for _, e := range []error{syscall.EEXIST, syscall.ENOTEMPTY, syscall.EISDIR, syscall.ENOTDIR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// quarantineNote records where a quarantined file came from.
type quarantineNote struct {
	TaskID string    `json:"task_id"`
	Path   string    `json:"path"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// quarantine moves the file a placement replaced to the workspace's
// quarantine/<artifact id>, with a note <artifact id>.json saying where it
// was, and logs it. Quarantined files count against the task's workspace
// quota, so a plugin cannot grow the disk by having them set aside.
func (s *Store) quarantine(root *os.Root, taskID, name, artifactID string, why error) error {
	if err := root.Mkdir(quarantineDir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	kept := quarantineDir + "/" + artifactID
	note, err := json.Marshal(quarantineNote{TaskID: taskID, Path: name, Reason: why.Error(), Time: time.Now().UTC()})
	if err != nil {
		return err
	}
	f, err := root.OpenFile(kept+".json", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if err := writeClose(f, note); err != nil {
		return err
	}
	if err := root.Rename(backupName(artifactID), kept); err != nil {
		return err
	}
	if err := syncRootDir(root, quarantineDir); err != nil {
		return err
	}
	if err := syncRootDir(root, "."); err != nil {
		return err
	}
	s.log.Warn("an upload was rolled back, but the file it had replaced could not go back: the artifact handler put something in its place; the file is kept aside",
		"task_id", taskID, "path", name, "kept_as", filepath.Join(s.workspaceDir(taskID), kept), "reason", why.Error())
	return nil
}

func removeIfExists(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// isPlaced reports whether the workspace file name is the staged upload
// itself (and not a file the placement never got to move aside).
func (s *Store) isPlaced(root *os.Root, name, artifactID string) bool {
	placed, err := root.Lstat(filesDir + "/" + name)
	if err != nil {
		return false
	}
	staged, err := os.Stat(s.stagingPath(artifactID))
	return err == nil && os.SameFile(placed, staged)
}

// recoverPlacement finishes a placement a killed process left: kept if its
// artifact was recorded, rolled back if not.
func (s *Store) recoverPlacement(artifactID string, recorded bool) error {
	b, err := os.ReadFile(s.journalPath(artifactID))
	if err != nil {
		return err
	}
	var j placementJournal
	if err := json.Unmarshal(b, &j); err != nil || uuid.Validate(j.TaskID) != nil {
		return os.Remove(s.journalPath(artifactID)) // torn write: nothing was placed yet
	}
	if recorded {
		p := &placement{s: s, taskID: j.TaskID, name: j.Path, artifactID: artifactID}
		p.Commit() // what Commit leaves in .tmp/, the sweep removes
		return nil
	}
	return s.rollbackPlacement(j.TaskID, j.Path, artifactID)
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
