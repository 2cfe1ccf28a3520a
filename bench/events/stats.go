package main

import (
	"math"
	"slices"
	"time"
)

// quantileSorted is the q-quantile of sorted durations by nearest rank
// (the ceil(q·n)-th smallest), 0 for none.
func quantileSorted(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(1, min(rank, len(sorted)))-1]
}

// latencies summarises a sample of durations.
type latencies struct {
	n             int
	p50, p99, max time.Duration
}

// summarize sorts ds in place and summarises it.
func summarize(ds []time.Duration) latencies {
	slices.Sort(ds)
	l := latencies{n: len(ds), p50: quantileSorted(ds, 0.5), p99: quantileSorted(ds, 0.99)}
	if len(ds) > 0 {
		l.max = ds[len(ds)-1]
	}
	return l
}

// medianRange is the median of vs, and its smallest and largest; the
// median of an even count is the mean of the middle two. NaN for none.
func medianRange(vs []float64) (median, lo, hi float64) {
	if len(vs) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	median = s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return median, s[0], s[n-1]
}
