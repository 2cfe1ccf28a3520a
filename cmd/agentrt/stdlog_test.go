package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/hostapi/egress"
)

// What a remote server sends reaches the operator's log only through the
// server's log and its scrubber, however Go writes it.

const unsolicitedKey = `sk-"unsolicited"<&>\key-0123`

// secretForms are the ways the tests look for a secret: as it is, as
// JSON (both escapings), %q and a URL write it, and each of those written
// again by JSON or %q (the server's log quotes a line Go quoted).
func secretForms(value string) []string {
	once := encodings(value)
	all := append([]string{}, once...)
	for _, f := range once {
		all = append(all, encodings(f)[1:]...)
	}
	return all
}

func encodings(value string) []string {
	html, _ := json.Marshal(value)
	var plain strings.Builder
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	enc.Encode(value)
	p, q := strings.TrimSpace(plain.String()), strconv.Quote(value)
	return []string{value, string(html[1 : len(html)-1]), p[1 : len(p)-1], q[1 : len(q)-1], url.QueryEscape(value)}
}

// unsolicitedServer answers every request with a response and, in the
// same write, the start of another no request asked for, which holds the
// key: Go's transport reads it on the idle connection and logs it with
// package log. Connections stay open until the test ends.
func unsolicitedServer(t *testing.T, key string) (port string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
				}
				conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" +
					"HTTP/1.1 401 Unauthorized\r\nX-Invalid-Key: " + key + "\r\n\r\n"))
				<-done
			}()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port
}

func TestASecretInAnUnsolicitedResponseReachesTheOperatorsLogAsItsPlaceholder(t *testing.T) {
	t.Setenv("LEAK_KEY", unsolicitedKey)
	port := unsolicitedServer(t, unsolicitedKey)
	origin := "http://127.0.0.1:" + port
	p := startProcess(t, callerPlugin(t), t.TempDir(), "--name", "caller",
		"--allow-http", "caller="+origin+"/", "--allow-private-host", "127.0.0.1",
		"--secret-env", "caller=LEAK_KEY@"+origin+"/v1")
	task := p.do("POST", "/ap/v1/agent/tasks", "application/json", `{}`).want(t, 200).json(t)
	in, _ := json.Marshal(map[string]any{"url": origin + "/v1/x", "headers": [][2]string{{"Authorization", "Bearer {{secret:LEAK_KEY}}"}}})
	body, _ := json.Marshal(map[string]string{"input": string(in)})
	st := p.do("POST", "/ap/v1/agent/tasks/"+task["task_id"].(string)+"/steps", "application/json", string(body)).want(t, 200).json(t)
	if out, _ := st["output"].(string); !strings.Contains(out, `"status":200`) {
		t.Fatalf("the request: %v", st)
	}
	eventually(t, 30*time.Second, "the unsolicited response's line in the log", func() bool {
		return strings.Contains(p.log(), "Unsolicited response received on idle HTTP channel")
	})
	logged := p.log()
	if !strings.Contains(logged, `X-Invalid-Key: {{secret:LEAK_KEY}}`) || !strings.Contains(logged, "standard library log") {
		t.Errorf("the line is not the server's log's, with the placeholder:\n%s", logged)
	}
	for _, form := range secretForms(unsolicitedKey) {
		if strings.Contains(logged, form) {
			t.Errorf("the operator's log holds the secret (as %q):\n%s", form, logged)
		}
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestTheStandardLibrarysLogIsScrubbedCutAndRateBoundInTheServersLog(t *testing.T) {
	g := egress.NewGrants()
	if err := g.AddSecret("A_KEY", unsolicitedKey, []string{"a"}, []string{"https://api.test/"}); err != nil {
		t.Fatal(err)
	}
	if err := g.AddSecret("B_KEY", "b-key-of-another-agent", []string{"b"}, []string{"https://api.test/"}); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	s := newStdLog(newLogger(logs, "json", slog.LevelInfo), g.Scrubber(), clock.Now)
	type record struct {
		Level, Msg, Line string
		Dropped          int `json:"dropped_before"`
	}
	records := func() []record {
		var out []record
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var r record
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("a log line that is not JSON: %q", l)
			}
			out = append(out, r)
		}
		return out
	}

	// Every secret of every agent, as Go's %q writes it.
	s.logger.Printf("starting with %q; and %s", unsolicitedKey, "b-key-of-another-agent")
	// A secret where the line is cut: scrubbed first.
	s.logger.Printf("%s%s", strings.Repeat("x", maxStdLogLine-10), unsolicitedKey)
	r := records()
	if len(r) != 2 || r[0].Level != "WARN" || r[0].Msg != "standard library log" ||
		r[0].Line != `starting with "{{secret:A_KEY}}"; and {{secret:B_KEY}}` {
		t.Fatalf("records: %+v", r)
	}
	if !strings.HasSuffix(r[1].Line, fmt.Sprintf("… (%d bytes)", maxStdLogLine-10+len("{{secret:A_KEY}}"))) || len(r[1].Line) > maxStdLogLine+32 {
		t.Errorf("a long line is %d bytes: %q", len(r[1].Line), r[1].Line)
	}
	for _, form := range append(secretForms(unsolicitedKey), unsolicitedKey[:8], "b-key-of") {
		if strings.Contains(logs.String(), form) {
			t.Errorf("the log holds a secret (as %q):\n%s", form, logs)
		}
	}

	// A flood: the burst, then one a second, the rest counted.
	for i := range 1000 {
		s.logger.Printf("flood %d", i)
	}
	if n := len(records()); n != stdLogBurst {
		t.Errorf("%d lines logged of a flood, want the burst of %d", n, stdLogBurst)
	}
	clock.advance(3 * stdLogEvery)
	s.logger.Print("after")
	s.logger.Print("after")
	s.logger.Print("after")
	s.logger.Print("dropped")
	r = records()
	last := r[len(r)-3:]
	if last[0].Line != "after" || last[0].Dropped != 1000-(stdLogBurst-2) || last[1].Dropped != 0 || last[2].Line != "after" {
		t.Errorf("after the flood: %+v", last)
	}
}

// agentrt's own HTTP server writes its errors (a client's bad TLS
// handshake, a handler's panic) through the same path.
func TestTheServersOwnHTTPErrorsGoToTheServersLog(t *testing.T) {
	logs := &syncBuffer{}
	s := newStdLog(newLogger(logs, "text", slog.LevelInfo), egress.NewGrants().Scrubber(), time.Now)
	hs := &http.Server{ErrorLog: s.logger, Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Close()
	http.Get("http://" + ln.Addr().String() + "/")
	eventually(t, 10*time.Second, "the panic in the server's log", func() bool {
		return strings.Contains(logs.String(), `msg="standard library log" line="http: panic serving`)
	})
}
