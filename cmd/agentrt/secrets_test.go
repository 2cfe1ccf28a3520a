package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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
// is or as JSON, a URL or base64 would write it.
func wantSecretNowhere(t *testing.T, seen map[string][]byte, value string) {
	t.Helper()
	forms := []string{value, url.QueryEscape(value), base64.StdEncoding.EncodeToString([]byte(value))}
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
