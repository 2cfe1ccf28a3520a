package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// A secret the operator holds reaches the destinations it is bound to and
// nothing else: not the plugin's view of a response, not what agentrt
// keeps or serves. These tests send it to servers that echo it every way
// they can, then search every place agentrt keeps or serves.

// keptEverywhere is everything the server keeps or serves of the tasks
// taskIDs, by where it is: what clients read (the tasks, their steps,
// artifacts and their bytes, logs, /agents), the server's log, and every
// file of the data directory (the database, its WAL, workspaces,
// artifact bytes), read once the server has stopped and its database is
// closed. It stops the server.
func keptEverywhere(t *testing.T, ts *testServer, taskIDs ...string) map[string][]byte {
	t.Helper()
	seen := map[string][]byte{"/agents": ts.do("GET", "/agents", "", "").want(t, 200).body}
	for _, id := range taskIDs {
		task := "/ap/v1/agent/tasks/" + id
		for _, p := range []string{task, task + "/steps?page_size=100", task + "/artifacts?page_size=100", task + "/logs"} {
			seen[p] = ts.do("GET", p, "", "").want(t, 200).body
		}
		var steps struct {
			Steps []struct {
				StepID string `json:"step_id"`
			} `json:"steps"`
		}
		ts.do("GET", task+"/steps?page_size=100", "", "").want(t, 200).decode(t, &steps)
		for _, st := range steps.Steps {
			for _, p := range []string{task + "/steps/" + st.StepID, task + "/steps/" + st.StepID + "/logs"} {
				seen[p] = ts.do("GET", p, "", "").want(t, 200).body
			}
		}
		var artifacts struct {
			Artifacts []struct {
				ArtifactID string `json:"artifact_id"`
			} `json:"artifacts"`
		}
		ts.do("GET", task+"/artifacts?page_size=100", "", "").want(t, 200).decode(t, &artifacts)
		for _, a := range artifacts.Artifacts {
			p := task + "/artifacts/" + a.ArtifactID
			seen[p] = ts.do("GET", p, "", "").want(t, 200).body
		}
	}
	dataDir := ts.cfg.dataDir
	ts.stop() // the server's last log lines written, the database checkpointed and closed
	seen["the server's log"] = []byte(ts.log.String())
	files := 0
	err := filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && !strings.Contains(p, string(filepath.Separator)+"cache"+string(filepath.Separator)) {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			seen[p], files = b, files+1
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no file in the data directory %s: the search would prove nothing", dataDir)
	}
	return seen
}

// wantSecretNowhere fails for each place of seen that holds value, as it
// is or as JSON, %q, a URL or base64 would write it, once or twice
// (secretForms).
func wantSecretNowhere(t *testing.T, seen map[string][]byte, value string) {
	t.Helper()
	forms := append(secretForms(value), base64.StdEncoding.EncodeToString([]byte(value)))
	for where, b := range seen {
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("the secret (as %q) is in %s", f, where)
			}
		}
	}
}

func TestASecretReachesItsDestinationOnlyAndNeitherThePluginNorAgentrtKeepsIt(t *testing.T) {
	const key = "sk-held-by-the-host-5e1d9c"
	t.Setenv("ECHO_KEY", key)
	got := make(chan string, 8)
	// The server echoes the key every way it can: in a header, in the
	// body as it is, as JSON and base64, in the URL it redirects to.
	echo := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		got <- auth
		k := strings.TrimPrefix(auth, "Bearer ")
		if r.URL.Path == "/v1/away" {
			http.Redirect(w, r, "http://elsewhere.test/stolen/"+k, http.StatusFound)
			return
		}
		w.Header().Set("X-Echo", auth)
		fmt.Fprintf(w, "invalid key %s; %q; %s", k, k, base64.StdEncoding.EncodeToString([]byte(k)))
	})
	other := startLoopback(t, func(w http.ResponseWriter, r *http.Request) { got <- "other: " + r.Header.Get("Authorization") })
	ts := serveCaller(t, "--allow-http", "caller="+echo.at("api.test", "/v1"), "--allow-http", "caller="+other.at("other.test", "/"),
		"--allow-private-host", "api.test", "--allow-private-host", "other.test",
		"--secret-env", "caller=ECHO_KEY@"+echo.at("api.test", "/v1"))
	auth := [][2]string{{"Authorization", "Bearer {{secret:ECHO_KEY}}"}}
	task := ts.createTask(`{}`)

	// The destination it is bound to gets it; the plugin sees the
	// placeholder wherever the server echoed it, and publishes what it saw
	// (an artifact, a workspace file, its log).
	o := ts.callIn(task.TaskID, map[string]any{"url": echo.at("api.test", "/v1/chat"), "headers": auth, "publish": true})
	if a := <-got; a != "Bearer "+key {
		t.Fatalf("the bound destination got Authorization %q", a)
	}
	const placeholder = "{{secret:ECHO_KEY}}"
	if o.Status != 200 || o.Headers["X-Echo"] != "Bearer "+placeholder ||
		o.Body != fmt.Sprintf("invalid key %s; %q; %s", placeholder, placeholder, placeholder) {
		t.Errorf("the plugin's view of the response: %+v", o)
	}

	// A granted destination it is not bound to: refused, nothing sent.
	o = ts.callIn(task.TaskID, map[string]any{"url": other.at("other.test", "/x"), "headers": auth})
	wantRefused(t, o, "not_allowed", "no secret ECHO_KEY is held for")
	if n := other.hits.Load(); n != 0 {
		t.Errorf("a request naming a secret not bound to its destination was sent %d times", n)
	}

	// The bound server redirects to a URL holding the key, which is
	// refused: the refusal the plugin reads (and the log) holds the
	// placeholder.
	o = ts.callIn(task.TaskID, map[string]any{"url": echo.at("api.test", "/v1/away"), "headers": auth})
	wantRefused(t, o, "not_allowed", "a redirect to http://elsewhere.test/stolen/"+placeholder)
	if a := <-got; a != "Bearer "+key {
		t.Fatalf("the bound destination got Authorization %q", a)
	}

	seen := keptEverywhere(t, ts, task.TaskID)
	wantSecretNowhere(t, seen, key)
	// The search saw what the plugin saw: the placeholder in its output,
	// the log it wrote and the artifact it published.
	if steps := seen["/ap/v1/agent/tasks/"+task.TaskID+"/steps?page_size=100"]; !bytes.Contains(steps, []byte(placeholder)) {
		t.Errorf("the steps do not hold what the plugin saw: %s", steps)
	}
	logs, artifacts := 0, 0
	for where, b := range seen {
		switch {
		case !strings.HasPrefix(where, "/ap/v1/"):
		case strings.Contains(where, "/steps/") && strings.HasSuffix(where, "/logs") && bytes.Contains(b, []byte("the response was invalid key "+placeholder)):
			logs++
		case strings.Contains(where, "/artifacts/") && bytes.HasPrefix(b, []byte("invalid key "+placeholder)):
			artifacts++
		}
	}
	if logs != 1 {
		t.Errorf("%d step logs searched hold what the plugin logged, want 1", logs)
	}
	if artifacts != 1 {
		t.Errorf("%d published artifacts searched, want 1", artifacts)
	}
}

// A bound server that reflects the key into the URL it redirects to, or
// into a URL the next hop would get as Referer, cannot make agentrt send
// it to a destination it is not bound to; nor can one that answers what
// Go quotes in an error get it to the plugin.
func TestASecretIsNeverSentOnToADestinationItIsNotBoundTo(t *testing.T) {
	const key = "sk:live@key!$*'()+=,;~5e1d"
	t.Setenv("LEAK_KEY", key)
	referers := make(chan string, 8)
	other := startLoopback(t, func(w http.ResponseWriter, r *http.Request) { referers <- r.Header.Get("Referer") })
	echo := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		k := r.Header.Get("X-Api-Key")
		switch r.URL.Path {
		case "/v1/query":
			http.Redirect(w, r, other.at("other.test", "/x?key="+k), http.StatusFound)
		case "/v1/escaped":
			http.Redirect(w, r, other.at("other.test", "/x?key="+url.QueryEscape(k)), http.StatusFound)
		case "/v1/base64":
			http.Redirect(w, r, other.at("other.test", "/x?key="+base64.RawURLEncoding.EncodeToString([]byte(k))), http.StatusTemporaryRedirect)
		case "/v1/referer":
			// Where the key is bound, a URL may hold it; net/http would
			// send that URL on as Referer.
			http.Redirect(w, r, "/v1/next?key="+url.QueryEscape(k), http.StatusFound)
		case "/v1/next":
			http.Redirect(w, r, other.at("other.test", "/plain"), http.StatusFound)
		}
	})
	ts := serveCaller(t, "--allow-http", "caller="+echo.at("api.test", "/v1"), "--allow-http", "caller="+other.at("other.test", "/"),
		"--allow-private-host", "api.test", "--allow-private-host", "other.test",
		"--secret-env", "caller=LEAK_KEY@"+echo.at("api.test", "/v1"))
	task := ts.createTask(`{}`)
	headers := [][2]string{{"X-Api-Key", "{{secret:LEAK_KEY}}"}}
	for _, path := range []string{"/v1/query", "/v1/escaped", "/v1/base64"} {
		o := ts.callIn(task.TaskID, map[string]any{"url": echo.at("api.test", path), "headers": headers, "method": "POST", "body": "b"})
		wantRefused(t, o, "not_allowed", "holds, in its URL, the value of a secret that is not bound to that destination")
	}
	if n := other.hits.Load(); n != 0 {
		t.Fatalf("the destination the key is not bound to got %d requests", n)
	}
	o := ts.callIn(task.TaskID, map[string]any{"url": echo.at("api.test", "/v1/referer"), "headers": headers})
	if o.Status != 200 || o.URL != other.at("other.test", "/plain") {
		t.Fatalf("the chain through a URL holding the key: %+v", o)
	}
	if ref := <-referers; ref != "" { // the last hop answered: it sent its Referer first
		t.Errorf("the last hop got Referer %q", ref)
	}
	seen := keptEverywhere(t, ts, task.TaskID)
	wantSecretNowhere(t, seen, key)
	if !strings.Contains(string(seen["the server's log"]), "secret=LEAK_KEY") {
		t.Errorf("the operator's log does not name the secret a refused request carried")
	}
}

// rawServer answers each request on loopback with answer, as it is.
func rawServer(t *testing.T, answer string) (port string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				conn.Write([]byte(answer))
			}()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port
}

func TestAnErrorGoWritesQuotingASecretAServerSentReachesThePluginAsItsPlaceholder(t *testing.T) {
	// Quotes, a backslash, what JSON escapes for HTML and a rune Go's %q
	// escapes: %q and JSON write it each their own way.
	const key = "sk-\"quoted\"<&>\\back-é\u200b-5e1d"
	t.Setenv("QUOTED_KEY", key)
	port := rawServer(t, "HTTP/1.1 200 OK\r\nX-Invalid "+key+"\r\n\r\n")
	origin := "http://api.test:" + port
	ts := serveCaller(t, "--allow-http", "caller="+origin+"/", "--allow-private-host", "api.test",
		"--secret-env", "caller=QUOTED_KEY@"+origin+"/")
	task := ts.createTask(`{}`)
	o := ts.callIn(task.TaskID, map[string]any{"url": origin + "/v1", "headers": [][2]string{{"Authorization", "Bearer {{secret:QUOTED_KEY}}"}}})
	wantRefused(t, o, "io", `malformed MIME header: missing colon: "X-Invalid {{secret:QUOTED_KEY}}"`)
	wantSecretNowhere(t, keptEverywhere(t, ts, task.TaskID), key)
}

func TestEveryRedirectCountsAgainstTheCallsOutboundRequests(t *testing.T) {
	var hops atomic.Int64
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		hops.Add(1)
		if n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/")); n > 0 {
			http.Redirect(w, r, fmt.Sprintf("/r/%d", n-1), http.StatusFound)
		}
	})
	ts := serveCaller(t, "--allow-http", "caller="+s.at("api.test", "/"), "--allow-private-host", "api.test", "--max-http-requests", "4")
	// 3 of 4 for the first (a request and 2 redirects); the second stops
	// at its first redirect.
	o := ts.call(map[string]any{"url": s.at("api.test", "/r/2"), "requests": 2})
	if o.Made != 1 {
		t.Errorf("made %d requests, want 1: %+v", o.Made, o)
	}
	wantRefused(t, o, "limit", "at most 4 outbound requests (each redirect followed is one)")
	if n := hops.Load(); n != 4 {
		t.Errorf("%d requests reached the server, want 4", n)
	}
}

func TestAnOutboundRequestsSecretsCountAtTheirLongestAgainstTheHeadersBound(t *testing.T) {
	s := startLoopback(t, func(w http.ResponseWriter, r *http.Request) {})
	t.Setenv("SHORT_KEY", "sk-short")
	ts := serveCaller(t, "--allow-http", "caller="+s.at("api.test", "/"), "--allow-private-host", "api.test",
		"--secret-env", "caller=SHORT_KEY@"+s.at("api.test", "/"))
	o := ts.call(map[string]any{"url": s.at("api.test", "/"), "headers": [][2]string{{"X-Keys", strings.Repeat("{{secret:SHORT_KEY}}", 4)}}})
	wantRefused(t, o, "invalid", "over 16384 bytes with each of its 4 secret placeholders counted as 4096 bytes")
	if n := s.hits.Load(); n != 0 {
		t.Errorf("%d requests were sent", n)
	}
}
