package runtime

import (
	"os"
	"sync"
)

// memoryPool keeps the linear memories of a plugin's closed instances for
// its next instances, each reset to how an instance starts: zeros, or the
// snapshot's image.
//
// Why: what an instance costs is mostly the pages of memory it touches
// that the system must find for it. A page the system hands out costs a
// fault, a fresh page and, for the snapshot's pages, a copy; measured on
// the 2-core machine of bench/README.md, 40 to 80 µs each, so that a Go
// instance touching a hundred pages cost milliseconds in faults alone. A
// memory from the pool has its pages already: resetting the pages an
// instance wrote costs a copy of each (a few hundred ns), and an instance
// that only reads a page of the image reads the page cache.
//
// Reset, a memory holds nothing of the instance that used it: every page
// the instance could have written is found (memoryPool.reset) and made
// the image's again, or zeros beyond it. Memories that grew more than
// maxPooledGrowth past the image, and those past poolSize, are unmapped.
type memoryPool struct {
	image *memoryImage // what a memory starts as; nil: zeros

	mu     sync.Mutex
	size   uint64 // of every mapping in free
	free   []*mappedMemory
	closed bool
}

const (
	// poolSize is the most memories a plugin's pool keeps: the default
	// of --max-instances on a small machine.
	poolSize = 8
	// maxPooledGrowth is the most a memory may have grown past its image
	// (or past nothing) and still be kept: what a pool holds stays under
	// poolSize × (the image + maxPooledGrowth).
	maxPooledGrowth = 4 << 20
)

func newMemoryPool(image *memoryImage) *memoryPool { return &memoryPool{image: image} }

// get returns a free memory of size bytes, or nil.
func (pl *memoryPool) get(size uint64) *mappedMemory {
	if pl == nil {
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if n := len(pl.free); n > 0 && pl.size == size {
		m := pl.free[n-1]
		pl.free = pl.free[:n-1]
		return m
	}
	return nil
}

// put takes back m, whose instance has closed, reset; false if it does
// not keep it (it is then the caller's to unmap).
func (pl *memoryPool) put(m *mappedMemory) bool {
	pl.mu.Lock()
	full := pl.closed || len(pl.free) >= poolSize || len(pl.free) > 0 && pl.size != uint64(len(m.buf))
	pl.mu.Unlock()
	if full || !pl.reset(m) {
		return false
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed || len(pl.free) >= poolSize {
		return false
	}
	if len(pl.free) == 0 {
		pl.size = uint64(len(m.buf))
	}
	m.owner = nil
	pl.free = append(pl.free, m)
	return true
}

// reset makes m's memory what an instance starts with: the image, then
// zeros. It looks only at the pages the instance may have written: those
// of the bytes it used, which the system says are the process's own
// (privatePages: written, where the image's are mapped from the page
// cache). Where the system cannot say, it copies the image and clears the
// rest of what was used. It reports false for a memory that grew too far
// to keep.
func (pl *memoryPool) reset(m *mappedMemory) bool {
	var image []byte
	if pl.image != nil {
		image = pl.image.bytes
	}
	if m.used > uint64(len(image))+maxPooledGrowth {
		return false
	}
	used := m.buf[:max(int(m.used), len(image))]
	ps := os.Getpagesize()
	ok := findPrivatePages(used, func(p int) {
		start := p * ps
		end := min(start+ps, len(used))
		if start < len(image) {
			copy(used[start:end], image[start:])
		}
		if end > len(image) {
			clear(used[max(start, len(image)):end])
		}
	})
	if !ok {
		copy(used, image)
		clear(used[len(image):])
	}
	m.used = 0
	return true
}

// findPrivatePages is privatePages; tests replace it.
var findPrivatePages = privatePages

// close unmaps the free memories; memories freed later are unmapped.
func (pl *memoryPool) close() {
	if pl == nil {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.closed = true
	for _, m := range pl.free {
		m.unmap()
	}
	pl.free = nil
}
