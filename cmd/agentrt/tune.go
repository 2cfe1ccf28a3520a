package main

import (
	goruntime "runtime"
	"runtime/debug"
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
