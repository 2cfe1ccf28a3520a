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

// cpus is the CPUs this process may use (GOMAXPROCS as Go sets it from the
// machine, the container's limit or the environment), taken before
// tuneRuntime adds a P: the defaults that follow the CPUs follow this.
var cpus = goruntime.GOMAXPROCS(0)

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
// than is live. While the server is busy, collections follow one another
// and Go's scavenger returns what the heap no longer needs. But once it is
// quiet, the garbage of the last calls waits for a collection that, with
// GOGC=400 and nothing allocating, may be minutes away, and the process
// holds gigabytes it does not use; the next burst adds to them.
//
// So once a second agentrt looks at the heap, and when no collection has
// run for reclaimQuiet and the heap holds reclaimThreshold more than the
// least it has held, it collects and hands the memory back at once
// (debug.FreeOSMemory, twice: buffers kept in sync.Pools, encoding/json's
// of its largest recent answer among them, survive one collection). That
// takes a few milliseconds with agentrt's live heap of a few MB, and never
// runs under load, where it would only make the allocator fault its pages
// in again. If the memory was live after all, it tries again after 2, 4,
// 8... seconds, up to a minute.
const (
	reclaimEvery     = time.Second
	reclaimQuiet     = 2 // intervals without a collection
	reclaimThreshold = 64 << 20
	reclaimMaxWait   = 64 // intervals
)

// reclaimPolicy decides when to hand freed heap memory back.
type reclaimPolicy struct {
	threshold uint64
	floor     uint64 // the least the heap has held
	gcs       uint64 // collections so far, at the last look
	quiet     int    // intervals since a collection ran
	wait      int    // intervals to let pass before trying again
	backoff   int
}

// due reports, given what the heap holds now and how many collections have
// run so far, whether to reclaim.
func (p *reclaimPolicy) due(held, gcs uint64) bool {
	if held < p.floor {
		p.floor = held
	}
	if gcs != p.gcs {
		p.gcs, p.quiet = gcs, 0
		return false // busy: the runtime gives memory back itself
	}
	if p.quiet++; p.quiet < reclaimQuiet {
		return false
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

// reclaimed records the heap after a reclaim: if it still holds far more
// than its floor, the memory is live, and the next try waits longer.
func (p *reclaimPolicy) reclaimed(held, gcs uint64) {
	p.gcs = gcs // its own collections are not the server being busy
	if held < p.floor {
		p.floor = held
	}
	if held > p.floor+p.threshold {
		p.backoff = min(max(2*p.backoff, 2), reclaimMaxWait)
		p.wait = p.backoff
	}
}

// heapStats is what the heap holds (live and dead objects, and memory kept
// for them but not returned to the system) and the collections so far.
func heapStats() (held, gcs uint64) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(samples)
	for _, s := range samples[:3] {
		held += s.Value.Uint64()
	}
	return held, samples[3].Value.Uint64()
}

// reclaim collects and returns freed memory to the system.
func reclaim() {
	debug.FreeOSMemory()
	debug.FreeOSMemory()
}

// reclaimMemory returns freed heap memory to the system, as reclaimPolicy
// decides, every interval until ctx is done.
func reclaimMemory(ctx context.Context, every time.Duration, threshold uint64) {
	// What compiling the plugins left is garbage: freed first, it is not
	// taken for the floor (measured: 20 Go plugins compiled cold kept
	// 300 MB more than the same loaded from the cache, for good).
	reclaim()
	held, gcs := heapStats()
	p := reclaimPolicy{threshold: threshold, floor: held, gcs: gcs}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if p.due(heapStats()) {
			reclaim()
			p.reclaimed(heapStats())
		}
	}
}
