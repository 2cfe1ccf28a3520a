package protocol

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestNewIDsAreUUIDv7InCreationOrder(t *testing.T) {
	before := time.Now().UnixMilli()
	prev := ""
	seen := map[string]bool{}
	for range 20000 {
		id := newID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 || len(id) != 36 {
			t.Fatalf("%q is not a canonical UUIDv7 (%v)", id, err)
		}
		if id <= prev {
			t.Fatalf("%s made after %s sorts before it", id, prev)
		}
		if seen[id] {
			t.Fatalf("%s made twice", id)
		}
		seen[id] = true
		prev = id
		sec, nsec := u.Time().UnixTime()
		if ms := sec*1000 + nsec/1e6; ms < before || ms > time.Now().UnixMilli()+1 { // +1: ids made faster than the clock ticks run ahead of it
			t.Fatalf("%s carries time %d, not between %d and now", id, ms, before)
		}
	}
}
