package plugins

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kitFiles is the kit's source on disk, as Source should hold it: go.mod,
// every Go file of go/ and abi/ (but their testdata), and the Rust crate's
// Cargo.toml and sources. Its paths are slash-separated, relative to this
// module.
func kitFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"go.mod", "rust/Cargo.toml"}
	for _, root := range []string{"go", "abi", "rust/src"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if path = filepath.ToSlash(path); !d.IsDir() && (strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".rs")) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// Source holds every file a project builds the kit from, as it is on disk,
// and nothing else: a file of the kit left out of source.go's go:embed
// lines would leave every project "agentrt new" writes unable to build.
func TestSourceIsTheWholeKit(t *testing.T) {
	want := map[string]bool{}
	for _, path := range kitFiles(t) {
		want[path] = true
		embedded, err := Source.ReadFile(path)
		if err != nil {
			t.Errorf("%s is not in Source: add its directory to the go:embed lines of source.go", path)
			continue
		}
		onDisk, err := os.ReadFile(filepath.FromSlash(path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(embedded, onDisk) {
			t.Errorf("Source's %s differs from the file", path)
		}
	}
	err := fs.WalkDir(Source, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !want[path] {
			t.Errorf("Source holds %s, which is no source of the kit", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
