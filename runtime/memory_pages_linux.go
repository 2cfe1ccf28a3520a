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

// privatePages calls page with the index of each page of mem (page-aligned,
// in a private mapping) that is the process's own: present or swapped,
// and not a file's page. In a private mapping of the image these are the
// pages written; in an anonymous one, those touched. It reports false,
// having called page for none, if the system does not say. It reads the
// entries a few hundred at a time into a buffer of its own, allocating
// nothing.
func privatePages(mem []byte, page func(i int)) bool {
	f := pagemap()
	if f == nil {
		return false
	}
	ps := os.Getpagesize()
	n := (len(mem) + ps - 1) / ps
	if n == 0 {
		return true
	}
	first := int64(uintptr(unsafe.Pointer(&mem[0])) / uintptr(ps))
	// page writes only pages that are already the process's own, which
	// changes nothing of what the entries say of the rest.
	var buf [512 * 8]byte
	for done := 0; done < n; {
		k := min(n-done, len(buf)/8)
		if got, err := f.ReadAt(buf[:8*k], (first+int64(done))*8); err != nil || got != 8*k {
			return false
		}
		for i := range k {
			e := binary.LittleEndian.Uint64(buf[8*i:])
			if e&(pagePresent|pageSwapped) != 0 && e&pageFile == 0 {
				page(done + i)
			}
		}
		done += k
	}
	return true
}
