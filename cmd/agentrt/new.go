package main

import (
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
)

// "agentrt new" writes a ready plugin project: a handler, its test, and a
// Makefile that builds it, tests it, runs it once in the sandbox (agentrt
// call) and serves it with reloads (agentrt run --dev). The project
// imports the kit from a checkout of agentrt (a replace in go.mod, a path
// dependency in Cargo.toml) until the kit is published.

//go:embed templates
var templates embed.FS

const newUsage = `Usage: agentrt new go|tinygo|rust DIR [--name NAME] [--kit CHECKOUT]

Writes a plugin project in DIR (which must not exist, or be empty): a step
handler, its test against the kit's in-memory host, and a Makefile:

  make          build NAME.wasm
  make test     run the test
  make call     run the step handler once in agentrt's sandbox (agentrt call)
  make dev      serve the agent, reloading NAME.wasm when it is rebuilt (agentrt run --dev)

go and tinygo projects share their source; they differ in the compiler
their Makefile runs. The kit comes from a checkout of agentrt: by default
the one this agentrt was built in.

Flags:
`

// newProject is what a project's templates are filled with.
type newProject struct {
	Lang string
	// Name is the agent's name: the plugin file NAME.wasm, the Go module,
	// the Rust crate.
	Name string
	// LibName is the Rust crate's library name (cargo's file name for it).
	LibName string
	// Kit is the kit to build with: the checkout's plugins/ for Go,
	// plugins/rust for Rust.
	Kit string
	// Agentrt, TinyGo and Cargo are the commands the Makefile runs.
	Agentrt, TinyGo, Cargo string
	// missing says how to install the compiler the project needs when
	// this machine lacks it; "" when it has it.
	missing string
}

func newCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agentrt new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, newUsage)
		fs.PrintDefaults()
	}
	var name, kit string
	fs.StringVar(&name, "name", "", "the agent's `NAME` (default: DIR's name)")
	fs.StringVar(&kit, "kit", "", "the agentrt `CHECKOUT` whose kit the project builds with (default: the one this agentrt was built in)")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 2 {
		fs.Usage()
		return &usageError{"new needs a language (go, tinygo or rust) and a directory"}
	}
	lang, dir := positional[0], positional[1]
	if lang != "go" && lang != "tinygo" && lang != "rust" {
		return &usageError{fmt.Sprintf("unknown language %q: want go, tinygo or rust", lang)}
	}
	if name == "" {
		name = projectNameOf(dir)
	}
	if err := validProjectName(name); err != nil {
		return &usageError{err.Error()}
	}
	if kit == "" {
		if kit, err = findCheckout(); err != nil {
			return err
		}
	}
	p, err := projectFor(lang, name, kit)
	if err != nil {
		return err
	}
	if err := writeProject(dir, p); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote a %s agent %q in %s\n\n  cd %s\n  make test   # its test\n  make        # build %s.wasm\n  make call   # run its step handler once\n  make dev    # serve it, reloading every build\n",
		lang, name, dir, dir, name)
	if p.missing != "" {
		fmt.Fprintf(stdout, "\n%s\n", p.missing)
	}
	return nil
}

// projectFor describes the project of language lang for the checkout.
func projectFor(lang, name, checkout string) (*newProject, error) {
	abs, err := filepath.Abs(checkout)
	if err != nil {
		return nil, err
	}
	if err := isCheckout(abs); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		self = "agentrt"
	}
	p := &newProject{Lang: lang, Name: name, LibName: strings.ReplaceAll(name, "-", "_"), Agentrt: self}
	install := fmt.Sprintf("%s %s", filepath.Join(abs, "scripts", "toolchains.sh"), lang)
	switch lang {
	case "rust":
		p.Kit = filepath.Join(abs, "plugins", "rust")
		var ok bool
		if p.Cargo, ok = wasmCargo(); !ok {
			p.missing = "No Rust here builds wasm32-unknown-unknown: add it with \"rustup target add wasm32-unknown-unknown\", or, on Debian, " + install + " installs Debian's."
		}
	case "tinygo":
		var ok bool
		if p.TinyGo, ok = tinygoCommand(); !ok {
			p.missing = "TinyGo is not installed: " + install + " builds it (on Debian), or see https://tinygo.org/getting-started/install/."
		}
		fallthrough
	default:
		p.Kit = filepath.Join(abs, "plugins")
	}
	return p, nil
}

// writeProject writes p's files into dir, which must not exist or be
// empty.
func writeProject(dir string, p *newProject) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty: agentrt new writes a project into a new directory", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("new project: %w", err)
	}
	src := "templates/go"
	if p.Lang == "rust" {
		src = "templates/rust"
	}
	return fs.WalkDir(templates, src, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		text, err := templates.ReadFile(name)
		if err != nil {
			return err
		}
		t, err := template.New(path.Base(name)).Funcs(projectQuoting).Parse(string(text))
		if err != nil {
			return fmt.Errorf("template %s: %w", name, err)
		}
		var out bytes.Buffer
		if err := t.Execute(&out, p); err != nil {
			return fmt.Errorf("template %s: %w", name, err)
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(name, src+"/"), ".tmpl")
		// The embedded tree holds no dot files: they are named without
		// their dot there.
		if rel == "gitignore" || strings.HasPrefix(rel, "cargo/") {
			rel = "." + rel
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("new project: %w", err)
		}
		return os.WriteFile(dst, out.Bytes(), 0o644)
	})
}

// projectQuoting writes a path into a project's files as each file's
// syntax reads it back whole, whatever it holds (a checkout in "My
// Projects", say): a go.mod path, a TOML string, a word of a Makefile's
// command.
var projectQuoting = template.FuncMap{
	"gomod": func(s string) string {
		if s == "" || strings.ContainsAny(s, " \t\"'`\\()[]{},;=") {
			return strconv.Quote(s)
		}
		return s
	},
	"toml": func(s string) string {
		var b strings.Builder
		b.WriteByte('"')
		for _, r := range s {
			switch {
			case r == '"' || r == '\\':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r < 0x20 || r == 0x7f:
				fmt.Fprintf(&b, "\\u%04X", r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
		return b.String()
	},
	"make": func(s string) string {
		if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@%") == "" {
			return s
		}
		quoted := "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		return strings.NewReplacer("$", "$$", "#", `\#`).Replace(quoted)
	},
}

// projectNameOf is the name a project in dir gets: its base name,
// lower-cased, with what a name cannot hold turned into '-'.
func projectNameOf(dir string) string {
	base := strings.ToLower(filepath.Base(filepath.Clean(dir)))
	b := []byte(base)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-_")
}

// validProjectName checks a name that serves as the agent's, the Go
// module's and the Rust crate's alike.
func validProjectName(name string) error {
	ok := len(name) >= 1 && len(name) <= 64 && (name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z')
	for i := 1; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("bad project name %q (set one with -name): want 1 to 64 letters, digits, '_' or '-', starting with a letter", name)
	}
	return nil
}

// findCheckout is the agentrt checkout this agentrt was built in: the
// first directory above the executable that holds the kit
// (build/agentrt in a checkout finds the checkout).
func findCheckout() (string, error) {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return "", fmt.Errorf("find the agentrt checkout: %w; give it with -kit", err)
	}
	return checkoutAbove(self)
}

// checkoutAbove is the first agentrt checkout in a directory above file.
func checkoutAbove(self string) (string, error) {
	for dir := filepath.Dir(self); ; dir = filepath.Dir(dir) {
		if isCheckout(dir) == nil {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("this agentrt (%s) is not in a checkout of agentrt, whose kit a project builds with (it is not published yet): give the checkout with -kit", self)
		}
	}
}

// isCheckout checks that dir is a checkout of agentrt with the kits.
func isCheckout(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "plugins", "go.mod"))
	if err != nil || !bytes.Contains(b, []byte("module github.com/agentrt/agentrt/plugins\n")) {
		return fmt.Errorf("%s is not a checkout of agentrt (no plugins/go.mod of the kit)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "plugins", "rust", "Cargo.toml")); err != nil {
		return fmt.Errorf("%s is not a checkout of agentrt (no plugins/rust/Cargo.toml)", dir)
	}
	return nil
}

// tinygoCommand is the tinygo a project's Makefile runs: the one on PATH,
// else the one scripts/toolchains.sh installs; "tinygo" and false when
// there is neither.
func tinygoCommand() (string, bool) {
	if _, err := exec.LookPath("tinygo"); err == nil {
		return "tinygo", true
	}
	if dir := agentrtCache(); dir != "" {
		if bin := filepath.Join(dir, "bin", "tinygo"); isExecutable(bin) {
			return bin, true
		}
	}
	return "tinygo", false
}

// wasmCargo is the cargo a Rust project's Makefile runs: the one on PATH
// when its rustc has the wasm32-unknown-unknown standard library, else
// Debian's (whose libstd-rust-dev-wasm32 has it) if that is there; "cargo"
// and false when there is neither.
func wasmCargo() (string, bool) {
	if out, err := exec.Command("rustc", "--print", "sysroot").Output(); err == nil {
		sysroot := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(sysroot, "lib", "rustlib", "wasm32-unknown-unknown")); err == nil {
			return "cargo", true
		}
	}
	if _, err := os.Stat("/usr/lib/rustlib/wasm32-unknown-unknown"); err == nil && isExecutable("/usr/bin/cargo") {
		return "RUSTC=/usr/bin/rustc /usr/bin/cargo", true
	}
	return "cargo", false
}

// agentrtCache is where scripts/toolchains.sh installs: $AGENTRT_CACHE,
// else $XDG_CACHE_HOME/agentrt, else ~/.cache/agentrt.
func agentrtCache() string {
	if dir := os.Getenv("AGENTRT_CACHE"); dir != "" {
		return dir
	}
	if dir := os.Getenv("XDG_CACHE_HOME"); dir != "" {
		return filepath.Join(dir, "agentrt")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "agentrt")
	}
	return ""
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
