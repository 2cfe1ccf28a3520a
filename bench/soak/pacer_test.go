package main

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Events fall due evenly: the first at once, half of them by half the
// span, all by its end, none beyond the total.
func TestPacerSpreadsEventsEvenly(t *testing.T) {
	p := newPacer(1000, 100*time.Second)
	for _, c := range []struct {
		at   time.Duration
		want int64
	}{
		{-time.Second, 1},
		{0, 1},
		{99 * time.Millisecond, 1},
		{100 * time.Millisecond, 2},
		{50 * time.Second, 501},
		{99*time.Second + 999*time.Millisecond, 1000},
		{100 * time.Second, 1000},
		{time.Hour, 1000},
	} {
		if got := p.due(c.at); got != c.want {
			t.Errorf("due at %v: %d, want %d", c.at, got, c.want)
		}
	}
	if got := newPacer(0, time.Minute).due(time.Hour); got != 0 {
		t.Errorf("a pacer of nothing has %d due", got)
	}
	if got := newPacer(7, 0).due(0); got != 7 {
		t.Errorf("a pacer over no time has %d of 7 due at once", got)
	}
}

// Clients taking at the same time get each due event once, never more.
func TestPacerHandsOutEachDueEventOnce(t *testing.T) {
	p := newPacer(1_000_000, time.Hour)
	at := 30 * time.Minute
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p.take(at) {
				taken.Add(1)
			}
		}()
	}
	wg.Wait()
	if want := p.due(at); taken.Load() != want {
		t.Errorf("taken %d, want the %d due", taken.Load(), want)
	}
	if p.take(at) {
		t.Error("took an event beyond those due")
	}
}

// until says when the next event falls due: then, and not before, take
// gives it.
func TestPacerUntilIsWhenTheNextFallsDue(t *testing.T) {
	p := newPacer(100, 10*time.Second) // one every 100 ms
	if got := p.until(0); got != 0 {
		t.Errorf("until at the start: %v, want 0 (the first is due at once)", got)
	}
	for p.take(250 * time.Millisecond) {
	}
	wait := p.until(250 * time.Millisecond)
	if wait != 50*time.Millisecond {
		t.Errorf("until at 250 ms with 3 taken: %v, want 50ms", wait)
	}
	if p.take(250*time.Millisecond + wait - time.Millisecond) {
		t.Error("an event was given before it fell due")
	}
	if !p.take(250*time.Millisecond + wait) {
		t.Error("no event given when until said one was due")
	}
	for p.take(time.Hour) {
	}
	if got := p.until(time.Hour); got != 10*time.Second {
		t.Errorf("until with none left: %v, want the span", got)
	}
}
