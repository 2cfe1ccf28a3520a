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

func BenchmarkPlainClient(b *testing.B) {
	s, _ := server(b)
	c := &http.Client{}
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				req, _ := http.NewRequest("POST", fmt.Sprintf("%s/%d", s.URL, n), bytes.NewReader(request))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		})
	}
}

func BenchmarkEgressClient(b *testing.B) {
	_, port := server(b)
	dest, _ := abi.ParseDestination("http://api.test:" + port)
	c := egress.New(egress.Config{Agent: "bench", Limits: egress.DefaultLimits, Resolver: resolver{},
		Policy: egress.Policy{Allow: []abi.Destination{dest}, PrivateHosts: []string{"api.test"},
			Secrets: []egress.Secret{{Name: "KEY", Value: key, Destinations: []abi.Destination{dest}}}}})
	defer c.Close()
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				_, err := c.Do(context.Background(), &egress.Request{Method: "POST", URL: fmt.Sprintf("http://api.test:%s/%d", port, n),
					Header: []abi.HTTPHeader{{Name: "Authorization", Value: "Bearer {{secret:KEY}}"}, {Name: "Content-Type", Value: "application/json"}},
					Body:   request})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSideBySide(b *testing.B) {
	s, port := server(b)
	plain := &http.Client{}
	dest, _ := abi.ParseDestination("http://api.test:" + port)
	c := egress.New(egress.Config{Agent: "bench", Limits: egress.DefaultLimits, Resolver: resolver{},
		Policy: egress.Policy{Allow: []abi.Destination{dest}, PrivateHosts: []string{"api.test"},
			Secrets: []egress.Secret{{Name: "KEY", Value: key, Destinations: []abi.Destination{dest}}}}})
	defer c.Close()
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var plainTime, egressTime time.Duration
			const round = 100
			for done := 0; done < b.N; done += round {
				start := time.Now()
				for range round {
					req, _ := http.NewRequest("POST", fmt.Sprintf("%s/%d", s.URL, n), bytes.NewReader(request))
					req.Header.Set("Authorization", "Bearer "+key)
					req.Header.Set("Content-Type", "application/json")
					resp, err := plain.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				plainTime += time.Since(start)
				start = time.Now()
				for range round {
					_, err := c.Do(context.Background(), &egress.Request{Method: "POST", URL: fmt.Sprintf("http://api.test:%s/%d", port, n),
						Header: []abi.HTTPHeader{{Name: "Authorization", Value: "Bearer {{secret:KEY}}"}, {Name: "Content-Type", Value: "application/json"}},
						Body:   request})
					if err != nil {
						b.Fatal(err)
					}
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
