// Package docs holds no code: its test keeps the documents honest about
// the tests they cite.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citedTest finds a Go test, fuzz target or benchmark a document names, as
// `TestName` or `TestName/subtest`.
var citedTest = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)(?:/[^`]*)?`")

// declaredTest finds a Go test, fuzz target or benchmark declared.
var declaredTest = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)\(`)

// TestEveryTestTheDocumentsCiteExists: docs/SECURITY.md and the others
// back each claim with the test that holds it; a test renamed or removed
// must take the citation with it, or the claim is left with nothing behind
// it.
func TestEveryTestTheDocumentsCiteExists(t *testing.T) {
	declared := map[string]bool{}
	cited := map[string][]string{} // test: the documents citing it
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "build", "node_modules", "target":
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, "_test.go"):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range declaredTest.FindAllStringSubmatch(string(src), -1) {
				declared[m[1]] = true
			}
		case strings.HasSuffix(path, ".md"):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range citedTest.FindAllStringSubmatch(string(src), -1) {
				cited[m[1]] = append(cited[m[1]], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cited) == 0 || len(declared) == 0 {
		t.Fatalf("found %d tests cited and %d declared: the walk missed the repository", len(cited), len(declared))
	}
	for name, docs := range cited {
		if !declared[name] {
			t.Errorf("%s cite %s, which no test file declares", strings.Join(docs, ", "), name)
		}
	}
}
