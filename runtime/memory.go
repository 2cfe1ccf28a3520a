package runtime

import (
	"bytes"
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
//
// With a pool, the memory comes from the plugin's memoryPool: the memory
// of an instance that closed, reset to how an instance starts (zeros, or a
// snapshot's image), or a new one.
type instanceMemory struct {
	limit   uint64
	refused uint64 // the largest size memory.grow asked for over limit; 0 if none
	pool    *memoryPool
}

// Allocate implements experimental.MemoryAllocator.
//
// The memory is an anonymous mapping of its maximum size (the limit,
// unless the plugin declares less). Growing it never copies, and pages
// cost nothing until the plugin touches them. A Go slice, wazero's
// default, costs a copy of the whole memory on every memory.grow, which
// made a fresh instance per call several times slower. Where the mapping
// fails (no address space left), it falls back to a growable slice.
//
// Without a pool, closing the instance unmaps its memory, so that it goes
// back to the system at once instead of waiting for the garbage
// collector. With one, it goes back to the pool, which keeps a few.
func (m *instanceMemory) Allocate(capacity, max uint64) experimental.LinearMemory {
	max = min(max, m.limit)
	var image []byte
	if m.pool != nil && m.pool.image != nil {
		image = m.pool.image.bytes
	}
	if max == 0 || max < uint64(len(image)) {
		// (A snapshot is of memory that grew within both max and the
		// limit: the plugin never gets here with one.)
		return &sliceMemory{owner: m, buf: bytes.Clone(image)}
	}
	if mm := m.pool.get(max); mm != nil {
		mm.owner = m
		return mm
	}
	buf, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return &sliceMemory{owner: m, buf: bytes.Clone(image)}
	}
	if m.pool != nil && m.pool.image != nil && !m.pool.image.mapInto(buf) {
		syscall.Munmap(buf)
		return &sliceMemory{owner: m, buf: bytes.Clone(image)}
	}
	return &mappedMemory{buf: buf, owner: m, pool: m.pool}
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
	// pool takes it back when it is freed; nil: it is unmapped.
	pool *memoryPool
	// used is the largest size it has had, in bytes: beyond, the plugin
	// never touched it.
	used uint64
}

// Reallocate implements experimental.LinearMemory.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		m.owner.refuse(size)
		return nil // over the maximum: memory.grow fails
	}
	m.used = max(m.used, size)
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory.
func (m *mappedMemory) Free() {
	if m.buf == nil {
		return
	}
	if m.pool != nil && m.pool.put(m) {
		return
	}
	m.unmap()
}

func (m *mappedMemory) unmap() {
	syscall.Munmap(m.buf)
	m.buf = nil
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
