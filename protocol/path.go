package protocol

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on names and paths in a task's workspace.
const (
	MaxNameBytes = 255  // one file or directory name
	MaxPathBytes = 1024 // a whole relative path
	MaxPathDepth = 32   // directories in a path
)

// CleanDir cleans a workspace directory such as an upload's relative_path:
// "./a//b/" becomes "a/b" and "" or "." the workspace root (""). It refuses,
// rather than repairs, anything that could name a place outside the
// workspace or that a file system would treat specially: absolute paths,
// ".." segments, backslashes, NUL and other control characters, invalid
// UTF-8, and names or paths over their length limits.
func CleanDir(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	if err := checkChars(p); err != nil {
		return "", err
	}
	if len(p) > MaxPathBytes {
		return "", Errorf(EBADPATH, "path is longer than %d bytes", MaxPathBytes)
	}
	if strings.HasPrefix(p, "/") {
		return "", Errorf(EBADPATH, "path %q is absolute; paths are relative to the task's workspace", p)
	}
	var kept []string
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".":
			continue
		case "..":
			return "", Errorf(EBADPATH, "path %q leaves the task's workspace (\"..\")", p)
		}
		if len(seg) > MaxNameBytes {
			return "", Errorf(EBADPATH, "a name in path %q is longer than %d bytes", p, MaxNameBytes)
		}
		kept = append(kept, seg)
	}
	if len(kept) > MaxPathDepth {
		return "", Errorf(EBADPATH, "path %q is deeper than %d directories", p, MaxPathDepth)
	}
	return strings.Join(kept, "/"), nil
}

// CleanFilePath cleans the path of a workspace file: like CleanDir, but the
// result must name a file, not the workspace root.
func CleanFilePath(p string) (string, error) {
	clean, err := CleanDir(p)
	if err != nil {
		return "", err
	}
	if clean == "" {
		return "", Errorf(EBADPATH, "path %q names no file", p)
	}
	return clean, nil
}

// CleanFileName cleans a file name such as an upload's: a client-side
// directory part ("C:\dir\a.txt", "dir/a.txt") is dropped, and what remains
// must be a plain name: not empty, ".", or "..", no control characters,
// valid UTF-8, at most MaxNameBytes.
func CleanFileName(name string) (string, error) {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	switch name {
	case "", ".", "..":
		return "", Errorf(EBADPATH, "file name %q is not a usable name", name)
	}
	if err := checkChars(name); err != nil {
		return "", err
	}
	if len(name) > MaxNameBytes {
		return "", Errorf(EBADPATH, "file name is longer than %d bytes", MaxNameBytes)
	}
	return name, nil
}

func checkChars(s string) error {
	if !utf8.ValidString(s) {
		return Errorf(EBADPATH, "path %q is not valid UTF-8", s)
	}
	for _, r := range s {
		switch {
		case r == 0:
			return Errorf(EBADPATH, "path %q contains NUL", s)
		case r == '\\':
			return Errorf(EBADPATH, "path %q contains a backslash; use / between names", s)
		case unicode.IsControl(r):
			return Errorf(EBADPATH, "path %q contains a control character", s)
		}
	}
	return nil
}
