package abi

import (
	"bufio"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The Rust kit mirrors this package's names and numbers by hand in
// plugins/rust/src/abi.rs; this test holds the two to one truth.

const rustABI = "../rust/src/abi.rs"

// TestRustKitConstantsAreGos: every exported constant of this package has
// a `pub const` of the same value in abi.rs, named in Rust's style
// (ErrNotFound is ERR_NOT_FOUND), and abi.rs has no other.
func TestRustKitConstantsAreGos(t *testing.T) {
	goConsts := goConstants(t)
	rustConsts := rustConstants(t, rustABI)
	if len(goConsts) < 30 {
		t.Fatalf("found only %d constants in package abi", len(goConsts))
	}
	fromGo := map[string]string{}
	for name, want := range goConsts {
		rname := rustName(name)
		fromGo[rname] = name
		got, ok := rustConsts[rname]
		switch {
		case !ok:
			t.Errorf("%s = %s has no `pub const %s` in %s", name, want, rname, rustABI)
		case got.Kind() != want.Kind() || !constant.Compare(got, token.EQL, want):
			t.Errorf("%s is %s in %s, %s in Go (%s)", rname, got, rustABI, want, name)
		}
	}
	for rname, v := range rustConsts {
		if fromGo[rname] == "" {
			t.Errorf("%s = %s in %s has no Go constant in package abi", rname, v, rustABI)
		}
	}
}

// goConstants returns the exported package-level constants of the
// package's non-test files, evaluated by go/types.
func goConstants(t *testing.T) map[string]constant.Value {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// Constants need no imports: each import is an empty package, and the
	// errors that makes elsewhere do not matter here.
	conf := types.Config{
		Importer: importerFunc(func(path string) (*types.Package, error) {
			return types.NewPackage(path, path[strings.LastIndex(path, "/")+1:]), nil
		}),
		Error: func(error) {},
	}
	pkg, _ := conf.Check("abi", fset, files, nil)
	out := map[string]constant.Value{}
	for _, name := range pkg.Scope().Names() {
		if c, ok := pkg.Scope().Lookup(name).(*types.Const); ok && c.Exported() {
			out[name] = c.Val()
		}
	}
	return out
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

var rustConst = regexp.MustCompile(`^\s*pub const ([A-Z][A-Z0-9_]*)\s*:\s*([^=]+?)\s*=\s*(.+?);\s*(//.*)?$`)

// rustConstants reads the `pub const NAME: T = VALUE;` lines of a Rust
// file: VALUE a string literal or an integer expression that reads the
// same in Go (1 << 2, -7, 4096). Any other line that declares a constant
// fails the test, so that none is skipped unseen.
func rustConstants(t *testing.T, path string) map[string]constant.Value {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]constant.Value{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := rustConst.FindStringSubmatch(line)
		if m == nil {
			if strings.Contains(line, "const ") && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d: a constant this test cannot read (one `pub const NAME: T = VALUE;` a line): %s", path, n, line)
			}
			continue
		}
		name, typ, expr := m[1], m[2], m[3]
		var v constant.Value
		if strings.HasPrefix(expr, `"`) {
			s, err := strconv.Unquote(expr)
			if err != nil || !strings.Contains(typ, "str") {
				t.Errorf("%s:%d: cannot read the string %s of type %s", path, n, expr, typ)
				continue
			}
			v = constant.MakeString(s)
		} else {
			tv, err := types.Eval(token.NewFileSet(), nil, token.NoPos, expr)
			if err != nil || tv.Value == nil || tv.Value.Kind() != constant.Int {
				t.Errorf("%s:%d: cannot read the integer %s (%v)", path, n, expr, err)
				continue
			}
			v = tv.Value
		}
		if _, dup := out[name]; dup {
			t.Errorf("%s:%d: %s is declared twice", path, n, name)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// rustName is a Go constant's name in Rust's style: ErrNotFound is
// ERR_NOT_FOUND, ErrIO is ERR_IO.
func rustName(goName string) string {
	r := []rune(goName)
	var b strings.Builder
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) {
			prevLower := unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if prevLower || (unicode.IsUpper(r[i-1]) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToUpper(c))
	}
	return b.String()
}

func TestRustName(t *testing.T) {
	for goName, want := range map[string]string{
		"Version": "VERSION", "ErrIO": "ERR_IO", "ErrNotFound": "ERR_NOT_FOUND", "HandlerBitTask": "HANDLER_BIT_TASK",
		"MaxArtifactMetaBytes": "MAX_ARTIFACT_META_BYTES", "FuncLastError": "FUNC_LAST_ERROR", "IOLimit": "IO_LIMIT",
	} {
		if got := rustName(goName); got != want {
			t.Errorf("rustName(%s) = %s, want %s", goName, got, want)
		}
	}
}
