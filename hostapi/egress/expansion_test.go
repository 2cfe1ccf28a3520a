package egress

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

// A plugin's request message is at most 64 KiB, but a placeholder of 14
// bytes stands for a secret of up to 4096: thousands of them would make
// the host build megabytes of headers. The headers as they would be sent
// are bounded before a secret is filled in, each placeholder counted as
// the longest secret, so whether a request fits depends on the request
// alone.

// placeholders is n placeholders of KEY, each after a comma.
func placeholders(n int) string { return strings.Repeat(",{{secret:KEY}}", n) }

func TestTheHeadersAsTheyWouldBeSentAreBoundedBeforeASecretIsFilledIn(t *testing.T) {
	s := newServer(t, nil)
	u := s.url("api.test", "/")
	for _, value := range []string{"sk-short", strings.Repeat("k", MaxSecretBytes)} {
		c, _ := newClient(t, Policy{Allow: dests(t, u), PrivateHosts: []string{"api.test"},
			Secrets: []Secret{{Name: "KEY", Value: value, Destinations: dests(t, u)}}}, Limits{})
		spread := make([]abi.HTTPHeader, abi.MaxHTTPHeaders)
		for i := range spread {
			spread[i] = abi.HTTPHeader{Name: fmt.Sprintf("X-%d", i), Value: placeholders(3)}
		}
		fits := make([]abi.HTTPHeader, 15)
		for i := range fits {
			fits[i] = abi.HTTPHeader{Name: fmt.Sprintf("X-%d", i), Value: "Bearer {{secret:KEY}}"}
		}
		for _, c2 := range []struct {
			name   string
			header []abi.HTTPHeader
			why    string
		}{
			// Within the 16 KiB of a header as written, 4 placeholders
			// are 16 KiB as sent.
			{"4 in one header", []abi.HTTPHeader{{Name: "X-Key", Value: placeholders(4)}}, "the header X-Key is over 16384 bytes with each of its 4 secret placeholders counted as 4096 bytes"},
			// A header's worth: 1,000 placeholders, 4 MB as sent.
			{"a header of placeholders", []abi.HTTPHeader{{Name: "X-Key", Value: placeholders(1000)}}, "the header X-Key is over 16384 bytes with each of its 1000"},
			{"3 in each of 100 headers", spread, "the request's headers are over 65536 bytes together, each secret placeholder counted as 4096 bytes"},
			{"one in each of 16 headers", append(fits, abi.HTTPHeader{Name: "X-15", Value: "{{secret:KEY}}"}), "over 65536 bytes together"},
		} {
			before := s.requests()
			_, err := c.Do(context.Background(), &Request{URL: u, Header: c2.header})
			wantError(t, err, Invalid, c2.why)
			if s.requests() != before {
				t.Errorf("%s: the request was sent", c2.name)
			}
		}
		// 15 fit, whatever the secret's length.
		if _, err := c.Do(context.Background(), &Request{URL: u, Header: fits}); err != nil {
			t.Errorf("15 headers of one placeholder each, a secret of %d bytes: %v", len(value), err)
		} else if r, _ := s.last(); r.Header.Get("X-14") != "Bearer "+value {
			t.Errorf("the server got X-14: %q", r.Header.Get("X-14"))
		}
	}
}

// The bound is checked before the policy is, so before any value is
// looked up or built: a request naming a secret nobody holds is refused
// for its size, and refusing the largest costs the host next to nothing.
func TestTheExpansionBoundIsCheckedBeforeAnyValueIsBuilt(t *testing.T) {
	s := newServer(t, nil)
	u := s.url("api.test", "/")
	c, _ := newClient(t, Policy{Allow: dests(t, u), PrivateHosts: []string{"api.test"},
		Secrets: []Secret{{Name: "KEY", Value: strings.Repeat("k", MaxSecretBytes), Destinations: dests(t, u)}}}, Limits{})
	_, err := c.Do(context.Background(), &Request{URL: u, Header: []abi.HTTPHeader{{Name: "X", Value: "{{secret:NOBODY}}" + placeholders(4)}}})
	wantError(t, err, Invalid, "over 16384 bytes with each of its 5")
	// 10 headers of 1,000 placeholders: 40 MB built.
	var many []abi.HTTPHeader
	for i := range 10 {
		many = append(many, abi.HTTPHeader{Name: fmt.Sprintf("X-%d", i), Value: placeholders(1000)})
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err = c.Do(context.Background(), &Request{URL: u, Header: many})
	runtime.ReadMemStats(&m1)
	wantError(t, err, Invalid, "over 16384 bytes with each of its 1000")
	if grew := m1.TotalAlloc - m0.TotalAlloc; grew > 1<<20 {
		t.Errorf("refusing the request allocated %d bytes", grew)
	}
	if s.requests() != 0 {
		t.Error("a request was sent")
	}
}
