package main

import (
	"math"
	"testing"
	"time"
)

// samplesEvery makes n samples interval apart (with the ticker's jitter),
// of growing memory, each with one request of route 0 whose latency is
// its index in milliseconds.
func samplesEvery(n int, interval time.Duration, rss func(i int) uint64) []sample {
	var ss []sample
	for i := 1; i <= n; i++ {
		s := sample{at: time.Duration(i)*interval + time.Millisecond, span: interval}
		s.status.VmRSS = rss(i)
		s.hists[0].record(time.Duration(i) * time.Millisecond)
		ss = append(ss, s)
	}
	return ss
}

func TestAnalyseTakesTheBaselineAfterTheWarmUpAndTheWindows(t *testing.T) {
	// 12 samples of 10 s: 2 minutes; warm-up 30 s; windows of a minute.
	ss := samplesEvery(12, 10*time.Second, func(i int) uint64 { return uint64(100 + i) })
	ss[9].status.VmRSS = 130 // the peak, at 100 s
	a := analyse(ss, 30*time.Second, time.Minute, 10*time.Second)
	if a.baseline != 2 {
		t.Fatalf("baseline: sample %d, want 2 (the one at 30 s)", a.baseline)
	}
	if want := 130.0 / 103; math.Abs(a.rssMax-want) > 1e-9 || a.rssMaxAt != 100*time.Second+time.Millisecond {
		t.Errorf("max: %.3f at %v, want %.3f at 100 s", a.rssMax, a.rssMaxAt, want)
	}
	if want := 112.0 / 103; math.Abs(a.rssLast-want) > 1e-9 {
		t.Errorf("last: %.3f, want %.3f", a.rssLast, want)
	}
	if !a.windowsFound {
		t.Fatal("no windows found")
	}
	// The first window covers 30–90 s: the samples at 40 to 90 s, whose
	// latencies are 4 to 9 ms; the last covers 60–120 s: 7 to 12 ms.
	if a.first[0].n != 6 || a.last[0].n != 6 {
		t.Errorf("windows of %d and %d samples, want 6 and 6", a.first[0].n, a.last[0].n)
	}
	if lo := a.first[0].quantile(0.01); lo < 4*time.Millisecond*31/32 || lo > 4*time.Millisecond*33/32 {
		t.Errorf("the first window starts at a latency of %v, want 4 ms", lo)
	}
	if hi := a.last[0].quantile(1); hi < 12*time.Millisecond*31/32 || hi > 12*time.Millisecond*33/32 {
		t.Errorf("the last window ends at a latency of %v, want 12 ms", hi)
	}
}

func TestAnalyseWithoutASampleAfterTheWarmUp(t *testing.T) {
	ss := samplesEvery(3, 10*time.Second, func(int) uint64 { return 100 })
	a := analyse(ss, time.Minute, time.Minute, 10*time.Second)
	if a.baseline != -1 || a.windowsFound {
		t.Errorf("a run shorter than its warm-up: baseline %d, windows %v; want -1, none", a.baseline, a.windowsFound)
	}
}
