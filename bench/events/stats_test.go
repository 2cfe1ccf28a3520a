package main

import (
	"math"
	"testing"
	"time"
)

func TestQuantilesAreTheNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond // unsorted: summarize sorts
	}
	tests := []struct {
		name string
		in   []time.Duration
		want latencies
	}{
		{"none", nil, latencies{}},
		{"one", []time.Duration{5}, latencies{n: 1, p50: 5, p99: 5, max: 5}},
		{"two: the median is the lower", []time.Duration{9, 1}, latencies{n: 2, p50: 1, p99: 9, max: 9}},
		{"a hundred: p99 is the 99th", hundred, latencies{n: 100, p50: 50 * time.Millisecond, p99: 99 * time.Millisecond, max: 100 * time.Millisecond}},
	}
	for _, tt := range tests {
		if got := summarize(tt.in); got != tt.want {
			t.Errorf("%s: summarize = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestAMedianOfRatiosHasItsRange(t *testing.T) {
	tests := []struct {
		in          []float64
		med, lo, hi float64
	}{
		{[]float64{0.9}, 0.9, 0.9, 0.9},
		{[]float64{1.2, 0.8, 1.0}, 1.0, 0.8, 1.2},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.in...)
		med, lo, hi := medianRange(tt.in)
		if med != tt.med || lo != tt.lo || hi != tt.hi {
			t.Errorf("medianRange(%v) = %v (%v–%v), want %v (%v–%v)", in, med, lo, hi, tt.med, tt.lo, tt.hi)
		}
		for i := range in {
			if in[i] != tt.in[i] {
				t.Errorf("medianRange reordered its argument: %v, was %v", tt.in, in)
				break
			}
		}
	}
	if med, _, _ := medianRange(nil); !math.IsNaN(med) {
		t.Errorf("medianRange(nil) = %v, want NaN", med)
	}
}

func TestRatiosPairModesOfTheSameRound(t *testing.T) {
	runs := []stepsRun{
		{mode: modeSync, round: 1, steps: 100, span: time.Second},
		{mode: modeAsync, round: 1, steps: 90, span: time.Second},
		{mode: modeAsync, round: 2, steps: 50, span: time.Second},
		{mode: modeSync, round: 2, steps: 200, span: time.Second},
		{mode: modeAsync, round: 3, steps: 70, span: time.Second}, // no sync in round 3
	}
	got := stepRatios(runs, modeAsync, modeSync, stepsRun.perSecond)
	want := []float64{0.9, 0.25}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("stepRatios = %v, want %v", got, want)
	}
}

func TestEachRoundTurnsTheOrder(t *testing.T) {
	modes := []string{"a", "b", "c"}
	for r, want := range []string{"abc", "bca", "cab", "abc"} {
		got := ""
		for _, m := range turn(modes, r) {
			got += m
		}
		if got != want {
			t.Errorf("round %d: %s, want %s", r, got, want)
		}
	}
	if len(modes) != 3 || modes[0] != "a" {
		t.Errorf("turn changed its argument: %v", modes)
	}
}
