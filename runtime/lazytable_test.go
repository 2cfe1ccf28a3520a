package runtime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
			code := watModule(t, "(module "+funcs+"\n"+tc.src+")")
			out, why := lazyTable(code)
			if !strings.Contains(why, tc.why) {
				t.Errorf("lazyTable says %q; want it to say %q", why, tc.why)
			}
			if !bytes.Equal(out, code) {
				t.Error("lazyTable changed a module it says it left as it is")
			}
		})
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
	out, why := lazyTable(code)
	if want := "neither ref.func nor ref.null"; !strings.Contains(why, want) {
		t.Errorf("lazyTable says %q; want it to say %q", why, want)
	}
	if !bytes.Equal(out, code) {
		t.Error("lazyTable changed a module it says it left as it is")
	}
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
	dir := os.Getenv("AGENTRT_PLUGINS")
	if dir == "" {
		dir = filepath.Join("..", "build", "plugins")
	}
	plugins, _ := filepath.Glob(filepath.Join(dir, "*.wasm"))
	if len(plugins) == 0 {
		t.Skipf("no plugins in %s; run make plugins", dir)
	}
	for _, path := range plugins {
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
