package main

import (
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestTuneRuntimeAddsAPAndRaisesGOGCUnlessTheEnvironmentSetsThem(t *testing.T) {
	procs := goruntime.GOMAXPROCS(0)
	gc := debug.SetGCPercent(100)
	t.Cleanup(func() {
		goruntime.GOMAXPROCS(procs)
		debug.SetGCPercent(gc)
	})

	tuneRuntime(func(string) string { return "" })
	if got := goruntime.GOMAXPROCS(0); got != procs+1 {
		t.Errorf("GOMAXPROCS = %d, want %d", got, procs+1)
	}
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GC percent = %d, want %d", got, gcPercent)
	}

	goruntime.GOMAXPROCS(procs)
	set := map[string]string{"GOGC": "100", "GOMAXPROCS": "1"}
	tuneRuntime(func(k string) string { return set[k] })
	if got := goruntime.GOMAXPROCS(0); got != procs {
		t.Errorf("with GOMAXPROCS set, GOMAXPROCS changed to %d", got)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the GC percent changed to %d", got)
	}
}

func TestReclaimPolicyReclaimsWhenQuietAndBacksOffFromLiveMemory(t *testing.T) {
	const mb = 1 << 20
	p := reclaimPolicy{threshold: 64 * mb, floor: 10 * mb}
	gcs := uint64(0)
	steps := []struct {
		held, after uint64 // what the heap holds, and after a reclaim if one is due
		gc          bool   // a collection ran since the last look
		due         bool
	}{
		{held: 300 * mb, gc: true}, {held: 300 * mb, gc: true}, // busy: never
		{held: 300 * mb}, // quiet for one interval
		{held: 300 * mb, after: 8 * mb, due: true}, // quiet for two: given back
		{held: 40 * mb}, // quiet, under the threshold
		{held: 5 * mb},  // the floor follows the heap down
		{held: 68 * mb}, // 63 MB over the floor of 5: not yet
		{held: 300 * mb, after: 290 * mb, due: true}, // live after all: back off
		{held: 300 * mb}, {held: 300 * mb}, // ...for two intervals
		{held: 300 * mb, after: 290 * mb, due: true}, // still live: four
		{held: 300 * mb}, {held: 300 * mb}, {held: 300 * mb}, {held: 300 * mb},
		{held: 300 * mb, after: 9 * mb, due: true}, // the memory was freed: given back
		{held: 300 * mb, gc: true},                 // busy again
		{held: 300 * mb},
		{held: 300 * mb, after: 9 * mb, due: true}, // quiet again: given back at once
	}
	for i, st := range steps {
		if st.gc {
			gcs++
		}
		if due := p.due(st.held, gcs); due != st.due {
			t.Fatalf("step %d: holding %d MB (floor %d MB), due = %v, want %v", i, st.held/mb, p.floor/mb, due, st.due)
		}
		if st.due {
			gcs += 2 // the reclaim's own collections
			p.reclaimed(st.after, gcs)
		}
	}
	for range 20 { // live memory that stays: tried at most once a minute
		p.due(300*mb, gcs)
		p.reclaimed(290*mb, gcs)
	}
	if p.backoff != reclaimMaxWait {
		t.Errorf("backoff %d, want %d", p.backoff, reclaimMaxWait)
	}
}

// sink keeps allocations alive until a test drops them.
var sink [][]byte

func TestReclaimReturnsAHeapBurstToTheSystem(t *testing.T) {
	released := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	// What earlier tests left is not the floor.
	reclaim()
	held, gcs := heapStats()
	p := reclaimPolicy{threshold: 64 << 20, floor: held, gcs: gcs}
	// A burst of 256 MiB, touched, then garbage.
	for range 256 {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = 1
		}
		sink = append(sink, b)
	}
	sink = nil
	before := released()
	// The burst's own collections make the heap look busy; once it has
	// been quiet for reclaimQuiet looks, the reclaim is due.
	due := false
	for range reclaimQuiet + 1 {
		if held, gcs := heapStats(); p.due(held, gcs) {
			due = true
			break
		}
	}
	if !due {
		held, _ := heapStats()
		t.Fatalf("a heap of %d MiB, its floor %d MiB: no reclaim due", held>>20, p.floor>>20)
	}
	reclaim()
	if got := released() - before; got < 192<<20 {
		t.Errorf("a garbage heap of 256 MiB: %d MiB returned to the system", got>>20)
	}
}
