package main

import (
	"context"
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// gcPercent is the garbage collector's target when GOGC is not set. The
// live heap of a serving agentrt is a few MB (plugins' linear memories are
// mapped outside it, and SQLite's page cache too), so at Go's default of
// 100 the collector ran about 20 times a second under load; at 400 it
// runs a quarter as often, and the heap may grow to five times what is
// live (some 20 MB more when idle). Where memory is tight, GOMEMLIMIT
// bounds it.
const gcPercent = 400

// tuneRuntime sets the Go runtime up for serving; what the environment
// sets (GOGC, GOMAXPROCS) is left as it is.
//
// One P more than Go's default: the store's writer goroutine spends most
// of its time in fsync inside SQLite, and the runtime takes the P of a
// goroutine blocked in a system call back only at its next sysmon tick
// (20 µs to 10 ms later). Until then the goroutines that goroutine just
// woke, the answers to the last commit, wait on a P nobody runs. With one
// more P they are picked up at once. Setting GOMAXPROCS this way stops Go
// from following later changes of the container's CPU limit.
//
// Together the two raise create-task throughput by about 15% on the
// 2-core project machine (bench/README.md).
func tuneRuntime(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if getenv("GOMAXPROCS") == "" {
		goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(0) + 1)
	}
}

// Freed memory goes back to the system. A big call (a result or an input
// of megabytes, tables near their limit) leaves the heap holding far more
// than is live: its garbage waits for the next collection, which with
// GOGC=400 and a quiet server may be minutes away, and Go's scavenger
// returns free pages only slowly after that. Meanwhile the process holds
// gigabytes it does not use, and the next burst adds to them. So once a
// second, if the heap holds more than reclaimThreshold beyond what it held
// after the last reclaim (or its lowest since), agentrt collects and hands
// the memory back at once (debug.FreeOSMemory, twice: a few milliseconds
// with agentrt's live heap of a few MB). Under steady load the heap stays
// within its collection target (five times the live heap, some 30 MB),
// under the threshold, so this runs only after such calls.
const (
	reclaimEvery     = time.Second
	reclaimThreshold = 64 << 20
)

// reclaimMemory returns freed heap memory to the system until ctx is done,
// checking every interval whether the heap holds more than threshold bytes
// beyond its level after the last reclaim.
func reclaimMemory(ctx context.Context, every time.Duration, threshold uint64) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"}, // live and dead objects
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"}, // free, not yet returned
	}
	held := func() uint64 {
		metrics.Read(samples)
		var n uint64
		for _, s := range samples {
			n += s.Value.Uint64()
		}
		return n
	}
	base := held()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		switch now := held(); {
		case now > base+threshold:
			// Twice: buffers kept in sync.Pools (encoding/json keeps the
			// buffer of its largest recent answer) survive one collection
			// and go at the second.
			debug.FreeOSMemory()
			debug.FreeOSMemory()
			base = held()
		case now < base:
			base = now
		}
	}
}
