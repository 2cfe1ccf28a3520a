package runtime

// memoryImage is the linear memory of a snapshot, which every instance
// that starts from the snapshot starts with. It is never written: each
// instance's memory is its own (instanceMemory).
//
// On Linux the image is a sealed memfd, mapped copy-on-write into each
// instance's memory: an instance starts without a copy, reads the image's
// pages from the page cache, and copies a page only when it writes it.
// Elsewhere, or when the memfd cannot be had, each instance copies it.
type memoryImage struct {
	// bytes is the image: a read-only shared mapping of the memfd, or a
	// copy on the heap.
	bytes []byte
	// fd is the sealed memfd holding the image, or -1.
	fd int
}
