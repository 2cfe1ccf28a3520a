package main

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentrt/agentrt/bench/internal/echostep"
	"github.com/agentrt/agentrt/runtime/runtimetest"
)

// The tool counts each loop's turns in one call, no more (not the warm-up
// call's) and no fewer, and names the function each is in.
func TestEachLoopsTurnsInOneCallAreCounted(t *testing.T) {
	wasm := runtimetest.AssembleFile(t, filepath.Join("testdata", "nested.wat"))
	c, err := countStep(context.Background(), wasm, echostep.Input)
	if err != nil {
		t.Fatal(err)
	}
	want := count{Total: 15, Loops: []loop{
		{Func: "agentrt_on_step", Label: "$L1", Turns: 12},
		{Func: "agentrt_on_step", Label: "$L0", Turns: 3},
	}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("counted %+v, want %+v", c, want)
	}
}

func TestRustSymbolsAreDemangled(t *testing.T) {
	for in, want := range map[string]string{
		"_ZN7agentrt4json6Parser6string17hdcdb068d863a6377E":                                                   "agentrt::json::Parser::string",
		"_ZN70_$LT$alloc..vec..Vec$LT$T$C$A$GT$$u20$as$u20$core..ops..drop..Drop$GT$4drop17h5e171441600b2e7cE": "<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop",
		"runtime.alloc": "runtime.alloc",
		"_ZN7agentrt7exports8on_input28_$u7b$$u7b$closure$u7d$$u7d$17h0123456789abcdefE": "agentrt::exports::on_input::{{closure}}",
		"_ZN3bad99short": "_ZN3bad99short",
	} {
		if got := demangle(in); got != want {
			t.Errorf("demangle(%q) = %q, want %q", in, got, want)
		}
	}
}
