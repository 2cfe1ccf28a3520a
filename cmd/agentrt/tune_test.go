package main

import (
	goruntime "runtime"
	"runtime/debug"
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
