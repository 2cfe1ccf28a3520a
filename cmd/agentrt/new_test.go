package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// kitGoVersion is the lowest Go the kit promises (the go line of
// plugins/go.mod), as a GOTOOLCHAIN value.
func kitGoVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "plugins", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("plugins/go.mod has no go line of the form 1.NN:\n%s", b)
	}
	return "go" + string(m[1]) + ".0"
}

// make runs make in dir with env, failing the test with its output.
func runMake(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("make", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// oddCheckout is the repository under a path that each of a project's
// files must quote to read back ("a checkout's $copy #1/agentrt", a
// link to it).
func oddCheckout(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "a checkout's $copy #1")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "agentrt")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// A project's Makefile runs agentrt and TinyGo where they are, whatever
// their paths hold.
func TestNewProjectsMakefileRunsCommandsAtOddPaths(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "it's a $dir #1 (or \\ two)")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	script := "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > " + strconv.Quote(ran) + "\n"
	for _, name := range []string{"agentrt", "tinygo"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, err := projectFor("tinygo", "odd", repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	p.Agentrt, p.TinyGo = filepath.Join(bin, "agentrt"), filepath.Join(bin, "tinygo")
	dir := t.TempDir()
	if err := writeProject(dir, p); err != nil {
		t.Fatal(err)
	}
	// In this order: the fake tinygo builds no odd.wasm, which is made
	// after the build so that "make call" finds it and runs only agentrt
	// (were call first, it would build odd.wasm, and the build after it
	// would find odd.wasm up to date and run nothing).
	for _, tc := range []struct{ target, want string }{
		{"odd.wasm", p.TinyGo + "\nbuild\n"},
		{"call", p.Agentrt + "\ncall\nodd.wasm\nstep\n--input\nhello\n"},
	} {
		os.Remove(ran)
		runMake(t, dir, os.Environ(), tc.target)
		if b, err := os.ReadFile(ran); err != nil || !strings.HasPrefix(string(b), tc.want) {
			t.Errorf("make %s ran %q (%v), want it to start %q", tc.target, b, err, tc.want)
		}
		os.WriteFile(filepath.Join(dir, "odd.wasm"), nil, 0o644)
	}
}

// A project that agentrt new writes, in each language, outside the
// repository: its test passes and it builds as written (Go with the
// lowest Go the kit promises), and the plugin it builds runs its handler
// under "make call", keeping notes in its workspace directory.
func TestNewProjectsBuildAndPassTheirTestsOutsideTheRepository(t *testing.T) {
	agentrt := agentrtBinary(t)
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "My Notes")
			var stdout, stderr bytes.Buffer
			if err := runMain(context.Background(), []string{"new", lang, dir, "--kit", oddCheckout(t)}, &stdout, &stderr); err != nil {
				t.Fatalf("agentrt new: %v\n%s", err, stderr.String())
			}
			if !strings.Contains(stdout.String(), `agent "my-notes"`) {
				t.Errorf("agentrt new said %q, want the agent named after the directory", stdout.String())
			}
			env := append(os.Environ(), "AGENTRT_CACHE="+agentrtCache())
			switch lang {
			case "go":
				// The kit's promise: the lowest Go it names builds it.
				env = append(env, "GOTOOLCHAIN="+kitGoVersion(t))
			case "rust":
				// Offline, with the cargo the Makefile chose: no registry is reachable.
				env = append(env, "CARGO_NET_OFFLINE=true")
			}
			runMake(t, dir, env, "test")
			runMake(t, dir, env)
			if _, err := os.Stat(filepath.Join(dir, "my-notes.wasm")); err != nil {
				t.Fatalf("make built no my-notes.wasm: %v", err)
			}
			if lang == "rust" {
				// Built with bulk memory (the project's .cargo/config.toml):
				// its copies are an instruction, not a loop.
				out, err := exec.Command("wasm-objdump", "-d", filepath.Join(dir, "my-notes.wasm")).CombinedOutput()
				if err != nil {
					t.Fatalf("wasm-objdump: %v\n%s", err, out)
				}
				if !bytes.Contains(out, []byte("memory.copy")) {
					t.Errorf("my-notes.wasm has no memory.copy: not built with bulk memory")
				}
			}
			call := func(input string) string {
				return runMake(t, dir, env, "call", "AGENTRT="+agentrt, "INPUT="+input)
			}
			call("milk")
			call("bread")
			done := call("done")
			for _, want := range []string{"  output: Here are your notes: notes.txt", "  is_last: true", `notes.txt (11 B): "milk\nbread\n"`} {
				if !strings.Contains(done, want) {
					t.Errorf("make call INPUT=done lacks %q:\n%s", want, done)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "workspace", "notes.txt")); string(b) != "milk\nbread\n" {
				t.Errorf("workspace/notes.txt = %q", b)
			}
		})
	}
}

func TestNewRefusesANonEmptyDirectoryABadNameAndAPlaceThatIsNoCheckout(t *testing.T) {
	full := filepath.Join(t.TempDir(), "full")
	os.Mkdir(full, 0o755)
	os.WriteFile(filepath.Join(full, "main.go"), []byte("package main"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"go", full, "--kit", repoRoot}, "is not empty"},
		{[]string{"go", filepath.Join(t.TempDir(), "x"), "--name", "9lives", "--kit", repoRoot}, "bad project name"},
		{[]string{"go", filepath.Join(t.TempDir(), "x"), "--name", "a/b", "--kit", repoRoot}, "bad project name"},
		{[]string{"cobol", filepath.Join(t.TempDir(), "x"), "--kit", repoRoot}, "unknown language"},
		{[]string{"go", filepath.Join(t.TempDir(), "x"), "--kit", t.TempDir()}, "is not a checkout of agentrt"},
	} {
		var stdout, stderr bytes.Buffer
		err := runMain(context.Background(), append([]string{"new"}, tc.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("new %q: %v, want %q", tc.args, err, tc.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(full, "main.go")); string(b) != "package main" {
		t.Errorf("a refused new changed the directory: %q", b)
	}
}

func TestNewFindsTheCheckoutAboveTheBinary(t *testing.T) {
	got, err := checkoutAbove(filepath.Join(repoRoot, "build", "agentrt"))
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs(repoRoot); filepath.Clean(got) != filepath.Clean(want) {
		t.Errorf("found %s, want %s", got, want)
	}
	if dir, err := checkoutAbove(filepath.Join(t.TempDir(), "bin", "agentrt")); err == nil {
		t.Errorf("a binary outside a checkout found the checkout %s", dir)
	}
}

// A project in a language whose compiler is not installed says how to
// install it; one whose compiler is found builds with it.
func TestNewSaysHowToInstallAMissingTinyGo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cache := t.TempDir()
	t.Setenv("AGENTRT_CACHE", cache)
	newTinyGo := func() (string, string) {
		dir := filepath.Join(t.TempDir(), "agent")
		var stdout, stderr bytes.Buffer
		if err := runMain(context.Background(), []string{"new", "tinygo", dir, "--kit", repoRoot}, &stdout, &stderr); err != nil {
			t.Fatalf("agentrt new: %v\n%s", err, stderr.String())
		}
		makefile, _ := os.ReadFile(filepath.Join(dir, "Makefile"))
		return stdout.String(), string(makefile)
	}
	out, makefile := newTinyGo()
	if want := "TinyGo is not installed: " + filepath.Join(mustAbs(t, repoRoot), "scripts", "toolchains.sh") + " tinygo builds it"; !strings.Contains(out, want) {
		t.Errorf("without TinyGo, agentrt new said:\n%s\nwant it to say %q", out, want)
	}
	if !strings.Contains(makefile, "TINYGO  ?= tinygo\n") {
		t.Errorf("without TinyGo, the Makefile runs:\n%s", makefile)
	}

	bin := filepath.Join(cache, "bin", "tinygo")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, makefile = newTinyGo()
	if strings.Contains(out, "not installed") || !strings.Contains(makefile, "TINYGO  ?= "+bin+"\n") {
		t.Errorf("with TinyGo in the cache, agentrt new said:\n%s\nand the Makefile runs:\n%s", out, makefile)
	}
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
