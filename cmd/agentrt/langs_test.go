package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Builders of test plugins in Rust, from source under the repository
// (testdata/plugins), with the toolchain scripts/toolchains.sh installs:
// Debian's cargo and rustc (whose standard library has the wasm32 target)
// in /usr/bin. TinyGo's is tinygoPlugin (helpers_test.go).

// debianCargo is the environment and command that build Rust for wasm32
// offline: Debian's cargo, running Debian's rustc.
func debianCargo(t testing.TB) (env []string, cargo string) {
	t.Helper()
	if !isExecutable("/usr/bin/cargo") || !isExecutable("/usr/bin/rustc") {
		t.Fatal("Debian's cargo and rustc are not installed: run scripts/toolchains.sh rust")
	}
	return append(os.Environ(), "RUSTC=/usr/bin/rustc", "RUSTDOC=/usr/bin/rustdoc"), "/usr/bin/cargo"
}

// rustPlugin builds the Rust plugin crate at dir (relative to the
// repository) for wasm32-unknown-unknown, offline.
func rustPlugin(t testing.TB, dir string) string {
	t.Helper()
	env, cargo := debianCargo(t)
	return once(t, "rust:"+dir+".wasm", func(out string) error {
		target := filepath.Join(buildDir, "cargo")
		cmd := exec.Command(cargo, "build", "--quiet", "--offline", "--release", "--target", "wasm32-unknown-unknown",
			"--manifest-path", filepath.Join(repoRoot, dir, "Cargo.toml"), "--target-dir", target)
		cmd.Env = env
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v\n%s", err, b)
		}
		lib := strings.ReplaceAll(filepath.Base(dir), "-", "_") + ".wasm"
		b, err := os.ReadFile(filepath.Join(target, "wasm32-unknown-unknown", "release", lib))
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
}

// faultyPlugin is the plugin that fails on request (testdata/plugins/faulty,
// faulty-rust) in a language.
func faultyPlugin(t testing.TB, lang string) string {
	t.Helper()
	switch lang {
	case "go":
		return goPlugin(t, "testdata/plugins/faulty")
	case "tinygo":
		return tinygoPlugin(t, "testdata/plugins/faulty")
	}
	return rustPlugin(t, "testdata/plugins/faulty-rust")
}
