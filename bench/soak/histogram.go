package main

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// subBits sets a histogram's resolution: 2^subBits buckets an octave, so
// a bucket is at most 1/16 of its lower bound wide and a percentile read
// from its middle is within 1/32 (3.1%) of the value recorded.
const subBits = 4

// maxOctave is the largest octave kept: durations of 2^41 ns (36 minutes)
// and more fall in the last bucket.
const maxOctave = 41

const histBuckets = (maxOctave-subBits+1)<<subBits + 1<<subBits

// histogram counts durations in buckets that grow by octaves (an HDR
// histogram's layout): exact below 32 ns, then 16 buckets an octave. It
// is a value of 2.4 KB that costs nothing to allocate as it records, so
// one is kept for each route and each sample interval.
type histogram struct {
	counts [histBuckets]uint32
	n      uint64
}

// bucketOf is the bucket of a duration of v nanoseconds.
func bucketOf(v uint64) int {
	msb := bits.Len64(v) - 1
	if msb < subBits {
		return int(v)
	}
	if msb > maxOctave {
		return histBuckets - 1
	}
	shift := msb - subBits
	return (shift+1)<<subBits + int(v>>shift) - 1<<subBits
}

// bucketRange is the first value of bucket i and its width.
func bucketRange(i int) (lo, width uint64) {
	if i < 1<<subBits {
		return uint64(i), 1
	}
	shift := i>>subBits - 1
	m := uint64(i&(1<<subBits-1)) + 1<<subBits
	return m << shift, 1 << shift
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
}

// add adds o's counts to h.
func (h *histogram) add(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile is the q-quantile (0 < q ≤ 1) of the durations recorded, by
// nearest rank: the middle of the bucket holding the ceil(q·n)-th
// smallest. It is 0 when nothing was recorded.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(1, min(rank, h.n))
	var seen uint64
	for i, c := range h.counts {
		seen += uint64(c)
		if seen >= rank {
			lo, width := bucketRange(i)
			return time.Duration(lo + width/2)
		}
	}
	return 0 // not reached: the counts add up to n
}

// quantileSorted is the q-quantile of sorted durations by nearest rank
// (the ceil(q·n)-th smallest), 0 for none.
func quantileSorted(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(1, min(rank, len(sorted)))-1]
}

// quantiles sorts ds in place and returns its median and 99th percentile.
func quantiles(ds []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(ds)
	return quantileSorted(ds, 0.5), quantileSorted(ds, 0.99)
}
