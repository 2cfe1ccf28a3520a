// Package runtimetest gives tests the modules they run: WebAssembly
// assembled from the text format, and the example plugins "make plugins"
// built, as net/http/httptest gives tests a server. Every package whose
// tests load a module uses it, so that each finds them the same way and
// fails, never skips, saying how to make what is missing.
//
// What it costs: wat2wasm (wabt, which scripts/toolchains.sh installs)
// runs once for each module assembled, a few milliseconds; nothing is
// kept between tests but what t.TempDir holds for the test.
package runtimetest

import (
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"testing"
)

// Root is the repository's top directory.
var Root = func() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}()

// wat2wasm is the assembler's path, or why there is none.
func wat2wasm(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Fatal("wat2wasm is not installed; run scripts/toolchains.sh wabt (make test does)")
	}
	return path
}

// AssembleFile assembles the text-format module at src (a path relative
// to the test's package, or absolute) and returns the path of the binary
// module, in the test's temporary directory.
func AssembleFile(t testing.TB, src string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(src)+".wasm")
	if b, err := exec.Command(wat2wasm(t), src, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", src, err, b)
	}
	return out
}

// Assemble assembles the text-format module src and returns the binary
// module.
func Assemble(t testing.TB, src string) []byte {
	t.Helper()
	in := filepath.Join(t.TempDir(), "m.wat")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(AssembleFile(t, in))
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// Fixture assembles testdata/wat/NAME.wat of the repository and returns
// the path of the binary module.
func Fixture(t testing.TB, name string) string {
	t.Helper()
	return AssembleFile(t, filepath.Join(Root, "testdata", "wat", name+".wat"))
}

// Fixtures are the paths of the repository's testdata/wat sources.
func Fixtures(t testing.TB) []string {
	t.Helper()
	sources, err := filepath.Glob(filepath.Join(Root, "testdata", "wat", "*.wat"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("no testdata/wat/*.wat under %s", Root)
	}
	return sources
}

// PluginDir is where "make plugins" builds every example in every
// language: $AGENTRT_PLUGINS, or build/plugins of the repository.
func PluginDir() string {
	if dir := os.Getenv("AGENTRT_PLUGINS"); dir != "" {
		return dir
	}
	return filepath.Join(Root, "build", "plugins")
}

// Plugin is the path of the example plugin NAME (washington-rust, say)
// that "make plugins" built.
func Plugin(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(PluginDir(), name+".wasm")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("plugin %s is missing; run \"make plugins\" (it builds every example in every language)", path)
	}
	return path
}

// Plugins are the paths of every plugin "make plugins" built.
func Plugins(t testing.TB) []string {
	t.Helper()
	plugins, _ := filepath.Glob(filepath.Join(PluginDir(), "*.wasm"))
	if len(plugins) == 0 {
		t.Fatalf("no plugins in %s; run \"make plugins\" (it builds every example in every language)", PluginDir())
	}
	return plugins
}
