package runtime

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// mappedMemory is a plugin instance's linear memory backed by an anonymous
// mapping of its maximum size (the memory limit, unless the plugin declares
// less). Growing it never copies, and pages cost nothing until the plugin
// touches them; closing the instance unmaps it, so its memory goes back to
// the system at once instead of waiting for the garbage collector. A Go
// slice, wazero's default, costs a copy of the whole memory on every
// memory.grow, which made a fresh instance per call several times slower.
type mappedMemory struct {
	buf []byte
}

// allocateMemory is the experimental.MemoryAllocator of plugin instances.
// Where the mapping fails (no address space left), it falls back to
// wazero's growable slice.
func allocateMemory(capacity, max uint64) experimental.LinearMemory {
	if max == 0 || max > 1<<32 {
		return &sliceMemory{}
	}
	buf, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return &sliceMemory{}
	}
	return &mappedMemory{buf: buf}
}

// Reallocate implements experimental.LinearMemory.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
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
type sliceMemory struct{ buf []byte }

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if n := uint64(len(m.buf)); size > n {
		m.buf = append(m.buf, make([]byte, size-n)...)
	}
	return m.buf[:size]
}

func (m *sliceMemory) Free() { m.buf = nil }
