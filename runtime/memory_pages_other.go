//go:build !linux

package runtime

// privatePages reports that this system does not say which pages of a
// memory were written.
func privatePages(mem []byte, page func(i int)) bool { return false }
