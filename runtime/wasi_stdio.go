package runtime

import (
	"context"
	"encoding/binary"
	"io"

	"github.com/tetratelabs/wazero/api"
)

// A plugin's fds are its standard input (0: empty), output (1) and error
// (2), and no other. WASI's fd_read, fd_write, fd_pread and fd_pwrite on
// them are agentrt's own: wazero's walk any number of iovecs (16 M empty
// ones took 1.4 s), and its fd_write hands each whole iovec to the writer
// in one call the call timeout cannot interrupt (one fd_write of 50
// iovecs naming the same 100 MiB of newlines ran for 177 s under a 5 s
// timeout, and held up the server's shutdown).
//
// They answer as wazero's do for the same fds, but for a count of iovecs
// over maxIovecs (EINVAL), and for an fd the plugin closed with fd_close,
// which they treat as still open (as poll_oneoff does): what the plugin
// writes then goes to its own log, where it could have written anyway.

// maxIovecs bounds the iovecs of one call (EINVAL beyond, before any is
// read), as IOV_MAX (1024 on Linux) bounds readv(2) and writev(2): a
// program written for POSIX passes no more. Go's, TinyGo's and Rust's
// standard libraries pass one or a few.
const maxIovecs = 1024

// writeChunk is the most fd_write hands a writer at once: between chunks it
// looks at the call's context.
const writeChunk = 64 << 10

// iovecSize is the size of a WASI iovec: {buf u32, buf_len u32}.
const iovecSize = 8

// stdioKey is the context key of a call's stdio.
type stdioKey struct{}

// stdio is where a plugin instance's fds 1 and 2 go.
type stdio struct{ stdout, stderr io.Writer }

// withStdio returns ctx carrying where fd_write on fds 1 and 2 goes for
// the guest calls made under it (a nil writer discards). Without it, what a
// plugin writes is discarded, as wazero does with no writer configured.
func withStdio(ctx context.Context, stdout, stderr io.Writer) context.Context {
	return context.WithValue(ctx, stdioKey{}, stdio{stdout, stderr})
}

// stdioWriter is where fd (1 or 2) goes under ctx.
func stdioWriter(ctx context.Context, fd int32) io.Writer {
	s, _ := ctx.Value(stdioKey{}).(stdio)
	w := s.stdout
	if fd == fdStderr {
		w = s.stderr
	}
	if w == nil {
		return io.Discard
	}
	return w
}

// isStdio reports whether fd is one of the plugin's fds.
func isStdio(fd int32) bool { return fd >= fdStdin && fd <= fdStderr }

// iovecs is the iovec array of n iovecs at ptr: EINVAL over maxIovecs,
// EFAULT if it lies outside memory.
func iovecs(mem api.Memory, ptr, n uint32) ([]byte, uint32) {
	if n > maxIovecs {
		return nil, errnoInval
	}
	vecs, ok := guestBytes(mem, ptr, uint64(n)*iovecSize)
	if !ok {
		return nil, errnoFault
	}
	return vecs, errnoSuccess
}

// iovec is the i-th iovec of vecs: its buffer's address and length.
func iovec(vecs []byte, i uint32) (buf, bufLen uint32) {
	v := vecs[i*iovecSize:]
	return binary.LittleEndian.Uint32(v), binary.LittleEndian.Uint32(v[4:])
}

// fdWrite is WASI's fd_write(fd, iovs, iovs_len, result.nwritten) -> errno.
//
// It returns EBADF for an fd other than 0, 1 and 2; EINVAL for more than
// maxIovecs iovecs; EFAULT if the iovecs lie outside memory. It then
// writes each iovec in turn to the call's stdout (fd 1) or stderr (fd 2),
// stopping with EFAULT at an iovec outside memory, with EBADF at any iovec
// on fd 0 (stdin is not written to), with EIO if the writer fails, and
// with EINTR once the call's context ends. Otherwise it stores the bytes
// written, modulo 2^32, at result.nwritten (EFAULT if that lies outside
// memory, the text written all the same) and returns 0.
//
// What it costs: at most maxIovecs iovecs read in place, and the writer's
// work, writeChunk bytes at a time with a look at the context between
// chunks; it allocates nothing.
func fdWrite(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = uint64(writeFd(ctx, mod.Memory(), int32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])))
}

func writeFd(ctx context.Context, mem api.Memory, fd int32, iovs, iovsLen, resultNwritten uint32) uint32 {
	if !isStdio(fd) {
		return errnoBadf
	}
	vecs, errno := iovecs(mem, iovs, iovsLen)
	if errno != errnoSuccess {
		return errno
	}
	var w io.Writer
	if fd != fdStdin {
		w = stdioWriter(ctx, fd)
	}
	var nwritten uint32
	for i := range iovsLen {
		buf, bufLen := iovec(vecs, i)
		b, ok := guestBytes(mem, buf, uint64(bufLen))
		if !ok {
			return errnoFault
		}
		if w == nil {
			return errnoBadf
		}
		for len(b) > 0 {
			if ctx.Err() != nil {
				return errnoIntr
			}
			chunk := b[:min(len(b), writeChunk)]
			n, err := w.Write(chunk)
			nwritten += uint32(n)
			if err != nil {
				return errnoIo
			}
			b = b[len(chunk):]
		}
	}
	if !mem.WriteUint32Le(resultNwritten, nwritten) {
		return errnoFault
	}
	return errnoSuccess
}

// fdRead is WASI's fd_read(fd, iovs, iovs_len, result.nread) -> errno.
// Standard input is empty: a read of it ends at its first iovec of room.
//
// It returns EBADF for an fd other than 0, 1 and 2; EINVAL for more than
// maxIovecs iovecs; EFAULT if the iovecs lie outside memory. It then skips
// the empty iovecs up to the first that has room, and returns EFAULT if
// that one lies outside memory, or EBADF if fd is 1 or 2 (they are not
// read from). Otherwise it stores 0 at result.nread (EFAULT if that lies
// outside memory) and returns 0. What it costs: at most maxIovecs iovecs
// read in place.
func fdRead(_ context.Context, mod api.Module, stack []uint64) {
	mem, fd := mod.Memory(), int32(stack[0])
	room, errno := firstRoom(mem, fd, uint32(stack[1]), uint32(stack[2]))
	if errno == errnoSuccess && room && fd != fdStdin {
		errno = errnoBadf
	}
	stack[0] = uint64(readNothing(mem, errno, uint32(stack[3])))
}

// fdPread is WASI's fd_pread(fd, iovs, iovs_len, offset, result.nread) ->
// errno. The plugin's fds are streams, without offsets: it answers as
// fd_read does, but EBADF where fd_read would read stdin's end of file.
func fdPread(_ context.Context, mod api.Module, stack []uint64) {
	mem := mod.Memory()
	room, errno := firstRoom(mem, int32(stack[0]), uint32(stack[1]), uint32(stack[2]))
	if errno == errnoSuccess && room {
		errno = errnoBadf
	}
	stack[0] = uint64(readNothing(mem, errno, uint32(stack[4])))
}

// readNothing ends a read that read nothing: unless errno says otherwise,
// it stores 0 at resultNread.
func readNothing(mem api.Memory, errno, resultNread uint32) uint32 {
	if errno == errnoSuccess && !mem.WriteUint32Le(resultNread, 0) {
		return errnoFault
	}
	return errno
}

// firstRoom checks what fd_read and fd_pread check of their fd and
// iovecs, in wazero's order: EBADF for an fd other than 0, 1 and 2, EINVAL
// over maxIovecs, EFAULT for an iovec array outside memory, then, skipping
// empty iovecs, EFAULT if the first with room lies outside memory. It
// reports whether there is an iovec with room.
func firstRoom(mem api.Memory, fd int32, iovs, iovsLen uint32) (bool, uint32) {
	if !isStdio(fd) {
		return false, errnoBadf
	}
	vecs, errno := iovecs(mem, iovs, iovsLen)
	if errno != errnoSuccess {
		return false, errno
	}
	for i := range iovsLen {
		buf, bufLen := iovec(vecs, i)
		if bufLen == 0 {
			continue
		}
		if _, ok := guestBytes(mem, buf, uint64(bufLen)); !ok {
			return false, errnoFault
		}
		return true, errnoSuccess
	}
	return false, errnoSuccess
}

// fdPwrite is WASI's fd_pwrite(fd, iovs, iovs_len, offset,
// result.nwritten) -> errno. The plugin's fds are streams, without
// offsets: it returns EBADF for an fd other than 0, 1 and 2; EINVAL for
// more than maxIovecs iovecs; EFAULT if the iovecs lie outside memory; then,
// iovec by iovec, EFAULT for one outside memory and EBADF for the first
// with bytes in it. With none, it stores 0 at result.nwritten (EFAULT if
// that lies outside memory) and returns 0. What it costs: at most
// maxIovecs iovecs read in place.
func fdPwrite(_ context.Context, mod api.Module, stack []uint64) {
	stack[0] = uint64(pwriteFd(mod.Memory(), int32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[4])))
}

func pwriteFd(mem api.Memory, fd int32, iovs, iovsLen, resultNwritten uint32) uint32 {
	if !isStdio(fd) {
		return errnoBadf
	}
	vecs, errno := iovecs(mem, iovs, iovsLen)
	if errno != errnoSuccess {
		return errno
	}
	for i := range iovsLen {
		buf, bufLen := iovec(vecs, i)
		if _, ok := guestBytes(mem, buf, uint64(bufLen)); !ok {
			return errnoFault
		}
		if bufLen != 0 {
			return errnoBadf
		}
	}
	if !mem.WriteUint32Le(resultNwritten, 0) {
		return errnoFault
	}
	return errnoSuccess
}
