package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// pollerWasm is a guest module that exports a one-page memory and
// poll(in, out, nsubscriptions, result_nevents) -> errno, which calls
// wasi_snapshot_preview1.poll_oneoff with its arguments. In text form:
//
//	(module
//	  (type (func (param i32 i32 i32 i32) (result i32)))
//	  (import "wasi_snapshot_preview1" "poll_oneoff" (func (type 0)))
//	  (memory (export "memory") 1)
//	  (func (export "poll") (type 0)
//	    local.get 0 local.get 1 local.get 2 local.get 3 call 0))
func pollerWasm() []byte {
	const i32, funcType, funcKind, memKind = 0x7f, 0x60, 0x00, 0x02
	vec := func(items ...[]byte) []byte {
		b := []byte{byte(len(items))}
		for _, item := range items {
			b = append(b, item...)
		}
		return b
	}
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	section := func(id byte, contents []byte) []byte {
		return append([]byte{id, byte(len(contents))}, contents...)
	}
	join := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	body := []byte{0x00, 0x20, 0, 0x20, 1, 0x20, 2, 0x20, 3, 0x10, 0, 0x0b} // no locals; local.get 0-3; call 0; end
	return join(
		[]byte("\x00asm\x01\x00\x00\x00"),
		section(1, vec([]byte{funcType, 4, i32, i32, i32, i32, 1, i32})),
		section(2, vec(join(name(wasi_snapshot_preview1.ModuleName), name("poll_oneoff"), []byte{funcKind, 0}))),
		section(3, vec([]byte{0})),
		section(5, vec([]byte{0x00, 1})), // min 1 page, no max
		section(7, vec(join(name("memory"), []byte{memKind, 0}), join(name("poll"), []byte{funcKind, 1}))),
		section(10, vec(append([]byte{byte(len(body))}, body...))),
	)
}

// Where tests put things in the poller's memory.
const (
	subsAt    = 0
	eventsAt  = 4096
	neventsAt = 8192
	untouched = 0xdeadbeef // in result_nevents before a call that must not write it
)

// poller is an instance of pollerWasm.
type poller struct {
	mod  api.Module
	poll api.Function
}

// agentrtWASI and wazeroWASI define wasi_snapshot_preview1 in a runtime.
var (
	agentrtWASI = instantiateWASI
	wazeroWASI  = func(ctx context.Context, r wazero.Runtime) error {
		_, err := wasi_snapshot_preview1.Instantiate(ctx, r)
		return err
	}
)

// newPoller instantiates pollerWasm in a runtime of its own, without
// WithCloseOnContextDone, so a call returns the errno poll_oneoff returned
// even past its context's end.
func newPoller(t *testing.T, wasi func(context.Context, wazero.Runtime) error) *poller {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	if err := wasi(ctx, r); err != nil {
		t.Fatal(err)
	}
	mod, err := r.InstantiateWithConfig(ctx, pollerWasm(), wazero.NewModuleConfig().WithSysNanotime().WithSysWalltime())
	if err != nil {
		t.Fatal(err)
	}
	p := &poller{mod: mod, poll: mod.ExportedFunction("poll")}
	p.writeUint32(t, neventsAt, untouched)
	return p
}

// call calls poll_oneoff through the guest.
func (p *poller) call(ctx context.Context, in, out, nsubscriptions, resultNevents uint32) (uint32, error) {
	res, err := p.poll.Call(ctx, uint64(in), uint64(out), uint64(nsubscriptions), uint64(resultNevents))
	if err != nil {
		return 0, err
	}
	return uint32(res[0]), nil
}

// pollSubs writes subs at subsAt and polls them, events to eventsAt.
func (p *poller) pollSubs(t *testing.T, ctx context.Context, subs ...[]byte) uint32 {
	t.Helper()
	for i, s := range subs {
		if !p.mod.Memory().Write(subsAt+uint32(i*subscriptionSize), s) {
			t.Fatalf("write subscription %d", i)
		}
	}
	errno, err := p.call(ctx, subsAt, eventsAt, uint32(len(subs)), neventsAt)
	if err != nil {
		t.Fatalf("poll_oneoff: %v", err)
	}
	return errno
}

func (p *poller) writeUint32(t *testing.T, ptr, v uint32) {
	t.Helper()
	if !p.mod.Memory().WriteUint32Le(ptr, v) {
		t.Fatalf("write %#x", ptr)
	}
}

func (p *poller) nevents(t *testing.T) uint32 {
	t.Helper()
	n, ok := p.mod.Memory().ReadUint32Le(neventsAt)
	if !ok {
		t.Fatal("read result_nevents")
	}
	return n
}

// event is a poll_oneoff event as the guest reads it.
type event struct {
	userdata  uint64
	errno     uint16
	eventType byte
	nbytes    uint64
	flags     uint16
}

// events reads the events the last call reported.
func (p *poller) events(t *testing.T) []event {
	t.Helper()
	n := p.nevents(t)
	if n == untouched {
		t.Fatal("poll_oneoff did not write result_nevents")
	}
	b, ok := p.mod.Memory().Read(eventsAt, n*eventSize)
	if !ok {
		t.Fatalf("result_nevents is %d", n)
	}
	var evs []event
	for e := range n {
		b := b[e*eventSize:]
		evs = append(evs, event{
			userdata:  binary.LittleEndian.Uint64(b[0:]),
			errno:     binary.LittleEndian.Uint16(b[8:]),
			eventType: b[10],
			nbytes:    binary.LittleEndian.Uint64(b[16:]),
			flags:     binary.LittleEndian.Uint16(b[24:]),
		})
	}
	return evs
}

func clockSub(userdata uint64, id uint32, timeout time.Duration, flags uint16) []byte {
	b := make([]byte, subscriptionSize)
	binary.LittleEndian.PutUint64(b[0:], userdata)
	b[8] = eventtypeClock
	binary.LittleEndian.PutUint32(b[16:], id)
	binary.LittleEndian.PutUint64(b[24:], uint64(timeout))
	binary.LittleEndian.PutUint64(b[32:], 1000) // precision, ignored
	binary.LittleEndian.PutUint16(b[40:], flags)
	return b
}

func fdSub(userdata uint64, eventType byte, fd uint32) []byte {
	b := make([]byte, subscriptionSize)
	binary.LittleEndian.PutUint64(b[0:], userdata)
	b[8] = eventType
	binary.LittleEndian.PutUint32(b[16:], fd)
	return b
}

func sameEvents(got, want []event) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// wrappingCounts are subscription counts whose size, in 32 bits, wraps:
// 0x05555556*48 is 32 and 0xffffffff*48 is 2^32-48 (their event sizes do not
// wrap small, so wazero's own check catches them in a small memory), and
// 0x10000000 and 0x10000001 wrap both sizes to (0, 0) and (48, 32), which
// passes wazero's check.
var wrappingCounts = []uint32{0x05555556, 0xffffffff, 0x10000000, 0x10000001}

func TestPollOneoffRefusesWrappingCounts(t *testing.T) {
	p := newPoller(t, agentrtWASI)
	p.mod.Memory().Write(subsAt, clockSub(1, clockMonotonic, 0, 0))
	for _, n := range wrappingCounts {
		errno, err := p.call(t.Context(), subsAt, eventsAt, n, neventsAt)
		if err != nil {
			t.Fatalf("nsubscriptions %#x: %v", n, err)
		}
		if errno != errnoFault {
			t.Errorf("nsubscriptions %#x: errno %d, want EFAULT (%d)", n, errno, errnoFault)
		}
	}
	if got := p.nevents(t); got != untouched {
		t.Errorf("result_nevents = %#x; a refused call must not write it", got)
	}
}

// TestWazeroPollOneoffPanicsOnWrappingCounts is why pollOneoff exists:
// wazero's own poll_oneoff, given a count whose sizes wrap past its bounds
// check, indexes past the subscriptions and panics in the host.
func TestWazeroPollOneoffPanicsOnWrappingCounts(t *testing.T) {
	p := newPoller(t, wazeroWASI)
	p.mod.Memory().Write(subsAt, clockSub(1, clockMonotonic, 0, 0))
	for _, n := range []uint32{0x10000000, 0x10000001} {
		_, err := p.call(t.Context(), subsAt, eventsAt, n, neventsAt)
		if err == nil || !strings.Contains(err.Error(), "index out of range") {
			t.Errorf("wazero's poll_oneoff, nsubscriptions %#x: err %v, want a recovered index-out-of-range panic", n, err)
		}
	}
}

func TestPollOneoffFaultsOutsideMemory(t *testing.T) {
	const size = 65536 // the poller's one page
	for _, c := range []struct {
		name            string
		in, out, result uint32
		want            uint32
	}{
		{"subscription past the end", size - subscriptionSize + 1, eventsAt, neventsAt, errnoFault},
		{"subscription wrapping 2^32", math.MaxUint32 - subscriptionSize + 1, eventsAt, neventsAt, errnoFault},
		{"subscription at the end", size - subscriptionSize, eventsAt, neventsAt, errnoSuccess},
		{"event past the end", subsAt, size - eventSize + 1, neventsAt, errnoFault},
		{"event wrapping 2^32", subsAt, math.MaxUint32 - eventSize + 1, neventsAt, errnoFault},
		{"event at the end", subsAt, size - eventSize, neventsAt, errnoSuccess},
		{"result_nevents past the end", subsAt, eventsAt, size - 3, errnoFault},
		{"result_nevents wrapping 2^32", subsAt, eventsAt, math.MaxUint32 - 3, errnoFault},
		{"result_nevents at the end", subsAt, eventsAt, size - 4, errnoSuccess},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPoller(t, agentrtWASI)
			p.mod.Memory().Write(c.in, fdSub(1, eventtypeFdWrite, fdStdout))
			errno, err := p.call(t.Context(), c.in, c.out, 1, c.result)
			if err != nil {
				t.Fatal(err)
			}
			if errno != c.want {
				t.Errorf("errno %d, want %d", errno, c.want)
			}
		})
	}
	t.Run("no memory", func(t *testing.T) {
		if errno := poll(t.Context(), nil, 0, 0, 1, 0); errno != errnoFault {
			t.Errorf("errno %d, want EFAULT (%d)", errno, errnoFault)
		}
	})
}

func TestPollOneoffRefusesInvalidCalls(t *testing.T) {
	for _, c := range []struct {
		name string
		subs [][]byte
		want uint32
	}{
		{"no subscription", nil, errnoInval},
		{"absolute clock", [][]byte{clockSub(1, clockRealtime, time.Hour, subclockAbstime)}, errnoNotsup},
		{"unknown clock flags", [][]byte{clockSub(1, clockMonotonic, time.Hour, 2)}, errnoInval},
		{"unknown event type", [][]byte{fdSub(1, 3, fdStdin)}, errnoInval},
		{"one bad among good", [][]byte{fdSub(1, eventtypeFdWrite, fdStdout), fdSub(2, 9, fdStdin)}, errnoInval},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPoller(t, agentrtWASI)
			// A refused call returns at once; this bounds one that does not.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if errno := p.pollSubs(t, ctx, c.subs...); errno != c.want {
				t.Errorf("errno %d, want %d", errno, c.want)
			}
			if got := p.nevents(t); got != untouched {
				t.Errorf("result_nevents = %#x; a refused call must not write it", got)
			}
		})
	}
}

func TestPollOneoffBoundsSubscriptions(t *testing.T) {
	p := newPoller(t, agentrtWASI)
	if _, ok := p.mod.Memory().Grow(5); !ok { // 6 pages: room for maxSubscriptions+1 of each
		t.Fatal("grow memory")
	}
	const (
		events  = (maxSubscriptions + 1) * subscriptionSize
		nevents = events + (maxSubscriptions+1)*eventSize
	)
	for i := range uint32(maxSubscriptions + 1) {
		p.mod.Memory().Write(i*subscriptionSize, fdSub(uint64(i), eventtypeFdWrite, fdStderr))
	}
	p.writeUint32(t, nevents, untouched)
	errno, err := p.call(t.Context(), 0, events, maxSubscriptions+1, nevents)
	if err != nil || errno != errnoInval {
		t.Errorf("%d subscriptions: errno %d, err %v; want EINVAL (%d)", maxSubscriptions+1, errno, err, errnoInval)
	}
	errno, err = p.call(t.Context(), 0, events, maxSubscriptions, nevents)
	if err != nil || errno != errnoSuccess {
		t.Errorf("%d subscriptions: errno %d, err %v; want 0", maxSubscriptions, errno, err)
	}
	if got, _ := p.mod.Memory().ReadUint32Le(nevents); got != maxSubscriptions {
		t.Errorf("%d subscriptions: %d events", maxSubscriptions, got)
	}
}

func TestPollOneoffSleepsForRelativeClock(t *testing.T) {
	const timeout = 20 * time.Millisecond
	for _, id := range []uint32{clockRealtime, clockMonotonic} {
		p := newPoller(t, agentrtWASI)
		start := time.Now()
		errno := p.pollSubs(t, t.Context(), clockSub(0x1111, id, timeout, 0))
		if elapsed := time.Since(start); elapsed < timeout {
			t.Errorf("clock %d: slept %s, want at least %s", id, elapsed, timeout)
		}
		if errno != errnoSuccess {
			t.Errorf("clock %d: errno %d", id, errno)
		}
		if got, want := p.events(t), []event{{userdata: 0x1111, eventType: eventtypeClock}}; !sameEvents(got, want) {
			t.Errorf("clock %d: events %+v, want %+v", id, got, want)
		}
	}
}

func TestPollOneoffReportsOnlyExpiredClocks(t *testing.T) {
	p := newPoller(t, agentrtWASI)
	// Were it to wait for the hour, the context would end the call with
	// EINTR.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	errno := p.pollSubs(t, ctx, clockSub(1, clockMonotonic, time.Hour, 0), clockSub(2, clockRealtime, 20*time.Millisecond, 0))
	if elapsed := time.Since(start); elapsed < 20*time.Millisecond {
		t.Errorf("slept %s, want at least 20ms", elapsed)
	}
	if errno != errnoSuccess {
		t.Fatalf("errno %d", errno)
	}
	if got, want := p.events(t), []event{{userdata: 2, eventType: eventtypeClock}}; !sameEvents(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
}

func TestPollOneoffStopsSleepingAtDeadline(t *testing.T) {
	p := newPoller(t, agentrtWASI)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	errno := p.pollSubs(t, ctx, clockSub(1, clockMonotonic, time.Hour, 0))
	if elapsed := time.Since(start); elapsed > time.Minute { // an hour, were the deadline ignored
		t.Errorf("a 1h sleep under a 100ms deadline took %s", elapsed)
	}
	if errno != errnoIntr || ctx.Err() == nil {
		t.Errorf("errno %d, context %v; want EINTR (%d) after the deadline", errno, ctx.Err(), errnoIntr)
	}
	if got := p.nevents(t); got != untouched {
		t.Errorf("result_nevents = %#x; an interrupted call must not write it", got)
	}
}

// doneWatch is a context that closes watched when its Done channel is first
// asked for: poll_oneoff's sleep asks, and nothing else does in a runtime
// without WithCloseOnContextDone.
type doneWatch struct {
	context.Context
	watched chan struct{}
	once    sync.Once
}

func (c *doneWatch) Done() <-chan struct{} {
	c.once.Do(func() { close(c.watched) })
	return c.Context.Done()
}

func TestPollOneoffStopsSleepingOnCancel(t *testing.T) {
	p := newPoller(t, agentrtWASI)
	p.mod.Memory().Write(subsAt, clockSub(1, clockMonotonic, time.Hour, 0))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watch := &doneWatch{Context: ctx, watched: make(chan struct{})}
	type result struct {
		errno uint32
		err   error
	}
	done := make(chan result, 1)
	go func() {
		errno, err := p.call(watch, subsAt, eventsAt, 1, neventsAt)
		done <- result{errno, err}
	}()
	select {
	case <-watch.watched:
	case <-time.After(10 * time.Second):
		t.Fatal("poll_oneoff never waited on the context")
	}
	cancel()
	select {
	case r := <-done:
		if r.err != nil || r.errno != errnoIntr {
			t.Errorf("errno %d, err %v; want EINTR (%d)", r.errno, r.err, errnoIntr)
		}
	case <-time.After(time.Minute): // an hour, were the cancel ignored
		t.Fatal("cancelling the context did not end a 1h sleep")
	}
}

func TestPollOneoffReportsReadyFdsWithoutSleeping(t *testing.T) {
	p := newPoller(t, agentrtWASI)
	// Were it to wait for the hour, the context would end the call with
	// EINTR.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	errno := p.pollSubs(t, ctx,
		clockSub(1, clockMonotonic, time.Hour, 0),
		fdSub(2, eventtypeFdWrite, fdStdout),
		fdSub(3, eventtypeFdRead, fdStdin),
		fdSub(4, eventtypeFdWrite, fdStderr),
	)
	if errno != errnoSuccess {
		t.Fatalf("errno %d", errno)
	}
	want := []event{
		{userdata: 2, errno: errnoNotsup, eventType: eventtypeFdWrite}, // as wazero reports it
		{userdata: 3, eventType: eventtypeFdRead},
		{userdata: 4, errno: errnoNotsup, eventType: eventtypeFdWrite},
	}
	if got := p.events(t); !sameEvents(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
}

func TestPollOneoffReportsBadFdsAndClocks(t *testing.T) {
	p := newPoller(t, agentrtWASI)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	errno := p.pollSubs(t, ctx,
		clockSub(1, clockMonotonic, time.Hour, 0),
		fdSub(2, eventtypeFdRead, fdStdout),
		fdSub(3, eventtypeFdRead, 7),
		fdSub(4, eventtypeFdWrite, fdStdin),
		fdSub(5, eventtypeFdWrite, math.MaxUint32), // -1
		clockSub(6, 2, time.Hour, 0),               // process CPU time: clock_time_get refuses it too
	)
	if errno != errnoSuccess {
		t.Fatalf("errno %d", errno)
	}
	want := []event{
		{userdata: 2, errno: errnoBadf, eventType: eventtypeFdRead},
		{userdata: 3, errno: errnoBadf, eventType: eventtypeFdRead},
		{userdata: 4, errno: errnoBadf, eventType: eventtypeFdWrite},
		{userdata: 5, errno: errnoBadf, eventType: eventtypeFdWrite},
		{userdata: 6, errno: errnoInval, eventType: eventtypeClock},
	}
	if got := p.events(t); !sameEvents(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
}

func TestInstantiateWASIKeepsWazeroFunctions(t *testing.T) {
	ctx := t.Context()
	defs := func(wasi func(context.Context, wazero.Runtime) error) map[string]api.FunctionDefinition {
		r := wazero.NewRuntime(ctx)
		t.Cleanup(func() { r.Close(context.Background()) })
		if err := wasi(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions()
	}
	ours, theirs := defs(agentrtWASI), defs(wazeroWASI)
	if len(ours) != len(theirs) {
		t.Errorf("%d functions, wazero's WASI has %d", len(ours), len(theirs))
	}
	for name, want := range theirs {
		got := ours[name]
		if got == nil {
			t.Errorf("no %s", name)
		} else if !sameSignature(got, want) {
			t.Errorf("%s: signature %s, want %s", name, signature(got), signature(want))
		} else if !slices.Equal(got.ParamNames(), want.ParamNames()) || !slices.Equal(got.ResultNames(), want.ResultNames()) {
			t.Errorf("%s: parameters %v -> %v, want %v -> %v", name, got.ParamNames(), got.ResultNames(), want.ParamNames(), want.ResultNames())
		}
	}
	for _, f := range ownWASI {
		if theirs[f.name] == nil {
			t.Errorf("agentrt serves %s, which wazero does not", f.name)
		}
	}
}

// TestWASIServesGoGuestSleep runs a real Go guest (testdata/sleeper), whose
// runtime sleeps through poll_oneoff, on instantiateWASI, in a fresh
// instance per call as Plugin does.
func TestWASIServesGoGuestSleep(t *testing.T) {
	wasm := buildSleeper(t)
	ctx := t.Context()
	// Count the guest's poll_oneoff calls: a poll_oneoff that returned
	// without sleeping would also make time.Sleep take its time, spinning.
	var polls atomic.Int64
	countPolls := experimental.WithFunctionListenerFactory(ctx, experimental.FunctionListenerFactoryFunc(
		func(def api.FunctionDefinition) experimental.FunctionListener {
			if def.Name() != "poll_oneoff" {
				return nil
			}
			return experimental.FunctionListenerFunc(func(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {
				polls.Add(1)
			})
		}))
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer r.Close(context.Background())
	if err := instantiateWASI(countPolls, r); err != nil {
		t.Fatal(err)
	}
	compiled, err := r.CompileModule(countPolls, wasm)
	if err != nil {
		t.Fatal(err)
	}
	cfg := wazero.NewModuleConfig().WithName("").WithSysNanotime().WithSysWalltime().WithStartFunctions("_initialize")
	sleepMs := func(t *testing.T, ctx context.Context, ms int32) (time.Duration, error) {
		t.Helper()
		mod, err := r.InstantiateModule(context.Background(), compiled, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer mod.Close(context.Background())
		start := time.Now()
		res, err := mod.ExportedFunction("sleep_ms").Call(ctx, uint64(ms))
		if err == nil && int32(res[0]) != 0 {
			t.Errorf("sleep_ms returned %d", int32(res[0]))
		}
		return time.Since(start), err
	}

	t.Run("sleeps", func(t *testing.T) {
		elapsed, err := sleepMs(t, ctx, 30)
		if err != nil {
			t.Fatal(err)
		}
		if elapsed < 30*time.Millisecond {
			t.Errorf("sleep_ms(30) took %s", elapsed)
		}
		if n := polls.Load(); n == 0 || n > 20 {
			t.Errorf("sleep_ms(30) called poll_oneoff %d times; want a few sleeps", n)
		}
	})
	t.Run("stops at deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		elapsed, err := sleepMs(t, ctx, int32(time.Hour/time.Millisecond))
		var exit *sys.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded {
			t.Errorf("a 1h sleep under a 200ms deadline: err %v, want exit code %d", err, sys.ExitCodeDeadlineExceeded)
		}
		if elapsed > time.Minute { // an hour, were the deadline ignored
			t.Errorf("a 1h sleep under a 200ms deadline took %s", elapsed)
		}
	})
}

// buildSleeper builds testdata/sleeper, skipping the test if this go
// cannot build for wasip1.
func buildSleeper(t *testing.T) []byte {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	if out, err := exec.Command(goTool, "tool", "dist", "list").Output(); err != nil || !strings.Contains(string(out), "wasip1/wasm") {
		t.Skip("go cannot build for wasip1")
	}
	out := filepath.Join(t.TempDir(), "sleeper.wasm")
	cmd := exec.Command(goTool, "build", "-buildmode=c-shared", "-o", out, "./testdata/sleeper")
	cmd.Env = append(cmd.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/sleeper: %v\n%s", err, b)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

func TestRandomGetFillsItsBufferFromCryptoRand(t *testing.T) {
	g := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), "random_get")
	const at, size = 0x1000, 3*randomChunk + 100
	var fills [][]byte
	for range 2 {
		if errno := g.call(t, t.Context(), "random_get", at, size); errno != errnoSuccess {
			t.Fatalf("errno %d", errno)
		}
		fills = append(fills, g.read(t, at, size))
	}
	for i, b := range fills {
		// Each chunk's last 64 bytes are all zero once in 2^512 times.
		for c := 0; c < size; c += randomChunk {
			if end := min(c+randomChunk, size); bytes.Count(b[end-64:end], []byte{0}) == 64 {
				t.Errorf("fill %d: bytes %d to %d are zero", i, end-64, end)
			}
		}
	}
	if bytes.Equal(fills[0], fills[1]) {
		t.Error("two fills are the same")
	}
	if got := g.read(t, at+size, 16); !bytes.Equal(got, make([]byte, 16)) {
		t.Errorf("bytes past the buffer written: %x", got)
	}
}

func TestRandomGetFaultsOutsideMemory(t *testing.T) {
	const size = guestPages * 65536
	g := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), "random_get")
	for _, c := range []struct{ buf, n uint32 }{
		{size - 4, 5}, {size + 1, 0}, {math.MaxUint32, 2}, {0, math.MaxUint32}, {16, size},
	} {
		if errno := g.call(t, t.Context(), "random_get", uint64(c.buf), uint64(c.n)); errno != errnoFault {
			t.Errorf("random_get(%#x, %#x): errno %d, want EFAULT (%d)", c.buf, c.n, errno, errnoFault)
		}
	}
	if got := g.read(t, 0, size); !bytes.Equal(got, make([]byte, size)) {
		t.Error("a refused random_get wrote to memory")
	}
	for _, c := range []struct{ buf, n uint32 }{{size - 4, 4}, {size, 0}, {0, size}} {
		if errno := g.call(t, t.Context(), "random_get", uint64(c.buf), uint64(c.n)); errno != errnoSuccess {
			t.Errorf("random_get(%#x, %#x): errno %d", c.buf, c.n, errno)
		}
	}
}

// doneAfter is a context whose Err reports it cancelled once Err has been
// asked n times: it ends at a point of a host function's work that a test
// chooses, however fast that work is.
type doneAfter struct {
	context.Context
	n int
}

func (c *doneAfter) Err() error {
	if c.n == 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

// TestRandomGetStopsWhenTheCallsContextEnds: the call's context ends after
// random_get has filled its first chunk; it fills no more and returns
// EINTR. wazero's fills its whole buffer in one read (200 MiB: 3.5 s the
// call timeout cannot interrupt).
func TestRandomGetStopsWhenTheCallsContextEnds(t *testing.T) {
	g := newWASIGuest(t, agentrtWASI, wazero.NewModuleConfig(), "random_get")
	const size = 4 * randomChunk
	mem := g.mod.Memory()
	if errno := fillRandom(&doneAfter{Context: t.Context(), n: 1}, mem, 0, size); errno != errnoIntr {
		t.Errorf("errno %d, want EINTR (%d)", errno, errnoIntr)
	}
	b := g.read(t, 0, size)
	if bytes.Count(b[randomChunk-64:randomChunk], []byte{0}) == 64 {
		t.Error("the first chunk was not filled")
	}
	if !bytes.Equal(b[randomChunk:], make([]byte, size-randomChunk)) {
		t.Errorf("random_get filled %d bytes past its first chunk after the context ended", size-randomChunk-bytes.Count(b[randomChunk:], []byte{0}))
	}
	// Through the guest, under a context already ended: nothing at all.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if errno := g.call(t, ctx, "random_get", size, size); errno != errnoIntr {
		t.Errorf("under an ended context: errno %d, want EINTR (%d)", errno, errnoIntr)
	}
	if !bytes.Equal(g.read(t, size, size), make([]byte, size)) {
		t.Error("under an ended context, random_get wrote to memory")
	}
}
