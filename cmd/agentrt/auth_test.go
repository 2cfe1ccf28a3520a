package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/storage"
)

// keyAdmin opens the keys of a running test server's data directory, as
// "agentrt keys" does beside a server.
func (ts *testServer) keyAdmin() *storage.KeyAdmin {
	ts.t.Helper()
	admin, err := storage.OpenKeyAdmin(context.Background(), ts.cfg.dataDir)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { admin.Close() })
	return admin
}

// createKey makes a key on a running test server's data directory.
func (ts *testServer) createKey(name string, agents ...string) string {
	ts.t.Helper()
	key, err := ts.keyAdmin().Create(context.Background(), name, agents)
	if err != nil {
		ts.t.Fatal(err)
	}
	return key
}

// doWith sends a request with headers.
func (ts *testServer) doWith(method, path string, header http.Header, contentType string, body []byte) *response {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, bytes.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(res.Body)
	return &response{status: res.StatusCode, header: res.Header, body: b.Bytes()}
}

func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// apiRoute is one request to one route.
type apiRoute struct {
	method, path, contentType string
	body                      []byte
}

// agentRoutes is a request to every protocol route under base (the root's
// "" or "/agents/NAME"), on a task of that agent with a step and an
// artifact.
func agentRoutes(t *testing.T, base, taskID, stepID, artifactID string) []apiRoute {
	ct, upload := multipartBody(t, part{name: "file", fileName: "a.txt", value: "x"})
	task := base + "/ap/v1/agent/tasks/" + taskID
	return []apiRoute{
		{"GET", base + "/ap/v1/agent/tasks", "", nil},
		{"POST", base + "/ap/v1/agent/tasks", "application/json", []byte(`{"input":"x"}`)},
		{"GET", task, "", nil},
		{"PATCH", task, "application/json", []byte(`{"title":"t"}`)},
		{"GET", task + "/logs", "", nil},
		{"GET", task + "/steps", "", nil},
		{"POST", task + "/steps", "application/json", []byte(`{"input":"x"}`)},
		{"GET", task + "/steps/" + stepID, "", nil},
		{"GET", task + "/steps/" + stepID + "/logs", "", nil},
		{"GET", task + "/artifacts", "", nil},
		{"POST", task + "/artifacts", ct, upload.Bytes()},
		{"GET", task + "/artifacts/" + artifactID, "", nil},
		{"DELETE", base + "/ap/v1/agent/tasks/0190d8a6-0000-7000-8000-000000000000", "", nil}, // none: 404 once let in
	}
}

// seedTask makes, through base with header, a task with a step and an
// uploaded artifact.
func (ts *testServer) seedTask(base string, header http.Header) (taskID, stepID, artifactID string) {
	ts.t.Helper()
	var task protocol.Task
	ts.doWith("POST", base+"/ap/v1/agent/tasks", header, "application/json", []byte(`{"input":"seed"}`)).want(ts.t, 200).decode(ts.t, &task)
	var st protocol.Step
	ts.doWith("POST", base+"/ap/v1/agent/tasks/"+task.TaskID+"/steps", header, "application/json", []byte(`{"input":"s"}`)).want(ts.t, 200).decode(ts.t, &st)
	ct, body := multipartBody(ts.t, part{name: "file", fileName: "seed.txt", value: "seed"})
	var art protocol.Artifact
	ts.doWith("POST", base+"/ap/v1/agent/tasks/"+task.TaskID+"/artifacts", header, ct, body.Bytes()).want(ts.t, 200).decode(ts.t, &art)
	return task.TaskID, st.StepID, art.ArtifactID
}

// twoAgents serves echo-go as the agents alpha (the default) and beta.
func twoAgents(t *testing.T, opts ...func(*runConfig)) *testServer {
	t.Helper()
	dir := t.TempDir()
	code := pluginBytes(t, examplePlugin(t, "echo-go"))
	for _, name := range []string{"alpha", "beta"} {
		putFile(t, filepath.Join(dir, name+".wasm"), code)
	}
	return serveDir(t, dir, append([]func(*runConfig){func(c *runConfig) { c.defaultAgent = "alpha" }}, opts...)...)
}

func TestEveryRouteNeedsAValidKeyForItsAgent(t *testing.T) {
	ts := twoAgents(t)
	all := ts.createKey("all")
	alphaOnly := ts.createKey("alpha-only", "alpha")
	revoked := ts.createKey("revoked")
	if err := ts.keyAdmin().Revoke(context.Background(), "revoked"); err != nil {
		t.Fatal(err)
	}
	wrong := all[:len(all)-4] + "AAAA"
	if wrong == all {
		wrong = all[:len(all)-4] + "BBBB"
	}
	var routes []apiRoute
	for _, base := range []string{"", "/agents/alpha", "/agents/beta"} {
		taskID, stepID, artifactID := ts.seedTask(base, bearer(all))
		routes = append(routes, agentRoutes(t, base, taskID, stepID, artifactID)...)
	}
	routes = append(routes, apiRoute{"GET", "/agents", "", nil}, apiRoute{"GET", "/agents/alpha", "", nil},
		apiRoute{"GET", "/agents/beta", "", nil}, apiRoute{"GET", "/metrics", "", nil},
		apiRoute{"GET", "/no/such/route", "", nil}, apiRoute{"GET", "/agents/nobody/ap/v1/agent/tasks", "", nil})

	for _, r := range routes {
		name := r.method + " " + r.path
		for _, tc := range []struct {
			what   string
			header http.Header
			want   int // 0: anything but 401 and 403
		}{
			{"no key", nil, 401},
			{"a wrong key", bearer(wrong), 401},
			{"a revoked key", bearer(revoked), 401},
			{"a key that is not a Bearer token", http.Header{"Authorization": {"Basic " + all}}, 401},
			{"the key", bearer(all), 0},
			{"the key as X-API-Key", http.Header{"X-Api-Key": {all}}, 0},
		} {
			res := ts.doWith(r.method, r.path, tc.header, r.contentType, r.body)
			switch {
			case tc.want == 401 && res.status != 401:
				t.Errorf("%s with %s: %d %s, want 401", name, tc.what, res.status, res.body)
			case tc.want == 401 && res.header.Get("WWW-Authenticate") == "":
				t.Errorf("%s with %s: 401 without WWW-Authenticate", name, tc.what)
			case tc.want == 0 && (res.status == 401 || res.status == 403):
				t.Errorf("%s with %s: %d %s", name, tc.what, res.status, res.body)
			}
			if res.status == 401 {
				res.wantError(t, 401, "API key")
			}
		}
		// A key for alpha only: 403 wherever another agent is named, or
		// everything is described.
		res := ts.doWith(r.method, r.path, bearer(alphaOnly), r.contentType, r.body)
		forbidden := strings.Contains(r.path, "/agents/beta") || r.path == "/metrics"
		switch {
		case forbidden && res.status != 403:
			t.Errorf("%s with a key for alpha only: %d %s, want 403", name, res.status, res.body)
		case !forbidden && (res.status == 401 || res.status == 403):
			t.Errorf("%s with a key for alpha only: %d %s", name, res.status, res.body)
		}
	}
	// A key for alpha lists alpha alone.
	var list struct {
		Agents []struct{ Name string }
	}
	ts.doWith("GET", "/agents", bearer(alphaOnly), "", nil).want(t, 200).decode(t, &list)
	if len(list.Agents) != 1 || list.Agents[0].Name != "alpha" {
		t.Errorf("GET /agents with a key for alpha lists %+v", list.Agents)
	}
	// The health checks stay open.
	for _, path := range []string{"/healthz", "/readyz"} {
		ts.do("GET", path, "", "").want(t, 200)
	}
}

func TestRequireAuthNeedsAKeyBeforeAnyExists(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"), func(c *runConfig) { c.requireAuth = true })
	ts.do("GET", "/ap/v1/agent/tasks", "", "").wantError(t, 401, "needs an API key")
	ts.do("GET", "/healthz", "", "").want(t, 200)
	key := ts.createKey("first")
	ts.doWith("GET", "/ap/v1/agent/tasks", bearer(key), "", nil).want(t, 200)

	// Without -require-auth, the server is open until a key exists, and
	// closed from the request after the first is made, for good.
	open := serve(t, examplePlugin(t, "echo-go"))
	open.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200)
	k := open.createKey("now")
	open.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 401)
	open.doWith("GET", "/ap/v1/agent/tasks", bearer(k), "", nil).want(t, 200)
	if err := open.keyAdmin().Revoke(context.Background(), "now"); err != nil {
		t.Fatal(err)
	}
	open.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 401) // no key left: still closed (TestRevokingTheLastKeyLeavesEveryRouteClosed)
}

// No key presented, valid or not, appears in a log line, an error body or
// the metrics: not from its headers, nor from a query a client put it in.
func TestAKeyIsNeverLoggedEchoedOrALabel(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"), func(c *runConfig) { c.accessLog = true })
	key := ts.createKey("secret-holder")
	bogus := "agentrt_abcdefgh_" + strings.Repeat("Z", 43)
	uuidLike := "0190d8a6-0000-7000-8000-000000000000"
	var bodies bytes.Buffer
	for _, h := range []http.Header{bearer(key), bearer(bogus), {"X-Api-Key": {bogus}}, {"Authorization": {bogus}},
		{"Authorization": {"Bearer " + key}, "X-Api-Key": {bogus}}} {
		for _, path := range []string{"/ap/v1/agent/tasks", "/ap/v1/agent/tasks/" + uuidLike, "/no/route", "/metrics", "/agents/x?key=" + key} {
			res := ts.doWith("GET", path, h, "", nil)
			bodies.Write(res.body)
		}
		res := ts.doWith("POST", "/ap/v1/agent/tasks?api_key="+key, h, "application/json", []byte(`{}`))
		bodies.Write(res.body)
	}
	metrics := ts.doWith("GET", "/metrics", bearer(key), "", nil).want(t, 200)
	for _, secret := range []string{key, key[len("agentrt_abcdefgh_"):], bogus[len("agentrt_abcdefgh_"):]} {
		if strings.Contains(ts.log.String(), secret) {
			t.Errorf("the log holds a key:\n%s", ts.log.String())
		}
		if bytes.Contains(bodies.Bytes(), []byte(secret)) {
			t.Errorf("an answer holds a key: %s", bodies.String())
		}
		if bytes.Contains(metrics.body, []byte(secret)) {
			t.Errorf("the metrics hold a key")
		}
	}
	if !strings.Contains(ts.log.String(), `key_name=secret-holder`) {
		t.Errorf("the access log does not name the key used:\n%s", ts.log.String())
	}
}

// agentrt check and agentrt client talk to a server that needs a key
// when they are given one.
func TestCheckAndClientWorkWithAKey(t *testing.T) {
	ts := serve(t, examplePlugin(t, "washington-go"))
	key := ts.createKey("tools")
	var out, errOut bytes.Buffer
	err := runClient(context.Background(), []string{"--url", ts.URL, "run", "Write the word 'Washington' to a .txt file"},
		clientEnv{getenv: func(string) string { return "" }, stdout: &out, stderr: &errOut})
	if err == nil || !strings.Contains(err.Error()+errOut.String(), "API key") {
		t.Errorf("client without a key: %v\n%s", err, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	err = runClient(context.Background(), []string{"--url", ts.URL, "--api-key", key, "run", "Write the word 'Washington' to a .txt file"},
		clientEnv{getenv: func(string) string { return "" }, stdout: &out, stderr: &errOut})
	if err != nil || !strings.Contains(out.String(), "done") {
		t.Errorf("client with a key: %v\n%s%s", err, out.String(), errOut.String())
	}
	out.Reset()
	if err := checkCommand(context.Background(), []string{ts.URL, "--api-key", key, "--only", "tasks,steps,artifacts,downloads"}, &out, &errOut); err != nil {
		t.Errorf("check with a key: %v\n%s", err, out.String())
	}
	out.Reset()
	os.Setenv("AGENTRT_API_KEY", key)
	defer os.Unsetenv("AGENTRT_API_KEY")
	if err := checkCommand(context.Background(), []string{ts.URL, "--only", "tasks"}, &out, &errOut); err != nil {
		t.Errorf("check with the key in $AGENTRT_API_KEY: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), key) {
		t.Errorf("check's report holds the key")
	}
}

// The keys command makes, lists and revokes keys and prints a key once.
func TestKeysCommand(t *testing.T) {
	dir := t.TempDir()
	keys := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := keysCommand(context.Background(), append(args, "--data", dir), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	key, note, err := keys("create", "ci", "--agent", "washington", "--agent", "echo")
	if err != nil || !strings.HasPrefix(key, "agentrt_") || !strings.Contains(note, "shown this once") {
		t.Fatalf("create: %q %q %v", key, note, err)
	}
	key = strings.TrimSpace(key)
	list, _, err := keys("list")
	if err != nil || !strings.Contains(list, "ci") || !strings.Contains(list, "washington,echo") || strings.Contains(list, key) ||
		!strings.Contains(list, key[:len("agentrt_")+8]) || !strings.Contains(list, "never") {
		t.Errorf("list: %v\n%s", err, list)
	}
	js, _, _ := keys("list", "--json")
	var infos []storage.KeyInfo
	if err := json.Unmarshal([]byte(js), &infos); err != nil || len(infos) != 1 || len(infos[0].Agents) != 2 {
		t.Errorf("list --json: %v\n%s", err, js)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"create", "ci"}, 1},       // a name in use
		{[]string{"create", "bad name"}, 2}, // a bad name
		{[]string{"create", "x", "--agent", "../a"}, 2},
		{[]string{"revoke", "nobody"}, 1},
		{[]string{"rotate", "ci"}, 2},
		{[]string{"create"}, 2},
		{[]string{}, 2},
	} {
		if _, _, err := keys(tc.args...); exitCode(err) != tc.code {
			t.Errorf("keys %s: %v (exit %d), want exit %d", strings.Join(tc.args, " "), err, exitCode(err), tc.code)
		}
	}
	if _, note, err := keys("revoke", "ci"); err != nil || !strings.Contains(note, "revoked") {
		t.Errorf("revoke: %v %s", err, note)
	}
	if list, _, _ := keys("list"); strings.Contains(list, "ci") {
		t.Errorf("a revoked key is listed:\n%s", list)
	}
}
