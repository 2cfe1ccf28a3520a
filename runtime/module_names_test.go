package runtime

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// namedModule is a module of funcs functions of type () -> () (function
// 0 exported under exports names, "e0", "e1", ...) with a "name" section of
// the given subsections.
func namedModule(funcs, exports int, names ...[]byte) []byte {
	var types, bodies, exps [][]byte
	for range funcs {
		types = append(types, uleb(0))
		bodies = append(bodies, funcBody(nil, opEnd))
	}
	for i := range exports {
		exps = append(exps, concat(wasmName(fmt.Sprintf("e%d", i)), []byte{0}, uleb(0)))
	}
	sections := [][]byte{
		wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec(), wasmVec()))),
		wasmSection(3, wasmVec(types...)),
	}
	if exports > 0 {
		sections = append(sections, wasmSection(7, wasmVec(exps...)))
	}
	sections = append(sections, wasmSection(10, wasmVec(bodies...)))
	if len(names) > 0 {
		sections = append(sections, customSection("name", names...))
	}
	return wasmModule(sections...)
}

// moduleName is the module-name subsection naming the module with n bytes.
func moduleName(n int) []byte {
	return nameSubsection(0, wasmName(strings.Repeat("m", n)))
}

// functionName is the function-names subsection naming function 0 with n
// bytes.
func functionName(n int) []byte {
	return nameSubsection(1, wasmVec(concat(uleb(0), wasmName(strings.Repeat("f", n)))))
}

// localNames is the local-names subsection naming local 0 of functions 0
// to n-1.
func localNames(n int) []byte {
	var entries [][]byte
	for i := range n {
		entries = append(entries, concat(uleb(uint64(i)), wasmVec(concat(uleb(0), wasmName("x")))))
	}
	return nameSubsection(2, wasmVec(entries...))
}

func TestPrepareModuleBoundsNamesAndExports(t *testing.T) {
	for _, tc := range []struct {
		name string
		code []byte
		want string // "" if accepted
	}{
		{"a module name at the limit", namedModule(1, 0, moduleName(maxModuleName)), ""},
		{"a module name over the limit", namedModule(1, 0, moduleName(maxModuleName+1)),
			`has a module name of 257 bytes in its "name" section; at most 256 are allowed`},
		{"a module name of 16 MiB", namedModule(1, 0, moduleName(16<<20)),
			`has a module name of 16777216 bytes in its "name" section; at most 256 are allowed`},
		{"a module name copied into the most functions", namedModule(maxModuleNameCopies/maxModuleName, 0, moduleName(maxModuleName)), ""},
		{"a module name copied into one function more", namedModule(maxModuleNameCopies/maxModuleName+1, 0, moduleName(maxModuleName)),
			`has a module name of 256 bytes in its "name" section, which would be copied into the name of each of its 16385 functions: 4096 KiB in all; at most 4096 KiB are allowed`},
		{"a function name at the limit", namedModule(1, 0, functionName(maxFunctionName)), ""},
		{"a function name over the limit", namedModule(1, 0, functionName(maxFunctionName+1)),
			`names function 0 with 16385 bytes in its "name" section; at most 16384 are allowed`},
		{"the locals of the most functions named", namedModule(maxLocalNamed, 0, localNames(maxLocalNamed)), ""},
		{"the locals of one function more named", namedModule(maxLocalNamed+1, 0, localNames(maxLocalNamed+1)),
			`names the locals of 1001 functions in its "name" section; at most 1000 are allowed`},
		{"the most exports", namedModule(1, maxExports), ""},
		{"one export more", namedModule(1, maxExports+1), "declares 1001 exports; at most 1000 are allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := prepareModule(tc.code, pluginLimits)
			if tc.want != "" {
				checkMessage(t, err, tc.want)
				return
			}
			if err != nil || !bytes.Equal(out, tc.code) {
				t.Fatalf("got %v, want the module accepted unchanged", err)
			}
			// And wazero compiles it: the test's module is well formed.
			ctx := context.Background()
			r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
			defer r.Close(ctx)
			if _, err := r.CompileModule(ctx, out); err != nil {
				t.Fatalf("wazero does not compile the module: %v", err)
			}
		})
	}
}

// recursionModule is a module whose export "rec" (i32) -> () calls itself
// down to 0 and then traps (unreachable), with a "name" section naming the
// module and the function with the given lengths.
func recursionModule(moduleNameLen, functionNameLen int) []byte {
	body := []byte{
		0x20, 0, 0x45, 0x04, 0x40, 0x00, opEnd, // if (local 0 == 0) unreachable
		0x20, 0, 0x41, 1, 0x6b, 0x10, 0, // rec(local 0 - 1)
		opEnd,
	}
	return wasmModule(
		wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec([]byte{valI32}), wasmVec()))),
		wasmSection(3, wasmVec(uleb(0))),
		wasmSection(7, wasmVec(concat(wasmName("rec"), []byte{0}, uleb(0)))),
		wasmSection(10, wasmVec(funcBody(nil, body...))),
		customSection("name", moduleName(moduleNameLen), functionName(functionNameLen)),
	)
}

// trapHeap is the heap allocated by a trap 40 calls deep in code.
func trapHeap(t *testing.T, code []byte) uint64 {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithDebugInfoEnabled(false))
	defer r.Close(ctx)
	mod, err := r.Instantiate(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	before := heapAllocated()
	if _, err := mod.ExportedFunction("rec").Call(ctx, 40); err == nil {
		t.Fatal("rec did not trap")
	}
	return heapAllocated() - before
}

// TestATrapCostsLittleWithNamesAtTheirLimits: wazero names every frame of
// a trap's stack trace (up to 30) by its function's name, module name
// included. With names at their limits, a trap allocates under 4 MiB; with
// a function name of 1 MiB, which prepareModule refuses, over 30 MiB.
func TestATrapCostsLittleWithNamesAtTheirLimits(t *testing.T) {
	atLimits := recursionModule(maxModuleName, maxFunctionName)
	if _, err := prepareModule(atLimits, pluginLimits); err != nil {
		t.Fatal(err)
	}
	got := trapHeap(t, atLimits)
	t.Logf("a trap 40 calls deep, names at their limits: %d KiB", got>>10)
	if got > 4<<20 {
		t.Errorf("a trap with names at their limits allocated %d KiB", got>>10)
	}
	over := recursionModule(maxModuleName, 1<<20)
	if _, err := prepareModule(over, pluginLimits); err == nil {
		t.Fatal("prepareModule accepts a function name of 1 MiB")
	}
	got = trapHeap(t, over)
	t.Logf("a trap 40 calls deep, a function name of 1 MiB: %d MiB", got>>20)
	if got < 30<<20 {
		t.Errorf("a trap in a function named with 1 MiB allocated %d MiB; the test means a hazard", got>>20)
	}
}
