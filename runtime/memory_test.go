package runtime

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

// memoryModule exports "grow" (i32) -> i32, memory.grow by that many pages,
// and "size" () -> i32, memory.size, over a memory of the given limits
// (flag 0x00 then a minimum, or 0x01 then a minimum and a maximum).
func memoryModule(limits ...byte) []byte {
	return wasmModule(
		wasmSection(1, wasmVec(
			concat([]byte{0x60}, wasmVec([]byte{valI32}), wasmVec([]byte{valI32})),
			concat([]byte{0x60}, wasmVec(), wasmVec([]byte{valI32})))),
		wasmSection(3, wasmVec([]byte{0}, []byte{1})),
		wasmSection(5, wasmVec(limits)),
		wasmSection(7, wasmVec(concat(wasmName("grow"), []byte{0x00, 0}), concat(wasmName("size"), []byte{0x00, 1}))),
		wasmSection(10, wasmVec(
			funcBody(nil, 0x20, 0, 0x40, 0, opEnd), // local.get 0; memory.grow 0
			funcBody(nil, 0x3f, 0, opEnd))),        // memory.size 0
	)
}

// TestInstanceMemoryHoldsTheLimitAndRecordsWhatItRefused pins how a plugin's
// memory is limited: memory.grow past the limit fails in the plugin (-1),
// a maximum the module declares above the limit does not lift it, and the
// largest size refused is recorded, for the failure's message.
func TestInstanceMemoryHoldsTheLimitAndRecordsWhatItRefused(t *testing.T) {
	const limitPages = 4
	for _, tc := range []struct {
		name   string
		limits []byte
	}{
		{"no maximum declared", []byte{0x00, 1}},
		{"a maximum over the limit", []byte{0x01, 1, 0x80, 0x02}}, // max 256 pages
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig())
			defer r.Close(ctx)
			code, err := prepareModule(memoryModule(tc.limits...), moduleLimits{MaxMemoryPages: limitPages})
			if err != nil {
				t.Fatal(err)
			}
			compiled, err := r.CompileModule(ctx, code)
			if err != nil {
				t.Fatal(err)
			}
			mem := &instanceMemory{limit: limitPages * 65536}
			mod, err := r.InstantiateModule(experimental.WithMemoryAllocator(ctx, mem), compiled, wazero.NewModuleConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			grow := func(pages uint32) int32 {
				res, err := mod.ExportedFunction("grow").Call(ctx, uint64(pages))
				if err != nil {
					t.Fatal(err)
				}
				return int32(res[0])
			}
			if got := grow(3); got != 1 {
				t.Fatalf("growing to the limit answered %d, want the old size 1", got)
			}
			if mem.refused != 0 {
				t.Errorf("a grow within the limit was recorded as refused (%d bytes)", mem.refused)
			}
			if got := grow(1); got != -1 {
				t.Errorf("growing one page past the limit answered %d, want -1", got)
			}
			if got := grow(100); got != -1 {
				t.Errorf("growing 100 pages past the limit answered %d, want -1", got)
			}
			if got := grow(1); got != -1 {
				t.Errorf("growing one page past the limit again answered %d, want -1", got)
			}
			if want := uint64(104 * 65536); mem.refused != want {
				t.Errorf("refused %d bytes recorded, want the largest asked for, %d", mem.refused, want)
			}
			if size := mod.Memory().Size(); size != limitPages*65536 {
				t.Errorf("the memory holds %d bytes, want the limit, %d", size, limitPages*65536)
			}
			// Every byte up to the limit is usable.
			if !mod.Memory().WriteByte(limitPages*65536-1, 1) {
				t.Error("the memory's last byte cannot be written")
			}
		})
	}
}

func TestPrepareModuleRefusesAMemoryWhoseMinimumIsOverTheLimit(t *testing.T) {
	lim := moduleLimits{MaxMemoryPages: 4}
	if _, err := prepareModule(memoryModule(0x00, 4), lim); err != nil {
		t.Errorf("a minimum at the limit: %v", err)
	}
	_, err := prepareModule(memoryModule(0x00, 5), lim)
	checkMessage(t, err, "declares a memory of at least 5 pages (320 KiB); the memory limit is 4 pages (256 KiB)")
}
