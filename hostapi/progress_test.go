package hostapi

import (
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

// TestProgressReachesTheHostWithinItsSizes: a report's message and
// output reach the host as given; one over either size, or outside the
// plugin's memory, is refused before the host sees a byte of it.
func TestProgressReachesTheHostWithinItsSizes(t *testing.T) {
	h := newFakeHost()
	g := newGuest(t, h, Config{})
	msg := g.put(0, "calling the model")
	if got := g.call("progress", 0, msg, 0, 0); got != 0 {
		t.Fatalf("progress = %d (%s)", got, g.lastError())
	}
	out := g.put(4096, "partial answer")
	if got := g.call("progress", 0, msg, 4096, out); got != 0 {
		t.Fatalf("progress with output = %d (%s)", got, g.lastError())
	}
	want := [][2]string{{"calling the model", ""}, {"calling the model", "partial answer"}}
	if len(h.progress) != 2 || h.progress[0] != want[0] || h.progress[1] != want[1] {
		t.Fatalf("reports %q, want %q", h.progress, want)
	}
	big := g.put(8192, strings.Repeat("x", abi.MaxProgressOutputBytes+1))
	g.wantErr(g.call("progress", 8192, abi.MaxProgressMessageBytes+1, 0, 0), abi.ErrLimit, "progress message of 1025 bytes")
	g.wantErr(g.call("progress", 0, msg, 8192, big), abi.ErrLimit, "progress output of 16385 bytes")
	for _, r := range badRanges {
		t.Run(r.name, func(t *testing.T) {
			g.wantErr(g.call("progress", r.ptr, r.len, 0, 0), abi.ErrFault, "outside")
			g.wantErr(g.call("progress", 0, msg, r.ptr, r.len), abi.ErrFault, "outside")
		})
	}
	if len(h.progress) != 2 {
		t.Errorf("refused reports reached the host: %q", h.progress[2:])
	}
}
