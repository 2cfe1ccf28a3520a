package runtime

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// instanceMemory allocates one plugin instance's linear memory and holds
// it to limit bytes.
//
// The limit is enforced here rather than by wazero (whose own limit is the
// 4 GiB of wasm32) so that a refused memory.grow is seen: wazero refuses a
// grow past its limit without telling anyone, and a plugin out of memory
// then traps on its own terms (Go's runtime after "fatal error: out of
// memory", TinyGo's and Rust's with unreachable), often with its memory
// far below the limit, since the request that failed was a big one. With
// refused known, the trap is reported as what it is.
//
// Memory the module declares as its minimum is checked against the limit
// at load (prepareModule), so the first allocation always fits.
type instanceMemory struct {
	limit   uint64
	refused uint64 // the largest size memory.grow asked for over limit; 0 if none
}

// Allocate implements experimental.MemoryAllocator.
//
// The memory is an anonymous mapping of its maximum size (the limit,
// unless the plugin declares less). Growing it never copies, and pages
// cost nothing until the plugin touches them; closing the instance unmaps
// it, so its memory goes back to the system at once instead of waiting for
// the garbage collector. A Go slice, wazero's default, costs a copy of the
// whole memory on every memory.grow, which made a fresh instance per call
// several times slower. Where the mapping fails (no address space left),
// it falls back to a growable slice.
func (m *instanceMemory) Allocate(capacity, max uint64) experimental.LinearMemory {
	max = min(max, m.limit)
	if max == 0 {
		return &sliceMemory{owner: m}
	}
	buf, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return &sliceMemory{owner: m}
	}
	return &mappedMemory{buf: buf, owner: m}
}

// refuse records that the plugin asked for size bytes of memory it may not
// have.
func (m *instanceMemory) refuse(size uint64) {
	m.refused = max(m.refused, size)
}

// mappedMemory is linear memory in a mapping of its maximum size.
type mappedMemory struct {
	buf   []byte
	owner *instanceMemory
}

// Reallocate implements experimental.LinearMemory.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		m.owner.refuse(size)
		return nil // over the maximum: memory.grow fails
	}
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory.
func (m *mappedMemory) Free() {
	if m.buf != nil {
		syscall.Munmap(m.buf[:cap(m.buf)])
		m.buf = nil
	}
}

// sliceMemory is a growable slice, for when a mapping is not possible.
type sliceMemory struct {
	buf   []byte
	owner *instanceMemory
}

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size > m.owner.limit {
		m.owner.refuse(size)
		return nil
	}
	if n := uint64(len(m.buf)); size > n {
		m.buf = append(m.buf, make([]byte, size-n)...)
	}
	return m.buf[:size]
}

func (m *sliceMemory) Free() { m.buf = nil }
