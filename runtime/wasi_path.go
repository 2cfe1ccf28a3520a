package runtime

import (
	"context"

	"github.com/tetratelabs/wazero/api"
)

// WASI's path_* functions act on a path inside a directory fd. A plugin
// has no directory fd (no directory is preopened, and path_open, which
// alone could open one, needs one), so every such call fails, and
// agentrt's versions answer from the fd alone: ENOTDIR for stdin, stdout
// and stderr, EBADF for any other fd, as wazero answers for a path it
// accepts. wazero's read the path first: they copy it, clean it and copy
// it again before they look at the fd, so a path of 200 MiB made the host
// allocate 480 MB and spend 8 s in one call the call timeout cannot
// interrupt. These never read a path: what they cost is constant.
//
// Where wazero refuses a call for its other arguments before it reads the
// path, so do these: path_readlink with an empty path or buffer, and
// path_filestat_set_times with contradictory flags, are EINVAL. For a path
// wazero refuses (outside memory: EFAULT; absolute or leaving its
// directory: EPERM), these answer from the fd all the same, and for an fd
// the plugin closed with fd_close, they answer as if it were open.

// pathAt is a path_* function whose directory fd is its fd-th parameter.
func pathAt(fd int) api.GoModuleFunc {
	return func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = uint64(notADirectory(int32(stack[fd])))
	}
}

// notADirectory is what a path_* function answers for the directory fd
// fd, none being a directory.
func notADirectory(fd int32) uint32 {
	if isStdio(fd) {
		return errnoNotdir
	}
	return errnoBadf
}

// pathReadlink is path_readlink(fd, path, path_len, buf, buf_len,
// result.bufused) -> errno: EINVAL if path_len or buf_len is 0, else
// notADirectory(fd).
func pathReadlink(_ context.Context, _ api.Module, stack []uint64) {
	if uint32(stack[2]) == 0 || uint32(stack[4]) == 0 {
		stack[0] = errnoInval
		return
	}
	stack[0] = uint64(notADirectory(int32(stack[0])))
}

// The fstflags bits of path_filestat_set_times.
const (
	fstflagsAtim = 1 << iota
	fstflagsAtimNow
	fstflagsMtim
	fstflagsMtimNow
)

// pathFilestatSetTimes is path_filestat_set_times(fd, flags, path,
// path_len, atim, mtim, fst_flags) -> errno: EINVAL if fst_flags asks to
// set a time both to a value and to now, else notADirectory(fd).
func pathFilestatSetTimes(_ context.Context, _ api.Module, stack []uint64) {
	flags := uint16(stack[6])
	if flags&(fstflagsAtim|fstflagsAtimNow) == fstflagsAtim|fstflagsAtimNow ||
		flags&(fstflagsMtim|fstflagsMtimNow) == fstflagsMtim|fstflagsMtimNow {
		stack[0] = errnoInval
		return
	}
	stack[0] = uint64(notADirectory(int32(stack[0])))
}
