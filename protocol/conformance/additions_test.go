package conformance

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A server without agentrt's additions (any other Agent Protocol server)
// has their checks skipped, each saying what it lacks, and fails none.
func TestChecksOfAgentrtsAdditionsAreSkippedByAServerWithoutThem(t *testing.T) {
	r := runAgainst(t, newFakeServer(breaks{noAdditions: true}), 5*time.Second)
	var added []string
	for _, c := range Checks() {
		if c.Level == LevelAdded {
			added = append(added, c.ID)
		}
	}
	slices.Sort(added)
	if got := withStatus(r, StatusSkip); len(added) != 4 || !slices.Equal(got, added) {
		t.Errorf("skipped %q, want the additions' checks %q", got, added)
	}
	if r.Failed != 0 {
		t.Errorf("failed %q, want none", withStatus(r, StatusFail))
	}
	for _, res := range r.Results {
		if res.Status == StatusSkip && !strings.HasPrefix(res.Message, "needs a server with agentrt's additions (") {
			t.Errorf("%s skipped saying %q, want it to say what the server lacks", res.ID, res.Message)
		}
	}
}
