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
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/agentrt/agentrt/plugins"
	"github.com/agentrt/agentrt/plugins/abi"
)

// "agentrt new" writes a ready plugin project: a handler, its test, and a
// Makefile that builds it, tests it, runs it once in the sandbox (agentrt
// call) and serves it with reloads (agentrt run --dev). The project builds
// with the kit this agentrt carries (plugins.Source), written into it as
// .agentrt/kit, so that the binary alone makes a project that builds
// offline; or, with --kit, with a checkout's plugins/, to work on the kit.

//go:embed templates
var templates embed.FS

// projectKit is where a project keeps the kit agentrt new writes into it,
// relative to the project: the kit module's files (go.mod, go/, abi/) for
// Go and TinyGo, the crate (rust/) for Rust, and a VERSION file.
const projectKit = ".agentrt/kit"

const newUsage = `Usage: agentrt new go|tinygo|rust DIR [--name NAME] [--kit CHECKOUT]

Writes a plugin project in DIR (which must not exist, or be empty): a step
handler, its test against the kit's in-memory host, and a Makefile:

  make          build NAME.wasm
  make test     run the test
  make call     run the step handler once in agentrt's sandbox (agentrt call)
  make dev      serve the agent, reloading NAME.wasm when it is rebuilt (agentrt run --dev)

go and tinygo projects share their source; they differ in the compiler
their Makefile runs. The project builds with the kit of this agentrt,
which new writes into DIR/` + projectKit + `: it needs nothing else, and no
network. Its README says how to move to a published kit.

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
	// Kit is the kit to build with, as go.mod's replace or Cargo.toml's
	// path names it: the kit module (plugins/ of a checkout, or
	// ./.agentrt/kit) for Go, the crate (plugins/rust, .agentrt/kit/rust)
	// for Rust.
	Kit string
	// Checkout is the agentrt checkout whose kit the project builds with
	// (--kit); "" when it builds with the kit new writes into it.
	Checkout string
	// Version is the agentrt that wrote the project, and so the version of
	// the kit it writes.
	Version string
	// GoVersion is the lowest Go the kit needs (its go.mod's go line).
	GoVersion string
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
	fs.StringVar(&kit, "kit", "", "build with the kit of the agentrt `CHECKOUT` (its plugins/), to work on the kit (default: write this agentrt's kit into DIR/"+projectKit+")")
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

// projectFor describes the project of language lang: one that builds with
// the kit of checkout, or with the kit this agentrt carries when checkout
// is "".
func projectFor(lang, name, checkout string) (*newProject, error) {
	self, err := os.Executable()
	if err != nil {
		self = "agentrt"
	}
	p := &newProject{Lang: lang, Name: name, LibName: strings.ReplaceAll(name, "-", "_"), Agentrt: self, Version: buildVersion()}
	var kitGoMod []byte
	if checkout == "" {
		// Relative to the project, slash-separated wherever it is made.
		p.Kit = "./" + projectKit
		if lang == "rust" {
			p.Kit = projectKit + "/rust"
		}
		kitGoMod, err = plugins.Source.ReadFile("go.mod")
	} else {
		if checkout, err = filepath.Abs(checkout); err != nil {
			return nil, err
		}
		if err := isCheckout(checkout); err != nil {
			return nil, err
		}
		p.Checkout = checkout
		p.Kit = filepath.Join(checkout, "plugins")
		if lang == "rust" {
			p.Kit = filepath.Join(p.Kit, "rust")
		}
		kitGoMod, err = os.ReadFile(filepath.Join(checkout, "plugins", "go.mod"))
	}
	if err != nil {
		return nil, fmt.Errorf("read the kit's go.mod: %w", err)
	}
	m := regexp.MustCompile(`(?m)^go (1\.[0-9]+(\.[0-9]+)?)$`).FindSubmatch(kitGoMod)
	if m == nil {
		return nil, fmt.Errorf("the kit's go.mod has no go line")
	}
	p.GoVersion = string(m[1])
	switch lang {
	case "rust":
		var ok bool
		if p.Cargo, ok = wasmCargo(); !ok {
			p.missing = "No Rust here builds wasm32-unknown-unknown: add it with \"rustup target add wasm32-unknown-unknown\", or, on Debian, " + toolchainsHint(checkout, lang) + "."
		}
	case "tinygo":
		var ok bool
		if p.TinyGo, ok = tinygoCommand(); !ok {
			p.missing = "TinyGo is not installed: " + toolchainsHint(checkout, lang) + ", or see https://tinygo.org/getting-started/install/."
		}
	}
	return p, nil
}

// toolchainsHint says how a Debian machine gets the compiler for lang
// (tinygo or rust): with scripts/toolchains.sh of checkout, or of the
// checkout this agentrt was built in, else as that script does.
func toolchainsHint(checkout, lang string) string {
	if checkout == "" {
		checkout, _ = findCheckout()
	}
	switch {
	case checkout != "" && lang == "rust":
		return filepath.Join(checkout, "scripts", "toolchains.sh") + " rust installs Debian's"
	case checkout != "":
		return filepath.Join(checkout, "scripts", "toolchains.sh") + " tinygo builds it (on Debian)"
	case lang == "rust":
		return "apt-get install rustc cargo libstd-rust-dev-wasm32 lld-14 installs Debian's"
	default:
		return "scripts/toolchains.sh tinygo in a checkout of agentrt builds it (on Debian)"
	}
}

// writeProject writes p's files into dir, which must not exist or be
// empty: its templates' (those of templates/ and of the language's
// directory), and the kit when p builds with this agentrt's.
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
	shared, err := fs.Glob(templates, "templates/*.tmpl")
	if err != nil {
		return err
	}
	for _, name := range shared {
		if err := writeTemplate(dir, "templates", name, p); err != nil {
			return err
		}
	}
	err = fs.WalkDir(templates, src, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return writeTemplate(dir, src, name, p)
	})
	if err != nil || p.Checkout != "" {
		return err
	}
	return writeKit(filepath.Join(dir, filepath.FromSlash(projectKit)), p)
}

// writeTemplate writes the template name, of the directory src of
// templates, filled with p, into dir.
func writeTemplate(dir, src, name string, p *newProject) error {
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
	return writeProjectFile(filepath.Join(dir, filepath.FromSlash(rel)), out.Bytes())
}

// writeKit writes the kit this agentrt carries into dir: for Go and TinyGo
// the kit module without the Rust crate (go.mod, go/, abi/) and without
// its tests, for Rust the crate alone (rust/); and VERSION, the agentrt it
// comes from. It writes about 150 KB (Go) or 250 KB (Rust).
func writeKit(dir string, p *newProject) error {
	roots := []string{"go.mod", "go", "abi"}
	if p.Lang == "rust" {
		roots = []string{"rust"}
	}
	for _, root := range roots {
		err := fs.WalkDir(plugins.Source, root, func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(name, "_test.go") {
				return err
			}
			b, err := plugins.Source.ReadFile(name)
			if err != nil {
				return err
			}
			return writeProjectFile(filepath.Join(dir, filepath.FromSlash(name)), b)
		})
		if err != nil {
			return fmt.Errorf("write the kit: %w", err)
		}
	}
	version := fmt.Sprintf("agentrt %s (plugin ABI %d)\n", p.Version, abi.Version)
	return writeProjectFile(filepath.Join(dir, "VERSION"), []byte(version))
}

// writeProjectFile writes a file of a new project, and the directories it
// is in.
func writeProjectFile(name string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("new project: %w", err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return fmt.Errorf("new project: %w", err)
	}
	return nil
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

// findCheckout is the agentrt checkout this agentrt runs from, if it runs
// from one: the first directory above the executable that holds the kit
// (build/agentrt in a checkout finds the checkout). A project is not
// built from it (unless --kit names it), only its scripts are named.
func findCheckout() (string, error) {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return "", fmt.Errorf("find the agentrt checkout: %w", err)
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
			return "", fmt.Errorf("this agentrt (%s) is not in a checkout of agentrt", self)
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
