package protocol

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// idStep is how far an id made in the same 256 ns as the one before it
// runs ahead of the clock: the step of the sub-millisecond counter that
// keeps ids in creation order (github.com/google/uuid's NewV7). However
// fast the machine, n ids made from a moment the ids were not ahead of
// the clock run ahead of it by at most n steps.
const idStep = 256 * time.Nanosecond

// idMilli is the Unix time in milliseconds an id carries.
func idMilli(t *testing.T, id string) int64 {
	t.Helper()
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 || len(id) != 36 {
		t.Fatalf("%q is not a canonical UUIDv7 (%v)", id, err)
	}
	sec, nsec := u.Time().UnixTime()
	return sec*1000 + nsec/1e6
}

func TestNewIDsAreUUIDv7InCreationOrder(t *testing.T) {
	// Ids made before this test may still run ahead of the clock: wait
	// for the clock to catch up with them.
	deadline := time.Now().Add(time.Second)
	for idMilli(t, newID()) > time.Now().UnixMilli() {
		if time.Now().After(deadline) {
			t.Fatalf("new ids carry a time ahead of the clock for a second")
		}
		time.Sleep(time.Millisecond)
	}
	before := time.Now().UnixMilli()
	prev := ""
	seen := map[string]bool{}
	for i := range 20000 {
		id := newID()
		ms := idMilli(t, id)
		if id <= prev {
			t.Fatalf("%s made after %s sorts before it", id, prev)
		}
		if seen[id] {
			t.Fatalf("%s made twice", id)
		}
		seen[id] = true
		prev = id
		// +1: the ids were up to a millisecond ahead when the loop began.
		if latest := time.Now().Add(time.Duration(i+1)*idStep).UnixMilli() + 1; ms < before || ms > latest {
			t.Fatalf("id %d, %s, carries time %d, not between %d and %d (now, and how far %d ids made at once may run ahead of it)",
				i, id, ms, before, latest, i+1)
		}
	}
}
