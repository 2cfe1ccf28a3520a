package runtime

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"math"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// instantiateWASI defines the wasi_snapshot_preview1 module in r: wazero's
// functions, except those in ownWASI, which are agentrt's own.
//
// A host function cannot be interrupted by the call timeout: guest code is
// stopped only once the host function returns. So no WASI function may do
// work in proportion to a number the plugin chooses unless it checks the
// call's context as it goes. What each function wazero serves costs, for a
// plugin's sandbox (stdin, stdout and stderr on fds 0 to 2, no other fd, no
// preopened directory, socket, argument or environment variable):
//
//   - agentrt's own (ownWASI): fd_read, fd_write, fd_pread and fd_pwrite
//     walk at most maxIovecs iovecs, and fd_write hands the writer at most
//     writeChunk bytes at a time, checking the context between them;
//     random_get fills its buffer randomChunk bytes at a time, checking the
//     context between them; poll_oneoff walks at most maxSubscriptions
//     subscriptions and sleeps until the context ends; the path_* functions
//     answer from their fd alone, never reading the path (there is no
//     directory for a path to be in).
//   - args_get, args_sizes_get, environ_get, environ_sizes_get: there are
//     no arguments or variables; they write at most two numbers.
//   - clock_res_get, clock_time_get, proc_exit, proc_raise, sched_yield,
//     fd_fdstat_set_rights (unimplemented): constant work.
//   - fd_advise, fd_allocate, fd_close, fd_datasync, fd_fdstat_get,
//     fd_fdstat_set_flags, fd_filestat_get, fd_filestat_set_size,
//     fd_filestat_set_times, fd_renumber, fd_seek, fd_sync, fd_tell: one
//     fd looked up, at most 64 bytes written.
//   - fd_prestat_get, fd_prestat_dir_name: write at most the preopened
//     directory's name, which is empty; a longer path_len is refused with
//     ENAMETOOLONG, not filled.
//   - fd_readdir: no fd is a directory, so it answers EBADF (or EINVAL for
//     a buffer under 24 bytes) before it touches the buffer.
//   - sock_accept, sock_recv, sock_send, sock_shutdown: no fd is a socket,
//     so they answer EBADF (or ENOTSUP for flags) before reading an iovec.
func instantiateWASI(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	// Exporting a name again replaces wazero's definition of it.
	for _, f := range ownWASI {
		types := make([]api.ValueType, len(f.params))
		names := make([]string, len(f.params))
		for i, p := range f.params {
			types[i], names[i] = p.typ, p.name
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(f.fn, types, []api.ValueType{api.ValueTypeI32}).
			WithParameterNames(names...).
			WithResultNames("errno").
			Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// wasiFunction is a WASI function agentrt serves itself, with wazero's
// signature and parameter names.
type wasiFunction struct {
	name   string
	params []wasiParam
	fn     api.GoModuleFunc
}

type wasiParam struct {
	name string
	typ  api.ValueType
}

func i32(name string) wasiParam { return wasiParam{name, api.ValueTypeI32} }
func i64(name string) wasiParam { return wasiParam{name, api.ValueTypeI64} }

// ownWASI are the WASI functions that replace wazero's.
var ownWASI = []wasiFunction{
	{"poll_oneoff", []wasiParam{i32("in"), i32("out"), i32("nsubscriptions"), i32("result.nevents")}, pollOneoff},
	{"random_get", []wasiParam{i32("buf"), i32("buf_len")}, randomGet},
	{"fd_read", []wasiParam{i32("fd"), i32("iovs"), i32("iovs_len"), i32("result.nread")}, fdRead},
	{"fd_write", []wasiParam{i32("fd"), i32("iovs"), i32("iovs_len"), i32("result.nwritten")}, fdWrite},
	{"fd_pread", []wasiParam{i32("fd"), i32("iovs"), i32("iovs_len"), i64("offset"), i32("result.nread")}, fdPread},
	{"fd_pwrite", []wasiParam{i32("fd"), i32("iovs"), i32("iovs_len"), i64("offset"), i32("result.nwritten")}, fdPwrite},
	{"path_create_directory", []wasiParam{i32("fd"), i32("path"), i32("path_len")}, pathAt(0)},
	{"path_filestat_get", []wasiParam{i32("fd"), i32("flags"), i32("path"), i32("path_len"), i32("result.filestat")}, pathAt(0)},
	{"path_filestat_set_times", []wasiParam{i32("fd"), i32("flags"), i32("path"), i32("path_len"), i64("atim"), i64("mtim"), i32("fst_flags")}, pathFilestatSetTimes},
	{"path_link", []wasiParam{i32("old_fd"), i32("old_flags"), i32("old_path"), i32("old_path_len"), i32("new_fd"), i32("new_path"), i32("new_path_len")}, pathAt(0)},
	{"path_open", []wasiParam{i32("fd"), i32("dirflags"), i32("path"), i32("path_len"), i32("oflags"), i64("fs_rights_base"), i64("fs_rights_inheriting"), i32("fdflags"), i32("result.opened_fd")}, pathAt(0)},
	{"path_readlink", []wasiParam{i32("fd"), i32("path"), i32("path_len"), i32("buf"), i32("buf_len"), i32("result.bufused")}, pathReadlink},
	{"path_remove_directory", []wasiParam{i32("fd"), i32("path"), i32("path_len")}, pathAt(0)},
	{"path_rename", []wasiParam{i32("fd"), i32("old_path"), i32("old_path_len"), i32("new_fd"), i32("new_path"), i32("new_path_len")}, pathAt(0)},
	{"path_symlink", []wasiParam{i32("old_path"), i32("old_path_len"), i32("fd"), i32("new_path"), i32("new_path_len")}, pathAt(2)},
	{"path_unlink_file", []wasiParam{i32("fd"), i32("path"), i32("path_len")}, pathAt(0)},
}

// WASI snapshot-1 numbers, as wazero's internal/wasip1 spells them.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoIntr    = 27
	errnoInval   = 28
	errnoIo      = 29
	errnoNotdir  = 54
	errnoNotsup  = 58

	eventtypeClock   = 0
	eventtypeFdRead  = 1
	eventtypeFdWrite = 2

	clockRealtime   = 0
	clockMonotonic  = 1
	subclockAbstime = 1 // the only subclockflags bit

	fdStdin  = 0
	fdStdout = 1
	fdStderr = 2

	subscriptionSize = 48
	eventSize        = 32
)

// maxSubscriptions bounds one poll_oneoff call (EINVAL beyond), as
// RLIMIT_NOFILE bounds poll(2)'s nfds. A guest subscribes at most once per
// fd it holds, plus clocks, and a plugin holds three fds; the bound only
// keeps a hostile guest from making the host walk millions of
// subscriptions, twice, per call.
const maxSubscriptions = 4096

// pollOneoff is WASI's poll_oneoff(in, out, nsubscriptions, result_nevents)
// -> errno for a plugin's sandbox, which has an empty stdin, stdout and
// stderr, and no other fd. It replaces wazero's, which computes
// nsubscriptions*48 and nsubscriptions*32 in 32 bits: a count that wraps
// passes its bounds check and then panics indexing past the subscriptions,
// and its sleep, through the module's nanosleep, does not end when the
// call's context does.
//
// It returns, without writing anything:
//   - EINVAL if nsubscriptions is 0;
//   - EFAULT if the subscriptions, the events or result_nevents lie outside
//     memory (checked in 64 bits);
//   - EINVAL if nsubscriptions is over maxSubscriptions;
//   - for a subscription wazero refuses, what wazero returns: EINVAL for an
//     unknown event type or unknown clock flags, ENOTSUP for an absolute
//     clock timeout;
//   - EINTR if the call's context ends during the sleep (the call then
//     fails as stopped, whatever the plugin does next: interrupter).
//
// Otherwise it returns 0 with the events written:
//   - If any subscription is ready, at once and with only those: fd_read on
//     stdin (empty: error 0, nbytes 0), fd_write on stdout or stderr (error
//     ENOTSUP, as wazero reports them), any other fd subscription (error
//     EBADF), a clock other than realtime or monotonic (error EINVAL, as
//     clock_time_get answers for it).
//   - Otherwise, every subscription being a relative clock, it sleeps for
//     the shortest timeout, or until the call's context is done, and reports
//     the clocks whose timeout has passed (error 0). It sleeps on a host
//     timer, not through the module's nanosleep (WithNanosleep), which
//     cannot be interrupted.
//
// What it costs: two passes over at most maxSubscriptions subscriptions in
// the guest's memory, and a timer when it sleeps; it allocates nothing per
// subscription.
func pollOneoff(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = uint64(poll(ctx, mod.Memory(), uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])))
}

func poll(ctx context.Context, mem api.Memory, in, out, nsubscriptions, resultNevents uint32) uint32 {
	if nsubscriptions == 0 {
		return errnoInval
	}
	subs, inOK := guestBytes(mem, in, uint64(nsubscriptions)*subscriptionSize)
	events, outOK := guestBytes(mem, out, uint64(nsubscriptions)*eventSize)
	_, neventsOK := guestBytes(mem, resultNevents, 4)
	if !inOK || !outOK || !neventsOK {
		return errnoFault
	}
	if nsubscriptions > maxSubscriptions {
		return errnoInval
	}

	// First pass: refuse the call or find whether to wait, and how long,
	// writing nothing.
	anyReady := false
	var timeout uint64 = math.MaxUint64
	for i := range nsubscriptions {
		s, errno := readSubscription(subs[i*subscriptionSize:][:subscriptionSize])
		if errno != errnoSuccess {
			return errno
		}
		if s.ready {
			anyReady = true
		} else {
			timeout = min(timeout, s.timeout)
		}
	}
	var slept uint64
	if !anyReady {
		start := time.Now()
		if !sleep(ctx, time.Duration(min(timeout, math.MaxInt64))) {
			return errnoIntr
		}
		slept = uint64(time.Since(start))
	}

	// Second pass: write the events. out may overlap in: subscription i is
	// read whole before its event goes to slot nevents <= i, so a guest
	// that overlaps them gets garbage, but never more than nsubscriptions
	// events.
	var nevents uint32
	for i := range nsubscriptions {
		s, errno := readSubscription(subs[i*subscriptionSize:][:subscriptionSize])
		if errno != errnoSuccess || s.ready != anyReady || (!s.ready && s.timeout > slept) {
			continue
		}
		writeEvent(events[nevents*eventSize:][:eventSize], s)
		nevents++
	}
	if !mem.WriteUint32Le(resultNevents, nevents) {
		return errnoFault // checked above; memory does not shrink
	}
	return errnoSuccess
}

// subscription is what poll_oneoff makes of one subscription.
type subscription struct {
	userdata  uint64
	eventType byte
	// ready is true for an event reported without waiting: an fd event or
	// an error. Otherwise the subscription is a clock that fires after
	// timeout nanoseconds.
	ready   bool
	errno   uint16
	timeout uint64
}

// readSubscription reads the 48-byte subscription b: userdata u64 @0, tag
// u8 @8, and at 16 either a clock {id u32 @16, timeout u64 @24, precision
// u64 @32, flags u16 @40} or an fd {fd u32 @16}. A nonzero errno refuses
// the whole call.
func readSubscription(b []byte) (subscription, uint32) {
	s := subscription{userdata: binary.LittleEndian.Uint64(b[0:]), eventType: b[8]}
	switch s.eventType {
	case eventtypeClock:
		switch binary.LittleEndian.Uint16(b[40:]) {
		case 0: // relative: the only kind wazero supports
		case subclockAbstime:
			return s, errnoNotsup
		default:
			return s, errnoInval
		}
		switch binary.LittleEndian.Uint32(b[16:]) {
		case clockRealtime, clockMonotonic:
			// A relative timeout is the same on both (clock_settime(2)).
			s.timeout = binary.LittleEndian.Uint64(b[24:])
		default:
			s.ready, s.errno = true, errnoInval
		}
	case eventtypeFdRead:
		s.ready = true
		if binary.LittleEndian.Uint32(b[16:]) != fdStdin {
			s.errno = errnoBadf
		}
	case eventtypeFdWrite:
		s.ready = true
		switch binary.LittleEndian.Uint32(b[16:]) {
		case fdStdout, fdStderr:
			s.errno = errnoNotsup
		default:
			s.errno = errnoBadf
		}
	default:
		return s, errnoInval
	}
	return s, errnoSuccess
}

// writeEvent writes the 32-byte event b for s: userdata u64 @0, error u16
// @8, type u8 @10, and fd_readwrite {nbytes u64 @16, flags u16 @24}, left
// zero.
func writeEvent(b []byte, s subscription) {
	clear(b)
	binary.LittleEndian.PutUint64(b[0:], s.userdata)
	binary.LittleEndian.PutUint16(b[8:], s.errno)
	b[10] = s.eventType
}

// guestBytes is the n bytes of guest memory at ptr, or false if any of them
// lies outside it (or there is no memory). The sum is in 64 bits: ptr and n
// come from the guest, and in 32 bits they wrap.
func guestBytes(mem api.Memory, ptr uint32, n uint64) ([]byte, bool) {
	if mem == nil || uint64(ptr)+n > uint64(mem.Size()) {
		return nil, false
	}
	return mem.Read(ptr, uint32(n))
}

// sleep waits for d, or until ctx is done, and reports whether it waited
// all of d. While a snapshot is taken, it advances the construction's
// virtual clock by d at once.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	if c := constructionOf(ctx); c != nil {
		c.clock.elapsed += int64(d)
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// randomChunk is the most random_get fills between two looks at the call's
// context: under a millisecond of crypto/rand.
const randomChunk = 64 << 10

// randomGet is WASI's random_get(buf, buf_len) -> errno: it fills buf_len
// bytes at buf from crypto/rand. It replaces wazero's, which fills the
// whole buffer in one read that the call timeout cannot interrupt: 200 MiB
// took 3.5 s.
//
// It returns EFAULT, writing nothing, if the buffer lies outside memory;
// EINTR if the call's context ends before the buffer is full (what was
// filled stays); 0 otherwise. What it costs: the buffer's length in
// crypto/rand, randomChunk bytes at a time, with a look at the context
// between chunks; it allocates nothing.
func randomGet(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = uint64(fillRandom(ctx, mod.Memory(), uint32(stack[0]), uint32(stack[1])))
}

func fillRandom(ctx context.Context, mem api.Memory, buf, bufLen uint32) uint32 {
	b, ok := guestBytes(mem, buf, uint64(bufLen))
	if !ok {
		return errnoFault
	}
	if c := constructionOf(ctx); c != nil {
		return c.random(ctx, b) // while a snapshot is taken: kept, to find what it seeds
	}
	return fillRandomChunks(ctx, b)
}

// fillRandomChunks fills b from crypto/rand, randomChunk bytes at a time,
// and returns EINTR if ctx ends before it is full.
func fillRandomChunks(ctx context.Context, b []byte) uint32 {
	for len(b) > 0 {
		if ctx.Err() != nil {
			return errnoIntr
		}
		chunk := b[:min(len(b), randomChunk)]
		rand.Read(chunk) // never fails: crypto/rand crashes the program instead
		b = b[len(chunk):]
	}
	return errnoSuccess
}
