// Command loops counts the loop turns a plugin's step handler takes in one
// call, and which functions take them.
//
// In agentrt's sandbox every turn of a loop is charged to the budget that
// lets the call's time limit stop it (runtime/interrupt.go), about 1 ns on
// the build machine; wazero's own check, which agentrt used before, left
// the guest's code for Go and came back at every turn, about 34 ns. A
// handler's loops, its JSON decoding's above all, are a cost of their
// own, which a profile of the host does not show by function.
//
//	make plugins
//	go run ./bench/loops build/plugins/echo-rust.wasm build/plugins/echo-tinygo.wasm
//	go run ./bench/loops -top 20 -input my-input.json my-agent.wasm
//
// It needs wabt (wasm2wat and wat2wasm; scripts/toolchains.sh wabt): the
// plugin is turned into text, a call to a counting host function is put at
// the head of each loop, and the result is loaded as agentrt loads any
// plugin and called once to warm up, then once counted. The input is an
// echo step's (the one bench/sandbox uses) unless -input names a file
// holding a whole handler input message.
//
// Results are in bench/README.md ("Loops cost").
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/bench/internal/echostep"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/plugin"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

func main() {
	top := flag.Int("top", 10, "how many loops to list, most turns first")
	inputFile := flag.String("input", "", "a file holding the handler's input message (default: an echo step's)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "Usage: go run ./bench/loops [-top N] [-input FILE] PLUGIN.wasm...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	input := echostep.Input
	if *inputFile != "" {
		b, err := os.ReadFile(*inputFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loops:", err)
			os.Exit(1)
		}
		input = b
	}
	for _, path := range flag.Args() {
		c, err := countStep(context.Background(), path, input)
		if err != nil {
			fmt.Fprintf(os.Stderr, "loops: %s: %v\n", path, err)
			os.Exit(1)
		}
		c.write(os.Stdout, path, *top)
	}
}

// loop is one loop of a plugin: the function it is in, its label in
// wasm2wat's text, and the turns it took.
type loop struct {
	Func, Label string
	Turns       int
}

// count is what one call's loops did.
type count struct {
	Total int
	Loops []loop // those that turned, most turns first
}

func (c count) write(w io.Writer, path string, top int) {
	fmt.Fprintf(w, "%s: %d loop turns in one step call\n", path, c.Total)
	fmt.Fprintf(w, "  %6s  %s\n", "turns", "function (loop)")
	for i, l := range c.Loops {
		if i == top {
			fmt.Fprintf(w, "  %6s  (%d loops more)\n", "…", len(c.Loops)-top)
			break
		}
		fmt.Fprintf(w, "  %6d  %s (%s)\n", l.Turns, demangle(l.Func), l.Label)
	}
}

// countModule is the host module the instrumented plugin calls.
const countModule = "agentrt_loops"

// countStep instruments the plugin at path, calls its step handler once to
// warm up and once more counting, and returns the count.
func countStep(ctx context.Context, path string, input []byte) (count, error) {
	dir, err := os.MkdirTemp("", "agentrt-loops-")
	if err != nil {
		return count{}, err
	}
	defer os.RemoveAll(dir)
	wat, err := run("wasm2wat", "--generate-names", path)
	if err != nil {
		return count{}, err
	}
	text, loops, err := instrument(wat)
	if err != nil {
		return count{}, err
	}
	watPath, wasmPath := filepath.Join(dir, "counted.wat"), filepath.Join(dir, "counted.wasm")
	if err := os.WriteFile(watPath, text, 0o644); err != nil {
		return count{}, err
	}
	if _, err := run("wat2wasm", watPath, "-o", wasmPath); err != nil {
		return count{}, err
	}

	turns := make([]int, len(loops))
	counting := false
	cfg := runtime.Config{
		CacheDir:    filepath.Join(dir, "cache"),
		CallTimeout: time.Minute,
		// Beside the host API's module, which plugin.Load adds.
		HostModules: []runtime.HostModule{
			{Name: countModule, Instantiate: func(ctx context.Context, r wazero.Runtime) error {
				_, err := r.NewHostModuleBuilder(countModule).NewFunctionBuilder().
					WithGoFunction(api.GoFunc(func(_ context.Context, stack []uint64) {
						if id := int(uint32(stack[0])); counting && id < len(turns) {
							turns[id]++
						}
					}), []api.ValueType{api.ValueTypeI32}, nil).
					Export("turn").Instantiate(ctx)
				return err
			}},
		},
	}
	p, err := plugin.Load(ctx, wasmPath, plugin.Config{Runtime: cfg})
	if err != nil {
		return count{}, err
	}
	defer p.Close(ctx)
	for _, counted := range []bool{false, true} {
		counting = counted
		code, result, err := echostep.Call(ctx, p, input)
		if err != nil {
			return count{}, fmt.Errorf("step: %w", err)
		}
		if code != 0 {
			return count{}, fmt.Errorf("step: the handler answered %d: %s", code, result)
		}
	}
	var c count
	for i, n := range turns {
		if n > 0 {
			c.Total += n
			c.Loops = append(c.Loops, loop{Func: loops[i].Func, Label: loops[i].Label, Turns: n})
		}
	}
	sort.SliceStable(c.Loops, func(i, j int) bool { return c.Loops[i].Turns > c.Loops[j].Turns })
	return c, nil
}

var (
	funcLine   = regexp.MustCompile(`^\s*\(func (\$\S+)`)
	importLine = regexp.MustCompile(`^\s*\(import `)
	loopLine   = regexp.MustCompile(`^(\s*)loop\b\s*(\$\S+)?`)
)

// instrument puts, at the head of each loop of wasm2wat's (unfolded) text,
// a call to agentrt_loops.turn with the loop's number, and returns the new
// text and the loops by number. Calls name their functions ($names from
// --generate-names), so the import it adds shifts no reference.
func instrument(wat []byte) ([]byte, []loop, error) {
	var out bytes.Buffer
	var loops []loop
	fn, imported := "", false
	sc := bufio.NewScanner(bytes.NewReader(wat))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := funcLine.FindStringSubmatch(line); m != nil {
			fn = strings.TrimPrefix(m[1], "$")
		}
		if !imported && (importLine.MatchString(line) || funcLine.MatchString(line)) {
			fmt.Fprintf(&out, "  (import %q \"turn\" (func $__agentrt_loops_turn (param i32)))\n", countModule)
			imported = true
		}
		out.WriteString(line)
		out.WriteByte('\n')
		if m := loopLine.FindStringSubmatch(line); m != nil {
			fmt.Fprintf(&out, "%s  i32.const %d\n%s  call $__agentrt_loops_turn\n", m[1], len(loops), m[1])
			loops = append(loops, loop{Func: fn, Label: m[2]})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read wasm2wat's text: %w", err)
	}
	return out.Bytes(), loops, nil
}

// demangle makes a Rust symbol (legacy mangling, _ZN...E) readable:
// its path joined by ::, without the hash. Other names are left as they are.
func demangle(name string) string {
	rest, ok := strings.CutPrefix(name, "_ZN")
	if !ok {
		return name
	}
	var parts []string
	for len(rest) > 0 && rest[0] != 'E' {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || i+n > len(rest) {
			return name
		}
		// A part that would start with '$' is mangled with '_' before it.
		part := rest[i : i+n]
		if strings.HasPrefix(part, "_$") {
			part = part[1:]
		}
		parts = append(parts, part)
		rest = rest[i+n:]
	}
	if len(parts) > 1 && len(parts[len(parts)-1]) == 17 && parts[len(parts)-1][0] == 'h' {
		parts = parts[:len(parts)-1]
	}
	s := strings.Join(parts, "::")
	return strings.NewReplacer("$LT$", "<", "$GT$", ">", "$u20$", " ", "$C$", ",", "$RF$", "&", "$BP$", "*", "$SP$", "@",
		"$u7b$", "{", "$u7d$", "}", "$u27$", "'", "$u5b$", "[", "$u5d$", "]", "$u7e$", "~", "..", "::").Replace(s)
}

func run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s(wasm2wat and wat2wasm are wabt's: scripts/toolchains.sh wabt)", name, err, stderr.String())
	}
	return out, nil
}
