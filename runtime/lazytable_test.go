package runtime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/runtime/runtimetest"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// tableModule has a table of 12 entries that its segments fill in every
// way a segment can: function indexes and expressions, segments that
// overlap (the later one wins), a null element, gaps, an imported
// function, and functions of two types. call(i) and callWith(i, x) call
// entry i as () -> i32 and (i32) -> i32; twice(i) calls it twice and adds
// a local of its own, which the local the rewrite adds must not be.
const tableModule = `(module
  (import "env" "forty" (func $forty (result i32)))
  (type $r (func (result i32)))
  (type $p (func (param i32) (result i32)))
  (table 12 12 funcref)
  (memory 1)
  (func $a (result i32) i32.const 10)
  (func $b (result i32) i32.const 20)
  (func $c (result i32) i32.const 30)
  (func $d (param i32) (result i32) local.get 0 i32.const 1 i32.add)
  (elem (i32.const 1) $a $b)
  (elem (i32.const 4) func $c $d $forty)
  (elem (i32.const 2) $c)
  (elem (i32.const 8) funcref (ref.func $b) (ref.null func) (ref.func $a))
  (elem declare func $b)
  (func (export "call") (param i32) (result i32)
    local.get 0
    call_indirect (type $r))
  (func (export "callWith") (param i32 i32) (result i32)
    local.get 1
    local.get 0
    call_indirect (type $p))
  (func (export "twice") (param i32) (result i32) (local $k i32) (local f64)
    i32.const 5
    local.set $k
    local.get 0
    call_indirect (type $r)
    local.get 0
    call_indirect (type $r)
    i32.add
    local.get $k
    i32.add))`

// outcomes calls every export of tableModule's kind for every table index
// from -1 to 13 in one instance of code, and says what each returned or
// the first line of the error it trapped with.
func outcomes(t *testing.T, code []byte) []string {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	if _, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func() int32 { return 40 }).Export("forty").Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	mod, err := r.Instantiate(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := int32(-1); i <= 13; i++ {
		for _, name := range []string{"call", "twice", "callWith"} {
			args := []uint64{api.EncodeI32(i), api.EncodeI32(7)}
			fn := mod.ExportedFunction(name)
			res, err := fn.Call(ctx, args[:len(fn.Definition().ParamTypes())]...)
			if err != nil {
				first, _, _ := strings.Cut(err.Error(), "\n")
				out = append(out, fmt.Sprintf("%s(%d): %s", name, i, first))
				continue
			}
			out = append(out, fmt.Sprintf("%s(%d) = %d", name, i, api.DecodeI32(res[0])))
		}
	}
	return out
}

func TestALazyTableCallsWhatTheSegmentsPutInTheTable(t *testing.T) {
	code := watModule(t, tableModule)
	lazy, why := lazyTable(code)
	if why != "" {
		t.Fatalf("lazyTable left the module as it is: %s", why)
	}
	if bytes.Equal(lazy, code) {
		t.Fatal("lazyTable returned the module unchanged")
	}
	eager, got := outcomes(t, code), outcomes(t, lazy)
	for i := range eager {
		if eager[i] != got[i] {
			t.Errorf("eager: %s; lazy: %s", eager[i], got[i])
		}
	}
	// What the eager table holds, so that the comparison above compares
	// calls that reach functions, and calls that trap each way.
	for _, want := range []string{
		"call(1) = 10", "call(2) = 30", "call(4) = 30", "call(6) = 40", "call(8) = 20", "call(10) = 10",
		"twice(2) = 65", "callWith(5) = 8",
		"call(0): wasm error: invalid table access",
		"call(9): wasm error: invalid table access",
		"call(12): wasm error: invalid table access",
		"call(-1): wasm error: invalid table access",
		"call(5): wasm error: indirect call type mismatch",
	} {
		if !strings.Contains(strings.Join(eager, "\n")+"\n", want+"\n") {
			t.Errorf("the eager table does not give %q:\n%s", want, strings.Join(eager, "\n"))
		}
	}
}

func TestLazyTableLeavesAModuleAsItIsWhenItCouldTellTheDifference(t *testing.T) {
	const funcs = `(type $r (func (result i32)))
  (func $a (result i32) i32.const 10)
  (func $b (result i32) i32.const 20)`
	for _, tc := range []struct {
		name, src, why string
	}{
		{"table.get", `(table 2 funcref) (elem (i32.const 0) $a $b)
		  (func (export "f") (result i32) i32.const 1 table.get 0 ref.is_null)`, "table.get"},
		{"table.set", `(table 2 funcref) (elem (i32.const 0) $a $b)
		  (func (export "f") i32.const 1 ref.null func table.set 0)`, "table.set"},
		{"table.grow", `(table 2 funcref) (elem (i32.const 0) $a $b)
		  (func (export "f") (result i32) ref.null func i32.const 1 table.grow 0)`, "0xfc 15"},
		{"table.copy", `(table 2 funcref) (elem (i32.const 0) $a $b)
		  (func (export "f") i32.const 0 i32.const 1 i32.const 1 table.copy)`, "0xfc 14"},
		{"elem.drop", `(table 2 funcref) (elem (i32.const 0) $a $b)
		  (func (export "f") elem.drop 0)`, "0xfc 13"},
		{"an exported table", `(table (export "t") 2 funcref) (elem (i32.const 0) $a $b)`, "exports its table"},
		{"two tables", `(table 2 funcref) (table 2 funcref) (elem (i32.const 0) $a $b)`, "2 tables"},
		{"an externref table", `(table 2 externref) (elem (i32.const 0) externref (ref.null extern))`, "not of funcref"},
		{"a passive segment", `(table 2 funcref) (elem func $a $b)`, "passive"},
		{"a segment for table 1", `(table 2 funcref) (table $t1 2 funcref) (elem (table $t1) (i32.const 0) func $a)`, "2 tables"},
		{"a segment off the table's end", `(table 2 funcref) (elem (i32.const 1) $a $b)`, "does not fit"},
		{"no segments", `(table 2 funcref)`, "no element segments"},
		{"only null elements", `(table 2 funcref) (elem (i32.const 0) funcref (ref.null func))`, "no function"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leftAsItIs(t, watModule(t, "(module "+funcs+"\n"+tc.src+")"), tc.why)
		})
	}
}

// leftAsItIs checks that lazyTable returns code unchanged, saying why
// with want in it.
func leftAsItIs(t *testing.T, code []byte, want string) {
	t.Helper()
	out, why := lazyTable(code)
	if !strings.Contains(why, want) {
		t.Errorf("lazyTable says %q; want it to say %q", why, want)
	}
	if !bytes.Equal(out, code) {
		t.Error("lazyTable changed a module it says it left as it is")
	}
}

func TestLazyTableLeavesAModuleAsItIsWhenAnElementIsAGlobal(t *testing.T) {
	code := watModule(t, `(module (func $a) (func $b)
	  (table 2 funcref) (global $g funcref (ref.func $a))
	  (elem (i32.const 0) funcref (ref.func $b) (ref.null func)))`)
	// wat2wasm writes no global.get in an element: the segment's ref.func
	// $b (0xd2 1 0x0b) becomes global.get $g (0x23 0 0x0b).
	i := bytes.LastIndex(code, []byte{0xd2, 0x01, 0x0b})
	if i < 0 {
		t.Fatal("no ref.func $b in the module")
	}
	// (wazero accepts global.get there only of an imported global, which
	// prepareModule refuses; lazyTable does not count on either.)
	code[i], code[i+1] = 0x23, 0x00
	leftAsItIs(t, code, "neither ref.func")
}

// The segments lazyTable reads are gone from the module wazero compiles,
// so it reads only what wazero would have accepted: a segment naming a
// function the module does not have (here the index fill would get)
// leaves the module as it is, which wazero then refuses.
func TestLazyTableReadsOnlyFunctionsTheModuleHas(t *testing.T) {
	code := watModule(t, `(module (func $a) (func $b)
	  (table 2 funcref) (elem (i32.const 0) $a $b)
	  (func (export "f") (param i32) local.get 0 call_indirect (type 0)))`)
	// The segment: flags 0, i32.const 0, end, 2 elements, $a, $b.
	i := bytes.Index(code, []byte{0x00, 0x41, 0x00, 0x0b, 0x02, 0x00, 0x01})
	if i < 0 {
		t.Fatal("no element segment of $a $b in the module")
	}
	code[i+6] = 0x04 // $b becomes function 4: imports 0, functions 3, so fill's
	leftAsItIs(t, code, "neither ref.func")
}

// A table as large as agentrt allows, all of it filled by one segment:
// the rewritten module, whose fill is a br_table of as many entries,
// compiles.
func TestALazyTableOfTheMostEntriesAllowedCompiles(t *testing.T) {
	n := DefaultMaxTableEntries
	src := fmt.Sprintf(`(module (type $r (func (result i32)))
	  (func $a (result i32) i32.const 10)
	  (table %d %d funcref)
	  (elem (i32.const 0) %s)
	  (func (export "call") (param i32) (result i32) local.get 0 call_indirect (type $r)))`,
		n, n, strings.Repeat("$a ", n))
	lazy, why := lazyTable(watModule(t, src))
	if why != "" {
		t.Fatal(why)
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	mod, err := r.Instantiate(ctx, lazy)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		if res, err := mod.ExportedFunction("call").Call(ctx, uint64(i)); err != nil || api.DecodeI32(res[0]) != 10 {
			t.Fatalf("call(%d) = %v, %v", i, res, err)
		}
	}
}

// FuzzLazyTable checks that lazyTable never panics or changes its input,
// returns its input when it says why it left it as it is, and never makes
// a module wazero compiles one it does not. Seeds: tableModule, and
// modules that lazyTable leaves as they are.
func FuzzLazyTable(f *testing.F) {
	f.Add(watModule(f, tableModule))
	f.Add(watModule(f, `(module (func $a) (table 2 funcref) (elem (i32.const 0) $a $a)
	  (func (export "f") (param i32) local.get 0 call_indirect (type 0)
	    i32.const 1 table.get 0 drop))`))
	f.Add(watModule(f, `(module (func $a) (table 3 funcref) (elem (i32.const 1) funcref (ref.func $a) (ref.null func))
	  (elem declare func $a) (elem func $a)
	  (func (export "f") (param i32) local.get 0 call_indirect (type 0)))`))
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	f.Cleanup(func() { r.Close(ctx) })
	f.Fuzz(func(t *testing.T, code []byte) {
		code, err := prepareModule(code, pluginLimits)
		if err != nil {
			return
		}
		in := bytes.Clone(code)
		out, why := lazyTable(code)
		if !bytes.Equal(code, in) {
			t.Fatal("lazyTable modified its input")
		}
		if why != "" {
			if !bytes.Equal(out, code) {
				t.Fatalf("lazyTable changed a module it says it left as it is (%s)", why)
			}
			return
		}
		compiled, err := r.CompileModule(ctx, code)
		if err != nil {
			return
		}
		compiled.Close(ctx)
		compiled, err = r.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("wazero compiles the module but not lazyTable's rewrite of it: %v", err)
		}
		compiled.Close(ctx)
	})
}

// TestEveryExamplePluginFillsItsTableAsItIsUsed runs what Compile does to
// a module over the plugins `make plugins` builds (or those in
// $AGENTRT_PLUGINS): each, in every language, gets a lazy table.
func TestEveryExamplePluginFillsItsTableAsItIsUsed(t *testing.T) {
	for _, path := range runtimetest.Plugins(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			code, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if code, err = prepareModule(code, pluginLimits); err != nil {
				t.Fatal(err)
			}
			inst, err := instrument(code)
			if err != nil {
				t.Fatal(err)
			}
			if _, why := lazyTable(inst.code); why != "" {
				t.Errorf("its table is filled as an instance starts: %s", why)
			}
		})
	}
}

// BenchmarkIndirectCall is what a lazy table costs a call_indirect: a
// loop of a million calls through the table, with the table as wazero
// fills it (eager) and as lazyTable's rewrite does (lazy).
//
//	go test ./runtime -run '^$' -bench IndirectCall
func BenchmarkIndirectCall(b *testing.B) {
	code := watModule(b, `(module
	  (type $r (func (param i32) (result i32)))
	  (table 4 funcref)
	  (func $inc (param i32) (result i32) local.get 0 i32.const 1 i32.add)
	  (func $dec (param i32) (result i32) local.get 0 i32.const 1 i32.sub)
	  (elem (i32.const 0) $inc $dec $inc $dec)
	  (func (export "loop") (param $n i32) (result i32) (local $acc i32)
	    (loop $l
	      (local.set $acc (call_indirect (type $r) (local.get $acc) (i32.and (local.get $n) (i32.const 3))))
	      (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))
	    local.get $acc))`)
	lazy, why := lazyTable(code)
	if why != "" {
		b.Fatal(why)
	}
	for _, tc := range []struct {
		name string
		code []byte
	}{{"eager", code}, {"lazy", lazy}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			r := wazero.NewRuntime(ctx)
			defer r.Close(ctx)
			mod, err := r.Instantiate(ctx, tc.code)
			if err != nil {
				b.Fatal(err)
			}
			loop := mod.ExportedFunction("loop")
			b.ResetTimer()
			for range b.N {
				if _, err := loop.Call(ctx, 1_000_000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func patchOnce(t *testing.T, code, old, new []byte) []byte {
	t.Helper()
	if len(old) != len(new) {
		t.Fatal("patch changes length")
	}
	if bytes.Count(code, old) != 1 {
		t.Fatalf("pattern % x found %d times", old, bytes.Count(code, old))
	}
	return bytes.Replace(code, old, new, 1)
}

// callEach instantiates code and calls export f with each arg, reporting
// result or first line of error.
func callEach(t *testing.T, code []byte, f string, args ...uint64) []string {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	mod, err := r.Instantiate(ctx, code)
	if err != nil {
		return []string{"instantiate: " + err.Error()}
	}
	var out []string
	for _, a := range args {
		res, err := mod.ExportedFunction(f).Call(ctx, a)
		if err != nil {
			first, _, _ := strings.Cut(err.Error(), "\n")
			out = append(out, fmt.Sprintf("%s(%d): %s", f, int32(a), first))
			continue
		}
		if len(res) > 0 {
			out = append(out, fmt.Sprintf("%s(%d) = %d", f, int32(a), api.DecodeI32(res[0])))
		} else {
			out = append(out, fmt.Sprintf("%s(%d) ok", f, int32(a)))
		}
	}
	return out
}

// sameAsEager checks that f, called with each of args, does the same in
// code instrumented as Compile does it, with and without lazyTable's
// rewrite, and returns why lazyTable left it as it is.
func sameAsEager(t *testing.T, code []byte, f string, args ...uint64) string {
	t.Helper()
	code, err := prepareModule(code, pluginLimits)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := instrument(code)
	if err != nil {
		t.Fatal(err)
	}
	lazy, why := lazyTable(inst.code)
	eager, got := callEach(t, inst.code, f, args...), callEach(t, lazy, f, args...)
	if strings.Join(eager, "|") != strings.Join(got, "|") {
		t.Errorf("eager: %v\nlazy: %v", eager, got)
	}
	return why
}

// wazero reads the opcode after 0xfd as one byte: in fd a3 11 00 00, the
// 0x11 is a call_indirect that must get its check.
func TestAVectorOpcodeIsReadAsWazeroReadsIt(t *testing.T) {
	code := watModule(t, `(module
  (type $r (func (result i32)))
  (memory 1)
  (table 2 funcref)
  (func $a (result i32) i32.const 10)
  (func $b (result i32) i32.const 20)
  (elem (i32.const 0) $a $b)
  (func (export "f") (param i32) (result i32)
    local.get 0
    i32x4.splat
    i32x4.all_true
    call_indirect (type $r)
    nop))`)
	// fd a3 01 11 00 00 01 -> fd a3 11 00 00 01 01
	code = patchOnce(t, code, []byte{0xfd, 0xa3, 0x01, 0x11, 0x00, 0x00, 0x01}, []byte{0xfd, 0xa3, 0x11, 0x00, 0x00, 0x01, 0x01})
	if why := sameAsEager(t, code, "f", 0, 1); why != "" {
		t.Errorf("lazyTable left it as it is: %s", why)
	}
}

// The same, hiding a table.set from the scans, in fd a3 04 10 26 00 (an
// if of type 16, then table.set).
func TestATableSetAfterAVectorOpcodeIsSeen(t *testing.T) {
	code := watModule(t, `(module
  (type $r (func (result i32)))
  (type (func (param i64))) (type (func (param i64 i64))) (type (func (param f32))) (type (func (param f64)))
  (type (func (param i64 i32))) (type (func (param f32 i32))) (type (func (param f64 i32))) (type (func (param i32 i32 i32)))
  (type (func (param i64 i64 i64))) (type (func (param f32 f32))) (type (func (param f64 f64))) (type (func (param i32 i64)))
  (type (func (param i32 f32))) (type (func (param i32 f64))) (type (func (param i64 f32)))
  (type $ti (func (param i32 funcref)))
  (memory 1)
  (table 2 funcref)
  (func $a (result i32) i32.const 10)
  (func $b (result i32) i32.const 20)
  (elem (i32.const 0) $a $b)
  (elem declare func $b)
  (func (export "f") (param i32) (result i32)
    ;; table[0] := null, then call through entry 0
    i32.const 0
    ref.null func
    local.get 0
    i32x4.splat
    i32x4.all_true
    if (type $ti) (param i32 funcref)
      table.set 0
    else
      drop drop
    end
    nop
    i32.const 0
    call_indirect (type $r)))`)
	// wat2wasm gives fd a3 01 04 01 26 00 05 1a 1a 0b 01 ; drop the 01 after a3, add a nop
	code = patchOnce(t, code, []byte{0xfd, 0xa3, 0x01, 0x04, 0x10, 0x26, 0x00, 0x05, 0x1a, 0x1a, 0x0b, 0x01},
		[]byte{0xfd, 0xa3, 0x04, 0x10, 0x26, 0x00, 0x05, 0x1a, 0x1a, 0x0b, 0x01, 0x01})
	if why := sameAsEager(t, code, "f", 0, 1); !strings.Contains(why, "table.set") {
		t.Errorf("lazyTable says %q; want it to find the table.set", why)
	}
	if why := stateOutsideSnapshot(code, 3); !strings.Contains(why, "table.set") {
		t.Errorf("the snapshot scan says %q; want it to find the table.set", why)
	}
}

func manyTypes(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "(type (func (param %s)))\n", strings.Repeat("i64 ", i+1))
	}
	return b.String()
}

// Block type 0x63 N, a nullable reference to type N, which wazero reads
// with its default features, is two bytes: the scan stops there rather
// than read N as an instruction.
func TestABlockTypeOfATypedReferenceIsNotRead(t *testing.T) {
	code := watModule(t, `(module
  (type $r (func (result i32)))
  `+manyTypes(15)+`
  (memory 1)
  (table 2 funcref)
  (func $a (result i32) i32.const 10)
  (func $b (result i32) i32.const 20)
  (elem (i32.const 0) $a $b)
  (func (export "f") (param i32) (result i32)
    nop
    block (result funcref)
      loop
        local.get 0
        call_indirect (type $r)
        return
      end
      unreachable
    end
    drop
    i32.const 0))`)
	// 01 02 70 03 40 20 00 11 00 00 0f 0b 00 0b -> 02 63 0e 03 40 20 00 11 00 00 0f 0b 00 0b
	code = patchOnce(t, code, []byte{0x01, 0x02, 0x70, 0x03, 0x40, 0x20, 0x00, 0x11}, []byte{0x02, 0x63, 0x0e, 0x03, 0x40, 0x20, 0x00, 0x11})
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	if _, err := r.CompileModule(ctx, code); err != nil {
		t.Fatalf("wazero refuses the original: %v", err)
	}
	if why := sameAsEager(t, code, "f", 0, 1); !strings.Contains(why, "block type") {
		t.Errorf("lazyTable says %q; want it to refuse the block type", why)
	}
}

// A typed select of a typed reference (1c 01 63 N) is validated by wazero
// as four bytes and compiled as three, which panics: Compile refuses it
// before wazero sees it (interruptible does not know the instruction), and
// where nothing reads the code first, says that wazero failed on it, and
// the process goes on.
func TestAModuleWazeroPanicsOnIsRefused(t *testing.T) {
	code := watModule(t, `(module
  `+manyTypes(17)+`
  (memory (export "memory") 1)
  (func (export "f") (param i32) (result i32)
    i32.const 1
    i32.const 2
    local.get 0
    nop
    select (result i32)
    drop
    i32.const 0))`)
	code = patchOnce(t, code, []byte{0x01, 0x1c, 0x01, 0x7f, 0x1a}, []byte{0x1c, 0x01, 0x63, 0x10, 0x1a})
	_, err := Compile(context.Background(), "x", code, Config{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "typed select of a type agentrt does not know") {
		t.Errorf("Compile: %v; want it to refuse the typed select", err)
	}
	_, err = Compile(context.Background(), "x", code, Config{CacheDir: t.TempDir(), NoDeadlineCheck: true})
	if err == nil || !strings.Contains(err.Error(), "wazero failed on it") {
		t.Errorf("Compile, the code read by wazero alone: %v; want it to say that wazero failed on it", err)
	}
}
