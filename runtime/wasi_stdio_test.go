package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// wasiGuest is an instance of a module that imports WASI functions and
// exports each under its own name, taking the same arguments, so that a
// test calls a WASI function as a plugin would, on the instance's memory.
type wasiGuest struct {
	mod api.Module
}

// guestPages is the memory of a wasiGuest: 1 MiB.
const guestPages = 16

// newWASIGuest instantiates, in a runtime of its own without
// WithCloseOnContextDone (so that a call returns the errno its function
// returned even past its context's end), a guest of the WASI functions
// names served by wasi, with cfg.
func newWASIGuest(t *testing.T, wasi func(context.Context, wazero.Runtime) error, cfg wazero.ModuleConfig, names ...string) *wasiGuest {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	if err := wasi(ctx, r); err != nil {
		t.Fatal(err)
	}
	defs := r.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions()
	var types, imports, funcs, exports, bodies [][]byte
	n := uint64(len(names))
	for i, name := range names {
		def := defs[name]
		if def == nil {
			t.Fatalf("no WASI function %s", name)
		}
		params := def.ParamTypes()
		var ps [][]byte
		body := []byte{0} // no locals
		for j, p := range params {
			ps = append(ps, []byte{p})
			body = append(body, 0x20, byte(j)) // local.get j
		}
		body = append(body, 0x10, byte(i), opEnd) // call i
		types = append(types, concat([]byte{0x60}, wasmVec(ps...), wasmVec([]byte{valI32})))
		imports = append(imports, concat(wasmName(wasi_snapshot_preview1.ModuleName), wasmName(name), []byte{0}, uleb(uint64(i))))
		funcs = append(funcs, uleb(uint64(i)))
		exports = append(exports, concat(wasmName(name), []byte{0}, uleb(n+uint64(i))))
		bodies = append(bodies, concat(uleb(uint64(len(body))), body))
	}
	exports = append(exports, concat(wasmName("memory"), []byte{2, 0}))
	code := wasmModule(
		wasmSection(1, wasmVec(types...)),
		wasmSection(2, wasmVec(imports...)),
		wasmSection(3, wasmVec(funcs...)),
		wasmSection(5, wasmVec([]byte{0x00, guestPages})),
		wasmSection(7, wasmVec(exports...)),
		wasmSection(10, wasmVec(bodies...)),
	)
	mod, err := r.InstantiateWithConfig(ctx, code, cfg.WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	return &wasiGuest{mod: mod}
}

// call calls the WASI function name through the guest and returns its errno.
func (g *wasiGuest) call(t *testing.T, ctx context.Context, name string, args ...uint64) uint32 {
	t.Helper()
	res, err := g.mod.ExportedFunction(name).Call(ctx, args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return uint32(res[0])
}

func (g *wasiGuest) write(t *testing.T, ptr uint32, b []byte) {
	t.Helper()
	if !g.mod.Memory().Write(ptr, b) {
		t.Fatalf("write %d bytes at %#x", len(b), ptr)
	}
}

func (g *wasiGuest) read(t *testing.T, ptr, n uint32) []byte {
	t.Helper()
	b, ok := g.mod.Memory().Read(ptr, n)
	if !ok {
		t.Fatalf("read %d bytes at %#x", n, ptr)
	}
	return bytes.Clone(b)
}

func (g *wasiGuest) uint32At(t *testing.T, ptr uint32) uint32 {
	t.Helper()
	return binary.LittleEndian.Uint32(g.read(t, ptr, 4))
}

// Where the stdio tests put things in a guest's memory.
const (
	iovsAt   = 0x100
	resultAt = 0x80
	dataAt   = 0x10000
)

// iov is an iovec.
type iov struct{ buf, len uint32 }

// writeIovecs writes vecs at iovsAt.
func (g *wasiGuest) writeIovecs(t *testing.T, vecs ...iov) {
	t.Helper()
	b := make([]byte, 0, len(vecs)*iovecSize)
	for _, v := range vecs {
		b = binary.LittleEndian.AppendUint32(b, v.buf)
		b = binary.LittleEndian.AppendUint32(b, v.len)
	}
	g.write(t, iovsAt, b)
}

// recorder is a writer that records what it is given, write by write, and
// may run a hook at each write.
type recorder struct {
	writes  [][]byte
	onWrite func()
}

func (r *recorder) Write(p []byte) (int, error) {
	r.writes = append(r.writes, bytes.Clone(p))
	if r.onWrite != nil {
		r.onWrite()
	}
	return len(p), nil
}

func (r *recorder) String() string { return string(bytes.Join(r.writes, nil)) }

func TestFdWriteWritesIovecsToStdoutAndStderr(t *testing.T) {
	g := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), "fd_write")
	g.write(t, dataAt, []byte("hello world\n"))
	g.writeIovecs(t, iov{dataAt, 6}, iov{dataAt + 100, 0}, iov{dataAt + 6, 6})
	var stdout, stderr recorder
	ctx := withStdio(t.Context(), &stdout, &stderr)
	for _, c := range []struct {
		fd   uint32
		want *recorder
	}{{fdStdout, &stdout}, {fdStderr, &stderr}} {
		g.write(t, resultAt, []byte{0xff, 0xff, 0xff, 0xff})
		if errno := g.call(t, ctx, "fd_write", uint64(c.fd), iovsAt, 3, resultAt); errno != errnoSuccess {
			t.Fatalf("fd %d: errno %d", c.fd, errno)
		}
		if got := g.uint32At(t, resultAt); got != 12 {
			t.Errorf("fd %d: nwritten %d, want 12", c.fd, got)
		}
		if got := c.want.String(); got != "hello world\n" {
			t.Errorf("fd %d wrote %q", c.fd, got)
		}
	}
	if len(stdout.writes) != 2 {
		t.Errorf("stdout got %d writes, want one per non-empty iovec: %q", len(stdout.writes), stdout.writes)
	}
	// Without a writer in the context, the text goes nowhere, all of it.
	if errno := g.call(t, t.Context(), "fd_write", fdStdout, iovsAt, 3, resultAt); errno != errnoSuccess || g.uint32At(t, resultAt) != 12 {
		t.Errorf("with no writer: errno %d, nwritten %d; want 0 and 12", errno, g.uint32At(t, resultAt))
	}
}

// TestFdWriteHandsTheWriterAChunkAtATime shows a long iovec reach the
// writer in writeChunk pieces, in order.
func TestFdWriteHandsTheWriterAChunkAtATime(t *testing.T) {
	g := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), "fd_write")
	data := bytes.Repeat([]byte("0123456789abcdef"), (2*writeChunk+100)/16)
	g.write(t, dataAt, data)
	g.writeIovecs(t, iov{dataAt, uint32(len(data))})
	var out recorder
	if errno := g.call(t, withStdio(t.Context(), &out, nil), "fd_write", fdStdout, iovsAt, 1, resultAt); errno != errnoSuccess {
		t.Fatalf("errno %d", errno)
	}
	if got := out.String(); got != string(data) || len(out.writes) != 3 {
		t.Errorf("%d bytes in %d writes, want %d in 3", len(got), len(out.writes), len(data))
	}
	for _, w := range out.writes {
		if len(w) > writeChunk {
			t.Errorf("a write of %d bytes, over writeChunk (%d)", len(w), writeChunk)
		}
	}
}

// TestFdWriteStopsWhenTheCallsContextEnds: the writer ends the call's
// context at its first write; fd_write, given 3 MiB to write, hands it no
// more and returns EINTR. wazero's would write it all: a host function is
// not interrupted by the call timeout.
func TestFdWriteStopsWhenTheCallsContextEnds(t *testing.T) {
	g := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), "fd_write")
	const size = 256 << 10
	g.writeIovecs(t, iov{dataAt, size}, iov{dataAt, size}, iov{dataAt, size})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := recorder{onWrite: cancel}
	g.write(t, resultAt, []byte{0xff, 0xff, 0xff, 0xff})
	errno := g.call(t, withStdio(ctx, &out, nil), "fd_write", fdStdout, iovsAt, 3, resultAt)
	if errno != errnoIntr {
		t.Errorf("errno %d, want EINTR (%d)", errno, errnoIntr)
	}
	if got := len(out.String()); got != writeChunk {
		t.Errorf("the writer got %d bytes after the context ended at the first write; want the one chunk of %d", got, writeChunk)
	}
	if got := g.uint32At(t, resultAt); got != math.MaxUint32 {
		t.Errorf("nwritten written (%d) by an interrupted call", got)
	}
}

// stdioFunctions are the functions that take iovecs, and the index of
// their result parameter.
var stdioFunctions = []struct {
	name   string
	result int
}{{"fd_write", 3}, {"fd_read", 3}, {"fd_pwrite", 4}, {"fd_pread", 4}}

// stdioArgs are the arguments of fn (one of stdioFunctions).
func stdioArgs(fn string, fd int32, iovs, n, result uint32) []uint64 {
	if fn == "fd_pread" || fn == "fd_pwrite" {
		return []uint64{uint64(uint32(fd)), uint64(iovs), uint64(n), 0, uint64(result)}
	}
	return []uint64{uint64(uint32(fd)), uint64(iovs), uint64(n), uint64(result)}
}

func TestFdCallsRefuseMoreThanIOVMaxIovecs(t *testing.T) {
	names := make([]string, len(stdioFunctions))
	for i, f := range stdioFunctions {
		names[i] = f.name
	}
	g := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), names...)
	// Empty iovecs, maxIovecs+1 of them, in memory never written (zero).
	const empty = 0x20000
	var out recorder
	ctx := withStdio(t.Context(), &out, &out)
	for _, f := range stdioFunctions {
		for _, fd := range []int32{fdStdin, fdStdout, fdStderr} {
			atMost := uint32(errnoSuccess)
			if f.name == "fd_write" && fd == fdStdin {
				atMost = errnoBadf // at the first iovec, empty or not
			}
			for _, c := range []struct {
				iovs, n uint32
				want    uint32
			}{
				{empty, maxIovecs, atMost},
				{empty, maxIovecs + 1, errnoInval},
				// Refused before the iovecs are read: they lie outside memory.
				{math.MaxUint32 - 8, maxIovecs + 1, errnoInval},
				{empty, 1 << 29, errnoInval},        // 2^32 bytes of iovecs: 0 in 32 bits
				{empty, 1<<29 + 1, errnoInval},      // 8 bytes in 32 bits
				{empty, math.MaxUint32, errnoInval}, // 2^32-8 bytes in 32 bits
			} {
				g.write(t, resultAt, []byte{0xff, 0xff, 0xff, 0xff})
				errno := g.call(t, ctx, f.name, stdioArgs(f.name, fd, c.iovs, c.n, resultAt)...)
				if errno != c.want {
					t.Errorf("%s(fd %d, %d iovecs at %#x): errno %d, want %d", f.name, fd, c.n, c.iovs, errno, c.want)
				}
				if got := g.uint32At(t, resultAt); c.want != errnoSuccess && got != math.MaxUint32 {
					t.Errorf("%s(fd %d, %d iovecs): a refused call wrote its result (%d)", f.name, fd, c.n, got)
				}
			}
		}
	}
	if len(out.writes) != 0 {
		t.Errorf("the writers were called %d times", len(out.writes))
	}
}

// stdioCase is a call of one of stdioFunctions, for
// TestStdioFunctionsAnswerAsWazerosDo.
type stdioCase struct {
	name   string
	fd     int32
	iovs   uint32 // where the iovecs are
	vecs   []iov  // written at iovsAt
	result uint32
}

func TestStdioFunctionsAnswerAsWazerosDo(t *testing.T) {
	const memSize = guestPages * 65536
	var cases []stdioCase
	for _, fd := range []int32{fdStdin, fdStdout, fdStderr, 3, -1, 1 << 20} {
		for _, vc := range []struct {
			name string
			iovs uint32
			vecs []iov
		}{
			{"no iovecs", iovsAt, nil},
			{"empty iovecs", iovsAt, []iov{{dataAt, 0}, {dataAt + 4, 0}}},
			{"text", iovsAt, []iov{{dataAt, 5}, {dataAt, 0}, {dataAt + 6, 6}}},
			{"empty then text", iovsAt, []iov{{dataAt, 0}, {dataAt + 6, 6}}},
			{"text outside memory", iovsAt, []iov{{dataAt, 5}, {memSize - 2, 3}}},
			{"text wrapping 2^32", iovsAt, []iov{{math.MaxUint32 - 1, 4}}},
			{"empty outside memory", iovsAt, []iov{{memSize + 1, 0}, {dataAt, 5}}},
			{"empty at the end", iovsAt, []iov{{memSize, 0}, {dataAt, 5}}},
			{"iovecs outside memory", memSize - 4, nil},
			{"iovecs wrapping 2^32", math.MaxUint32 - 3, nil},
		} {
			for _, f := range stdioFunctions {
				for _, result := range []uint32{resultAt, memSize - 3} {
					n := len(vc.vecs)
					if vc.iovs != iovsAt {
						n = 1
					}
					cases = append(cases, stdioCase{name: fmt.Sprintf("%s(fd %d, %s, %d iovecs, result at %#x)", f.name, fd, vc.name, n, result),
						fd: fd, iovs: vc.iovs, vecs: vc.vecs, result: result})
				}
			}
		}
	}
	type outcome struct {
		errno          uint32
		result         []byte
		stdout, stderr string
	}
	// agentrt's functions take their writers from the call's context,
	// wazero's from the module's configuration.
	names := make([]string, len(stdioFunctions))
	for i, f := range stdioFunctions {
		names[i] = f.name
	}
	var stdout, stderr bytes.Buffer
	ours := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), names...)
	theirs := newWASIGuest(t, wazeroWASI, wazero.NewModuleConfig().WithStdout(&stdout).WithStderr(&stderr), names...)
	run := func(g *wasiGuest, ctx context.Context, fn string, c stdioCase) outcome {
		stdout.Reset()
		stderr.Reset()
		g.write(t, dataAt, []byte("hello world\n"))
		g.writeIovecs(t, c.vecs...)
		g.write(t, resultAt, []byte{0xaa, 0xbb, 0xcc, 0xdd})
		n := uint32(len(c.vecs))
		if c.iovs != iovsAt {
			n = 1
		}
		errno := g.call(t, ctx, fn, stdioArgs(fn, c.fd, c.iovs, n, c.result)...)
		return outcome{errno, g.read(t, resultAt, 4), stdout.String(), stderr.String()}
	}
	for _, c := range cases {
		fn, _, _ := strings.Cut(c.name, "(")
		a := run(ours, withStdio(t.Context(), &stdout, &stderr), fn, c)
		b := run(theirs, t.Context(), fn, c)
		if a.errno != b.errno || !slices.Equal(a.result, b.result) || a.stdout != b.stdout || a.stderr != b.stderr {
			t.Errorf("%s: agentrt's %+v, wazero's %+v", c.name, a, b)
		}
	}
}
