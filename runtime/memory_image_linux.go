package runtime

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newMemoryImage makes an image of b, whose length is a multiple of the
// system's page size (wasm pages are 64 KiB).
func newMemoryImage(b []byte) *memoryImage {
	if len(b) == 0 {
		return &memoryImage{fd: -1}
	}
	fd, err := unix.MemfdCreate("agentrt-snapshot", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return heapImage(b)
	}
	for rest := b; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err != nil {
			unix.Close(fd)
			return heapImage(b)
		}
		rest = rest[n:]
	}
	// Sealed, the image cannot change under the instances mapping it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS,
		unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return heapImage(b)
	}
	view, err := syscall.Mmap(fd, 0, len(b), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return heapImage(b)
	}
	return &memoryImage{bytes: view, fd: fd}
}

func heapImage(b []byte) *memoryImage {
	return &memoryImage{bytes: append([]byte(nil), b...), fd: -1}
}

// mapInto makes the start of buf, an anonymous mapping that is an
// instance's memory, the image: a private mapping of the memfd at buf's
// address (copy-on-write), or a copy. It reports false if buf may no
// longer be mapped (a failed mapping over it), and must then be unmapped.
func (img *memoryImage) mapInto(buf []byte) bool {
	n := len(img.bytes)
	if n == 0 {
		return true
	}
	if img.fd < 0 {
		copy(buf, img.bytes)
		return true
	}
	p, err := unix.MmapPtr(img.fd, 0, unsafe.Pointer(&buf[0]), uintptr(n),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	return err == nil && p == unsafe.Pointer(&buf[0])
}

// close releases the image; instances that map it keep their mappings.
func (img *memoryImage) close() {
	if img.fd >= 0 {
		syscall.Munmap(img.bytes)
		unix.Close(img.fd)
		img.fd = -1
	}
	img.bytes = nil
}
