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
// gigabytes it does not use, and the next burst adds to them.
//
// So once a second agentrt compares what the heap holds with the least it
// has held, and when it holds reclaimThreshold more, it collects and hands
// the memory back at once (debug.FreeOSMemory, twice: buffers kept in
// sync.Pools, encoding/json's of its largest recent answer among them,
// survive one collection). That takes a few milliseconds with agentrt's
// live heap of a few MB. If the memory was live after all (a call still
// running), it tries again after 2, 4, 8... seconds, up to a minute, so a
// server that really needs more memory does not collect every second.
// Under steady load the heap stays within its collection target (five
// times the live heap, some 30 MB), under the threshold, so this runs only
// after big calls.
const (
	reclaimEvery     = time.Second
	reclaimThreshold = 64 << 20
	reclaimMaxWait   = 64 // intervals
)

// reclaimPolicy decides when to hand freed heap memory back.
type reclaimPolicy struct {
	threshold uint64
	floor     uint64 // the least the heap has held
	wait      int    // intervals to let pass before trying again
	backoff   int
}

// due reports, given what the heap holds now, whether to reclaim.
func (p *reclaimPolicy) due(held uint64) bool {
	if held < p.floor {
		p.floor = held
	}
	if held <= p.floor+p.threshold {
		p.wait, p.backoff = 0, 0
		return false
	}
	if p.wait > 0 {
		p.wait--
		return false
	}
	return true
}

// reclaimed records what the heap held after a reclaim: if that is still
// far above its floor, the memory is live, and the next try waits longer.
func (p *reclaimPolicy) reclaimed(held uint64) {
	if held < p.floor {
		p.floor = held
	}
	if held > p.floor+p.threshold {
		p.backoff = min(max(2*p.backoff, 2), reclaimMaxWait)
		p.wait = p.backoff
	}
}

// heapHeld is what the heap holds: live and dead objects, and memory kept
// for them but not returned to the system.
func heapHeld() uint64 {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(samples)
	var n uint64
	for _, s := range samples {
		n += s.Value.Uint64()
	}
	return n
}

// reclaim collects and returns freed memory to the system.
func reclaim() {
	debug.FreeOSMemory()
	debug.FreeOSMemory()
}

// reclaimMemory returns freed heap memory to the system, as reclaimPolicy
// decides, every interval until ctx is done.
func reclaimMemory(ctx context.Context, every time.Duration, threshold uint64) {
	p := reclaimPolicy{threshold: threshold, floor: heapHeld()}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if p.due(heapHeld()) {
			reclaim()
			p.reclaimed(heapHeld())
		}
	}
}
