package plugins

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The Rust crate's test harness (agentrt::testing, test_host!) is its
// "testing" feature, which a plugin enables in [dev-dependencies] as
// "agentrt new rust" writes it: a plugin's tests have it, and a build of
// the plugin has none of it, so a release build that names the harness
// outside its tests does not compile, saying how to have it.
//
// It runs Debian's cargo (the Makefile's, which builds the Rust
// plugins), checking the crate for its tests and building it for
// release, about 15 seconds: -short skips it.
func TestTheRustHarnessIsInAPluginsTestsOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the Rust crate twice")
	}
	cargo, rustc := "/usr/bin/cargo", "/usr/bin/rustc"
	for _, tool := range []string{cargo, rustc} {
		if _, err := os.Stat(tool); err != nil {
			t.Skipf("no %s (make toolchains installs it)", tool)
		}
	}
	kit, err := filepath.Abs("rust")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Cargo.toml", `[package]
name = "probe"
version = "0.1.0"
edition = "2021"

[lib]
crate-type = ["cdylib"]

[dependencies]
agentrt = { path = `+strconv.Quote(kit)+` }

[dev-dependencies]
agentrt = { path = `+strconv.Quote(kit)+`, features = ["testing"] }
`)
	// harness names the harness outside the crate's tests.
	write("src/lib.rs", `use agentrt::{Error, Step, StepResult};

fn on_step(_: &Step) -> Result<StepResult, Error> {
    Ok(StepResult::output("ok"))
}

agentrt::export_agent!(step = on_step);

pub fn harness() -> agentrt::testing::Host {
    agentrt::test_host!()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_step_runs() {
        let host = super::harness();
        let mut task = host.create_task("t").unwrap();
        assert_eq!(task.step("go").unwrap().output, "ok");
    }
}
`)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(cargo, append(args, "--offline", "--quiet")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RUSTC="+rustc, "CARGO_TARGET_DIR="+filepath.Join(dir, "target"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	if out, err := run("check", "--tests"); err != nil {
		t.Fatalf("cargo check --tests, with the harness in [dev-dependencies]: %v\n%s", err, out)
	}
	out, err := run("build", "--release")
	if err == nil {
		t.Fatal("cargo build --release compiled a crate naming agentrt::testing outside its tests: the harness is in a plugin's build")
	}
	for _, want := range []string{
		"could not find `testing` in `agentrt`",
		`agentrt::test_host! needs the kit's test harness`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("cargo build --release failed without saying %q:\n%s", want, out)
		}
	}
}
