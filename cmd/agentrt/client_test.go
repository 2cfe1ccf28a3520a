package main

// "agentrt client" against a live agentrt server (and, where a server
// must misbehave, small fakes): every command, its text and JSON output,
// its errors and exit statuses.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol/client"
)

// clientCall is one run of "agentrt client".
type clientCall struct {
	env      map[string]string
	terminal bool
	// stdout, when set, also gets what the command prints, as it prints it.
	stdout io.Writer
}

// run runs "agentrt client args..." and returns what it printed and its
// error.
func (cr clientCall) run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	var w io.Writer = &out
	if cr.stdout != nil {
		w = io.MultiWriter(&out, cr.stdout)
	}
	clock := time.Unix(0, 0)
	err = runClient(context.Background(), args, clientEnv{
		getenv:   func(k string) string { return cr.env[k] },
		stdout:   w,
		stderr:   &errOut,
		terminal: cr.terminal,
		// Each reading of the clock is 50 ms after the one before, so that
		// a progress bar is drawn every other chunk.
		now: func() time.Time { clock = clock.Add(50 * time.Millisecond); return clock },
	})
	return out.String(), errOut.String(), err
}

// agentrtClient runs "agentrt client args..." and fails the test if it
// fails; it returns what the command printed on stdout.
func agentrtClient(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := clientCall{}.run(t, args...)
	if err != nil {
		t.Fatalf("agentrt client %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// clientJSON runs "agentrt client args... --json" and decodes its output
// into v.
func clientJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := agentrtClient(t, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("agentrt client %s --json printed no JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// writeFile writes a file under dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestClientRunExecutesStepsUntilTheLastAndSavesTheArtifacts(t *testing.T) {
	ts := serve(t, examplePlugin(t, "washington-go"))
	dir := filepath.Join(t.TempDir(), "out")
	out := agentrtClient(t, "run", "--url", ts.URL, "Write the word 'Washington' to a .txt file", "--download", dir)
	for _, want := range []string{
		"Write the word 'Washington' to a .txt file",
		"step 1  completed (last)",
		"  Wrote 'Washington' to output.txt\n",
		"done: step 1 was the last",
		"agent  output.txt",
		"saved " + filepath.Join(dir, "output.txt") + " (10 B)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if got := readFile(t, filepath.Join(dir, "output.txt")); got != "Washington" {
		t.Errorf("output.txt holds %q", got)
	}
	var tasks client.TaskListResponse
	ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200).decode(t, &tasks)
	if len(tasks.Tasks) != 1 {
		t.Fatalf("%d tasks, want 1", len(tasks.Tasks))
	}
	var steps client.TaskStepsListResponse
	ts.do("GET", "/ap/v1/agent/tasks/"+tasks.Tasks[0].TaskID+"/steps", "", "").want(t, 200).decode(t, &steps)
	if len(steps.Steps) != 1 {
		t.Errorf("%d steps executed after the last, want 1", len(steps.Steps))
	}
}

// lineWriter calls line with each complete line written to it.
type lineWriter struct {
	buf  []byte
	line func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

func TestClientRunPrintsEachStepAsItEnds(t *testing.T) {
	ts := serve(t, examplePlugin(t, "planner-go"))
	// When a step is printed, the server must have executed it and no
	// other since: a command that printed its steps at the end would show
	// every step done at every line.
	type printed struct {
		name                 string
		last                 bool
		completedWhenPrinted int
	}
	var (
		taskID    string
		steps     []printed
		artifacts []client.Artifact
	)
	w := &lineWriter{line: func(line string) {
		var v struct {
			Task      *client.Task
			Step      *client.Step
			Artifacts []client.Artifact
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("a line of run --json is not JSON: %v\n%s", err, line)
		}
		switch {
		case v.Task != nil:
			taskID = v.Task.TaskID
		case v.Step != nil:
			var l client.TaskStepsListResponse
			ts.do("GET", "/ap/v1/agent/tasks/"+taskID+"/steps", "", "").want(t, 200).decode(t, &l)
			completed := 0
			for _, s := range l.Steps {
				if s.Status == client.StatusCompleted {
					completed++
				}
			}
			steps = append(steps, printed{*v.Step.Name, v.Step.IsLast, completed})
		case v.Artifacts != nil:
			artifacts = v.Artifacts
		}
	}}
	_, errOut, err := clientCall{stdout: w}.run(t, "run", "some words, some more words", "--url", ts.URL, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	want := []printed{{"count words", false, 1}, {"rank words", false, 2}, {"write report", true, 3}}
	if len(steps) != len(want) {
		t.Fatalf("steps printed: %+v, want %+v", steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step %d printed as %+v, want %+v", i+1, steps[i], want[i])
		}
	}
	if len(artifacts) != 1 || artifacts[0].FileName != "report.md" {
		t.Errorf("artifacts printed: %+v, want report.md", artifacts)
	}
}

func TestClientRunGivesUpAfterMaxSteps(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go")) // never marks a step the last
	out, _, err := clientCall{}.run(t, "run", "again", "--url", ts.URL, "--max-steps", "3")
	if err == nil || !strings.Contains(err.Error(), "has not ended after 3 steps (--max-steps)") || exitCode(err) != 1 {
		t.Fatalf("error %v (exit %d), want one saying the task has not ended (exit 1)", err, exitCode(err))
	}
	if n := strings.Count(out, "\nstep "); n != 3 {
		t.Errorf("%d steps printed, want 3:\n%s", n, out)
	}
	var tasks client.TaskListResponse
	ts.do("GET", "/ap/v1/agent/tasks", "", "").want(t, 200).decode(t, &tasks)
	var steps client.TaskStepsListResponse
	ts.do("GET", "/ap/v1/agent/tasks/"+tasks.Tasks[0].TaskID+"/steps", "", "").want(t, 200).decode(t, &steps)
	if len(steps.Steps) != 3 {
		t.Errorf("the server executed %d steps, want 3", len(steps.Steps))
	}
}

func TestClientCommandsAgainstALiveServer(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	url := "--url=" + ts.URL

	var task client.Task
	clientJSON(t, &task, "create", "first", "--additional-input", `{"run": 1}`, url)
	if task.Input == nil || *task.Input != "first" || compactJSON(t, task.AdditionalInput) != `{"run":1}` {
		t.Errorf("created %+v", task)
	}
	var got client.Task
	clientJSON(t, &got, "task", task.TaskID, url)
	if got.TaskID != task.TaskID || *got.Input != "first" {
		t.Errorf("task %s read back as %+v", task.TaskID, got)
	}

	var step client.Step
	clientJSON(t, &step, "step", task.TaskID, "hello", "--additional-input", `{"k":"v"}`, url)
	if step.Output == nil || *step.Output != "hello" || step.Status != client.StatusCompleted || compactJSON(t, step.AdditionalInput) != `{"k":"v"}` {
		t.Errorf("step %+v", step)
	}
	var steps client.TaskStepsListResponse
	clientJSON(t, &steps, "steps", task.TaskID, url)
	if len(steps.Steps) != 1 || steps.Steps[0].StepID != step.StepID || steps.Pagination.TotalItems != 1 {
		t.Errorf("steps %+v", steps)
	}
	var gotStep client.Step
	clientJSON(t, &gotStep, "get-step", task.TaskID, step.StepID, url)
	if gotStep.StepID != step.StepID || *gotStep.Output != "hello" {
		t.Errorf("step %s read back as %+v", step.StepID, gotStep)
	}

	src := t.TempDir()
	notes := writeFile(t, src, "notes.txt", "some notes\n")
	var art client.Artifact
	clientJSON(t, &art, "upload", task.TaskID, notes, "--relative-path", "docs/in", url)
	if art.FileName != "notes.txt" || art.RelativePath == nil || *art.RelativePath != "docs/in" || art.AgentCreated {
		t.Errorf("uploaded %+v", art)
	}
	other := writeFile(t, src, "other.bin", "\x00\x01\x02")
	var art2 client.Artifact
	clientJSON(t, &art2, "upload", task.TaskID, other, url)
	var arts client.TaskArtifactsListResponse
	clientJSON(t, &arts, "artifacts", task.TaskID, url)
	if len(arts.Artifacts) != 2 || arts.Artifacts[0].ArtifactID != art.ArtifactID || arts.Artifacts[1].ArtifactID != art2.ArtifactID {
		t.Errorf("artifacts %+v", arts)
	}

	all := t.TempDir()
	var saved []savedArtifact
	clientJSON(t, &saved, "download", task.TaskID, "--dir", all, url)
	if len(saved) != 2 || saved[0].Path != filepath.Join(all, "docs", "in", "notes.txt") || saved[0].Bytes != 11 {
		t.Errorf("saved %+v", saved)
	}
	if readFile(t, filepath.Join(all, "docs", "in", "notes.txt")) != "some notes\n" || readFile(t, filepath.Join(all, "other.bin")) != "\x00\x01\x02" {
		t.Errorf("downloaded files differ from the uploaded ones")
	}
	one := t.TempDir()
	out := agentrtClient(t, "download", task.TaskID, art2.ArtifactID, "--dir", one, url)
	if want := "saved " + filepath.Join(one, "other.bin") + " (3 B)\n"; out != want {
		t.Errorf("download of one artifact printed %q, want %q", out, want)
	}
	if _, err := os.Stat(filepath.Join(one, "docs")); !os.IsNotExist(err) {
		t.Errorf("an artifact not named was downloaded too")
	}

	// Tasks, a page at a time and all.
	agentrtClient(t, url, "create", "second")
	agentrtClient(t, url, "create")
	var page client.TaskListResponse
	clientJSON(t, &page, "tasks", "--page-size", "2", url)
	if len(page.Tasks) != 2 || page.Pagination != (client.Pagination{TotalItems: 3, TotalPages: 2, CurrentPage: 1, PageSize: 2}) {
		t.Errorf("tasks, page 1 of size 2: %+v", page)
	}
	clientJSON(t, &page, "tasks", "--page", "2", "--page-size", "2", url)
	if len(page.Tasks) != 1 || page.Tasks[0].Input != nil {
		t.Errorf("tasks, page 2 of size 2: %+v", page)
	}
	var allTasks struct{ Tasks []client.Task }
	clientJSON(t, &allTasks, "tasks", "--all", url)
	if len(allTasks.Tasks) != 3 || allTasks.Tasks[0].TaskID != task.TaskID {
		t.Errorf("all tasks: %+v", allTasks)
	}
	out = agentrtClient(t, "tasks", "--page-size", "2", url)
	if !strings.Contains(out, "first") || !strings.Contains(out, "page 1 of 2 (3 tasks in all); --page 2 for the next, --all for every page") {
		t.Errorf("tasks as text:\n%s", out)
	}
	var allSteps, allArts map[string][]json.RawMessage
	clientJSON(t, &allSteps, "steps", task.TaskID, "--all", url)
	clientJSON(t, &allArts, "artifacts", task.TaskID, "--all", url)
	if len(allSteps["steps"]) != 1 || len(allArts["artifacts"]) != 2 {
		t.Errorf("all steps %d, all artifacts %d; want 1 and 2", len(allSteps["steps"]), len(allArts["artifacts"]))
	}
}

// URI artifacts through the client: uploaded with --uri, listed with
// their URI, never fetched by a download (a redirect is not followed).
func TestClientUploadsURIsListsSchemesAndDoesNotFetchURIArtifacts(t *testing.T) {
	var fetched atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fetched.Add(1) }))
	defer origin.Close()
	ts := serve(t, examplePlugin(t, "echo-go"))
	url := "--url=" + ts.URL
	task := ts.createTask(`{}`).TaskID
	target := origin.URL + "/report.pdf"

	var art client.Artifact
	clientJSON(t, &art, "upload", task, "--uri", target, "--file-name", "r.pdf", "--relative-path", "refs", url)
	if art.URI != target || art.FileName != "r.pdf" || *art.RelativePath != "refs" || art.Source != "input" || art.StepID != nil {
		t.Errorf("uploaded %+v", art)
	}
	out := agentrtClient(t, "upload", task, "--uri", target, url)
	if !strings.HasPrefix(out, "uploaded "+target+" as artifact ") || !strings.HasSuffix(out, "  report.pdf\n") {
		t.Errorf("upload --uri printed %q", out)
	}
	if out := agentrtClient(t, "schemes", url); out != "input:  file http https\noutput: file http https\n" {
		t.Errorf("schemes printed %q", out)
	}
	src := writeFile(t, t.TempDir(), "notes.txt", "notes")
	agentrtClient(t, "upload", task, src, url)
	out = agentrtClient(t, "artifacts", task, url)
	if !strings.Contains(out, "URI") || !strings.Contains(out, "refs/r.pdf  "+target) {
		t.Errorf("artifacts printed:\n%s", out)
	}
	dir := t.TempDir()
	out, errOut, err := clientCall{}.run(t, "download", task, "--dir", dir, url)
	if err != nil || !strings.Contains(out, "saved "+filepath.Join(dir, "notes.txt")) ||
		strings.Count(errOut, "a URI artifact, not fetched: "+target) != 2 {
		t.Errorf("download: %v\n%s\n%s", err, out, errOut)
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the client fetched the URI artifact %d times", n)
	}
	// The library: a redirect is an error, not followed.
	c, _ := client.New(ts.URL)
	_, err = c.DownloadArtifact(context.Background(), task, art.ArtifactID, io.Discard, nil)
	var re *client.RedirectError
	if !errors.As(err, &re) || re.Location != target || re.Status != 307 || fetched.Load() != 0 {
		t.Errorf("DownloadArtifact of a URI artifact: %v", err)
	}
}

func TestClientFlagsMayComeBeforeOrAfterTheCommand(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	id := ts.createTask(`{"input":"x"}`).TaskID
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"before", nil, []string{"--url", ts.URL, "--json", "task", id}},
		{"after", nil, []string{"task", id, "--url", ts.URL, "--json"}},
		{"around", nil, []string{"--json", "task", "--url", ts.URL, id}},
		{"one dash", nil, []string{"-json", "task", id, "-url=" + ts.URL}},
		{"URL from the environment", map[string]string{"AGENTRT_URL": ts.URL}, []string{"task", id, "--json"}},
		{"the flag over the environment", map[string]string{"AGENTRT_URL": "http://127.0.0.1:1"}, []string{"--url", ts.URL, "task", id, "--json"}},
		{"URL ending in /ap/v1", nil, []string{"task", id, "--json", "--url", ts.URL + "/ap/v1"}},
		{"URL ending in /ap/v1/", nil, []string{"task", id, "--json", "--url", ts.URL + "/ap/v1/"}},
		{"URL without a scheme", nil, []string{"task", id, "--json", "--url", strings.TrimPrefix(ts.URL, "http://")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := clientCall{env: tc.env}.run(t, tc.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			var task client.Task
			if err := json.Unmarshal([]byte(out), &task); err != nil || task.TaskID != id {
				t.Errorf("printed %q, want task %s as JSON", out, id)
			}
		})
	}
}

func TestClientServerErrorsShowTheStatusAndTheServersMessage(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	id := ts.createTask(`{}`).TaskID
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"task", "nope"}, `get task nope: the server answered 404 Not Found: task "nope" not found`},
		{[]string{"get-step", id, "nope"}, `the server answered 404 Not Found: step "nope" not found`},
		{[]string{"upload", "nope", "client_test.go"}, `the server answered 404 Not Found: task "nope" not found`},
		{[]string{"download", "nope"}, `the server answered 404 Not Found: task "nope" not found`},
		{[]string{"download", id, "not-an-artifact"}, "task " + id + " has no artifact not-an-artifact"},
	} {
		_, _, err := clientCall{}.run(t, append(tc.args, "--url", ts.URL)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	_, _, err := clientCall{}.run(t, "task", "nope", "--url", ts.URL)
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 404 || exitCode(err) != 1 {
		t.Errorf("error %v (exit %d): want a *client.Error, 404, exit 1", err, exitCode(err))
	}
}

func TestClientUnreachableServerIsOneLineNamingTheURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, _, err = clientCall{}.run(t, "tasks", "--url", "http://"+addr)
	want := "cannot reach the Agent Protocol server at http://" + addr + "/ap/v1: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q, want one line starting %q", err, want)
	}
	if exitCode(err) != 1 {
		t.Errorf("exit status %d, want 1", exitCode(err))
	}
}

func TestClientCommandLineMistakesAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "client needs a command"},
		{[]string{"--json"}, "client needs a command"},
		{[]string{"tasx"}, `unknown client command "tasx"`},
		{[]string{"task"}, "usage: agentrt client task TASK_ID [flags]"},
		{[]string{"task", "a", "b"}, "usage: agentrt client task TASK_ID [flags]"},
		{[]string{"get-step", "a"}, "usage: agentrt client get-step TASK_ID STEP_ID [flags]"},
		{[]string{"run"}, "usage: agentrt client run INPUT [flags]"},
		{[]string{"upload", "t"}, "upload needs a FILE, or --uri URI"},
		{[]string{"upload", "t", "f", "--uri", "https://x"}, "a FILE or --uri, not both"},
		{[]string{"upload", "t", "f", "--file-name", "n"}, "--file-name goes with --uri"},
		{[]string{"schemes", "x"}, "usage: agentrt client schemes [flags]"},
		{[]string{"create", "--additional-input", "[1]"}, "bad --additional-input"},
		{[]string{"create", "--additional-input", "null"}, "bad --additional-input"},
		{[]string{"step", "t", "--additional-input", "{"}, "bad --additional-input"},
		{[]string{"tasks", "--all", "--page", "2"}, "--all reads every page"},
		{[]string{"tasks", "--page", "-1"}, "bad --page"},
		{[]string{"run", "x", "--max-steps", "0"}, "bad --max-steps"},
		{[]string{"tasks", "--url", "ftp://host"}, "bad --url"},
		{[]string{"tasks", "--timeout", "-1s"}, "bad --timeout"},
		{[]string{"steps", "t", "--page-size", "x"}, "invalid value"},
		{[]string{"tasks", "--frobnicate"}, "flag provided but not defined: -frobnicate"},
		{[]string{"task", "t", "--download", "d"}, "flag provided but not defined: -download"},
	} {
		_, _, err := clientCall{}.run(t, tc.args...)
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) || exitCode(err) != 2 {
			t.Errorf("agentrt client %s: %v (exit %d), want a usage error saying %q", strings.Join(tc.args, " "), err, exitCode(err), tc.want)
		}
	}
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"download", "-h"}} {
		if _, _, err := (clientCall{}).run(t, args...); !errors.Is(err, flag.ErrHelp) || exitCode(err) != 0 {
			t.Errorf("agentrt client %s: %v, want help (exit 0)", strings.Join(args, " "), err)
		}
	}
	out, _, err := clientCall{}.run(t, "help")
	if err != nil || !strings.Contains(out, "download TASK_ID [ARTIFACT_ID...]") {
		t.Errorf("agentrt client help: %v\n%s", err, out)
	}
}

func TestClientSendsTheAPIKeyAsABearerToken(t *testing.T) {
	agent := serve(t, examplePlugin(t, "echo-go"))
	// A proxy that wants a key in front of agentrt, which has none.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"message":"a valid API key is required"}`)
			return
		}
		agent.srv.handler.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		ok   bool
	}{
		{"no key", nil, nil, false},
		{"the flag", nil, []string{"--api-key", "s3cret"}, true},
		{"the environment", map[string]string{"AGENTRT_API_KEY": "s3cret"}, nil, true},
		{"the flag over the environment", map[string]string{"AGENTRT_API_KEY": "wrong"}, []string{"--api-key=s3cret"}, true},
		{"a wrong key", nil, []string{"--api-key", "wrong"}, false},
	} {
		_, _, err := clientCall{env: tc.env}.run(t, append([]string{"tasks", "--url", proxy.URL}, tc.args...)...)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "401 Unauthorized: a valid API key is required")):
			t.Errorf("%s: %v, want the proxy's 401", tc.name, err)
		}
	}
	// The key is a secret: --help does not show it.
	_, errOut, _ := clientCall{env: map[string]string{"AGENTRT_API_KEY": "s3cret"}}.run(t, "tasks", "--help")
	if strings.Contains(errOut, "s3cret") {
		t.Errorf("--help shows the API key:\n%s", errOut)
	}
}

func TestClientDownloadReplacesFilesOnlyWithForce(t *testing.T) {
	ts := serve(t, examplePlugin(t, "washington-go"))
	dir := t.TempDir()
	var lines []json.RawMessage
	out := agentrtClient(t, "run", "Write the word 'Washington' to a .txt file", "--url", ts.URL, "--json", "--download", dir)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		lines = append(lines, json.RawMessage(l))
	}
	var first struct{ Task client.Task }
	json.Unmarshal(lines[0], &first)
	var last struct{ Saved []savedArtifact }
	json.Unmarshal(lines[len(lines)-1], &last)
	if len(last.Saved) != 1 || last.Saved[0].Path != filepath.Join(dir, "output.txt") {
		t.Fatalf("run --download --json ends with %s", lines[len(lines)-1])
	}
	dest := writeFile(t, dir, "output.txt", "mine")

	_, errOut, err := clientCall{}.run(t, "download", first.Task.TaskID, "--dir", dir, "--url", ts.URL)
	if err == nil || exitCode(err) != 1 || !strings.Contains(errOut, "output.txt: file already exists (not overwritten); --force replaces it") {
		t.Errorf("download over an existing file: %v (exit %d)\nstderr: %s", err, exitCode(err), errOut)
	}
	if got := readFile(t, dest); got != "mine" {
		t.Errorf("the existing file holds %q", got)
	}
	agentrtClient(t, "download", first.Task.TaskID, "--dir", dir, "--url", ts.URL, "--force")
	if got := readFile(t, dest); got != "Washington" {
		t.Errorf("with --force, the file holds %q", got)
	}
}

func TestClientDownloadSavesTheLatestOfArtifactsWithOnePath(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	id := ts.createTask(`{}`).TaskID
	src := t.TempDir()
	agentrtClient(t, "upload", id, writeFile(t, src, "notes.txt", "first"), "--url", ts.URL)
	agentrtClient(t, "upload", id, writeFile(t, src, "notes.txt", "second"), "--url", ts.URL)
	dir := t.TempDir()
	_, errOut, err := clientCall{}.run(t, "download", id, "--dir", dir, "--url", ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "notes.txt")); got != "second" {
		t.Errorf("notes.txt holds %q, want the later upload", got)
	}
	if !strings.Contains(errOut, "has the same path notes.txt") {
		t.Errorf("stderr does not say an artifact was skipped: %s", errOut)
	}
}

func TestClientProgressBarIsDrawnOnlyOnATerminal(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	src := t.TempDir()
	big := writeFile(t, src, "big.bin", strings.Repeat("0123456789abcdef", 3<<20/16))
	small := writeFile(t, src, "small.txt", "small")
	withBig := ts.createTask(`{}`).TaskID
	agentrtClient(t, "upload", withBig, big, "--url", ts.URL)
	for _, tc := range []struct {
		name     string
		terminal bool
		args     []string
		want     string // on stderr; "" for nothing
	}{
		{"upload, terminal", true, []string{"upload", ts.createTask(`{}`).TaskID, big}, "upload big.bin  ["},
		{"upload, no terminal", false, []string{"upload", ts.createTask(`{}`).TaskID, big}, ""},
		{"small upload, terminal", true, []string{"upload", ts.createTask(`{}`).TaskID, small}, ""},
		{"download, terminal", true, []string{"download", withBig, "--dir", t.TempDir()}, "download big.bin  ["},
		{"download, no terminal", false, []string{"download", withBig, "--dir", t.TempDir()}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, err := clientCall{terminal: tc.terminal}.run(t, append(tc.args, "--url", ts.URL)...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if errOut != "" {
					t.Errorf("stderr: %q, want nothing", errOut)
				}
				return
			}
			// Drawn in place, complete at the end, then cleared.
			if !strings.HasPrefix(errOut, "\r"+tc.want) || !strings.Contains(errOut, "100%  3.00 MiB / 3.00 MiB") ||
				!strings.HasSuffix(errOut, "  \r") {
				t.Errorf("stderr: %q", errOut)
			}
		})
	}
}

func TestClientTextNeverPrintsTheServersControlCharacters(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	// ESC sequences that would retitle the terminal and clear the screen.
	hostile := "\x1b]0;pwned\x07\x1b[2J"
	task := ts.createTask(`{"input": "` + strings.NewReplacer("\x1b", `\u001b`, "\x07", `\u0007`).Replace(hostile) + `"}`)
	ts.step(task.TaskID, `{"input": "`+strings.NewReplacer("\x1b", `\u001b`, "\x07", `\u0007`).Replace(hostile)+`\nline two"}`)
	for _, args := range [][]string{{"task", task.TaskID}, {"tasks"}, {"steps", task.TaskID}} {
		out := agentrtClient(t, append(args, "--url", ts.URL)...)
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%s printed control characters: %q", args[0], out)
		}
		if !strings.Contains(out, `\x1b]0;pwned\a\x1b[2J`) {
			t.Errorf("%s does not show the input escaped: %q", args[0], out)
		}
	}
	_, _, err := clientCall{}.run(t, "get-step", task.TaskID, hostile, "--url", ts.URL)
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\x07") {
		t.Errorf("error %q", err)
	}
}

func TestClientStalledDownloadStopsAtTheTimeoutAndLeavesNothing(t *testing.T) {
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/artifacts") {
			io.WriteString(w, `{"artifacts":[{"artifact_id":"a1","agent_created":true,"file_name":"slow.bin","relative_path":""}],`+
				`"pagination":{"total_items":1,"total_pages":1,"current_page":1,"page_size":100}}`)
			return
		}
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, "the first bytes, then nothing")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the client gives up
	}))
	defer fake.Close()
	dir := t.TempDir()
	_, errOut, err := clientCall{}.run(t, "download", "t1", "--dir", dir, "--url", fake.URL, "--timeout", "200ms")
	if err == nil || !strings.HasPrefix(errOut, "agentrt: download slow.bin: nothing moved for 200ms (--timeout)\n") {
		t.Errorf("stalled download: %v\nstderr: %s", err, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left in the directory: %v", entries)
	}
}

func TestClientProgressBar(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(0, 0)
	bar := newProgressBar(&out, "download x", func() time.Time { return clock })
	step := func(d time.Duration, done, total int64) string {
		clock = clock.Add(d)
		out.Reset()
		bar.update(done, total)
		return out.String()
	}
	const mib = 1 << 20
	if got := step(0, 1000, 10*mib); got != "\rdownload x  [>                       ]   0%  1000 B / 10.0 MiB" {
		t.Errorf("first draw %q", got)
	}
	if got := step(50*time.Millisecond, 2*mib, 10*mib); got != "" {
		t.Errorf("redrawn within %s: %q", progressInterval, got)
	}
	if got := step(50*time.Millisecond, 5*mib, 10*mib); got != "\rdownload x  [============>           ]  50%  5.00 MiB / 10.0 MiB  50.0 MiB/s" {
		t.Errorf("draw at 50%% %q", got)
	}
	end := step(time.Millisecond, 10*mib, 10*mib)
	if !strings.Contains(end, "100%") {
		t.Errorf("the end is drawn however soon it comes: %q", end)
	}
	out.Reset()
	bar.finish()
	if want := "\r" + strings.Repeat(" ", len(end)-1) + "\r"; out.String() != want {
		t.Errorf("finish wrote %q, want the line cleared", out.String())
	}
	if got := step(time.Second, 10*mib, 10*mib); got != "" {
		t.Errorf("drawn after finish: %q", got)
	}

	small := newProgressBar(&out, "upload y", time.Now)
	out.Reset()
	small.update(1000, 1000)
	small.update(4000, -1)
	small.finish()
	if out.Len() != 0 {
		t.Errorf("a small transfer drew %q", out.String())
	}
}
