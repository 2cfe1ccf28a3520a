package main

import (
	"math"
	"sync/atomic"
	"time"
)

// pacer spreads total events evenly over a span of time, shared by many
// goroutines: at elapsed time t, floor(total·t/span)+1 of them are due
// (the first at once, the last at the span's end), and take hands each
// out exactly once. A client that is behind catches up as fast as it
// goes; nothing is handed out beyond total.
type pacer struct {
	total  int64
	span   time.Duration
	issued atomic.Int64
}

func newPacer(total int64, span time.Duration) *pacer {
	return &pacer{total: max(total, 0), span: span}
}

// due is how many events are due by elapsed time t.
func (p *pacer) due(t time.Duration) int64 {
	if p.total == 0 {
		return 0
	}
	if t < 0 {
		t = 0
	}
	if p.span <= 0 || t >= p.span {
		return p.total
	}
	n := int64(math.Floor(float64(p.total)*float64(t)/float64(p.span))) + 1
	return min(n, p.total)
}

// take claims an event due by elapsed time t: false when every event due
// has been claimed.
func (p *pacer) take(t time.Duration) bool {
	due := p.due(t)
	for {
		n := p.issued.Load()
		if n >= due {
			return false
		}
		if p.issued.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// until is how long after elapsed time t the next unclaimed event falls
// due: 0 if one is due now, the span's length if none is left.
func (p *pacer) until(t time.Duration) time.Duration {
	n := p.issued.Load()
	if n >= p.total {
		return p.span
	}
	if n < p.due(t) {
		return 0
	}
	// Event n (0-based) is due from the time at which total·t/span
	// reaches n.
	at := time.Duration(math.Ceil(float64(n) * float64(p.span) / float64(p.total)))
	return max(at-t, time.Microsecond)
}
