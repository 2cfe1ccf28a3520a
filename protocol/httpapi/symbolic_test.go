package httpapi

import (
	"net/http/httptest"
	"testing"
)

// Each object's symbols are distinct, however they are written.
func TestEverySymbolOfAnObjectIsItsOwn(t *testing.T) {
	for name, syms := range map[string][]symbol{"task": taskSymbols, "step": stepSymbols, "artifact": artifactSymbols,
		"list": listSymbols, "page": pageSymbols, "error": errorSymbols} {
		seen := map[string]string{}
		for _, s := range syms {
			n := normalSymbol(s.sym)
			if n == "" {
				t.Errorf("%s: the symbol of %s is empty once normalised", name, s.plain)
			}
			if other, ok := seen[n]; ok {
				t.Errorf("%s: %s and %s share the symbol %s", name, other, s.plain, s.sym)
			}
			seen[n] = s.plain
		}
	}
}

func TestASymbolIsMatchedWhicheverWayItsEmojiIsWritten(t *testing.T) {
	for _, key := range []string{"🚶", "🚶♂️", "🚶\u200d♂️", "🚶\u200d♀\ufe0f", "🚶🏽\u200d♀️"} {
		if got := plainName(taskSymbols, key); got != "steps" {
			t.Errorf("%q is %q, want steps", key, got)
		}
	}
	for _, key := range []string{"🏷️", "🏷"} {
		if got := plainName(taskSymbols, key); got != "title" {
			t.Errorf("%q is %q, want title", key, got)
		}
	}
	for _, key := range []string{"", "title", "🚶🚶", "♂️"} {
		if got := plainName(taskSymbols, key); got != "" {
			t.Errorf("%q is %q, want no field", key, got)
		}
	}
}

func TestTheSymbolicFormIsServedOnlyOnTaskRoutesToClientsWhoAskForIt(t *testing.T) {
	for _, tc := range []struct {
		path, accept string
		want         bool
	}{
		{"/ap/v1/agent/tasks", SymbolicType, true},
		{"/ap/v1/agent/tasks/x", SymbolicType, true},
		{"/agents/a/ap/v1/agent/tasks/x", SymbolicType, true},
		{"/ap/v1/agent/tasks/x/steps", SymbolicType, false},
		{"/agents", SymbolicType, false},
		{"/ap/v1/agent/tasks", "application/json", false},
		{"/ap/v1/agent/tasks", SymbolicType + ";q=0", false},
		{"/ap/v1/agent/tasks", "text/html, " + SymbolicType + ";q=0.2", true},
	} {
		r := httptest.NewRequest("GET", tc.path, nil)
		r.Header.Set("Accept", tc.accept)
		if got := symbolic(markSymbolic(r)); got != tc.want {
			t.Errorf("GET %s, Accept %q: symbolic %v, want %v", tc.path, tc.accept, got, tc.want)
		}
	}
}
