package runtime

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/runtime/runtimetest"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// The tests build modules byte by byte with these helpers; the encoding is
// https://webassembly.github.io/spec/core/binary/.

// uleb is v as unsigned LEB128.
func uleb(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// sleb is v as signed LEB128.
func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// wasmSection is a section of the given id holding parts.
func wasmSection(id byte, parts ...[]byte) []byte {
	content := concat(parts...)
	return concat([]byte{id}, uleb(uint64(len(content))), content)
}

// wasmVec is a vector: its length, then its elements.
func wasmVec(elems ...[]byte) []byte { return concat(uleb(uint64(len(elems))), concat(elems...)) }

// wasmName is a name: its length, then its bytes.
func wasmName(s string) []byte { return concat(uleb(uint64(len(s))), []byte(s)) }

func wasmModule(sections ...[]byte) []byte {
	return concat([]byte("\x00asm\x01\x00\x00\x00"), concat(sections...))
}

// customSection is a custom section.
func customSection(name string, parts ...[]byte) []byte {
	return wasmSection(0, wasmName(name), concat(parts...))
}

// nameSubsection is a subsection of the "name" section.
func nameSubsection(id byte, parts ...[]byte) []byte {
	content := concat(parts...)
	return concat([]byte{id}, uleb(uint64(len(content))), content)
}

// funcBody is a function body: its size, then its local declarations and code.
func funcBody(locals [][]byte, code ...byte) []byte {
	b := concat(wasmVec(locals...), code)
	return concat(uleb(uint64(len(b))), b)
}

// localDecl declares n locals of type t.
func localDecl(n uint64, t byte) []byte { return concat(uleb(n), []byte{t}) }

const (
	valI32, valI64, valF32, valF64, valV128, valFuncref, valExternref = 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f
	opEnd                                                             = 0x0b
)

var (
	pluginLimits = moduleLimits{MaxTableEntries: DefaultMaxTableEntries, MaxLocals: maxLocals, MaxInstanceBytes: maxInstanceBytes, MaxMemoryPages: DefaultMemoryLimitPages}
	i32c0        = []byte{0x41, 0, opEnd} // i32.const 0
)

// checkMessage fails unless err is one line that reads after "plugin X.wasm: "
// and contains want.
func checkMessage(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", want)
	}
	msg := err.Error()
	if !strings.Contains(msg, want) {
		t.Errorf("got error %q, want one containing %q", msg, want)
	}
	if strings.ContainsAny(msg, "\n\r") || msg == "" || msg[0] < 'a' || msg[0] > 'z' {
		t.Errorf("error %q is not one line starting with a lower-case word", msg)
	}
}

// hostileCounts are modules that declare n elements and hold few or none;
// perElement is at least what wazero v1.12's decoder allocates for each
// element declared (measured with TestWazeroAllocatesFromHostileCounts).
var hostileCounts = []struct {
	name       string
	build      func(n uint64) []byte
	perElement uint64
	want       string // prepareModule's error when n is 2^32-1
}{
	{"types' parameters", func(n uint64) []byte { return wasmModule(wasmSection(1, uleb(1), []byte{0x60}, uleb(n))) },
		8, "declares 4294967295 parameters in type 0, but only 0 bytes of section 1 (type) remain"},
	{"imports", func(n uint64) []byte { return wasmModule(wasmSection(2, uleb(n))) },
		112, "declares 4294967295 imports, but only 0 bytes of section 2 (import) remain"},
	{"import name length", func(n uint64) []byte { return wasmModule(wasmSection(2, uleb(1), uleb(n))) },
		1, "declares an import's module name of 4294967295 bytes, but only 0 bytes of section 2 (import) remain"},
	{"functions", func(n uint64) []byte { return wasmModule(wasmSection(3, uleb(n))) },
		4, "declares 4294967295 functions, but only 0 bytes of section 3 (function) remain"},
	{"tables", func(n uint64) []byte { return wasmModule(wasmSection(4, uleb(n))) },
		32, "declares 4294967295 tables, but only 0 bytes of section 4 (table) remain"},
	{"globals", func(n uint64) []byte { return wasmModule(wasmSection(6, uleb(n))) },
		40, "declares 4294967295 globals, but only 0 bytes of section 6 (global) remain"},
	{"exports", func(n uint64) []byte { return wasmModule(wasmSection(7, uleb(n))) },
		64, "declares 4294967295 exports, but only 0 bytes of section 7 (export) remain"},
	{"element segments", func(n uint64) []byte { return wasmModule(wasmSection(9, uleb(n))) },
		72, "declares 4294967295 element segments, but only 0 bytes of section 9 (element) remain"},
	{"element function indices", func(n uint64) []byte { return wasmModule(wasmSection(9, uleb(1), uleb(0), i32c0, uleb(n))) },
		24, "declares 4294967295 function indices in element segment 0, but only 0 bytes of section 9 (element) remain"},
	{"element expressions", func(n uint64) []byte {
		return wasmModule(wasmSection(9, uleb(1), uleb(5), []byte{valFuncref}, uleb(n)))
	},
		24, "declares 4294967295 expressions in element segment 0, but only 0 bytes of section 9 (element) remain"},
	{"function bodies", func(n uint64) []byte { return wasmModule(wasmSection(10, uleb(n))) },
		72, "declares 4294967295 function bodies, but only 0 bytes of section 10 (code) remain"},
	{"function body size", func(n uint64) []byte { return wasmModule(wasmSection(10, uleb(1), uleb(n), []byte{0})) },
		1, "declares the body of function 0 of 4294967295 bytes, but only 1 bytes of section 10 (code) remain"},
	{"locals", func(n uint64) []byte {
		// Without a function section, so that wazero stops after
		// allocating and filling the locals, before it compiles them.
		return wasmModule(wasmSection(10, wasmVec(funcBody([][]byte{localDecl(n, valI32)}, opEnd))))
	}, 8, "function 0 declares 4294967295 locals; at most 50000 are allowed"},
	{"data segments", func(n uint64) []byte { return wasmModule(wasmSection(11, uleb(n))) },
		56, "declares 4294967295 data segments, but only 0 bytes of section 11 (data) remain"},
	{"data segment length", func(n uint64) []byte { return wasmModule(wasmSection(11, uleb(1), uleb(1), uleb(n))) },
		1, "declares data segment 0 of 4294967295 bytes, but only 0 bytes of section 11 (data) remain"},
	{"custom section name length", func(n uint64) []byte { return wasmModule(wasmSection(0, uleb(n))) },
		1, "declares a custom section name of 4294967295 bytes, but only 0 bytes of section 0 (custom) remain"},
	{"custom section length", func(n uint64) []byte { return wasmModule([]byte{0}, uleb(n), wasmName("x")) },
		1, "section 0 (custom) is truncated: it declares 4294967295 bytes, but 2 remain"},
	{"name section module name", func(n uint64) []byte { return wasmModule(customSection("name", nameSubsection(0, uleb(n)))) },
		1, `declares a module name of 4294967295 bytes, but only 0 bytes of subsection 0 of the "name" section remain`},
	{"name section function names", func(n uint64) []byte { return wasmModule(customSection("name", nameSubsection(1, uleb(n)))) },
		24, `declares 4294967295 function names, but only 0 bytes of subsection 1 of the "name" section remain`},
	{"name section functions with local names", func(n uint64) []byte { return wasmModule(customSection("name", nameSubsection(2, uleb(n)))) },
		32, `declares 4294967295 functions' local names, but only 0 bytes of subsection 2 of the "name" section remain`},
	{"name section local names", func(n uint64) []byte {
		return wasmModule(customSection("name", nameSubsection(2, uleb(1), uleb(0), uleb(n))))
	},
		24, `declares 4294967295 local names of function 0, but only 0 bytes of subsection 2 of the "name" section remain`},
	{"name subsection hiding a count", func(n uint64) []byte {
		// Subsection 1 holds its count (0) and, past it, bytes that
		// wazero reads as subsection 2, since it reads subsections 0
		// to 2 without regard to their size; subsection 9 keeps
		// wazero's count of the bytes left above zero meanwhile.
		hidden := concat([]byte{2}, uleb(uint64(len(uleb(n)))), uleb(n))
		return wasmModule(customSection("name", nameSubsection(1, uleb(0), hidden), nameSubsection(9, make([]byte, 8))))
	}, 32, `subsection 1 of the "name" section has 7 bytes left over after its contents`},
}

func TestPrepareModuleRefusesCountsTheBytesCannotHold(t *testing.T) {
	for _, tc := range hostileCounts {
		t.Run(tc.name, func(t *testing.T) {
			code := tc.build(math.MaxUint32)
			if len(code) > 40 {
				t.Fatalf("the module has %d bytes; the point is that it has few", len(code))
			}
			out, err := prepareModule(code, pluginLimits)
			if out != nil {
				t.Errorf("returned %d bytes of code with the error", len(out))
			}
			checkMessage(t, err, tc.want)
		})
	}
}

// TestWazeroAllocatesFromHostileCounts shows that each guard of
// TestPrepareModuleRefusesCountsTheBytesCannotHold matters: wazero, given
// the unchecked module, allocates in proportion to the count it declares.
// It declares enough for 256 MiB each; at 2^32-1 the figure is perElement
// times 4 GiB, from 4 GiB (function body size, names) to 448 GiB (imports),
// and the Go runtime dies of it. If this fails because wazero allocates
// less, wazero has learnt to check, and the guard is belt and braces.
func TestWazeroAllocatesFromHostileCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 256 MiB per case")
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	for _, tc := range hostileCounts {
		t.Run(tc.name, func(t *testing.T) {
			mib := uint64(256)
			if tc.name == "locals" {
				mib = 64 // wazero fills the locals in too, one by one: slow under -race
			}
			n := mib << 20 / tc.perElement
			code := tc.build(n)
			if _, err := prepareModule(code, pluginLimits); err == nil {
				t.Fatal("prepareModule accepts the module")
			}
			var before, after goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&before)
			start := time.Now()
			_, err := r.CompileModule(ctx, code)
			took := time.Since(start)
			goruntime.ReadMemStats(&after)
			if err == nil {
				t.Error("wazero compiles the module")
			}
			got := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes declaring %d elements: wazero allocated %d MiB in %v (%.1f bytes per element; %.0f GiB at 2^32-1)",
				len(code), n, got>>20, took.Round(time.Millisecond), float64(got)/float64(n), float64(got)/float64(n)*math.MaxUint32/(1<<30))
			if want := n * tc.perElement; got < want {
				t.Errorf("wazero allocated %d bytes, want at least %d", got, want)
			}
		})
	}
}

func TestPrepareModuleBoundsLocals(t *testing.T) {
	twoImports := wasmSection(2, wasmVec(
		concat(wasmName("env"), wasmName("a"), []byte{0}, uleb(0)),
		concat(wasmName("env"), wasmName("b"), []byte{0}, uleb(0))))
	for _, tc := range []struct {
		name string
		code []byte
		want string // "" if accepted
	}{
		{"at the limit, in two declarations",
			wasmModule(wasmSection(10, wasmVec(funcBody([][]byte{localDecl(25_000, valI32), localDecl(25_000, valF64)}, opEnd)))), ""},
		{"one over, named by its index after the imported functions",
			wasmModule(twoImports, wasmSection(10, wasmVec(funcBody(nil, opEnd), funcBody([][]byte{localDecl(50_000, valI32), localDecl(1, valI64)}, opEnd)))),
			"function 3 declares 50001 locals; at most 50000 are allowed"},
		{"a sum past 32 bits",
			wasmModule(wasmSection(10, wasmVec(funcBody([][]byte{localDecl(math.MaxUint32, valI32), localDecl(math.MaxUint32, valI32)}, opEnd)))),
			"function 0 declares 8589934590 locals; at most 50000 are allowed"},
		{"more declarations than the body holds",
			wasmModule(wasmSection(10, wasmVec(concat(uleb(3), uleb(9), localDecl(1, valI32))))),
			"declares 9 local declarations in function 0, but only 2 bytes of section 10 (code) remain"},
		{"functions at the limit each, more than their bytes pay for",
			wasmModule(wasmSection(10, wasmVec(
				funcBody([][]byte{localDecl(50_000, valI32)}, opEnd),
				funcBody([][]byte{localDecl(50_000, valI32)}, opEnd),
				funcBody([][]byte{localDecl(50_000, valI32)}, opEnd)))),
			"declares 150000 locals in all its functions; at most 50022 are allowed (50000, plus one per byte of its code section)"},
		{"locals past the limit paid for by code",
			wasmModule(wasmSection(10, wasmVec(
				funcBody([][]byte{localDecl(50_000, valI32)}, opEnd),
				funcBody([][]byte{localDecl(100, valI32)}, append(make([]byte, 100), opEnd)...)))), // 100 nops
			""},
		{"a declaration running past the body",
			wasmModule(wasmSection(10, uleb(1), uleb(2), uleb(1), uleb(1), []byte{valI32, opEnd})),
			"section 10 (code) is truncated at byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := prepareModule(tc.code, pluginLimits)
			if tc.want == "" {
				if err != nil || !bytes.Equal(out, tc.code) {
					t.Fatalf("got %v, want the module accepted unchanged", err)
				}
				return
			}
			checkMessage(t, err, tc.want)
		})
	}
}

// TestWazeroKeepsTheLocalsOfEveryFunction shows why the locals of a
// module's functions together are bounded, not only each function's:
// wazero keeps 8 bytes per local for as long as the module is compiled, so
// 50 functions of 50,000 locals each, in 421 bytes, hold 19 MiB, and a
// module of 80 KiB of them would hold 4 GiB (and take 10 s to compile).
func TestWazeroKeepsTheLocalsOfEveryFunction(t *testing.T) {
	const functions, locals = 50, 50_000
	var types, bodies [][]byte
	for range functions {
		types = append(types, uleb(0))
		bodies = append(bodies, funcBody([][]byte{localDecl(locals, valI64)}, opEnd))
	}
	code := wasmModule(wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec(), wasmVec()))), wasmSection(3, wasmVec(types...)), wasmSection(10, wasmVec(bodies...)))
	_, err := prepareModule(code, pluginLimits)
	checkMessage(t, err, "declares 2500000 locals in all its functions")

	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	compiled, err := r.CompileModule(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d bytes of module: wazero keeps %d MiB", len(code), kept>>20)
	if want := int64(functions * locals * 8 * 9 / 10); kept < want {
		t.Errorf("wazero keeps %d bytes for the compiled module, want at least %d", kept, want)
	}
	goruntime.KeepAlive(compiled)
}

func TestPrepareModuleBoundsFunctionTypes(t *testing.T) {
	types := func(params, results int) []byte {
		return wasmModule(wasmSection(1, wasmVec(concat([]byte{0x60}, uleb(uint64(params)), bytes.Repeat([]byte{valI64}, params),
			uleb(uint64(results)), bytes.Repeat([]byte{valI32}, results)))))
	}
	for _, tc := range []struct {
		name string
		code []byte
		want string // "" if accepted
	}{
		{"1000 parameters and 1000 results", types(1000, 1000), ""},
		{"1001 parameters", types(1001, 0), "declares type 0 with 1001 parameters; at most 1000 are allowed"},
		{"1001 results", types(0, 1001), "declares type 0 with 1001 results; at most 1000 are allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := prepareModule(tc.code, pluginLimits)
			if tc.want == "" {
				if err != nil || !bytes.Equal(out, tc.code) {
					t.Fatalf("got %v, want the module accepted unchanged", err)
				}
				return
			}
			checkMessage(t, err, tc.want)
		})
	}

	// Why: wazero names a type in time and garbage quadratic in its
	// length, here 150 MiB for 10 KB (630 MiB for 20,000 parameters).
	code := types(10_000, 0)
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	if _, err := r.CompileModule(ctx, code); err != nil {
		t.Fatal(err)
	}
	goruntime.ReadMemStats(&after)
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("a type of 10,000 parameters: wazero allocates %d MiB", got>>20)
	if got < 100<<20 {
		t.Errorf("wazero allocates %d bytes for a type of 10,000 parameters, want over 100 MiB", got)
	}
}

// TestPrepareModuleAllocatesPerSectionNotPerElement pins what the walk
// costs: a few allocations per section (names for messages, the table
// section's copy), none per element, however many there are.
func TestPrepareModuleAllocatesPerSectionNotPerElement(t *testing.T) {
	const n = 10_000
	var types, funcs, bodies, names [][]byte
	for i := range n {
		types = append(types, concat([]byte{0x60}, wasmVec([]byte{valI32}, []byte{valI64}), wasmVec([]byte{valI32})))
		funcs = append(funcs, uleb(uint64(i)))
		bodies = append(bodies, funcBody([][]byte{localDecl(3, valI32), localDecl(2, valF64)}, 0x41, 0, opEnd))
		names = append(names, concat(uleb(uint64(i)), wasmName(fmt.Sprint("function ", i))))
	}
	code := wasmModule(wasmSection(1, wasmVec(types...)), wasmSection(3, wasmVec(funcs...)), wasmSection(4, wasmVec([]byte{valFuncref, 0x00, 100})),
		wasmSection(10, wasmVec(bodies...)), customSection("name", nameSubsection(1, wasmVec(names...))))
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := prepareModule(code, pluginLimits); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 30 {
		t.Errorf("prepareModule allocates %.0f times for a module of %d functions, want a few per section", allocs, n)
	}
}

// growModule has one funcref table of 10 entries and no maximum, and
// exports grow(delta i32) i32, which runs table.grow with ref.null.
var growModule = wasmModule(
	wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec([]byte{valI32}), wasmVec([]byte{valI32})))),
	wasmSection(3, wasmVec(uleb(0))),
	wasmSection(4, wasmVec([]byte{valFuncref, 0x00, 10})),
	wasmSection(7, wasmVec(concat(wasmName("grow"), []byte{0}, uleb(0)))),
	wasmSection(10, wasmVec(funcBody(nil,
		0xd0, valFuncref, // ref.null func
		0x20, 0, // local.get 0
		0xfc, 15, 0, // table.grow 0
		opEnd))),
)

func TestPrepareModuleCapsTableGrowth(t *testing.T) {
	ctx := context.Background()
	grow := func(t *testing.T, code []byte) func(delta uint32) (old uint32, heapGrowth int64) {
		r := wazero.NewRuntime(ctx)
		t.Cleanup(func() { r.Close(ctx) })
		mod, err := r.Instantiate(ctx, code)
		if err != nil {
			t.Fatal(err)
		}
		fn := mod.ExportedFunction("grow")
		return func(delta uint32) (uint32, int64) {
			var before, after goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&before)
			res, err := fn.Call(ctx, api.EncodeU32(delta))
			goruntime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			return uint32(res[0]), int64(after.HeapAlloc) - int64(before.HeapAlloc)
		}
	}

	t.Run("capped", func(t *testing.T) {
		code, err := prepareModule(growModule, moduleLimits{MaxTableEntries: 1000, MaxLocals: 100, MaxMemoryPages: DefaultMemoryLimitPages})
		if err != nil {
			t.Fatal(err)
		}
		grow := grow(t, code)
		for _, step := range []struct {
			delta, want uint32
		}{
			{990, 10},                    // to the cap, 1000: returns the old size
			{1, math.MaxUint32},          // past it: -1
			{0xfffffff0, math.MaxUint32}, // what killed the server: -1, and nothing allocated
		} {
			old, heap := grow(step.delta)
			t.Logf("table.grow %d: %d, heap %+d bytes", step.delta, int32(old), heap)
			if old != step.want {
				t.Errorf("table.grow %d returned %d, want %d", step.delta, int32(old), int32(step.want))
			}
			if heap > 4<<20 {
				t.Errorf("table.grow %d grew the heap by %d bytes", step.delta, heap)
			}
		}
	})
	t.Run("uncapped", func(t *testing.T) {
		// The same module unprepared grows as far as it asks (8 bytes of
		// heap per entry; 0xfffffff0 entries would be 32 GiB).
		old, heap := grow(t, growModule)(1 << 20)
		t.Logf("table.grow %d: %d, heap %+d bytes", 1<<20, int32(old), heap)
		if old != 10 {
			t.Errorf("table.grow 2^20 returned %d, want 10", int32(old))
		}
		if heap < 7<<20 { // 8 MiB, less what the sweeper frees meanwhile
			t.Errorf("table.grow 2^20 grew the heap by %d bytes, want about 8 MiB", heap)
		}
	})
}

// tableDecl is a table's limits as a test declares or finds them.
type tableDecl struct {
	min, max uint32
	hasMax   bool
}

func (tb tableDecl) encode() []byte {
	if tb.hasMax {
		return concat([]byte{valFuncref, 0x01}, uleb(uint64(tb.min)), uleb(uint64(tb.max)))
	}
	return concat([]byte{valFuncref, 0x00}, uleb(uint64(tb.min)))
}

func TestPrepareModuleSharesTableEntries(t *testing.T) {
	noMax := func(min uint32) tableDecl { return tableDecl{min: min} }
	withMax := func(min, max uint32) tableDecl { return tableDecl{min, max, true} }
	for _, tc := range []struct {
		name   string
		limit  uint32
		tables []tableDecl
		want   []uint32 // the maximums after, or nil if the module comes back unchanged
		err    string
	}{
		{"two tables share what their minimums leave", 1000, []tableDecl{noMax(100), noMax(200)}, []uint32{450, 550}, ""},
		{"a smaller declared maximum is kept", 1000, []tableDecl{withMax(100, 120), noMax(200)}, []uint32{120, 550}, ""},
		{"a larger declared maximum is lowered", 1000, []tableDecl{withMax(0, math.MaxUint32)}, []uint32{1000}, ""},
		{"a table as large as the limit", 1000, []tableDecl{noMax(1000)}, []uint32{1000}, ""},
		{"a Go plugin's table", 100_000, []tableDecl{noMax(6_213)}, []uint32{100_000}, ""},
		{"maximums within their shares are left alone", 1000, []tableDecl{withMax(10, 20), withMax(0, 400)}, nil, ""},
		{"no tables", 1000, nil, nil, ""},
		{"minimums over the limit", 1000, []tableDecl{noMax(600), noMax(500)}, nil,
			"declares tables of 1100 entries in all; a plugin's tables may hold at most 1000 entries"},
		{"minimums over 32 bits", 1000, []tableDecl{noMax(math.MaxUint32), noMax(math.MaxUint32)}, nil,
			"declares tables of 8589934590 entries in all; a plugin's tables may hold at most 1000 entries"},
		{"a maximum below the minimum", 1000, []tableDecl{withMax(10, 5)}, nil,
			"declares table 0 with a maximum of 5 entries, below its minimum of 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var decls [][]byte
			for _, tb := range tc.tables {
				decls = append(decls, tb.encode())
			}
			// Sections around the table section, to see them copied as they are.
			code := wasmModule(wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec(), wasmVec()))), wasmSection(4, wasmVec(decls...)),
				wasmSection(5, wasmVec([]byte{0x00, 1})), customSection("after", []byte("tail")))
			in := bytes.Clone(code)
			out, err := prepareModule(code, moduleLimits{MaxTableEntries: tc.limit, MaxLocals: 10, MaxMemoryPages: DefaultMemoryLimitPages})
			if !bytes.Equal(code, in) {
				t.Fatal("prepareModule modified its input")
			}
			if tc.err != "" {
				checkMessage(t, err, tc.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if &out[0] != &code[0] || len(out) != len(code) {
					t.Fatal("the module came back changed")
				}
				return
			}
			checkSameExceptTables(t, code, out)
			got := tablesOf(t, out)
			var sum uint64
			for i, tb := range got {
				sum += uint64(tb.max)
				if !tb.hasMax || tb.min != tc.tables[i].min || tb.max != tc.want[i] {
					t.Errorf("table %d is %+v, want min %d, max %d", i, tb, tc.tables[i].min, tc.want[i])
				}
			}
			if len(got) != len(tc.tables) || sum > uint64(tc.limit) {
				t.Errorf("got %d tables of at most %d entries in all, want %d tables of at most %d", len(got), sum, len(tc.tables), tc.limit)
			}
			ctx := context.Background()
			r := wazero.NewRuntime(ctx)
			defer r.Close(ctx)
			if _, err := r.CompileModule(ctx, out); err != nil {
				t.Errorf("wazero does not compile the rewritten module: %v", err)
			}
			if again, err := prepareModule(out, moduleLimits{MaxTableEntries: tc.limit, MaxLocals: 10, MaxMemoryPages: DefaultMemoryLimitPages}); err != nil || &again[0] != &out[0] {
				t.Errorf("a second pass changes the module (%v)", err)
			}
		})
	}
}

func TestPrepareModuleRefusesImportsOtherThanFunctions(t *testing.T) {
	imp := func(mod, name string, desc ...byte) []byte {
		return wasmModule(wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec(), wasmVec()))), wasmSection(2, wasmVec(concat(wasmName(mod), wasmName(name), desc))))
	}
	for _, tc := range []struct {
		name string
		code []byte
		want string // "" if accepted
	}{
		{"function", imp("agentrt_v1", "log", 0x00, 0), ""},
		{"table", imp("env", "__indirect_function_table", 0x01, valFuncref, 0x00, 1),
			`imports table "env.__indirect_function_table"; a plugin may import only functions`},
		{"memory", imp("env", "memory", 0x02, 0x00, 1), `imports memory "env.memory"; a plugin may import only functions`},
		{"global", imp("env", "__stack_pointer", 0x03, valI32, 0x01), `imports global "env.__stack_pointer"; a plugin may import only functions`},
		{"tag", imp("env", "exn", 0x04, 0x00, 0), `imports tag "env.exn"; a plugin may import only functions`},
		{"unknown kind", imp("env", "x", 0x05), `imports "env.x" with unknown kind 0x05; a plugin may import only functions`},
		{"a name that would break the line, cut", imp("env\n", strings.Repeat("m", 100), 0x02, 0x00, 1),
			`imports memory "env\n.` + strings.Repeat("m", 59) + `"...; a plugin may import only functions`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := prepareModule(tc.code, pluginLimits)
			if tc.want == "" {
				if err != nil || !bytes.Equal(out, tc.code) {
					t.Fatalf("got %v, want the module accepted unchanged", err)
				}
				return
			}
			checkMessage(t, err, tc.want)
		})
	}
}

func TestPrepareModuleRefusesMalformedModules(t *testing.T) {
	typeSection := wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec(), wasmVec())))
	global := func(expr ...byte) []byte { return wasmModule(wasmSection(6, wasmVec(concat([]byte{valI32, 0}, expr)))) }
	for _, tc := range []struct {
		name string
		code []byte
		want string
	}{
		{"empty", nil, "is not a WebAssembly module (bad magic)"},
		{"bad magic", []byte("\x7fELF\x01\x00\x00\x00"), "is not a WebAssembly module (bad magic)"},
		{"short header", []byte("\x00asm\x01"), "is not a WebAssembly module (truncated header)"},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), "is WebAssembly binary format version 2; only version 1 is supported"},
		{"a section past the end", wasmModule([]byte{10}, uleb(1000), []byte{0}), "section 10 (code) is truncated: it declares 1000 bytes, but 1 remain"},
		{"a section size of six bytes", wasmModule([]byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}), "section 1 (type) has a number too large for 32 bits at byte 13"},
		{"a section size over 32 bits", wasmModule([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x1f}), "section 1 (type) has a number too large for 32 bits at byte 13"},
		{"a section size cut short", wasmModule([]byte{1, 0x80}), "section 1 (type) is truncated at byte 10"},
		{"a count cut short", wasmModule(wasmSection(2, []byte{0x80})), "section 2 (import) is truncated at byte 11"},
		{"an unknown section", wasmModule(wasmSection(14)), "has a section of unknown id 14 at byte 8"},
		{"two type sections", wasmModule(typeSection, typeSection), "has two type sections"},
		{"bytes left in a section", wasmModule(wasmSection(3, wasmVec(uleb(0)), []byte{0})), "section 3 (function) has 1 bytes left over after its contents"},
		{"a name subsection past its section", wasmModule(customSection("name", []byte{1}, uleb(100), uleb(0))),
			`declares name subsection 1 of 100 bytes, but only 1 bytes of the "name" section remain`},
		{"a recursive type group", wasmModule(wasmSection(1, wasmVec([]byte{0x4e, 1, 0x60, 0, 0}))),
			"declares a recursive type group (0x4e) at type 0; agentrt does not enable the GC proposal"},
		{"a type of unknown form", wasmModule(wasmSection(1, wasmVec([]byte{0x5f, 0, 0}))), "declares type 0 of form 0x5f; only function types (0x60) exist"},
		{"a typed reference", wasmModule(wasmSection(1, wasmVec([]byte{0x60, 1, 0x63, 0x70, 0}))),
			"uses a typed reference (0x63) at byte 13; agentrt does not enable the function-references proposal"},
		{"exnref", wasmModule(wasmSection(1, wasmVec([]byte{0x60, 1, 0x69, 0}))), "uses exnref at byte 13; agentrt does not enable the exception-handling proposal"},
		{"an unknown value type", wasmModule(wasmSection(1, wasmVec([]byte{0x60, 0, 1, 0x40}))), "has an unknown value type 0x40 at byte 14"},
		{"a table with an initializer", wasmModule(wasmSection(4, wasmVec([]byte{0x40, 0x00, valFuncref, 0x00, 1, 0xd0, valFuncref, opEnd}))),
			"declares table 0 with an initializer (0x40); agentrt does not enable the function-references proposal"},
		{"a table of typed references", wasmModule(wasmSection(4, wasmVec([]byte{0x64, 0x70, 0x00, 1}))),
			"declares table 0 of a typed reference (0x64); agentrt does not enable the function-references proposal"},
		{"a table of i32", wasmModule(wasmSection(4, wasmVec([]byte{valI32, 0x00, 1}))), "declares table 0 of element type 0x7f; only funcref (0x70) and externref (0x6f) exist"},
		{"a shared table", wasmModule(wasmSection(4, wasmVec([]byte{valFuncref, 0x03, 1, 2}))),
			"declares table 0 shared (limits flag 0x03); agentrt does not enable the threads proposal"},
		{"a 64-bit table", wasmModule(wasmSection(4, wasmVec([]byte{valFuncref, 0x04, 1}))),
			"declares table 0 with 64-bit limits (flag 0x04); agentrt does not enable the memory64 proposal"},
		{"a 64-bit table with a maximum", wasmModule(wasmSection(4, wasmVec([]byte{valFuncref, 0x05, 1, 2}))),
			"declares table 0 with 64-bit limits (flag 0x05); agentrt does not enable the memory64 proposal"},
		{"unknown table limits", wasmModule(wasmSection(4, wasmVec([]byte{valFuncref, 0x08, 1}))), "declares table 0 with limits flag 0x08; only 0x00 and 0x01 exist"},
		{"a shared memory", wasmModule(wasmSection(5, wasmVec([]byte{0x03, 1, 2}))),
			"declares its memory shared (limits flag 0x03); agentrt does not enable the threads proposal"},
		{"a 64-bit memory", wasmModule(wasmSection(5, wasmVec([]byte{0x04, 1}))),
			"declares its memory with 64-bit limits (flag 0x04); agentrt does not enable the memory64 proposal"},
		{"two memories", wasmModule(wasmSection(5, wasmVec([]byte{0x00, 1}, []byte{0x00, 1}))), "declares 2 memories; a module may have at most one"},
		{"a global of unknown mutability", wasmModule(wasmSection(6, wasmVec(concat([]byte{valI32, 2}, i32c0)))),
			"declares global 0 with mutability 0x02; only 0x00 and 0x01 exist"},
		{"an export of unknown kind", wasmModule(wasmSection(7, wasmVec(concat(wasmName("x"), []byte{5, 0})))), "declares export 0 of kind 0x05; only 0x00 to 0x04 exist"},
		{"an unknown element segment", wasmModule(wasmSection(9, wasmVec(uleb(8)))), "declares element segment 0 with flags 8; only 0 to 7 exist"},
		{"an element kind other than funcref", wasmModule(wasmSection(9, wasmVec(concat(uleb(1), []byte{1}, wasmVec())))),
			"declares element segment 0 of element kind 0x01; only 0x00 exists"},
		{"an element type of i32", wasmModule(wasmSection(9, wasmVec(concat(uleb(5), []byte{valI32}, wasmVec())))),
			"declares element segment 0 of element type 0x7f; only funcref (0x70) and externref (0x6f) exist"},
		{"an element type of typed references", wasmModule(wasmSection(9, wasmVec(concat(uleb(7), []byte{0x63, 0x70}, wasmVec())))),
			"declares element segment 0 of a typed reference (0x63); agentrt does not enable the function-references proposal"},
		{"an unknown data segment", wasmModule(wasmSection(11, wasmVec(concat(uleb(3), wasmName("x"))))), "declares data segment 0 with flags 3; only 0 to 2 exist"},
		{"a tag with an attribute", wasmModule(wasmSection(13, wasmVec([]byte{1, 0}))), "declares tag 0 with attribute 0x01; only 0x00 exists"},
		// Constant expressions: an unknown opcode, or a number longer
		// than its type allows, would leave the walk unable to tell where
		// the expression ends.
		{"an unknown opcode in a constant", global(0x41, 0, 0x45, opEnd),
			"has opcode 0x45 at byte 15 in a constant expression; agentrt accepts only constants, global.get, ref.null, ref.func and i32/i64 add, sub and mul there"},
		{"local.get in a constant", global(0x20, 0, opEnd), "has opcode 0x20 at byte 13 in a constant expression"},
		{"a constant without its end", global(0x41, 0), "section 6 (global) is truncated at byte 15"},
		{"an i32 of six bytes", global(0x41, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, opEnd), "section 6 (global) has a number too large for 32 bits at byte 18"},
		{"an i32 whose unused bits are not its sign", global(0x41, 0xff, 0xff, 0xff, 0xff, 0x4f, opEnd), "has a number too large for 32 bits at byte 18"},
		{"an i64 of eleven bytes", global(0x42, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, opEnd),
			"section 6 (global) has a number too large for 64 bits at byte 23"},
		{"an f64 cut short", global(0x44, 0, 0, 0), "section 6 (global) is truncated at byte 17"},
		{"ref.null of a type index", global(0xd0, 0x00, opEnd), "has ref.null of heap type 0x00 at byte 14; only func (0x70) and extern (0x6f) are supported"},
		{"a vector instruction other than v128.const", global(0xfd, 0x0d, opEnd),
			"has vector instruction 0xfd 0x0d at byte 13 in a constant expression; only v128.const (0xfd 0x0c) is allowed there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := prepareModule(tc.code, pluginLimits)
			if out != nil {
				t.Errorf("returned %d bytes of code with the error", len(out))
			}
			checkMessage(t, err, tc.want)
		})
	}
}

// kitchenSink is a module with every section and every encoding of element
// and data segment and of constant expression wazero's default features
// accept, and a name section with every subsection wazero reads and one
// it skips.
var kitchenSink = wasmModule(
	wasmSection(1, wasmVec(
		concat([]byte{0x60}, wasmVec(), wasmVec()),
		concat([]byte{0x60}, wasmVec([]byte{valI32}), wasmVec([]byte{valI32})),
		concat([]byte{0x60}, wasmVec([]byte{valI64}, []byte{valF32}, []byte{valF64}, []byte{valV128}, []byte{valFuncref}, []byte{valExternref}), wasmVec([]byte{valI32}, []byte{valI64})),
	)),
	wasmSection(2, wasmVec(concat(wasmName("env"), wasmName("f"), []byte{0x00}, uleb(0)))),
	wasmSection(3, wasmVec(uleb(1), uleb(0), uleb(2))),
	wasmSection(4, wasmVec([]byte{valFuncref, 0x01, 2, 10}, []byte{valExternref, 0x01, 1, 5})),
	wasmSection(5, wasmVec([]byte{0x01, 1, 2})),
	wasmSection(6, wasmVec(
		concat([]byte{valI32, 0x00, 0x41}, sleb(-1), []byte{opEnd}),
		concat([]byte{valI64, 0x01, 0x42}, sleb(math.MinInt64), []byte{opEnd}),
		concat([]byte{valF32, 0x00, 0x43}, []byte{0, 0, 0x80, 0x3f}, []byte{opEnd}),
		concat([]byte{valF64, 0x00, 0x44}, make([]byte, 8), []byte{opEnd}),
		concat([]byte{valV128, 0x00, 0xfd, 0x0c}, make([]byte, 16), []byte{opEnd}),
		[]byte{valFuncref, 0x00, 0xd0, valFuncref, opEnd},
		[]byte{valExternref, 0x01, 0xd0, valExternref, opEnd},
		[]byte{valFuncref, 0x00, 0xd2, 1, opEnd},
		concat([]byte{valI32, 0x00, 0x41}, sleb(math.MinInt32), []byte{opEnd}),
	)),
	wasmSection(7, wasmVec(
		concat(wasmName("memory"), []byte{0x02}, uleb(0)),
		concat(wasmName("one"), []byte{0x00}, uleb(1)),
		concat(wasmName("table"), []byte{0x01}, uleb(0)),
		concat(wasmName("global"), []byte{0x03}, uleb(0)),
	)),
	wasmSection(8, uleb(2)),
	wasmSection(9, wasmVec(
		concat(uleb(0), i32c0, wasmVec(uleb(1))),
		concat(uleb(1), []byte{0x00}, wasmVec(uleb(1), uleb(2))),
		concat(uleb(2), uleb(0), []byte{0x41, 1, opEnd}, []byte{0x00}, wasmVec(uleb(2))),
		concat(uleb(3), []byte{0x00}, wasmVec(uleb(1))),
		concat(uleb(4), i32c0, wasmVec([]byte{0xd2, 1, opEnd}, []byte{0xd0, valFuncref, opEnd})),
		concat(uleb(5), []byte{valExternref}, wasmVec([]byte{0xd0, valExternref, opEnd})),
		concat(uleb(6), uleb(1), i32c0, []byte{valExternref}, wasmVec([]byte{0xd0, valExternref, opEnd})),
		concat(uleb(7), []byte{valFuncref}, wasmVec([]byte{0xd2, 3, opEnd})),
	)),
	wasmSection(12, uleb(3)),
	wasmSection(10, wasmVec(
		funcBody([][]byte{localDecl(2, valI64), localDecl(1, valF32)}, 0x20, 0, opEnd),
		funcBody(nil, opEnd),
		funcBody([][]byte{localDecl(1, valV128), localDecl(1, valFuncref), localDecl(1, valExternref), localDecl(1, valF64)}, 0x41, 0, 0x42, 0, opEnd),
	)),
	wasmSection(11, wasmVec(
		concat(uleb(0), i32c0, wasmName("abc")),
		concat(uleb(1), wasmName("passive")),
		concat(uleb(2), uleb(0), []byte{0x41, 8, opEnd}, wasmName("xy")),
	)),
	customSection("name",
		nameSubsection(0, wasmName("kitchen")),
		nameSubsection(1, wasmVec(concat(uleb(1), wasmName("one")), concat(uleb(2), wasmName("two")))),
		nameSubsection(2, wasmVec(concat(uleb(1), wasmVec(concat(uleb(0), wasmName("p")), concat(uleb(1), wasmName("q")))), concat(uleb(2), wasmVec()))),
		nameSubsection(4, wasmVec(concat(uleb(0), wasmName("empty")))),
	),
	customSection("producers", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}),
)

func TestPrepareModuleAcceptsEveryEncodingItWalks(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		code     []byte
		features api.CoreFeatures
	}{
		{"every section", kitchenSink, api.CoreFeaturesV2},
		{"extended constants", wasmModule(
			wasmSection(6, wasmVec(
				concat([]byte{valI32, 0x00}, i32c0),
				[]byte{valI32, 0x00, 0x41, 1, 0x41, 2, 0x6a, 0x41, 3, 0x6b, 0x41, 4, 0x6c, opEnd},
				[]byte{valI64, 0x00, 0x42, 1, 0x42, 2, 0x7c, 0x42, 3, 0x7d, 0x42, 4, 0x7e, opEnd},
			))), api.CoreFeaturesV2 | experimental.CoreFeaturesExtendedConst},
		{"tags", wasmModule(wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec([]byte{valI32}), wasmVec()))), wasmSection(13, wasmVec([]byte{0x00, 0}))),
			api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling},
		// wazero refuses global.get of anything but an imported global,
		// which agentrt refuses: this one only shows the walk reads it.
		{"global.get", wasmModule(wasmSection(6, wasmVec(concat([]byte{valI32, 0x00}, i32c0), []byte{valI32, 0x00, 0x23, 0x80, 0x00, opEnd}))), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// wazero compiling the module shows that it is well formed as
			// the walk reads it.
			if tc.features != 0 {
				r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(tc.features))
				defer r.Close(ctx)
				if _, err := r.CompileModule(ctx, tc.code); err != nil {
					t.Fatalf("wazero does not compile the test's module: %v", err)
				}
			}
			out, err := prepareModule(tc.code, pluginLimits)
			if err != nil {
				t.Fatal(err)
			}
			if &out[0] != &tc.code[0] || len(out) != len(tc.code) {
				t.Error("the module came back changed")
			}
		})
	}
}

// TestPrepareModuleAcceptsRealPlugins runs prepareModule over the plugins
// `make plugins` builds (or those in $AGENTRT_PLUGINS) and over the modules
// wat2wasm makes of testdata/wat: all but the fixtures of hostile tables
// pass, wazero compiles what comes back, and only the table section may
// differ.
func TestPrepareModuleAcceptsRealPlugins(t *testing.T) {
	t.Run("plugins", func(t *testing.T) {
		for _, path := range runtimetest.Plugins(t) {
			t.Run(filepath.Base(path), func(t *testing.T) {
				t.Parallel()
				checkRealModule(t, path)
			})
		}
	})
	t.Run("wat", func(t *testing.T) {
		// The fixtures prepareModule is there to refuse.
		refused := map[string]string{
			"table_min.wat": "declares tables of 4000000000 entries in all; a plugin's tables may hold at most 100000 entries",
		}
		for _, src := range runtimetest.Fixtures(t) {
			t.Run(filepath.Base(src), func(t *testing.T) {
				t.Parallel()
				out := runtimetest.AssembleFile(t, src)
				if want, ok := refused[filepath.Base(src)]; ok {
					code, err := os.ReadFile(out)
					if err != nil {
						t.Fatal(err)
					}
					_, err = prepareModule(code, pluginLimits)
					checkMessage(t, err, want)
					return
				}
				checkRealModule(t, out)
			})
		}
	})
}

func checkRealModule(t *testing.T, path string) {
	code, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in := bytes.Clone(code)
	start := time.Now()
	out, err := prepareModule(code, pluginLimits)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("prepareModule: %v", err)
	}
	if !bytes.Equal(code, in) {
		t.Fatal("prepareModule modified its input")
	}
	checkSameExceptTables(t, code, out)
	var sum uint64
	for _, tb := range tablesOf(t, out) {
		sum += uint64(tb.max)
		if !tb.hasMax {
			t.Errorf("a table has no maximum after prepareModule")
		}
	}
	if sum > uint64(pluginLimits.MaxTableEntries) {
		t.Errorf("tables of %d entries in all after prepareModule", sum)
	}
	t.Logf("%d bytes in %v; tables before %+v, after %+v", len(code), took, tablesOf(t, code), tablesOf(t, out))
	// The interpreter decodes and validates as the compiler does, in a
	// fraction of the time.
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	if _, err := r.CompileModule(ctx, out); err != nil {
		t.Errorf("wazero does not compile the prepared module: %v", err)
	}
}

// sectionsOf splits a module the test knows to be well formed into its
// sections, headers included.
func sectionsOf(t *testing.T, code []byte) [][]byte {
	t.Helper()
	var sections [][]byte
	for off := 8; off < len(code); {
		size, n := readLEB(code[off+1:])
		next := off + 1 + n + int(size)
		if n == 0 || next > len(code) {
			t.Fatalf("malformed section at byte %d", off)
		}
		sections = append(sections, code[off:next])
		off = next
	}
	return sections
}

func readLEB(b []byte) (v uint64, n int) {
	for i, c := range b {
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// checkSameExceptTables fails unless out has the sections of code, in the
// same order and byte for byte the same but for the table section.
func checkSameExceptTables(t *testing.T, code, out []byte) {
	t.Helper()
	if !bytes.Equal(code[:8], out[:8]) {
		t.Error("the header changed")
	}
	a, b := sectionsOf(t, code), sectionsOf(t, out)
	if len(a) != len(b) {
		t.Fatalf("%d sections before, %d after", len(a), len(b))
	}
	for i := range a {
		if a[i][0] != b[i][0] || (a[i][0] != sectionTable && !bytes.Equal(a[i], b[i])) {
			t.Errorf("section %d (id %d) changed", i, a[i][0])
		}
	}
}

// tablesOf reads the tables a well-formed module defines.
func tablesOf(t *testing.T, code []byte) []tableDecl {
	t.Helper()
	var tables []tableDecl
	for _, s := range sectionsOf(t, code) {
		if s[0] != sectionTable {
			continue
		}
		_, n := readLEB(s[1:])
		b := s[1+n:]
		count, n := readLEB(b)
		b = b[n:]
		for range count {
			var tb tableDecl
			flag := b[1]
			b = b[2:]
			v, n := readLEB(b)
			tb.min, b = uint32(v), b[n:]
			if flag == 0x01 {
				v, n := readLEB(b)
				tb.max, tb.hasMax, b = uint32(v), true, b[n:]
			}
			tables = append(tables, tb)
		}
	}
	return tables
}

// FuzzPrepareModule checks that prepareModule never panics, that what it
// returns passes it again unchanged, differs from its input only in the
// table section, and does not make wazero panic or allocate more than 256
// MiB to compile it. Seeds: the modules of the tests above, and
// testdata/fuzz/FuzzPrepareModule.
func FuzzPrepareModule(f *testing.F) {
	for _, tc := range hostileCounts {
		f.Add(tc.build(math.MaxUint32))
		f.Add(tc.build(3))
	}
	f.Add(kitchenSink)
	f.Add(growModule)
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	f.Cleanup(func() { r.Close(ctx) })
	f.Fuzz(func(t *testing.T, code []byte) {
		in := bytes.Clone(code)
		out, err := prepareModule(code, pluginLimits)
		if !bytes.Equal(code, in) {
			t.Fatal("prepareModule modified its input")
		}
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || msg[0] < 'a' || msg[0] > 'z' {
				t.Fatalf("error %q is not one line starting with a lower-case word", msg)
			}
			return
		}
		again, err := prepareModule(out, pluginLimits)
		if err != nil {
			t.Fatalf("prepareModule refuses its own output: %v", err)
		}
		if !bytes.Equal(again, out) {
			t.Fatal("prepareModule changes its own output")
		}
		checkSameExceptTables(t, code, out)
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		if compiled, err := r.CompileModule(ctx, out); err == nil {
			compiled.Close(ctx)
		}
		goruntime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 256<<20 {
			t.Fatalf("wazero allocates %d MiB to compile %d bytes that prepareModule accepts", got>>20, len(out))
		}
	})
}

// repeated is n copies of item, after n as a vector length.
func repeated(n int, item []byte) []byte {
	return concat(uleb(uint64(n)), bytes.Repeat(item, n))
}

// instanceHeap is how much the Go heap grows while 4 instances of code
// stand, per instance.
func instanceHeap(t *testing.T, code []byte) uint64 {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	var mods []api.Module
	for range 4 {
		m, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		mods = append(mods, m)
	}
	grew := heap() - before
	for _, m := range mods {
		m.Close(ctx)
	}
	return grew / 4
}

func TestPrepareModuleBoundsWhatEveryInstanceHolds(t *testing.T) {
	lim := moduleLimits{MaxTableEntries: 100_000, MaxLocals: 50_000, MaxInstanceBytes: 16 << 20, MaxMemoryPages: DefaultMemoryLimitPages}
	fn := concat(wasmSection(1, wasmVec([]byte{0x60, 0, 0})), wasmSection(3, wasmVec([]byte{0})))
	for _, tc := range []struct {
		name string
		code func(n int) []byte
		n    int
	}{
		// Minimums of 0 pass MaxTableEntries; each table still costs.
		{"tables of no entries", func(n int) []byte { return wasmModule(wasmSection(4, repeated(n, []byte{0x70, 0x00, 0x00}))) }, 400_000},
		{"globals", func(n int) []byte {
			return wasmModule(wasmSection(6, repeated(n, []byte{0x7f, 0x01, 0x41, 0x00, 0x0b})))
		}, 400_000},
		{"passive element entries", func(n int) []byte {
			return wasmModule(fn, wasmSection(9, uleb(1), []byte{1, 0}, repeated(n, []byte{0})), wasmSection(10, wasmVec([]byte{2, 0, opEnd})))
		}, 800_000},
		{"data segments", func(n int) []byte {
			return wasmModule(wasmSection(5, wasmVec([]byte{0, 1})), wasmSection(11, repeated(n, []byte{1, 0})))
		}, 1_000_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := tc.code(tc.n)
			// Unchecked, every instance of these few MiB holds tens of MB.
			unchecked, err := prepareModule(code, moduleLimits{MaxTableEntries: 100_000, MaxLocals: 50_000, MaxMemoryPages: DefaultMemoryLimitPages})
			if err != nil {
				t.Fatal(err)
			}
			per := instanceHeap(t, unchecked)
			t.Logf("%d of them in %d KiB: %d MiB per instance", tc.n, len(code)>>10, per>>20)
			if per < 16<<20 {
				t.Errorf("the module is not the hazard the test means: %d KiB per instance", per>>10)
			}
			if _, err := prepareModule(code, lim); err == nil || !strings.Contains(err.Error(), "each instance would hold") {
				t.Fatalf("refused with %v, want the instance's host memory named", err)
			}
			// A tenth of them is within the limit.
			if _, err := prepareModule(tc.code(tc.n/10), lim); err != nil {
				t.Errorf("a tenth of them: %v", err)
			}
		})
	}
}

// TestPrepareModuleCountsImportedFunctionsInWhatEveryInstanceHolds:
// every instance resolves each imported function anew, about 40 bytes of
// host heap each; a module may import the same function over and over, so
// that a module of 18 MB made every instance hold 19 MiB.
func TestPrepareModuleCountsImportedFunctionsInWhatEveryInstanceHolds(t *testing.T) {
	lim := moduleLimits{MaxTableEntries: 100_000, MaxLocals: 50_000, MaxInstanceBytes: 16 << 20, MaxMemoryPages: DefaultMemoryLimitPages}
	imports := func(n int) []byte {
		imp := concat(wasmName("wasi_snapshot_preview1"), wasmName("sched_yield"), []byte{0}, uleb(0))
		return wasmModule(wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec(), wasmVec([]byte{valI32})))), wasmSection(2, repeated(n, imp)))
	}
	const n = 500_000
	code := imports(n)
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	if err := instantiateWASI(ctx, r); err != nil {
		t.Fatal(err)
	}
	cm, err := r.CompileModule(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	before := heapAllocated()
	for range 4 {
		m, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(ctx)
	}
	per := (heapAllocated() - before) / 4
	t.Logf("%d imported functions in %d KiB: each instance allocates %d MiB", n, len(code)>>10, per>>20)
	if per < 16<<20 {
		t.Errorf("the module is not the hazard the test means: %d KiB per instance", per>>10)
	}
	if _, err := prepareModule(code, lim); err == nil || !strings.Contains(err.Error(), "each instance would hold") {
		t.Fatalf("refused with %v, want the instance's host memory named", err)
	}
	if _, err := prepareModule(imports(n/10), lim); err != nil {
		t.Errorf("a tenth of them: %v", err)
	}
}
