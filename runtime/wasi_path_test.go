package runtime

import (
	"bytes"
	"math"
	"runtime/metrics"
	"testing"

	"github.com/tetratelabs/wazero"
)

// pathFunctions are WASI's path_* functions, each with its arguments for
// a directory fd and a path (for the functions of two paths, both; of two
// fds, both).
var pathFunctions = []struct {
	name string
	args func(fd int32, path, pathLen uint32) []uint64
}{
	{"path_create_directory", func(fd int32, p, n uint32) []uint64 { return []uint64{fdArg(fd), uint64(p), uint64(n)} }},
	{"path_filestat_get", func(fd int32, p, n uint32) []uint64 {
		return []uint64{fdArg(fd), 1, uint64(p), uint64(n), resultAt}
	}},
	{"path_filestat_set_times", func(fd int32, p, n uint32) []uint64 {
		return []uint64{fdArg(fd), 1, uint64(p), uint64(n), 1, 2, fstflagsAtim | fstflagsMtimNow}
	}},
	{"path_link", func(fd int32, p, n uint32) []uint64 {
		return []uint64{fdArg(fd), 1, uint64(p), uint64(n), fdArg(fd), uint64(p), uint64(n)}
	}},
	{"path_open", func(fd int32, p, n uint32) []uint64 {
		return []uint64{fdArg(fd), 1, uint64(p), uint64(n), 1 /* O_CREAT */, math.MaxUint64, math.MaxUint64, 0, resultAt}
	}},
	{"path_readlink", func(fd int32, p, n uint32) []uint64 {
		return []uint64{fdArg(fd), uint64(p), uint64(n), dataAt, 64, resultAt}
	}},
	{"path_remove_directory", func(fd int32, p, n uint32) []uint64 { return []uint64{fdArg(fd), uint64(p), uint64(n)} }},
	{"path_rename", func(fd int32, p, n uint32) []uint64 {
		return []uint64{fdArg(fd), uint64(p), uint64(n), fdArg(fd), uint64(p), uint64(n)}
	}},
	{"path_symlink", func(fd int32, p, n uint32) []uint64 {
		return []uint64{uint64(p), uint64(n), fdArg(fd), uint64(p), uint64(n)}
	}},
	{"path_unlink_file", func(fd int32, p, n uint32) []uint64 { return []uint64{fdArg(fd), uint64(p), uint64(n)} }},
}

func fdArg(fd int32) uint64 { return uint64(uint32(fd)) }

func pathFunctionNames() []string {
	var names []string
	for _, f := range pathFunctions {
		names = append(names, f.name)
	}
	return names
}

// testFds are fds the path tests try: stdio, and fds nothing opened.
var testFds = []int32{fdStdin, fdStdout, fdStderr, 3, 4, -1, math.MaxInt32}

// TestPathFunctionsAnswerAsWazerosDoForPathsItAccepts: for a path wazero
// accepts (in memory, relative, not leaving its directory), agentrt's
// path_* functions answer as wazero's do; and agentrt's give the same
// answer for paths they never read, wazero's EFAULT and EPERM aside.
func TestPathFunctionsAnswerAsWazerosDoForPathsItAccepts(t *testing.T) {
	names := pathFunctionNames()
	ours := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), names...)
	theirs := newWASIGuest(t, wazeroWASI, wazero.NewModuleConfig(), names...)
	const size = guestPages * 65536
	for _, g := range []*wasiGuest{ours, theirs} {
		g.write(t, dataAt, []byte("a/b.txt"))
		g.write(t, dataAt+16, []byte("/etc/passwd"))
		g.write(t, dataAt+32, []byte("../../etc"))
	}
	for _, f := range pathFunctions {
		for _, fd := range testFds {
			want := uint32(errnoBadf)
			if fd >= 0 && fd <= 2 {
				want = errnoNotdir
			}
			if got := theirs.call(t, t.Context(), f.name, f.args(fd, dataAt, 7)...); got != want {
				t.Errorf("wazero's %s(fd %d, \"a/b.txt\"): errno %d, want %d", f.name, fd, got, want)
			}
			for _, p := range []struct {
				what   string
				ptr, n uint32
			}{
				{"a/b.txt", dataAt, 7},
				// Paths wazero refuses (EFAULT, EPERM) before it looks at the fd.
				{"a path outside memory", size - 3, 7},
				{"a path wrapping 2^32", math.MaxUint32, 2},
				{"a path of 4 GiB", 0, math.MaxUint32},
				{"/etc/passwd", dataAt + 16, 11},
				{"../../etc", dataAt + 32, 9},
			} {
				if got := ours.call(t, t.Context(), f.name, f.args(fd, p.ptr, p.n)...); got != want {
					t.Errorf("agentrt's %s(fd %d, %s): errno %d, want %d", f.name, fd, p.what, got, want)
				}
			}
		}
	}
	if got := ours.read(t, resultAt, 4); got[0]|got[1]|got[2]|got[3] != 0 {
		t.Errorf("a path_* function wrote a result: %x", got)
	}
}

func TestPathFunctionsRefuseWhatWazeroRefusesBeforeReadingThePath(t *testing.T) {
	ours := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), "path_readlink", "path_filestat_set_times")
	theirs := newWASIGuest(t, wazeroWASI, wazero.NewModuleConfig(), "path_readlink", "path_filestat_set_times")
	for _, g := range []*wasiGuest{ours, theirs} {
		g.write(t, dataAt, []byte("a"))
	}
	type call struct {
		name string
		args []uint64
	}
	var calls []call
	for _, fd := range testFds {
		for _, c := range []struct{ pathLen, bufLen uint64 }{{0, 64}, {1, 0}, {0, 0}, {1, 64}} {
			calls = append(calls, call{"path_readlink", []uint64{fdArg(fd), dataAt, c.pathLen, dataAt + 16, c.bufLen, resultAt}})
		}
		for flags := range uint64(16) {
			calls = append(calls, call{"path_filestat_set_times", []uint64{fdArg(fd), 0, dataAt, 1, 1, 2, flags}})
		}
	}
	for _, c := range calls {
		got, want := ours.call(t, t.Context(), c.name, c.args...), theirs.call(t, t.Context(), c.name, c.args...)
		if got != want {
			t.Errorf("%s%v: agentrt's errno %d, wazero's %d", c.name, c.args, got, want)
		}
	}
}

// heapAllocated is the bytes the Go heap has allocated so far.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// pathAttack calls every path_* function of g, on every test fd, with a
// path of all of g's memory (grown to 64 MiB), and reports the heap the
// calls allocated.
func pathAttack(t *testing.T, g *wasiGuest, functions ...string) (allocated uint64) {
	t.Helper()
	const pages = 1024 // 64 MiB
	if _, ok := g.mod.Memory().Grow(pages - guestPages); !ok {
		t.Fatal("grow memory")
	}
	// "a//a//a//...": a path cleaning changes, so that it is copied again.
	block := bytes.Repeat([]byte("a//"), 64<<10)[:192<<10]
	for i := uint32(0); i < pages*65536; i += uint32(len(block)) {
		g.write(t, i, block[:min(len(block), pages*65536-int(i))])
	}
	before := heapAllocated()
	for _, f := range pathFunctions {
		for _, name := range functions {
			if name == f.name {
				g.call(t, t.Context(), f.name, f.args(3, 0, pages*65536)...)
			}
		}
	}
	return heapAllocated() - before
}

// TestPathFunctionsNeverReadThePath: the path_* functions, each given a
// path of 64 MiB, allocate nothing for it. wazero's copy it before they
// look at the fd (TestWazeroPathFunctionsCopyThePath).
func TestPathFunctionsNeverReadThePath(t *testing.T) {
	g := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), pathFunctionNames()...)
	if got := pathAttack(t, g, pathFunctionNames()...); got > 1<<20 {
		t.Errorf("path_* functions given a path of 64 MiB allocated %d KiB", got>>10)
	}
}

// TestWazeroPathFunctionsCopyThePath is why agentrt has its own path_*
// functions: wazero's, given a path of 64 MiB and an fd that is not open,
// copy the path (and, as cleaning changes it, copy it again) before they
// find the fd is not open.
func TestWazeroPathFunctionsCopyThePath(t *testing.T) {
	g := newWASIGuest(t, wazeroWASI, wazero.NewModuleConfig(), "path_open")
	if got := pathAttack(t, g, "path_open"); got < 64<<20 {
		t.Errorf("wazero's path_open given a path of 64 MiB allocated %d MiB; want at least 64", got>>20)
	}
}
