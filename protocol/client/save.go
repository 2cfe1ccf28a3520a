package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"
)

// LocalPath is where SaveArtifact puts an artifact below its directory:
// the artifact's relative_path, then its file_name, slash-separated.
//
// Both come from the server, which is not trusted, so they are held to
// what stays inside the directory. A file_name must be one plain name:
// not empty, "." or "..", without "/" or "\". A relative_path is read
// below the directory: leading slashes, empty and "." elements are
// dropped; a ".." element or a "\" is refused. Neither may hold a control
// character (NUL, ESC, ...). What is refused is an error saying why.
func LocalPath(a Artifact) (string, error) {
	name := a.FileName
	switch {
	case name == "", name == ".", name == "..":
		return "", fmt.Errorf("the server's file_name %q is not a file name", name)
	case strings.ContainsAny(name, `/\`):
		return "", fmt.Errorf("the server's file_name %q holds a path separator", name)
	case hasControl(name):
		return "", fmt.Errorf("the server's file_name %q holds a control character", name)
	}
	var dir []string
	if a.RelativePath != nil {
		rel := *a.RelativePath
		switch {
		case strings.Contains(rel, `\`):
			return "", fmt.Errorf("the server's relative_path %q holds a backslash", rel)
		case hasControl(rel):
			return "", fmt.Errorf("the server's relative_path %q holds a control character", rel)
		}
		for elem := range strings.SplitSeq(rel, "/") {
			switch elem {
			case "", ".":
			case "..":
				return "", fmt.Errorf("the server's relative_path %q leads out of the directory (..)", rel)
			default:
				dir = append(dir, elem)
			}
		}
	}
	p := path.Join(append(dir, name)...)
	if !filepath.IsLocal(filepath.FromSlash(p)) {
		return "", fmt.Errorf("the server's relative_path and file_name %q are not a local path here", p)
	}
	return p, nil
}

// hasControl reports whether s holds a control character.
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// SaveArtifact downloads an artifact into the file LocalPath(a) below dir,
// making dir and the directories between as needed, and returns the
// file's path (dir joined with LocalPath) and size.
//
// Nothing is written outside dir: names are checked by LocalPath, and
// every file operation goes through an os.Root at dir, which refuses a
// path that a symbolic link leads out of it. The bytes go to a temporary
// file (".agentrt-*.part", beside the artifact's) that takes the
// artifact's name only when the download is complete and synced to disk;
// a download that fails or is cancelled removes it. An existing file is
// replaced only if overwrite is set; otherwise SaveArtifact fails, before
// downloading anything, with an error that wraps fs.ErrExist. progress,
// if not nil, is told of each chunk written.
func (c *Client) SaveArtifact(ctx context.Context, taskID string, a Artifact, dir string, overwrite bool, progress Progress) (string, int64, error) {
	rel, err := LocalPath(a)
	if err != nil {
		return "", 0, fmt.Errorf("save artifact %s: refused: %w", a.ArtifactID, err)
	}
	dest := filepath.Join(dir, filepath.FromSlash(rel))
	n, err := c.saveArtifact(ctx, taskID, a.ArtifactID, dir, rel, overwrite, progress)
	if err != nil {
		return "", 0, fmt.Errorf("save artifact %s as %s: %w", a.ArtifactID, dest, err)
	}
	return dest, n, nil
}

func (c *Client) saveArtifact(ctx context.Context, taskID, artifactID, dir, rel string, overwrite bool, progress Progress) (int64, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	exists := func() error {
		if _, err := root.Lstat(rel); err == nil {
			return errExists
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if !overwrite {
		if err := exists(); err != nil {
			return 0, err
		}
	}
	if d := path.Dir(rel); d != "." {
		if err := root.MkdirAll(d, 0o777); err != nil {
			return 0, err
		}
	}
	var random [8]byte
	rand.Read(random[:])
	tmp := path.Join(path.Dir(rel), ".agentrt-"+hex.EncodeToString(random[:])+".part")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return 0, err
	}
	n, err := c.DownloadArtifact(ctx, taskID, artifactID, f, progress)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = place(root, tmp, rel, overwrite, exists)
	}
	if err != nil {
		root.Remove(tmp)
		return 0, err
	}
	return n, nil
}

// errExists is SaveArtifact's error for a file it would have to replace.
var errExists = fmt.Errorf("%w (not overwritten)", fs.ErrExist)

// place gives the complete file tmp its name rel. Without overwrite it
// links tmp as rel, which fails if rel exists, even if it appeared while
// the download ran; where links are not supported it checks, then renames.
func place(root *os.Root, tmp, rel string, overwrite bool, exists func() error) error {
	if overwrite {
		return root.Rename(tmp, rel)
	}
	err := root.Link(tmp, rel)
	switch {
	case err == nil:
		return root.Remove(tmp)
	case errors.Is(err, fs.ErrExist):
		return errExists
	}
	if err := exists(); err != nil {
		return err
	}
	return root.Rename(tmp, rel)
}
