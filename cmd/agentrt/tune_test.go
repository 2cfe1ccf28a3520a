package main

import (
	"context"
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
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

// sink keeps allocations alive until a test drops them.
var sink [][]byte

func TestReclaimMemoryReturnsAHeapBurstToTheSystem(t *testing.T) {
	released := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); reclaimMemory(ctx, 10*time.Millisecond, 64<<20) }()
	defer func() { cancel(); <-done }()

	// A burst of 256 MiB, touched, then garbage.
	for range 256 {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = 1
		}
		sink = append(sink, b)
	}
	before := released()
	sink = nil
	deadline := time.Now().Add(10 * time.Second)
	for released() < before+192<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("a garbage heap of 256 MiB was not returned: %d MiB released since", (released()-before)>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
