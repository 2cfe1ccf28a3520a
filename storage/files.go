package storage

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

// Workspace files are written whole into .tmp/ and swapped in with a
// rename, never modified in place: an artifact's bytes may be a hard link
// to a workspace file (or the other way round), and must not change when
// the file does. This file holds reading, writing and removing them,
// staging one as an artifact, and the synced writes those are built on.

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
