package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

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

// placeUpload puts the staged bytes of artifact artifactID at name in the
// task's workspace (a hard link: no copy), keeping any file it replaces
// until Commit.
func (s *Store) placeUpload(taskID, name, artifactID string) (protocol.Placement, error) {
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
