//go:build !linux

package runtime

// newMemoryImage makes an image of b, copied into every instance.
func newMemoryImage(b []byte) *memoryImage {
	return &memoryImage{bytes: append([]byte(nil), b...), fd: -1}
}

func (img *memoryImage) mapInto(buf []byte) bool {
	copy(buf, img.bytes)
	return true
}

func (img *memoryImage) close() { img.bytes = nil }
