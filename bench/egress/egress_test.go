// Package egress benchmarks what the outbound HTTP policy costs one
// request: a plain net/http client against agentrt's egress client (URL
// and header checks, the policy, the dial-time address check of each new
// connection, a secret filled in and the answer scrubbed), both against
// one server on loopback with keep-alive, side by side.
//
//	go test ./bench/egress -run x -bench . -benchtime 2s -count 3
//
// BenchmarkSideBySide alternates the two in rounds of 100 requests, so
// that both see the same machine, and reports their ratio
// (egress/plain): the figure to quote on a shared machine. Results are
// in bench/README.md.
package egress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/plugins/abi"
)

type resolver struct{}

func (resolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

const key = "sk-bench-0123456789abcdef"

// sizes are the response bodies benchmarked: a chat completion's, and a
// page's.
var sizes = []int{1 << 10, 64 << 10}

func server(b *testing.B) (*httptest.Server, string) {
	bodies := map[string][]byte{}
	for _, n := range sizes {
		bodies[fmt.Sprint(n)] = bytes.Repeat([]byte("x"), n)
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write(bodies[strings.TrimPrefix(r.URL.Path, "/")])
	}))
	b.Cleanup(s.Close)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	return s, port
}

var request = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Write the word Washington to a .txt file"}]}`)

// plainRequest sends the request to the server at base through c, the
// key written in, and reads the answer.
func plainRequest(b *testing.B, c *http.Client, base string, n int) {
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/%d", base, n), bytes.NewReader(request))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
}

// egressClient is an agent's client granted the server on port, holding
// the key for it.
func egressClient(b *testing.B, port string) *egress.Client {
	dest, _ := abi.ParseDestination("http://api.test:" + port)
	c := egress.New(egress.Config{Agent: "bench", Limits: egress.DefaultLimits, Resolver: resolver{},
		Policy: egress.Policy{Allow: []abi.Destination{dest}, PrivateHosts: []string{"api.test"},
			Secrets: []egress.Secret{{Name: "KEY", Value: key, Destinations: []abi.Destination{dest}}}}})
	b.Cleanup(c.Close)
	return c
}

// egressRequest sends the request through c, as a plugin would: the key
// a placeholder.
func egressRequest(b *testing.B, c *egress.Client, port string, n int) {
	_, err := c.Do(context.Background(), &egress.Request{Method: "POST", URL: fmt.Sprintf("http://api.test:%s/%d", port, n),
		Header: []abi.HTTPHeader{{Name: "Authorization", Value: "Bearer {{secret:KEY}}"}, {Name: "Content-Type", Value: "application/json"}},
		Body:   request})
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkPlainClient(b *testing.B) {
	s, _ := server(b)
	c := &http.Client{}
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				plainRequest(b, c, s.URL, n)
			}
		})
	}
}

func BenchmarkEgressClient(b *testing.B) {
	_, port := server(b)
	c := egressClient(b, port)
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				egressRequest(b, c, port, n)
			}
		})
	}
}

func BenchmarkSideBySide(b *testing.B) {
	s, port := server(b)
	plain := &http.Client{}
	c := egressClient(b, port)
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var plainTime, egressTime time.Duration
			const round = 100
			for done := 0; done < b.N; done += round {
				start := time.Now()
				for range round {
					plainRequest(b, plain, s.URL, n)
				}
				plainTime += time.Since(start)
				start = time.Now()
				for range round {
					egressRequest(b, c, port, n)
				}
				egressTime += time.Since(start)
			}
			rounds := float64((b.N + round - 1) / round * round)
			b.ReportMetric(float64(plainTime.Nanoseconds())/rounds, "plain-ns/req")
			b.ReportMetric(float64(egressTime.Nanoseconds())/rounds, "egress-ns/req")
			b.ReportMetric(float64(egressTime)/float64(plainTime), "egress/plain")
		})
	}
}
