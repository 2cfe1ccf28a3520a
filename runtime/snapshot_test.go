package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/runtime/runtimetest"
	"github.com/tetratelabs/wazero"
)

// watModule assembles a module in the text format.
func watModule(t testing.TB, src string) []byte { return runtimetest.Assemble(t, src) }

// instanceState is an instance's memory and its exported globals.
type instanceState struct {
	memory  []byte
	globals map[string]uint64
}

func stateOf(t *testing.T, code []byte, starts ...string) instanceState {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	compiled, err := r.CompileModule(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithStartFunctions(starts...))
	if err != nil {
		t.Fatal(err)
	}
	view, _ := mod.Memory().Read(0, mod.Memory().Size())
	st := instanceState{memory: bytes.Clone(view), globals: map[string]uint64{}}
	for _, name := range []string{"a", "b"} {
		if g := mod.ExportedGlobal(name); g != nil {
			st.globals[name] = g.Get()
		}
	}
	return st
}

// dataModule has data segments in an order other than memory's, a few
// bytes apart and far apart, and a start function that reads what they
// wrote.
const dataModule = `(module
  (memory (export "memory") 2)
  (global $a (export "a") (mut i32) (i32.const 1))
  (global $b (export "b") (mut i64) (i64.const 2))
  (data (i32.const 100) "second")
  (data (i32.const 10) "first, and long enough for the gaps after it to be merged: eighty bytes of it....")
  (data (i32.const 112) "third, after a gap")
  (data (i32.const 8192) "further")
  (data (i32.const 70000) "far")
  (func $start
    (global.set $a (i32.load8_u (i32.const 10)))
    (global.set $b (i64.load (i32.const 112)))
    (i32.store (i32.const 200) (i32.const 0x01020304)))
  (start $start))`

// An instrumented module's instantiate export leaves an instance as
// instantiating the module did: its data copied, its start function run;
// segments a few bytes apart are merged.
func TestAnInstrumentedModuleInstantiatesAsTheModuleDid(t *testing.T) {
	code := watModule(t, dataModule)
	inst, err := instrument(code)
	if err != nil {
		t.Fatal(err)
	}
	if inst.noSnapshot != "" {
		t.Errorf("no snapshot: %s", inst.noSnapshot)
	}
	want := stateOf(t, code)
	got := stateOf(t, inst.code, instantiateExport)
	if !bytes.Equal(got.memory, want.memory) {
		t.Errorf("memory differs at byte %d", firstDifference(got.memory, want.memory))
	}
	if got.globals["a"] != want.globals["a"] || got.globals["b"] != want.globals["b"] || want.globals["a"] != 'f' {
		t.Errorf("globals %v, want %v", got.globals, want.globals)
	}
	m, _ := parseSections(inst.code)
	if n, _ := m.countOf(sectionData); n != 3 {
		t.Errorf("the instrumented module has %d data segments; want 3 (10 to 130 merged, 8192, 70000)", n)
	}
	if _, ok := m.sections[sectionStart]; ok {
		t.Error("the instrumented module kept its start section")
	}
	if len(inst.globals) != 2 {
		t.Errorf("mutable globals: %+v", inst.globals)
	}
}

func TestInstrumentRefusesDataOutsideTheInitialMemoryAndSaysWhatItCannotSnapshot(t *testing.T) {
	_, err := instrument(watModule(t, `(module (memory (export "memory") 1) (data (i32.const 65530) "too long") (func (export "f")))`))
	if err == nil || !strings.Contains(err.Error(), "its data segment 0 (8 bytes at 65530) lies outside its memory's initial 64 KiB") {
		t.Errorf("instrument: %v", err)
	}
	for src, why := range map[string]string{
		`(module (memory (export "memory") 1) (data "passive") (func (export "f") (memory.init 0 (i32.const 0) (i32.const 0) (i32.const 1))))`: "its data segment 0 is passive",
		`(module (memory (export "memory") 1) (global (mut funcref) (ref.null func)) (func (export "f")))`:                                     "its global 0 is a mutable funcref",
	} {
		inst, err := instrument(watModule(t, src))
		if err != nil || !strings.Contains(inst.noSnapshot, why) {
			t.Errorf("instrument(%s): %v, no snapshot because %q; want %q", src, err, inst.noSnapshot, why)
		}
	}
	_, err = instrument(watModule(t, `(module (memory (export "memory") 1) (func (export "agentrt.snapshot.x")))`))
	if _, ok := err.(*errNotInstrumented); !ok {
		t.Errorf("a module exporting a reserved name: %v", err)
	}
}

// What the rewrite adds is bounded by what the module holds: merged
// segments hold at most twice the bytes of the segments, however far apart
// they lie, and a module with more mutable globals than a snapshot holds
// exports none of them.
func TestInstrumentAddsNoMoreThanTheModuleHolds(t *testing.T) {
	// 4,000 one-byte segments, 4 KiB apart: 16 MiB of memory.
	var segs [][]byte
	for i := range 4000 {
		segs = append(segs, concat([]byte{0x00, 0x41}, sleb(int64(i)*4096), []byte{opEnd}, wasmName("x")))
	}
	code := wasmModule(
		wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec(), wasmVec()))),
		wasmSection(3, wasmVec([]byte{0})),
		wasmSection(5, wasmVec([]byte{0x00, 0x80, 0x02})), // 256 pages
		wasmSection(7, wasmVec(concat(wasmName("memory"), []byte{0x02, 0}))),
		wasmSection(10, wasmVec(funcBody(nil, opEnd))),
		wasmSection(11, wasmVec(segs...)))
	inst, err := instrument(code)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := parseSections(inst.code)
	if n := len(m.sections[sectionData]); n > 2*4000+8*4000 {
		t.Errorf("the data section grew to %d bytes from 4,000 bytes of data", n)
	}

	var globals [][]byte
	for range maxSnapshotGlobals + 1 {
		globals = append(globals, concat([]byte{valI32, 0x01}, i32c0))
	}
	code = wasmModule(
		wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec(), wasmVec()))),
		wasmSection(3, wasmVec([]byte{0})),
		wasmSection(5, wasmVec([]byte{0x00, 1})),
		wasmSection(6, wasmVec(globals...)),
		wasmSection(7, wasmVec(concat(wasmName("memory"), []byte{0x02, 0}))),
		wasmSection(10, wasmVec(funcBody(nil, opEnd))))
	inst, err = instrument(code)
	if err != nil {
		t.Fatal(err)
	}
	if len(inst.globals) != 0 || !strings.Contains(inst.noSnapshot, "1001 mutable globals; a snapshot holds at most 1000") {
		t.Errorf("%d globals exported; no snapshot because %q", len(inst.globals), inst.noSnapshot)
	}
}

// A module with any instruction that changes a table or drops or reads a
// segment gets no snapshot; one agentrt cannot read neither.
func TestStateOutsideSnapshotFindsEveryInstructionThatChangesTablesOrSegments(t *testing.T) {
	const head = `(module (memory (export "memory") 1) (table $t 4 funcref) (elem $e func $f) (data $d "x")
	  (func $f) (func (export "g") `
	for body, want := range map[string]string{
		`(nop)`: "",
		`(table.set $t (i32.const 0) (ref.null func))`:                 "function 1 changes a table (table.set)",
		`(drop (table.grow $t (ref.null func) (i32.const 1)))`:         "changes a table (table.grow)",
		`(table.fill $t (i32.const 0) (ref.null func) (i32.const 1))`:  "changes a table (table.fill)",
		`(table.copy $t $t (i32.const 0) (i32.const 1) (i32.const 1))`: "changes a table (table.copy)",
		`(table.init $t $e (i32.const 0) (i32.const 0) (i32.const 1))`: "changes a table (table.init)",
		`(elem.drop $e)`: "drops an element segment (elem.drop)",
		`(data.drop $d)`: "drops a data segment (data.drop)",
		`(memory.init $d (i32.const 0) (i32.const 0) (i32.const 1))`:             "reads a data segment (memory.init)",
		`(drop (i32.add (i32.const 1) (i32.const 2))) (block (br 0))`:            "",
		`(drop (v128.load offset=16 (i32.const 0)))`:                             "",
		`(drop (i8x16.extract_lane_s 3 (v128.const i64x2 1 2)))`:                 "",
		`(drop (table.get $t (i32.const 0))) (drop (table.size $t))`:             "",
		`(memory.fill (i32.const 0) (i32.const 0) (i32.const 1))`:                "",
		`(drop (select (result i32) (i32.const 1) (i32.const 2) (i32.const 0)))`: "",
	} {
		code := watModule(t, head+body+`))`)
		if got := stateOutsideSnapshot(code, 2); got != want && !(want != "" && strings.Contains(got, want)) {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
	// An opcode of a proposal agentrt does not enable: 0xfe (threads).
	code := wasmModule(
		wasmSection(1, wasmVec(concat([]byte{0x60}, wasmVec(), wasmVec()))),
		wasmSection(3, wasmVec([]byte{0})),
		wasmSection(10, wasmVec(funcBody(nil, 0xfe, 0x03, 0x00, opEnd))))
	if got := stateOutsideSnapshot(code, 1); !strings.Contains(got, "does not know (opcode 0xfe") {
		t.Errorf("an unknown opcode: %q", got)
	}
}

// A memory back from an instance is reset to the image and zeros
// wherever the instance wrote, within the image and in pages it grew, so
// that the next instance finds no trace of it; the same where the system
// does not say which pages were written.
func TestAPooledMemoryIsResetWhereverTheInstanceWrote(t *testing.T) {
	image := make([]byte, 4*65536)
	rand.Read(image[:3*65536]) // the last page zeros
	for _, system := range []string{"pagemap", "no pagemap"} {
		t.Run(system, func(t *testing.T) {
			if system == "no pagemap" {
				saved := findPrivatePages
				findPrivatePages = func([]byte, func(int)) bool { return false }
				defer func() { findPrivatePages = saved }()
			}
			img := newMemoryImage(image)
			pool := newMemoryPool(img)
			defer img.close()
			defer pool.close()
			const limit = 64 * 65536
			var first *mappedMemory
			for round := range 20 {
				im := &instanceMemory{limit: limit, pool: pool}
				mm, ok := im.Allocate(0, limit).(*mappedMemory)
				if !ok {
					t.Fatal("no mapping")
				}
				if round == 0 {
					first = mm
				} else if mm != first {
					t.Fatalf("round %d got a new memory, not the pooled one", round)
				}
				buf := mm.Reallocate(uint64(len(image)) + 3*65536)
				if i := firstDifference(buf, append(bytes.Clone(image), make([]byte, 3*65536)...)); i >= 0 {
					t.Fatalf("round %d: memory differs from the image and zeros at byte %d", round, i)
				}
				// Read some pages, write others, in the image and past it.
				var sum byte
				for i := range 50 {
					sum += buf[mrand.IntN(len(buf))]
					buf[mrand.IntN(len(buf))] = byte(i) | 1
				}
				_ = sum
				mm.Free()
			}
		})
	}
}

// A cached snapshot is read back as it was written; any damage to its file
// makes it unreadable rather than wrong.
func TestACachedSnapshotIsReadAsWrittenAndDamageRefusesIt(t *testing.T) {
	mem := make([]byte, 3*65536)
	rand.Read(mem[5000:9000])
	rand.Read(mem[70000:70010])
	s := &snapshot{image: newMemoryImage(mem), pages: 3, globals: []uint64{1, 2},
		generators: []generator{{goChaCha8, 1024}, {libcArc4random, 4096}},
		output:     []printed{{fdStdout, []byte("hello\n")}, {fdStderr, []byte("err")}}, monoLast: 12345}
	defer s.close()
	path := filepath.Join(t.TempDir(), "s.snap")
	if err := writeSnapshot(path, s); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	got, err := decodeSnapshot(data, 4*65536, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer got.close()
	if !bytes.Equal(got.image.bytes, mem) || got.pages != 3 || got.monoLast != 12345 ||
		len(got.globals) != 2 || got.globals[1] != 2 || len(got.generators) != 2 || got.generators[1] != s.generators[1] ||
		!samePrinted(got.output, s.output) {
		t.Errorf("read back %+v", got)
	}
	for name, bad := range map[string]struct {
		data    []byte
		limit   uint64
		globals int
	}{
		"cut short":           {data[:len(data)-1], 4 * 65536, 2},
		"a byte changed":      {append(append([]byte(nil), data[:100]...), append([]byte{data[100] ^ 0x40}, data[101:]...)...), 4 * 65536, 2},
		"over the limit":      {data, 2 * 65536, 2},
		"for other globals":   {data, 4 * 65536, 3},
		"another format":      {append([]byte("agentrt snapshot 0\n"), data[len(snapshotFormat):]...), 4 * 65536, 2},
		"nothing":             {nil, 4 * 65536, 2},
		"only a sum of empty": {func() []byte { s := sha256Of(nil); return s[:] }(), 4 * 65536, 2},
	} {
		if s, err := decodeSnapshot(bad.data, bad.limit, bad.globals); err == nil {
			s.close()
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeSnapshot: whatever a cache file holds, decoding it never
// panics, and what it accepts stays within the limit it was given.
func FuzzDecodeSnapshot(f *testing.F) {
	s := &snapshot{image: newMemoryImage(make([]byte, 65536)), pages: 1, globals: []uint64{7},
		generators: []generator{{tinygoXorshift, 16}}, output: []printed{{fdStdout, []byte("x")}}}
	path := filepath.Join(f.TempDir(), "s.snap")
	writeSnapshot(path, s)
	data, _ := os.ReadFile(path)
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		// The sum would refuse any change: fuzz what is behind it.
		if len(data) >= len(snapshotFormat) {
			data = append([]byte(snapshotFormat), data[len(snapshotFormat):]...)
		}
		sum := sha256Of(data)
		s, err := decodeSnapshot(append(bytes.Clone(data), sum[:]...), 2*65536, 1)
		if err != nil {
			return
		}
		defer s.close()
		if uint64(len(s.image.bytes)) != uint64(s.pages)*65536 || s.pages > 2 {
			t.Errorf("accepted a snapshot of %d pages, %d bytes", s.pages, len(s.image.bytes))
		}
		for _, g := range s.generators {
			if uint64(g.at)+uint64(g.kind.size()) > uint64(len(s.image.bytes)) {
				t.Errorf("accepted a generator outside memory: %+v", g)
			}
		}
	})
}

// The monotonic clock of instances from a snapshot reads after every
// reading the initialization made, even one from a process whose clock
// was further on (a snapshot from the cache, taken before a reboot).
func TestTheMonotonicClockNeverReadsBeforeTheSnapshot(t *testing.T) {
	p := &Plugin{snap: &snapshot{monoLast: monotonicNow() + int64(time.Hour)}}
	now := p.snapshotNanotime()
	a := now()
	if a < p.snap.monoLast {
		t.Errorf("the clock read %d, before the snapshot's %d", a, p.snap.monoLast)
	}
	if b := now(); b < a {
		t.Errorf("the clock went back: %d then %d", a, b)
	}
	p.snap.monoLast = 0
	if d := p.snapshotNanotime()() - monotonicNow(); d > int64(time.Second) {
		t.Errorf("a snapshot from this process moved the clock on by %d ns", d)
	}
}

// chacha8State is an internal/chacha8rand State of seed, drawn n times.
func chacha8State(seed [32]byte, drawn int) []byte {
	g := mrand.NewChaCha8(seed)
	for range drawn {
		g.Uint64()
	}
	b, _ := g.MarshalBinary() // "chacha8:" used(8, BE) seed(32): what counter and index follow from
	used := binary.BigEndian.Uint64(b[8:])
	c, i := uint32(used/32)*4, uint32(used%32)
	s := make([]byte, 304)
	r := mrand.NewChaCha8(seed)
	for range 32 * (c / 4) {
		r.Uint64()
	}
	n := uint32(32)
	if c == 12 {
		n = 28
	}
	for k := range n {
		binary.LittleEndian.PutUint64(s[8*k:], r.Uint64())
	}
	copy(s[256:], seed[:])
	binary.LittleEndian.PutUint32(s[288:], i)
	binary.LittleEndian.PutUint32(s[292:], n)
	binary.LittleEndian.PutUint32(s[296:], c)
	return s
}

// findGenerators finds the generators whose states it can check, and only
// those: a state one bit off is no generator, and a random read no found
// generator explains is left unexplained.
func TestFindGeneratorsFindsOnlyStatesItChecks(t *testing.T) {
	mem := func() (a, b []byte) { return make([]byte, 65536), make([]byte, 65536) }
	var sa, sb [32]byte
	rand.Read(sa[:])
	rand.Read(sb[:])

	a, b := mem()
	copy(a[1000:], chacha8State(sa, 40))
	copy(b[1000:], chacha8State(sb, 40))
	// An m's cheaprand, after its state: the state's first draw, moved on.
	for _, x := range []struct {
		m    []byte
		seed [32]byte
	}{{a, sa}, {b, sb}} {
		v := mrand.NewChaCha8(x.seed).Uint64()
		for range 100 {
			v = cheapRandNext(v)
		}
		binary.LittleEndian.PutUint64(x.m[1304:], v)
	}
	ca := &construction{memory: a, entropy: [][]byte{sa[:], make([]byte, 8)}}
	cb := &construction{memory: b, entropy: [][]byte{sb[:], make([]byte, 8)}}
	gens, explained := findGenerators(ca, cb, nil)
	if len(gens) != 2 || gens[0] != (generator{goChaCha8, 1000}) || gens[1] != (generator{goCheapRand, 1304}) {
		t.Errorf("found %+v", gens)
	}
	if !explained[0] || explained[1] {
		t.Errorf("explained %v: the 32-byte read, not the 8-byte one", explained)
	}
	b[1304] ^= 1 // not a draw of the sequence: no cheaprand
	if gens, _ := findGenerators(ca, cb, nil); len(gens) != 1 {
		t.Errorf("found %+v with a cheaprand one bit off", gens)
	}
	a[1000+8*20] ^= 1 // a drawn value changed: not the block of its seed
	if gens, _ := findGenerators(ca, cb, nil); len(gens) != 0 {
		t.Errorf("found %+v in a state one bit off", gens)
	}

	// wasi-libc's arc4random, seeded by the read, drawn 8 bytes (TinyGo's
	// xorshift seed), and TinyGo's xorshift state in the module's data,
	// 3 draws on.
	a, b = mem()
	for _, x := range []struct {
		m    []byte
		seed [32]byte
	}{{a, sa}, {b, sb}} {
		keys, reserve := arc4Ratchet(x.seed[:])
		binary.LittleEndian.PutUint32(x.m[2000:], 1) // initialized
		binary.LittleEndian.PutUint32(x.m[2004:], 8) // off
		copy(x.m[2008:], keys[0][:])
		copy(x.m[2040+8:], reserve[8:])
		v := binary.LittleEndian.Uint32(reserve[:]) | 1
		for range 3 {
			v = xorshift32(v)
		}
		binary.LittleEndian.PutUint32(x.m[300:], v)
		binary.LittleEndian.PutUint32(x.m[40000:], v) // a map's seed, on the heap
	}
	ca = &construction{memory: a, entropy: [][]byte{sa[:]}}
	cb = &construction{memory: b, entropy: [][]byte{sb[:]}}
	gens, explained = findGenerators(ca, cb, []memoryRange{{256, 512}})
	if len(gens) != 2 || gens[0] != (generator{libcArc4random, 2008}) || gens[1] != (generator{tinygoXorshift, 300}) || !explained[0] {
		t.Errorf("found %+v, explained %v", gens, explained)
	}
	a[2040] = 1 // a drawn byte not cleared
	if gens, explained := findGenerators(ca, cb, nil); len(gens) != 0 || explained[0] {
		t.Errorf("found %+v, explained %v, in a state with a drawn byte left", gens, explained)
	}
}

// Re-seeding gives each generator a fresh state of its kind: one the
// checks still recognise, and another each time.
func TestReseedGivesEachGeneratorAFreshState(t *testing.T) {
	mem := make([]byte, 8192)
	gens := []generator{{goChaCha8, 0}, {goCheapRand, 304}, {libcArc4random, 1024}, {tinygoXorshift, 4096}}
	reseed(mem, gens)
	first := bytes.Clone(mem)
	reseed(mem, gens)
	if !isChaCha8State(mem) || binary.LittleEndian.Uint32(mem[292:]) != 32 {
		t.Error("a re-seeded chacha8rand state is not one")
	}
	if got := binary.LittleEndian.Uint32(mem[1020:]); got != arc4ReserveSize {
		t.Errorf("a re-seeded arc4random state's offset is %d, want %d (its reserve used up)", got, arc4ReserveSize)
	}
	for _, g := range gens {
		s := g.at + g.kind.size()
		if bytes.Equal(mem[g.at:s], first[g.at:s]) || allZero(mem[g.at:g.at+4]) {
			t.Errorf("%s was not re-seeded afresh", g.kind)
		}
	}
}

func sha256Of(b []byte) [32]byte { return sha256.Sum256(b) }
