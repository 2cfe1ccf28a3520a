package runtime

import (
	"context"
	"encoding/binary"
	"math"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// instantiateWASI defines the wasi_snapshot_preview1 module in r: wazero's
// functions, except poll_oneoff, which is agentrt's own (see pollOneoff).
func instantiateWASI(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	// Exporting a name again replaces wazero's definition of it.
	i32 := api.ValueTypeI32
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(pollOneoff), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("in", "out", "nsubscriptions", "result.nevents").
		WithResultNames("errno").
		Export("poll_oneoff")
	_, err := b.Instantiate(ctx)
	return err
}

// WASI snapshot-1 numbers, as wazero's internal/wasip1 spells them.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoIntr    = 27
	errnoInval   = 28
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
//   - EINTR if the call's context ends during the sleep (with
//     WithCloseOnContextDone, wazero then closes the module).
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
// all of d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
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
