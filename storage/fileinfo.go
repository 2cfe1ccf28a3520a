package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/agentrt/agentrt/protocol"
)

// A file info describes a workspace file as protocol.FileInfo: its path
// under files/, its size and its modification time. Only regular files are
// described: a directory exists only as part of a file's path. Stat
// refuses anything else (a directory, or a link planted in the workspace)
// as not a file, and a listing leaves it out.

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
