package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

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
