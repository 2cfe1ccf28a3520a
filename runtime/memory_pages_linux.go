package runtime

import (
	"encoding/binary"
	"os"
	"sync"
	"unsafe"
)

// pagemap is /proc/self/pagemap, opened once: nil if it cannot be.
var pagemap = sync.OnceValue(func() *os.File {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return nil
	}
	return f
})

// Bits of a /proc/self/pagemap entry
// (https://docs.kernel.org/admin-guide/mm/pagemap.html).
const (
	pagePresent = 1 << 63
	pageSwapped = 1 << 62
	pageFile    = 1 << 61 // a page of a file (the image's, read), or shared
)

// privatePages returns the indices of the pages of mem (page-aligned, in a
// private mapping) that are the process's own: present or swapped, and not
// a file's page. In a private mapping of the image these are the pages
// written; in an anonymous one, those touched. It reports false if the
// system does not say.
func privatePages(mem []byte) ([]int, bool) {
	f := pagemap()
	if f == nil || len(mem) == 0 {
		return nil, f != nil
	}
	ps := os.Getpagesize()
	n := (len(mem) + ps - 1) / ps
	entries := make([]byte, 8*n)
	off := int64(uintptr(unsafe.Pointer(&mem[0]))/uintptr(ps)) * 8
	if k, err := f.ReadAt(entries, off); err != nil || k != len(entries) {
		return nil, false
	}
	var pages []int
	for i := range n {
		e := binary.LittleEndian.Uint64(entries[8*i:])
		if e&(pagePresent|pageSwapped) != 0 && e&pageFile == 0 {
			pages = append(pages, i)
		}
	}
	return pages, true
}
