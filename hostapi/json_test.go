package hostapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

// The JSON answers a plugin asks for (a workspace listing, a file's
// description) were escaped for HTML: each <, > and & of a path took 6
// bytes, so a listing of such paths was six times what docs/SECURITY.md
// says it costs. Now a path takes its own bytes, and at most twice them
// (a quote is \", U+2028 is \u2028), beside a few dozen bytes of framing.
func TestJSONAnswersTakeAtMostTwiceTheirTextBytes(t *testing.T) {
	h := newFakeHost()
	g := newGuest(t, h, Config{})
	// Paths of four names of 250 bytes or so, made of each kind of text.
	path := func(name string) string { return strings.Join([]string{name, name, name, name}, "/") }
	paths := []string{
		path(strings.Repeat("<>&", 83)),    // one byte each
		path(strings.Repeat(`"`, 250)),     // two bytes each
		path(strings.Repeat("\u2028", 83)), // three bytes, escaped in six
	}
	framing := len(`{"path":"","size":1,"mod_time":1700000000000}`)
	for _, p := range paths {
		h.files[p] = []byte("x")
	}
	for _, p := range paths {
		// workspace_stat answers one entry.
		n := g.call("workspace_stat", 0, g.put(0, p), 8192, 8192)
		answer := g.get(8192, uint32(max(n, 0)))
		var fi abi.FileInfo
		if n < 0 || json.Unmarshal([]byte(answer), &fi) != nil || fi.Path != p {
			t.Fatalf("stat %.20q… = %d %.100q", p, n, answer)
		}
		if strings.Contains(answer, `\u003c`) || n > int32(2*len(p)+framing) {
			t.Errorf("stat of a %d-byte path answers %d bytes: %.60s…", len(p), n, answer)
		}
	}
	// workspace_list answers them all.
	n := g.call("workspace_list", 0, 0, 8192, 50000)
	answer := g.get(8192, uint32(max(n, 0)))
	var list []abi.FileInfo
	if n < 0 || json.Unmarshal([]byte(answer), &list) != nil || len(list) != len(paths) {
		t.Fatalf("list = %d %.100q", n, answer)
	}
	bound := 2
	for _, p := range paths {
		bound += 2*len(p) + framing + 1
	}
	if strings.Contains(answer, `\u003c`) || n > int32(bound) {
		t.Errorf("the listing answers %d bytes, over %d", n, bound)
	}
	if want := fmt.Sprintf("%q", paths[0]); !strings.Contains(answer, want) {
		t.Errorf("the listing does not hold %.40s… as it is", want)
	}
}
