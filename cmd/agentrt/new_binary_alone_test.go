package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

// loneAgentrt is the agentrt binary copied alone into a directory of its
// own, outside any checkout, as a user who downloaded it or ran "go
// install" has it.
func loneAgentrt(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(agentrtBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bin", "agentrt")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if dir, err := checkoutAbove(bin); err == nil {
		t.Fatalf("%s is in the checkout %s: the test needs a binary outside any", bin, dir)
	}
	return bin
}

// offlineEnv is an environment without the network and with a new home:
// no module proxy, an empty module cache and cargo home, and a proxy that
// refuses every connection. Only the build caches (Go's, TinyGo's) are the
// machine's, so that the builds are not started from scratch.
func offlineEnv(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CACHE_HOME=" + cache,
		"GOCACHE=" + strings.TrimSpace(string(gocache)),
		"AGENTRT_CACHE=" + agentrtCache(),
		"GOPATH=" + filepath.Join(home, "go"),
		"GOPROXY=off",
		"GOFLAGS=-mod=mod",
		"GOTOOLCHAIN=local",
		"CARGO_HOME=" + filepath.Join(home, ".cargo"),
		"CARGO_NET_OFFLINE=true",
		"HTTP_PROXY=http://127.0.0.1:1",
		"HTTPS_PROXY=http://127.0.0.1:1",
	}
}

// The binary alone makes a project that builds offline: agentrt, copied
// outside any checkout and run outside it, writes a project in each
// language that passes its test and builds its plugin with no network,
// an empty module cache and no checkout, with the kit it carries (written
// into the project, as plugins/ has it, with the agentrt it came from
// recorded); the plugin runs its handler under "make call".
func TestNewProjectsBuildFromTheBinaryAloneOffline(t *testing.T) {
	agentrt := loneAgentrt(t)
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			env := offlineEnv(t)
			work := t.TempDir()
			cmd := exec.Command(agentrt, "new", lang, "my-notes")
			cmd.Dir, cmd.Env = work, env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("agentrt new %s: %v\n%s", lang, err, out)
			}
			dir := filepath.Join(work, "my-notes")

			kit := filepath.Join(dir, filepath.FromSlash(projectKit))
			checkKitIsPlugins(t, kit, lang)
			recorded, _ := os.ReadFile(filepath.Join(kit, "VERSION"))
			if want := fmt.Sprintf("(plugin ABI %d)\n", abi.Version); !strings.HasPrefix(string(recorded), "agentrt "+version) || !strings.HasSuffix(string(recorded), want) {
				t.Errorf("%s/VERSION = %q, want agentrt %s ... %s", projectKit, recorded, version, want)
			}
			manifest := "go.mod"
			if lang == "rust" {
				manifest = "Cargo.toml"
			}
			if b, _ := os.ReadFile(filepath.Join(dir, manifest)); !bytes.Contains(b, []byte("The kit of agentrt "+version)) {
				t.Errorf("%s does not say which agentrt's kit it builds with:\n%s", manifest, b)
			}

			runMake(t, dir, env, "test")
			runMake(t, dir, env)
			call := func(input string) string {
				return runMake(t, dir, env, "call", "INPUT="+input)
			}
			call("milk")
			done := call("done")
			for _, want := range []string{"  output: Here are your notes: notes.txt", "  is_last: true", `notes.txt (5 B): "milk\n"`} {
				if !strings.Contains(done, want) {
					t.Errorf("make call INPUT=done lacks %q:\n%s", want, done)
				}
			}
		})
	}
}

// checkKitIsPlugins checks that the kit a project of lang holds in dir is
// the repository's plugins/, file for file: for Go and TinyGo the kit
// module without the Rust crate and without its tests, for Rust the crate.
func checkKitIsPlugins(t *testing.T, dir, lang string) {
	t.Helper()
	var roots []string
	switch lang {
	case "rust":
		roots = []string{"rust/Cargo.toml", "rust/src"}
	default:
		roots = []string{"go.mod", "go", "abi"}
	}
	written := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		written[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !written["VERSION"] {
		t.Errorf("%s has no VERSION", dir)
	}
	delete(written, "VERSION")
	plugins := filepath.Join(repoRoot, "plugins")
	for _, root := range roots {
		err := filepath.WalkDir(filepath.Join(plugins, root), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(plugins, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || strings.HasSuffix(rel, "_test.go") {
				return nil
			}
			want, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
				t.Errorf("the project's kit lacks %s: %v", rel, err)
			} else if !bytes.Equal(got, want) {
				t.Errorf("the project's kit's %s differs from plugins/%s", rel, rel)
			}
			delete(written, rel)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for rel := range written {
		t.Errorf("the project's kit holds %s, which plugins/ has not (or a test)", rel)
	}
}
