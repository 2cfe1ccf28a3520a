package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A histogram's percentile is within its resolution (1/32) of the exact
// nearest-rank percentile, over durations from nanoseconds to minutes.
func TestHistogramQuantileIsWithinItsResolutionOfTheExactOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, spread := range []struct {
		name     string
		lo, span float64 // log10 of ns
	}{{"sub-microsecond", 0, 3}, {"milliseconds", 5, 2}, {"microseconds to minutes", 3, 8}} {
		t.Run(spread.name, func(t *testing.T) {
			var h histogram
			var all []time.Duration
			for range 20000 {
				d := time.Duration(math.Pow(10, spread.lo+spread.span*rng.Float64()))
				h.record(d)
				all = append(all, d)
			}
			slices.Sort(all)
			for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
				exact, got := quantileSorted(all, q), h.quantile(q)
				if diff := float64(got-exact) / float64(max(exact, 1)); diff > 1.0/32+1e-9 || diff < -1.0/32-1e-9 {
					if exact >= 32 || got != exact { // below 32 ns the buckets are exact
						t.Errorf("q=%v: histogram %v, exact %v (%.1f%% off)", q, got, exact, diff*100)
					}
				}
			}
		})
	}
}

// Every value falls in the bucket whose range holds it, and the buckets
// follow each other without gaps or overlaps.
func TestHistogramBucketsTileTheDurations(t *testing.T) {
	for i := 0; i+1 < histBuckets; i++ {
		lo, w := bucketRange(i)
		next, _ := bucketRange(i + 1)
		if lo+w != next {
			t.Fatalf("bucket %d is [%d, %d), bucket %d starts at %d", i, lo, lo+w, i+1, next)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		v := rng.Uint64N(1 << 41)
		i := bucketOf(v)
		lo, w := bucketRange(i)
		if v < lo || v >= lo+w {
			t.Fatalf("%d is in bucket %d, [%d, %d)", v, i, lo, lo+w)
		}
	}
	if got := bucketOf(1 << 62); got != histBuckets-1 {
		t.Errorf("a duration past the last octave is in bucket %d, want the last, %d", got, histBuckets-1)
	}
}

func TestHistogramAddMergesCounts(t *testing.T) {
	var a, b, both histogram
	for i := range 1000 {
		d := time.Duration(i) * time.Microsecond
		if i%3 == 0 {
			a.record(d)
		} else {
			b.record(d)
		}
		both.record(d)
	}
	a.add(&b)
	if a != both {
		t.Errorf("a + b differs from both recorded in one: n %d against %d", a.n, both.n)
	}
	var empty histogram
	if got := empty.quantile(0.99); got != 0 {
		t.Errorf("an empty histogram's p99 is %v, want 0", got)
	}
}

func TestQuantileSortedTakesTheNearestRank(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.51, 6}, {0.99, 10}, {0.1, 1}, {0.01, 1}, {1, 10}} {
		if got := quantileSorted(ds, c.q); got != c.want {
			t.Errorf("q=%v of 1..10: %v, want %v", c.q, got, c.want)
		}
	}
	if got := quantileSorted(nil, 0.5); got != 0 {
		t.Errorf("the median of nothing is %v, want 0", got)
	}
	p50, p99 := quantiles([]time.Duration{9, 1, 5})
	if p50 != 5 || p99 != 9 {
		t.Errorf("quantiles of 9, 1, 5: p50 %v, p99 %v; want 5 and 9", p50, p99)
	}
}
