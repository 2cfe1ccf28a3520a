package main

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// Authentication never switches off as a side effect: once a data
// directory has needed keys it needs them, with no key left and across
// restarts, until "agentrt keys open --yes" opens it.

// seededIDs are a task, a step and an artifact of one agent.
type seededIDs struct{ task, step, artifact string }

// noSuchIDs name nothing: enough where every request is refused before
// it is routed.
var noSuchIDs = seededIDs{"0190d8a6-0000-7000-8000-000000000000", "0190d8a6-0000-7000-8000-000000000001", "0190d8a6-0000-7000-8000-000000000002"}

// everyGuardedRoute is a request to every route the server guards with a
// key (httpapi.Server.GuardedRoutes, so that a route added later is in
// it), once for each agent a route may name, with ids[agent] filled in
// (the root's routes are the default agent's, "alpha"); then a route
// that does not exist and a method a route does not allow. DELETEs come
// last, so that the others find their task.
func everyGuardedRoute(t *testing.T, ts *testServer, ids map[string]seededIDs) []apiRoute {
	t.Helper()
	ct, upload := multipartBody(t, part{name: "file", fileName: "a.txt", value: "x"})
	var routes, deletes []apiRoute
	for _, r := range ts.srv.api.GuardedRoutes() {
		agents := []string{"alpha"}
		if strings.Contains(r.Path, ":agent") {
			agents = []string{"alpha", "beta"}
		}
		for _, agent := range agents {
			id := ids[agent]
			var path []string
			for _, seg := range strings.Split(r.Path, "/") {
				switch seg {
				case ":agent":
					seg = agent
				case ":task_id":
					seg = id.task
				case ":step_id":
					seg = id.step
				case ":artifact_id":
					seg = id.artifact
				default:
					if strings.HasPrefix(seg, ":") || strings.HasPrefix(seg, "*") {
						t.Fatalf("route %s %s has a parameter %s this test cannot fill: teach it", r.Method, r.Path, seg)
					}
				}
				path = append(path, seg)
			}
			route := apiRoute{method: r.Method, path: strings.Join(path, "/")}
			switch {
			case r.Method == "POST" && strings.HasSuffix(r.Path, "/artifacts"):
				route.contentType, route.body = ct, upload.Bytes()
			case r.Method == "POST":
				route.contentType, route.body = "application/json", []byte(`{"input":"x"}`)
			case r.Method == "PATCH":
				route.contentType, route.body = "application/json", []byte(`{"title":"t"}`)
			}
			if r.Method == "DELETE" {
				deletes = append(deletes, route)
			} else {
				routes = append(routes, route)
			}
		}
	}
	if len(routes)+len(deletes) < 30 {
		t.Fatalf("only %d routes to try: the server's routes were not read", len(routes)+len(deletes))
	}
	routes = append(routes, apiRoute{"GET", "/no/such/route", "", nil}, apiRoute{"PUT", "/ap/v1/agent/tasks", "application/json", []byte(`{}`)})
	return append(routes, deletes...)
}

// wantClosed checks that every route answers 401, without a key and with
// each of keys (revoked), and that the health checks answer 200.
func (ts *testServer) wantClosed(t *testing.T, when string, routes []apiRoute, keys ...string) {
	t.Helper()
	headers := []http.Header{nil}
	for _, k := range keys {
		headers = append(headers, bearer(k))
	}
	for _, r := range routes {
		for _, h := range headers {
			res := ts.doWith(r.method, r.path, h, r.contentType, r.body)
			if res.status != 401 || res.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: %s %s with %d keys: %d %s, want 401 with WWW-Authenticate", when, r.method, r.path, len(h), res.status, res.body)
			}
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if res := ts.do("GET", path, "", ""); res.status != 200 {
			t.Errorf("%s: GET %s: %d, want 200", when, path, res.status)
		}
	}
}

// keysCLI runs "agentrt keys" on dir in-process, and returns its stdout,
// its stderr with the error it ended with, and its exit code.
func keysCLI(dir string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	err := keysCommand(context.Background(), append(args, "--data", dir), &out, &errOut)
	if err != nil {
		return out.String(), errOut.String() + err.Error(), exitCode(err)
	}
	return out.String(), errOut.String(), 0
}

func TestRevokingTheLastKeyLeavesEveryRouteClosed(t *testing.T) {
	ts := twoAgents(t)
	dir := ts.cfg.dataDir
	key := ts.createKey("only")
	ids := map[string]seededIDs{}
	for _, agent := range []string{"alpha", "beta"} {
		task, step, artifact := ts.seedTask("/agents/"+agent, bearer(key))
		ids[agent] = seededIDs{task, step, artifact}
	}
	routes := everyGuardedRoute(t, ts, ids)

	// The last key is revoked beside the running server.
	_, note, code := keysCLI(dir, "revoke", "only")
	if code != 0 || !strings.Contains(note, "no key is left: closed") {
		t.Fatalf("keys revoke: exit %d\n%s", code, note)
	}
	ts.wantClosed(t, "after the last key is revoked", routes, key)

	// A restart, without --require-auth (as --require-auth=false is).
	ts.stop()
	ts.cfg.requireAuth = false
	ts = startServer(t, ts.cfg)
	ts.wantClosed(t, "after a restart", routes, key)

	// keys open without --yes does nothing.
	if _, note, code := keysCLI(dir, "open"); code != 2 || !strings.Contains(note, "--yes") {
		t.Errorf("keys open without --yes: exit %d\n%s", code, note)
	}
	ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 401)
	if strings.Contains(ts.log.String(), "turned off") {
		t.Fatalf("the server logged an opening before there was one:\n%s", ts.log.String())
	}

	// keys open --yes opens it, and says so, and the server logs it.
	_, note, code = keysCLI(dir, "open", "--yes")
	if code != 0 || !strings.Contains(note, "authentication turned off by operator command") {
		t.Fatalf("keys open --yes: exit %d\n%s", code, note)
	}
	for _, r := range routes {
		res := ts.doWith(r.method, r.path, nil, r.contentType, r.body)
		switch {
		case res.status == 401 || res.status == 403:
			t.Errorf("after keys open: %s %s: %d %s", r.method, r.path, res.status, res.body)
		case strings.HasSuffix(r.path, "/cancel") && res.status == 409:
			// Served: the seeded step has ended, so it cannot be cancelled.
		case r.method != "DELETE" && !strings.HasPrefix(r.path, "/no/") && r.method != "PUT" && res.status >= 300:
			t.Errorf("after keys open: %s %s: %d %s, want it served", r.method, r.path, res.status, res.body)
		}
	}
	if !strings.Contains(ts.log.String(), "authentication turned off by operator command") {
		t.Errorf("the server did not log the opening:\n%s", ts.log.String())
	}
}

// A data directory a server was started on with --require-auth, and on
// which no key was ever made, stays closed when the next start has no
// flag; keys list says so, and why.
func TestRequireAuthOnceKeepsTheDataDirectoryClosed(t *testing.T) {
	ts := twoAgents(t, func(c *runConfig) { c.requireAuth = true })
	dir := ts.cfg.dataDir
	routes := everyGuardedRoute(t, ts, map[string]seededIDs{"alpha": noSuchIDs, "beta": noSuchIDs})
	ts.wantClosed(t, "with --require-auth", routes)
	ts.stop()
	ts.cfg.requireAuth = false
	ts = startServer(t, ts.cfg)
	ts.wantClosed(t, "after a restart without --require-auth", routes)
	if list, note, code := keysCLI(dir, "list"); code != 0 || !strings.Contains(list, "closed, with no key") || !strings.Contains(list, "--require-auth") {
		t.Errorf("keys list: exit %d\n%s%s", code, list, note)
	}
	if _, note, code := keysCLI(dir, "open", "--yes"); code != 0 {
		t.Fatalf("keys open --yes: exit %d\n%s", code, note)
	}
	ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200)
}

// keys list shows whether the directory is closed, and keys open opens
// only a directory with no key left, and only with --yes.
func TestKeysListShowsWhetherTheDataDirectoryIsClosed(t *testing.T) {
	dir := t.TempDir()
	for _, step := range []struct {
		args     []string
		code     int
		say      string // in stderr, or the error
		listSays string // the first line of keys list then
	}{
		{[]string{"list"}, 0, "", "open: no key was ever required"},
		{[]string{"open", "--yes"}, 0, "needed no key already", "open: no key was ever required"},
		{[]string{"create", "k"}, 0, "created", "closed: every request but the health checks needs a key (since "},
		{[]string{"open", "--yes"}, 1, "revoke them first", "closed: every request"},
		{[]string{"create", "x", "--yes"}, 2, "--yes is for keys open", "closed: every request"},
		{[]string{"revoke", "k"}, 0, "no key is left: closed, with no key", "closed, with no key"},
		{[]string{"open"}, 2, "--yes", "closed, with no key"},
		{[]string{"open", "x", "--yes"}, 2, "no argument", "closed, with no key"},
		{[]string{"open", "--yes"}, 0, "authentication turned off by operator command", "open: anyone who reaches the port may use every agent (since "},
		{[]string{"create", "again"}, 0, "created", "closed: every request"},
	} {
		name := "keys " + strings.Join(step.args, " ")
		_, note, code := keysCLI(dir, step.args...)
		if code != step.code || !strings.Contains(note, step.say) {
			t.Errorf("%s: exit %d, want %d saying %q:\n%s", name, code, step.code, step.say, note)
		}
		list, _, _ := keysCLI(dir, "list")
		if first, _, _ := strings.Cut(list, "\n"); !strings.HasPrefix(first, step.listSays) {
			t.Errorf("after %s, keys list begins %q, want %q", name, first, step.listSays)
		}
	}
}

// The same with the real binary, across a kill -9: the last key revoked
// by "agentrt keys" leaves the server closed, and the next process too,
// until "agentrt keys open --yes", which both log.
func TestTheLastKeyRevokedStaysClosedAcrossAProcessRestart(t *testing.T) {
	data := t.TempDir()
	plugin := examplePlugin(t, "echo-go")
	keys := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(agentrtBinary(t), append(append([]string{"keys"}, args...), "--data", data)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	p := startProcess(t, plugin, data)
	p.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200)
	out, _ := keys("create", "only")
	key := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	doWithKey(t, p.url, key).want(t, 200)
	if out, code := keys("revoke", "only"); code != 0 {
		t.Fatalf("keys revoke: exit %d\n%s", code, out)
	}
	p.do("GET", "/ap/v1/agent/tasks", "", "").wantError(t, 401, "API key")
	doWithKey(t, p.url, key).want(t, 401)

	p.kill()
	p = startProcess(t, plugin, data, "--require-auth=false")
	p.do("GET", "/ap/v1/agent/tasks", "", "").wantError(t, 401, "API key")
	if out, code := keys("open"); code != 2 {
		t.Errorf("keys open without --yes: exit %d\n%s", code, out)
	}
	p.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 401)
	if out, code := keys("open", "--yes"); code != 0 || !strings.Contains(out, "authentication turned off by operator command") {
		t.Fatalf("keys open --yes: exit %d\n%s", code, out)
	}
	p.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200)
	// The log reaches the test through a pipe: wait for the line.
	eventually(t, 10*time.Second, "the server's warning of the opening", func() bool {
		return slices.ContainsFunc(strings.Split(p.log(), "\n"), func(l string) bool {
			return strings.Contains(l, "WARN") && strings.Contains(l, "authentication turned off by operator command")
		})
	})
	p.kill()
	p = startProcess(t, plugin, data)
	p.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200)
	eventually(t, 10*time.Second, "a start on an opened directory saying it is open", func() bool {
		return strings.Contains(p.log(), "authentication is off: turned off by operator command")
	})
}
