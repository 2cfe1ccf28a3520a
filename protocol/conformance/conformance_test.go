package conformance

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runAgainst runs the checks only selects against h, served on a local
// port.
func runAgainst(t *testing.T, h http.Handler, timeout time.Duration, only ...string) *Report {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	root, err := APIRoot(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	checks, err := Select(only)
	if err != nil {
		t.Fatal(err)
	}
	return Run(context.Background(), Config{Root: root, Checks: checks, Timeout: timeout})
}

// withStatus returns the ids of the checks that ended with status, sorted.
func withStatus(r *Report, status Status) []string {
	var ids []string
	for _, res := range r.Results {
		if res.Status == status {
			ids = append(ids, res.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func allIDs() []string {
	var ids []string
	for _, c := range Checks() {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestAConformingServerPassesEveryCheck(t *testing.T) {
	// Twice against the same server: the second run finds it full of the
	// first run's tasks, and must not care.
	f := newFakeServer(breaks{})
	for run := 1; run <= 2; run++ {
		r := runAgainst(t, f, 5*time.Second)
		if r.Failed != 0 || r.Skipped != 0 || r.Passed != len(Checks()) {
			for _, res := range r.Results {
				if res.Status != StatusPass {
					t.Errorf("run %d: %s: %s: %s", run, res.ID, res.Status, res.Message)
				}
			}
			t.Fatalf("run %d: %s, want all %d passed", run, r.Summary(), len(Checks()))
		}
	}
}

// brokenServers are servers that each get behaviours wrong, and the checks
// each must fail: exactly those.
var brokenServers = []struct {
	name string
	breaks
	fail []string
}{
	{"unknown ids are 500", breaks{unknownIDs500: true}, []string{
		"errors.unknown-task", "errors.unknown-step", "errors.unknown-artifact", "errors.malformed-ids",
		"errors.step-of-other-task", "errors.artifact-of-other-task"}},
	{"lists are bare arrays", breaks{bareArrays: true}, []string{
		"tasks.list", "steps.list", "steps.list-order", "artifacts.list", "artifacts.uploaded-listed", "artifacts.agent-created",
		"pagination.envelope", "pagination.page-size-one", "pagination.defaults", "pagination.counts", "pagination.past-end",
		"pagination.order", "pagination.page-size-cap"}},
	{"uploads ignore relative_path", breaks{ignoreRelativePath: true}, []string{
		"uploads.relative-path", "uploads.traversal-refused", "uploads.absolute-refused"}},
	{"steps and artifacts found through any task", breaks{globalIDs: true}, []string{
		"errors.step-of-other-task", "errors.artifact-of-other-task"}},
	{"route errors are plain text", breaks{plainRouteErrors: true}, []string{"errors.unknown-route", "errors.wrong-method"}},
	{"bodies are required", breaks{noEmptyBody: true}, []string{"tasks.create-without-body", "steps.execute-without-body"}},
	{"pretty-printed JSON is refused", breaks{compactJSONOnly: true}, []string{
		"tasks.create", "steps.execute", "steps.execute-again", "steps.after-last", "artifacts.agent-created", "downloads.agent-artifact"}},
	{"mistyped bodies are taken", breaks{lenientBodies: true}, []string{"errors.mistyped-body", "errors.additional-input-not-object"}},
	{"text that is not Unicode is taken", breaks{lenientText: true}, []string{"errors.invalid-text"}},
	{"malformed JSON is 400", breaks{malformed400: true}, []string{"errors.malformed-json"}},
	{"additional_input is dropped", breaks{dropAdditional: true}, []string{"tasks.round-trip"}},
	{"get-task leaves out additional_input", breaks{getOmitsAdditional: true}, []string{"tasks.get", "tasks.round-trip"}},
	{"get-step is not a Step", breaks{getStepShape: true}, []string{"steps.get"}},
	{"the official page query is slow", breaks{slowPaging: true}, []string{"tasks.response-time"}},
	{"a finished task refuses steps", breaks{refuseAfterLast: true}, []string{"steps.execute-again", "steps.after-last"}},
	{"lists are newest first", breaks{newestFirst: true}, []string{"steps.list-order", "pagination.order"}},
	{"total_pages rounds down", breaks{floorPages: true}, []string{"pagination.counts", "pagination.page-size-cap"}},
	{"page_size defaults to 20", breaks{defaultPageSize20: true}, []string{"pagination.defaults"}},
	{"bad page values are 500", breaks{badPage500: true}, []string{"pagination.bad-values"}},
	{"huge page sizes are refused", breaks{refuseHugePage: true}, []string{"pagination.page-size-cap"}},
	{"get-task leaves out uploads", breaks{uploadsNotInTask: true}, []string{"artifacts.in-task"}},
	{"uploads are agent_created", breaks{uploadsAgentMade: true}, []string{"uploads.upload", "artifacts.uploaded-listed"}},
	{"file names keep the client's directory", breaks{keepClientDir: true}, []string{"uploads.file-name-directory"}},
	{"an upload without a file is 400", breaks{noFile400: true}, []string{"uploads.no-file"}},
	{"the agent's artifacts are not listed", breaks{agentArtsUnlisted: true}, []string{"artifacts.agent-created"}},
	{"the agent's artifacts cannot be downloaded", breaks{agentArtsNo404: true}, []string{"downloads.agent-artifact"}},
	{"downloads are text/plain", breaks{textPlainDownload: true}, []string{"downloads.content-type"}},
	{"downloads have no Content-Disposition", breaks{noDisposition: true}, []string{"downloads.attachment", "downloads.non-ascii-name"}},
	{"downloads ignore Range", breaks{noRange: true}, []string{"downloads.range"}},
	{"downloads mangle bytes that are not UTF-8", breaks{mangleBytes: true}, []string{"downloads.exact-bytes"}},
	{"downloads add a newline", breaks{appendNewline: true}, []string{"downloads.download", "downloads.exact-bytes"}},
	{"a step in the background has no Location", breaks{asyncNoLocation: true}, []string{"steps.async"}},
	{"a step that ended is cancelled", breaks{cancelEnded200: true}, []string{"steps.cancel-ended"}},
	{"a stream ignores Last-Event-ID", breaks{eventsIgnoreLastID: true}, []string{"events.stream-resume"}},
	{"the events page is a bare array", breaks{eventPageBare: true}, []string{"events.page"}},
	{"the events page has no counts", breaks{eventPageNoCounts: true}, []string{"events.page"}},
}

func TestEachBrokenBehaviourFailsItsChecksAndOnlyThose(t *testing.T) {
	for _, tc := range brokenServers {
		t.Run(tc.name, func(t *testing.T) {
			r := runAgainst(t, newFakeServer(tc.breaks), 5*time.Second)
			want := slices.Sorted(slices.Values(tc.fail))
			if got := withStatus(r, StatusFail); !slices.Equal(got, want) {
				for _, res := range r.Results {
					if res.Status == StatusFail {
						t.Logf("%s: %s", res.ID, res.Message)
					}
				}
				t.Errorf("failed %q, want %q", got, want)
			}
			if skipped := withStatus(r, StatusSkip); len(skipped) != 0 {
				t.Errorf("skipped %q, want none", skipped)
			}
			for _, res := range r.Results {
				if res.Status == StatusFail {
					wantNamesTheExchange(t, res)
				}
			}
		})
	}
}

// wantNamesTheExchange fails unless a failed check's message names its
// request (method and path) and what came back (status and body), and
// the result carries both.
func wantNamesTheExchange(t *testing.T, res Result) {
	t.Helper()
	if res.Request == nil || res.Response == nil {
		t.Errorf("%s failed without its request and response: %+v", res.ID, res)
		return
	}
	if head := res.Request.Method + " " + res.Request.Path + ": "; !strings.HasPrefix(res.Message, head) {
		t.Errorf("%s: message %q does not start with the request %q", res.ID, res.Message, head)
	}
	if got := "; got " + strconv.Itoa(res.Response.Status); !strings.Contains(res.Message, got) {
		t.Errorf("%s: message %q does not say what came back (%q)", res.ID, res.Message, got)
	}
}

func TestEveryCheckFailsAgainstSomeBrokenServer(t *testing.T) {
	failed := map[string]bool{}
	for _, tc := range brokenServers {
		for _, id := range tc.fail {
			failed[id] = true
		}
	}
	for _, id := range allIDs() {
		if !failed[id] {
			t.Errorf("no broken server fails %s: it is not shown to catch anything", id)
		}
	}
}

// TestTheJSSDKsFaultsAreCaught is a server with the reference JS SDK's
// faults: 500 for unknown ids, lists without their envelope, relative_path
// ignored. Each fault's checks fail, saying which request showed it and
// what came back.
func TestTheJSSDKsFaultsAreCaught(t *testing.T) {
	r := runAgainst(t, newFakeServer(breaks{unknownIDs500: true, bareArrays: true, ignoreRelativePath: true}), 5*time.Second)
	results := map[string]Result{}
	for _, res := range r.Results {
		results[res.ID] = res
	}
	for _, tc := range []struct {
		id   string
		want []string // in the message, in order
	}{
		{"errors.unknown-task", []string{"GET /ap/v1/agent/tasks/", "want 404", "got 500 application/json", `{"error":`}},
		{"errors.unknown-step", []string{"GET /ap/v1/agent/tasks/", "/steps/", "want 404", "got 500"}},
		{"errors.unknown-artifact", []string{"GET /ap/v1/agent/tasks/", "/artifacts/", "want 404", "got 500"}},
		{"errors.malformed-ids", []string{"GET /ap/v1/agent/tasks/not-an-id: ", "want 404", "got 500"}},
		{"tasks.list", []string{"GET /ap/v1/agent/tasks: ", "not an object", "got 200 application/json ["}},
		{"pagination.envelope", []string{"GET /ap/v1/agent/tasks: ", "not an object", "got 200 application/json ["}},
		{"steps.list", []string{"GET /ap/v1/agent/tasks/", "/steps: ", "got 200 application/json ["}},
		{"artifacts.list", []string{"GET /ap/v1/agent/tasks/", "/artifacts: ", "got 200 application/json ["}},
		{"uploads.relative-path", []string{"POST /ap/v1/agent/tasks/", "/artifacts: ", `want relative_path "docs/in"`, `got 200`, `"relative_path":null`}},
		{"uploads.traversal-refused", []string{"POST /ap/v1/agent/tasks/", "/artifacts: ", "want a 4xx", "got 200"}},
		{"uploads.absolute-refused", []string{"POST /ap/v1/agent/tasks/", "/artifacts: ", "want a 4xx", "got 200"}},
	} {
		res := results[tc.id]
		if res.Status != StatusFail {
			t.Errorf("%s: %s, want fail", tc.id, res.Status)
			continue
		}
		rest := res.Message
		for _, w := range tc.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: message %q does not say %q (after what came before it)", tc.id, res.Message, w)
				break
			}
			rest = rest[i+len(w):]
		}
	}
	if r.Failed == 0 {
		t.Fatal("nothing failed")
	}
}

func TestChecksThatNeedTheAgentAreSkippedWhenItDoesNotDoIt(t *testing.T) {
	r := runAgainst(t, newFakeServer(breaks{noArtifacts: true, neverLast: true}), 5*time.Second)
	want := []string{"artifacts.agent-created", "downloads.agent-artifact", "steps.after-last"}
	if got := withStatus(r, StatusSkip); !slices.Equal(got, want) {
		t.Errorf("skipped %q, want %q", got, want)
	}
	if r.Failed != 0 {
		t.Errorf("failed %q, want none", withStatus(r, StatusFail))
	}
	for _, res := range r.Results {
		if res.Status == StatusSkip && !strings.HasPrefix(res.Message, "needs an agent that ") {
			t.Errorf("%s skipped saying %q, want it to say what it needs of the agent", res.ID, res.Message)
		}
		if c, _ := lookup(res.ID); (c.Needs != "") != slices.Contains(want, res.ID) {
			t.Errorf("%s: Needs is %q", res.ID, c.Needs)
		}
	}
}

func TestAServerThatHangsFailsOneCheckAndTheRestAreNotRun(t *testing.T) {
	r := runAgainst(t, newFakeServer(breaks{hang: true}), 200*time.Millisecond)
	first := r.Results[0]
	if first.Status != StatusFail || !strings.Contains(first.Message, "no answer within 200ms") ||
		!strings.HasPrefix(first.Message, "POST /ap/v1/agent/tasks: ") {
		t.Errorf("first check %s: %s, want it failed saying POST /ap/v1/agent/tasks had no answer within 200ms", first.Status, first.Message)
	}
	if first.Response == nil || !strings.Contains(first.Response.Error, "no answer within") {
		t.Errorf("first check's response %+v, want the error", first.Response)
	}
	if r.Failed != 1 || r.Skipped != len(Checks())-1 {
		t.Errorf("%s, want 1 failed and the rest skipped", r.Summary())
	}
	for _, res := range r.Results[1:] {
		if want := "not run: the server stopped answering (see " + first.ID + ")"; res.Message != want {
			t.Fatalf("%s: %q, want %q", res.ID, res.Message, want)
		}
	}
}

func TestAServerThatIsNotThereFailsClearly(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	root, err := APIRoot(url)
	if err != nil {
		t.Fatal(err)
	}
	r := Run(context.Background(), Config{Root: root, Timeout: 5 * time.Second})
	if msg := r.Results[0].Message; r.Failed != 1 || !strings.Contains(msg, "no answer") || !strings.Contains(msg, "refused") {
		t.Errorf("%s; first: %s, want one failure saying the connection was refused", r.Summary(), msg)
	}
}

func TestACancelledRunRunsNothingMore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv := httptest.NewServer(newFakeServer(breaks{}))
	defer srv.Close()
	root, _ := APIRoot(srv.URL)
	r := Run(ctx, Config{Root: root})
	if r.Skipped != len(Checks()) || !strings.Contains(r.Results[0].Message, "context canceled") {
		t.Errorf("%s; first: %s, want every check skipped as cancelled", r.Summary(), r.Results[0].Message)
	}
}

func TestAPIRootTakesABaseURLOrTheAPIRoot(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:8000", "http://127.0.0.1:8000/ap/v1"},
		{"http://127.0.0.1:8000/", "http://127.0.0.1:8000/ap/v1"},
		{"http://127.0.0.1:8000/ap/v1", "http://127.0.0.1:8000/ap/v1"},
		{"http://127.0.0.1:8000/ap/v1/", "http://127.0.0.1:8000/ap/v1"},
		{"http://127.0.0.1:8000/ap/v1/agent/tasks", "http://127.0.0.1:8000/ap/v1"},
		{"127.0.0.1:8000", "http://127.0.0.1:8000/ap/v1"},
		{"https://agents.example/agents/washington", "https://agents.example/agents/washington/ap/v1"},
		{"https://agents.example/agents/washington/ap/v1", "https://agents.example/agents/washington/ap/v1"},
	} {
		u, err := APIRoot(tc.in)
		if err != nil || u.String() != tc.want {
			t.Errorf("APIRoot(%q) = %v, %v; want %s", tc.in, u, err, tc.want)
		}
	}
	for _, bad := range []string{"", "ftp://host/", "http://", "http://host:8000/?x=1"} {
		if u, err := APIRoot(bad); err == nil {
			t.Errorf("APIRoot(%q) = %v, want an error", bad, u)
		}
	}
}

func TestSelectByGroupLevelAndID(t *testing.T) {
	count := func(pred func(Check) bool) int {
		n := 0
		for _, c := range Checks() {
			if pred(c) {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		names []string
		want  func(Check) bool
	}{
		{nil, func(Check) bool { return true }},
		{[]string{"spec"}, func(c Check) bool { return c.Level == LevelSpec }},
		{[]string{"strict"}, func(c Check) bool { return c.Level == LevelStrict }},
		{[]string{"uploads"}, func(c Check) bool { return c.Group == "uploads" }},
		{[]string{"uploads", "downloads"}, func(c Check) bool { return c.Group == "uploads" || c.Group == "downloads" }},
		{[]string{"spec", "errors"}, func(c Check) bool { return c.Level == LevelSpec && c.Group == "errors" }},
		{[]string{"tasks.get", "errors"}, func(c Check) bool { return c.ID == "tasks.get" || c.Group == "errors" }},
		{[]string{"strict", "tasks.get"}, func(Check) bool { return false }},
	} {
		got, err := Select(tc.names)
		if err != nil {
			t.Fatalf("Select(%q): %v", tc.names, err)
		}
		for _, c := range got {
			if !tc.want(c) {
				t.Errorf("Select(%q) selected %s", tc.names, c.ID)
			}
		}
		if len(got) != count(tc.want) {
			t.Errorf("Select(%q) selected %d checks, want %d", tc.names, len(got), count(tc.want))
		}
	}
	if _, err := Select([]string{"uploadz"}); err == nil || !strings.Contains(err.Error(), "uploads") {
		t.Errorf("Select(uploadz): %v, want an error naming the groups", err)
	}
}

func TestChecksAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Checks() {
		if seen[c.ID] {
			t.Errorf("%s: two checks have this id", c.ID)
		}
		seen[c.ID] = true
		if !strings.HasPrefix(c.ID, c.Group+".") || !slices.Contains(Groups, c.Group) {
			t.Errorf("%s: group %q; an id is group.name, of one of %q", c.ID, c.Group, Groups)
		}
		if !slices.Contains(Levels, c.Level) || c.Asserts == "" || c.run == nil {
			t.Errorf("%s: level %q, asserts %q: want a level, a line and a run", c.ID, c.Level, c.Asserts)
		}
		if len(c.Official) > 0 && c.Level != LevelSpec {
			t.Errorf("%s re-expresses the official suite, so it is at level spec, not %s", c.ID, c.Level)
		}
	}
	var order []string
	for _, c := range Checks() {
		if len(order) == 0 || order[len(order)-1] != c.Group {
			order = append(order, c.Group)
		}
	}
	if !slices.Equal(order, Groups) {
		t.Errorf("checks run in groups %q, want %q", order, Groups)
	}
}

func TestTextReportGroupsChecksAndEndsWithTheTotals(t *testing.T) {
	r := runAgainst(t, newFakeServer(breaks{noRange: true, neverLast: true}), 5*time.Second)
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if want := strconv.Itoa(len(Checks())-2) + " passed, 1 failed, 1 skipped"; lines[len(lines)-1] != want {
		t.Errorf("last line %q, want %q", lines[len(lines)-1], want)
	}
	for _, g := range Groups {
		if !slices.Contains(lines, g) {
			t.Errorf("no heading for group %s", g)
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  FAIL  strict  downloads\.range +a download with Range.*\n +GET /ap/v1/agent/tasks/[^ ]+/artifacts/[^ ]+: want 206; got 200 application/octet-stream 0123456789$`),
		regexp.MustCompile(`(?m)^  skip  strict  steps\.after-last +after a step.*\n +needs an agent that marks a step is_last`),
		regexp.MustCompile(`(?m)^  pass  spec    tasks\.create +create-task answers 200`),
	} {
		if !want.MatchString(text) {
			t.Errorf("report does not match %s:\n%s", want, text)
		}
	}
}

func TestJSONReportCarriesEachCheckAndTheTotals(t *testing.T) {
	r := runAgainst(t, newFakeServer(breaks{noRange: true}), 5*time.Second, "downloads")
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		URL    string `json:"url"`
		Checks []struct {
			ID, Group, Level, Status, Message string
			Request                           *struct{ Method, Path, Body string }
			Response                          *struct {
				Status      int
				ContentType string `json:"content_type"`
				Body        string
			}
		}
		Passed, Failed, Skipped int
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Passed != len(got.Checks)-1 || got.Failed != 1 || got.Skipped != 0 || !strings.HasSuffix(got.URL, "/ap/v1") {
		t.Errorf("url %q, totals %d/%d/%d, want the API root and all passed but one", got.URL, got.Passed, got.Failed, got.Skipped)
	}
	for _, c := range got.Checks {
		if c.Group != "downloads" || c.Request == nil || c.Response == nil || c.Level == "" || c.Message == "" {
			t.Errorf("check %+v: want a downloads check with its level, message, request and response", c)
			continue
		}
		if c.ID == "downloads.range" && (c.Status != "fail" || c.Response.Status != 200 || c.Response.Body != "0123456789" ||
			c.Response.ContentType != "application/octet-stream" || c.Request.Method != "GET") {
			t.Errorf("downloads.range: %+v %+v %+v, want failed on the GET that answered 200 with the whole file", c, c.Request, c.Response)
		}
	}
}

// TestEveryOfficialAssertionIsReexpressed reads the official suite, when
// it is beside the repository, and wants each of its assertions named by
// a check.
func TestEveryOfficialAssertionIsReexpressed(t *testing.T) {
	path := filepath.Join("..", "..", "..", "shared", "conformance", "agent_protocol_v1.offline.json")
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("%s is not there", path)
	} else if err != nil {
		t.Fatal(err)
	}
	var collection struct {
		Item []struct {
			Name  string
			Event []struct {
				Listen string
				Script struct{ Exec []string }
			}
			Item []struct {
				Name  string
				Event []struct {
					Listen string
					Script struct{ Exec []string }
				}
			}
		}
	}
	if err := json.Unmarshal(b, &collection); err != nil {
		t.Fatal(err)
	}
	comment := regexp.MustCompile(`(?s)/\*.*?\*/`)
	test := regexp.MustCompile(`pm\.test\("([^"]+)",`)
	testsOf := func(events []struct {
		Listen string
		Script struct{ Exec []string }
	}) []string {
		var names []string
		for _, e := range events {
			if e.Listen != "test" {
				continue
			}
			for _, m := range test.FindAllStringSubmatch(comment.ReplaceAllString(strings.Join(e.Script.Exec, "\n"), ""), -1) {
				names = append(names, m[1])
			}
		}
		return names
	}
	var official []string
	for _, c := range Checks() {
		official = append(official, c.Official...)
	}
	n := 0
	for _, folder := range collection.Item {
		for _, req := range folder.Item {
			for _, name := range append(testsOf(folder.Event), testsOf(req.Event)...) {
				n++
				a := folder.Name + " / " + req.Name + ": " + name
				if !slices.Contains(official, a) {
					t.Errorf("no check re-expresses %q", a)
				}
			}
		}
	}
	if n != 26 || len(official) != n {
		t.Errorf("the suite has %d assertions and the checks name %d; want the suite's 26, each named once", n, len(official))
	}
}

// TestEveryCheckIsDocumented wants each check in docs/CONFORMANCE.md's
// table, with its group and level.
func TestEveryCheckIsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "CONFORMANCE.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, c := range Checks() {
		row := "| `" + c.ID + "` | " + c.Group + " | " + string(c.Level) + " |"
		if !strings.Contains(doc, row) {
			t.Errorf("docs/CONFORMANCE.md has no row starting %q", row)
		}
	}
}
