package runtime

import (
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

// stepOnlyPlugin is the smallest plugin: a memory, the ABI version and a
// step handler that returns 0. salt makes its code differ.
func stepOnlyPlugin(salt byte) []byte {
	ret := func(v byte) []byte { return funcBody(nil, 0x41, v, opEnd) } // i32.const v
	export := func(name string, kind, index byte) []byte { return concat(wasmName(name), []byte{kind, index}) }
	return wasmModule(
		wasmSection(1, wasmVec([]byte{0x60, 0, 1, valI32})), // type: () -> i32
		wasmSection(3, wasmVec([]byte{0}, []byte{0})),       // two functions of that type
		wasmSection(5, wasmVec([]byte{0, 1})),               // memory: 1 page
		wasmSection(7, wasmVec(export("memory", 2, 0), export(abi.VersionExport, 0, 0), export(abi.StepExport, 0, 1))),
		wasmSection(10, wasmVec(ret(abi.Version), ret(salt))), // code
	)
}

func TestAPluginSaysWhetherItsCodeCameFromTheCache(t *testing.T) {
	dir := t.TempDir()
	compile := func(code []byte, cacheDir string) string {
		t.Helper()
		p, err := Compile(t.Context(), "p.wasm", code, Config{CacheDir: cacheDir})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(t.Context())
		return p.Cache()
	}
	a, b := stepOnlyPlugin(0), stepOnlyPlugin(1)
	for i, tc := range []struct {
		code     []byte
		cacheDir string
		want     string
	}{
		{a, dir, CacheMiss},
		{a, dir, CacheHit},
		{b, dir, CacheMiss}, // another plugin, beside the first in the cache
		{b, dir, CacheHit},
		{a, dir, CacheHit},
		{a, "", CacheOff},
	} {
		if got := compile(tc.code, tc.cacheDir); got != tc.want {
			t.Errorf("compile %d: %s, want %s", i+1, got, tc.want)
		}
	}
}
