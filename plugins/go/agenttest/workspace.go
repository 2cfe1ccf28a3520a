package agenttest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// A task's workspace is a map of cleaned paths to files. Paths are
// checked as agentrt checks them (plugins/ABI.md, "Paths"): relative,
// /-separated, no "..", no backslash or control character, names of at
// most 255 bytes, paths of at most 1024 bytes and 32 directories.

// WriteFile puts a file in the task's workspace, as an earlier step would
// have: to set up what a handler reads.
func (t *Task) WriteFile(path string, data []byte) error {
	p, err := cleanFilePath(path)
	if err != nil {
		return err
	}
	if err := t.checkWrite(p); err != nil {
		return err
	}
	t.files[p] = file{data: append([]byte(nil), data...), modTime: time.Now()}
	return nil
}

// ReadFile returns a file of the task's workspace.
func (t *Task) ReadFile(path string) ([]byte, error) {
	p, err := cleanFilePath(path)
	if err != nil {
		return nil, err
	}
	f, ok := t.files[p]
	if !ok {
		return nil, fmt.Errorf("no file %q in the task's workspace", p)
	}
	return append([]byte(nil), f.data...), nil
}

// Files lists the paths of the task's workspace files, in path order.
func (t *Task) Files() []string {
	paths := make([]string, 0, len(t.files))
	for p := range t.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// checkWrite refuses a file where a directory is (another file's path
// goes through it) or a directory where a file is, as a file system does.
func (t *Task) checkWrite(p string) error {
	for other := range t.files {
		if strings.HasPrefix(other, p+"/") {
			return fmt.Errorf("%q is a directory, not a file", p)
		}
		if strings.HasPrefix(p, other+"/") {
			return fmt.Errorf("a directory in %q is a file", p)
		}
	}
	return nil
}

// cleanFilePath cleans the path of a workspace file, or refuses it.
func cleanFilePath(p string) (string, error) {
	clean, err := cleanDir(p)
	if err == nil && clean == "" {
		err = fmt.Errorf("path %q names no file", p)
	}
	return clean, err
}

// cleanDir cleans a workspace directory: "./a//b/" is "a/b", "" the root.
func cleanDir(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	switch {
	case !utf8.ValidString(p):
		return "", fmt.Errorf("path %q is not valid UTF-8", p)
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("path %q contains NUL", p)
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("path %q contains a backslash; use / between names", p)
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "", fmt.Errorf("path %q contains a control character", p)
	case len(p) > 1024:
		return "", errors.New("path is longer than 1024 bytes")
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("path %q is absolute; paths are relative to the task's workspace", p)
	}
	var kept []string
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "" || seg == ".":
			continue
		case seg == "..":
			return "", fmt.Errorf("path %q leaves the task's workspace (\"..\")", p)
		case len(seg) > 255:
			return "", fmt.Errorf("a name in path %q is longer than 255 bytes", p)
		}
		kept = append(kept, seg)
	}
	if len(kept) > 32 {
		return "", fmt.Errorf("path %q is deeper than 32 directories", p)
	}
	return strings.Join(kept, "/"), nil
}

// cleanArtifactName checks an artifact's file name (a plain name) and
// cleans its directory.
func cleanArtifactName(fileName, relativePath string) (name, dir string, err error) {
	if fileName == "" || fileName == "." || fileName == ".." || strings.ContainsRune(fileName, '/') {
		return "", "", fmt.Errorf("file name %q is not a plain name; put directories in relative_path", fileName)
	}
	if _, err := cleanDir(fileName); err != nil {
		return "", "", err
	}
	dir, err = cleanDir(relativePath)
	return fileName, dir, err
}
