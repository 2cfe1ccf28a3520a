package runtime

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
)

// A generator is the state of a random generator of a plugin's language
// runtime, found in a snapshot's memory and re-seeded in every instance
// that starts from the snapshot, so that what a handler draws from it
// differs between calls as it would if each call ran the initialization.
//
// What Go's and TinyGo's runtimes draw from the system while they start
// (measured on Go 1.26 and TinyGo 0.41, wasip1):
//
//   - Go reads 32 random bytes once, into the bootstrap generator of its
//     runtime (internal/chacha8rand), which then seeds the per-M generator
//     (the one runtime.rand draws from: math/rand and math/rand/v2's
//     top-level functions, map seeds, map iteration and select order),
//     m.cheaprand (scheduling, sampling) and the hash key of every map
//     (runtime.hashkey). It reads the monotonic clock 8 times. crypto/rand
//     reads random_get at each use and draws from no state.
//   - TinyGo reads 32 random bytes once, into wasi-libc's arc4random key,
//     whose output is math/rand's and crypto/rand's (arc4random_buf); its
//     first 4 bytes also seed the runtime's xorshift state, from which
//     TinyGo seeds every map and starts every map iteration. It reads the
//     real-time clock once (TinyGo's monotonic clock is CLOCK_REALTIME).
//   - Rust on wasm32-unknown-unknown reads nothing; on wasm32-wasi,
//     std's HashMap keys are drawn when the first map is made.
//
// So the generators re-seeded are: Go's chacha8rand states (the per-M
// one and the bootstrap one) and m.cheaprand; wasi-libc's arc4random
// state; TinyGo's xorshift state. What the runtimes derived once and
// cannot change without breaking what they built with it (Go's hash key,
// and the seeds and layouts of the maps the initialization built) stays
// as the snapshot holds it, the same in every call: as it is for the whole
// life of a native process. Clock readings are in clocks.go.
type generator struct {
	kind generatorKind
	at   uint32 // where its state is in memory
}

type generatorKind uint8

const (
	// goChaCha8 is Go's internal/chacha8rand.State: buf [32]uint64, seed
	// [4]uint64, i, n, c uint32 (300 bytes), its buf the ChaCha8 block of
	// its seed and counter c.
	goChaCha8 generatorKind = iota + 1
	// goCheapRand is runtime.m's cheaprand (8 bytes), after the m's
	// chacha8rand state (at +304): a draw of cheaprand's sequence from the
	// state's first value.
	goCheapRand
	// libcArc4random is wasi-libc's arc4random state, at its key: {int
	// initialized; size_t off; uint8 key[32]; uint8 reserve[512]}.
	libcArc4random
	// tinygoXorshift is TinyGo's runtime.xorshift32State (4 bytes).
	tinygoXorshift
)

func (k generatorKind) String() string {
	switch k {
	case goChaCha8:
		return "Go's runtime generator (chacha8rand)"
	case goCheapRand:
		return "Go's cheaprand"
	case libcArc4random:
		return "wasi-libc's arc4random"
	case tinygoXorshift:
		return "TinyGo's xorshift state"
	}
	return fmt.Sprintf("generator %d", uint8(k))
}

// size is how many bytes of memory from at a generator's state takes.
func (k generatorKind) size() uint32 {
	switch k {
	case goChaCha8:
		return chacha8StateSize
	case goCheapRand:
		return 8
	case libcArc4random:
		return arc4KeySize + arc4ReserveSize
	case tinygoXorshift:
		return 4
	}
	return 0
}

// describeGenerators names the generators, counted: "Go's runtime
// generator (chacha8rand) ×2", "Go's cheaprand".
func describeGenerators(gens []generator) []string {
	var order []generatorKind
	counts := map[generatorKind]int{}
	for _, g := range gens {
		if counts[g.kind] == 0 {
			order = append(order, g.kind)
		}
		counts[g.kind]++
	}
	names := make([]string, len(order))
	for i, k := range order {
		names[i] = k.String()
		if counts[k] > 1 {
			names[i] += fmt.Sprintf(" ×%d", counts[k])
		}
	}
	return names
}

const (
	chacha8StateSize = 300
	chacha8BufSize   = 256
	arc4KeySize      = 32
	arc4ReserveSize  = 512
	// arc4Refills bounds the refills of arc4random's reserve an
	// initialization may have made (each 512 bytes drawn) for its key to be
	// found.
	arc4Refills = 64
	// xorshiftSteps bounds the xorshift draws (maps made) an initialization
	// may have made after seeding it for its state to be found.
	xorshiftSteps = 1 << 16
)

// findGenerators finds the generators in a, one construction's memory,
// whose state differs in b, another's, and says which of a's random reads
// each explains (seeded): a read no generator explains leaves random bytes
// in the snapshot that no re-seeding changes. data are the ranges the
// module's data segments initialize (a runtime's own variables).
//
// Each kind is recognised by what its state must be, checked in both
// memories: a Go chacha8rand state's buf is the ChaCha8 block of its seed
// and counter, and an m's cheaprand a draw of its sequence from that
// state's first value; an arc4random key is the one its ChaCha20 ratchet
// makes from a 32-byte read; TinyGo's xorshift state is in the module's
// data and is a draw of the xorshift sequence that read seeds. A false
// match would need a 256-bit (chacha8rand, arc4random) or 64-bit
// (cheaprand, xorshift, in both memories) coincidence.
func findGenerators(a, b *construction, data []memoryRange) ([]generator, []bool) {
	n := min(len(a.memory), len(b.memory)) // b's heap may have grown otherwise
	am, bm := a.memory[:n], b.memory[:n]
	explained := make([]bool, len(a.entropy))
	var gens []generator

	// Go: the states, each with cheaprand after it if it is an m's.
	for o := 0; o+chacha8StateSize <= len(am); o += 8 {
		if bytes.Equal(am[o:o+8], bm[o:o+8]) || !isChaCha8State(am[o:]) || !isChaCha8State(bm[o:]) {
			continue
		}
		gens = append(gens, generator{goChaCha8, uint32(o)})
		if c := o + 304; c+8 <= len(am) && isCheapRand(am[o:], am[c:]) && isCheapRand(bm[o:], bm[c:]) {
			gens = append(gens, generator{goCheapRand, uint32(c)})
		}
		o += chacha8StateSize - 4 // the next state is 8-aligned, after this one
	}
	if len(gens) > 0 {
		// Go's runtime reads its seed once, 32 bytes, before any package
		// initializer runs.
		for i, e := range a.entropy {
			if len(e) == 32 {
				explained[i] = true
				break
			}
		}
	}

	// wasi-libc: a key of the ratchet seeded by one of the reads.
	for i, e := range a.entropy {
		if len(e) != arc4KeySize || i >= len(b.entropy) || len(b.entropy[i]) != arc4KeySize {
			continue
		}
		ka, ra := arc4Ratchet(e)
		kb, rb := arc4Ratchet(b.entropy[i])
		stepOf := map[uint32]int{}
		for step, k := range ka {
			stepOf[binary.LittleEndian.Uint32(k[:])] = step
		}
		for o := 8; o+arc4KeySize+arc4ReserveSize <= len(am); o += 4 {
			if bytes.Equal(am[o:o+4], bm[o:o+4]) {
				continue
			}
			step, ok := stepOf[binary.LittleEndian.Uint32(am[o:])]
			if !ok || !bytes.Equal(am[o:o+32], ka[step][:]) || !bytes.Equal(bm[o:o+32], kb[step][:]) ||
				!isArc4State(am, o) || !isArc4State(bm, o) {
				continue
			}
			gens = append(gens, generator{libcArc4random, uint32(o)})
			explained[i] = true
			// TinyGo seeds its xorshift state from the first arc4random
			// draw: reserve[0:4] of the first refill, with its low bit set.
			first := func(r [arc4ReserveSize]byte) uint32 { return binary.LittleEndian.Uint32(r[:]) | 1 }
			if at, ok := findXorshift(am, bm, data, first(ra), first(rb)); ok {
				gens = append(gens, generator{tinygoXorshift, at})
			}
			break
		}
	}
	return gens, explained
}

// isChaCha8State reports whether s starts with an internal/chacha8rand
// State: counters in range, and buf the block its seed and counter make.
func isChaCha8State(s []byte) bool {
	i := binary.LittleEndian.Uint32(s[288:])
	n := binary.LittleEndian.Uint32(s[292:])
	c := binary.LittleEndian.Uint32(s[296:])
	if c%4 != 0 || c >= 16 || !(n == 32 || n == 28 && c == 12) || i > n {
		return false
	}
	g := mrand.NewChaCha8([32]byte(s[256:288]))
	for range 32 * (c / 4) { // the chunks before c's
		g.Uint64()
	}
	for k := range n {
		if binary.LittleEndian.Uint64(s[8*k:]) != g.Uint64() {
			return false
		}
	}
	return true
}

// cheapRandSteps bounds the cheaprand draws (scheduling decisions) an
// initialization may have made for the state to be found.
const cheapRandSteps = 1 << 16

// isCheapRand reports whether v starts with the cheaprand of the m whose
// chacha8rand state starts state: Go's runtime sets it to the state's
// first draw (runtime.mrandinit), which the seed still gives while the
// state has not been reseeded, and then moves it on by wasm's cheaprand
// (xorshift64+ on two 32-bit halves).
func isCheapRand(state, v []byte) bool {
	g := mrand.NewChaCha8([32]byte(state[256:288]))
	x := g.Uint64()
	want := binary.LittleEndian.Uint64(v)
	for range cheapRandSteps {
		if x == want {
			return true
		}
		x = cheapRandNext(x)
	}
	return false
}

// cheapRandNext is runtime.cheaprand's step on wasm.
func cheapRandNext(x uint64) uint64 {
	s1, s0 := uint32(x), uint32(x>>32)
	s1 ^= s1 << 17
	s1 = s1 ^ s0 ^ s1>>7 ^ s0>>16
	return uint64(s0) | uint64(s1)<<32
}

// isArc4State reports whether the key at o in mem sits in an arc4random
// state: initialized, its offset within the reserve, and the reserve's
// bytes before the offset (drawn, so cleared) zero.
func isArc4State(mem []byte, o int) bool {
	if binary.LittleEndian.Uint32(mem[o-8:]) != 1 {
		return false
	}
	off := binary.LittleEndian.Uint32(mem[o-4:])
	if off > arc4ReserveSize {
		return false
	}
	reserve := mem[o+arc4KeySize:]
	for _, b := range reserve[:off] {
		if b != 0 {
			return false
		}
	}
	return true
}

// arc4Ratchet is the keys wasi-libc's arc4random holds after each of the
// first arc4Refills refills of its reserve, when getentropy gave it seed,
// and the reserve of the first refill.
func arc4Ratchet(seed []byte) (keys [][32]byte, firstReserve [arc4ReserveSize]byte) {
	key := [32]byte(seed)
	for r := range arc4Refills {
		var st [16]uint32
		st[0], st[1], st[2], st[3] = 0x61707865, 0x3320646e, 0x79622d32, 0x6b206574
		for j := range 8 {
			st[4+j] = binary.LittleEndian.Uint32(key[4*j:])
		}
		block := arc4Update(&st)
		copy(key[:], block[:32])
		keys = append(keys, key)
		if r == 0 {
			for j := range arc4ReserveSize / 64 {
				block := arc4Update(&st)
				copy(firstReserve[64*j:], block[:])
			}
		}
	}
	return keys, firstReserve
}

// arc4Update is wasi-libc's chacha20_update: ChaCha20's 20 rounds on st,
// the block the state before them plus the state after, and then st is the
// state after them, with its counter word incremented.
func arc4Update(st *[16]uint32) (out [64]byte) {
	in := *st
	qr := func(a, b, c, d int) {
		st[a] += st[b]
		st[d] ^= st[a]
		st[d] = st[d]<<16 | st[d]>>16
		st[c] += st[d]
		st[b] ^= st[c]
		st[b] = st[b]<<12 | st[b]>>20
		st[a] += st[b]
		st[d] ^= st[a]
		st[d] = st[d]<<8 | st[d]>>24
		st[c] += st[d]
		st[b] ^= st[c]
		st[b] = st[b]<<7 | st[b]>>25
	}
	for range 10 {
		qr(0, 4, 8, 12)
		qr(1, 5, 9, 13)
		qr(2, 6, 10, 14)
		qr(3, 7, 11, 15)
		qr(0, 5, 10, 15)
		qr(1, 6, 11, 12)
		qr(2, 7, 8, 13)
		qr(3, 4, 9, 14)
	}
	for i := range 16 {
		binary.LittleEndian.PutUint32(out[4*i:], in[i]+st[i])
	}
	st[12]++
	return out
}

// findXorshift finds TinyGo's xorshift32State among the module's own
// variables (data, the ranges its data segments initialize: the state is
// one, initialized to 1): the word that holds, in a and b, the same draw
// of the xorshift sequences seedA and seedB start. Maps TinyGo makes at run
// time hold draws of it as their seeds, but on the heap, outside data.
// More than one such word is no match.
func findXorshift(am, bm []byte, data []memoryRange, seedA, seedB uint32) (uint32, bool) {
	stepOf := make(map[uint32]int, xorshiftSteps)
	seqB := make([]uint32, xorshiftSteps)
	for k, a, b := 0, seedA, seedB; k < xorshiftSteps; k++ {
		if _, ok := stepOf[a]; !ok {
			stepOf[a] = k
		}
		seqB[k] = b
		a, b = xorshift32(a), xorshift32(b)
	}
	var found []uint32
	for _, r := range data {
		for o := (r.start + 3) &^ 3; o+4 <= r.end && int(o)+4 <= len(am); o += 4 {
			va, vb := binary.LittleEndian.Uint32(am[o:]), binary.LittleEndian.Uint32(bm[o:])
			if va == vb {
				continue
			}
			if k, ok := stepOf[va]; ok && seqB[k] == vb {
				found = append(found, o)
			}
		}
	}
	if len(found) != 1 {
		return 0, false
	}
	return found[0], true
}

func xorshift32(x uint32) uint32 {
	x ^= x << 7
	x ^= x >> 1
	x ^= x << 9
	return x
}

// reseed gives each generator in mem, an instance's memory, a fresh state
// from crypto/rand.
func reseed(mem []byte, gens []generator) {
	var seed [32]byte
	for _, g := range gens {
		s := mem[g.at : g.at+g.kind.size()]
		switch g.kind {
		case goChaCha8:
			rand.Read(seed[:])
			r := mrand.NewChaCha8(seed)
			for k := range 32 {
				binary.LittleEndian.PutUint64(s[8*k:], r.Uint64())
			}
			copy(s[chacha8BufSize:], seed[:])
			binary.LittleEndian.PutUint32(s[288:], 0)  // i
			binary.LittleEndian.PutUint32(s[292:], 32) // n
			binary.LittleEndian.PutUint32(s[296:], 0)  // c
		case goCheapRand:
			rand.Read(s)
			s[0] |= 1 // on wasm, two 32-bit xorshift states: neither may be 0
			s[4] |= 1
		case libcArc4random:
			rand.Read(s[:arc4KeySize])
			clear(s[arc4KeySize:])
			// off: the reserve is used up, so the next draw refills it
			// from the new key.
			binary.LittleEndian.PutUint32(mem[g.at-4:], arc4ReserveSize)
		case tinygoXorshift:
			rand.Read(s)
			s[0] |= 1
		}
	}
}
