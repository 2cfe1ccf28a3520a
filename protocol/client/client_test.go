package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestClientNewTakesABaseURLOrTheProtocolRoot(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "http://127.0.0.1:8000", want: "http://127.0.0.1:8000/ap/v1"},
		{in: "http://127.0.0.1:8000/", want: "http://127.0.0.1:8000/ap/v1"},
		{in: "http://127.0.0.1:8000/ap/v1", want: "http://127.0.0.1:8000/ap/v1"},
		{in: "http://127.0.0.1:8000/ap/v1/", want: "http://127.0.0.1:8000/ap/v1"},
		{in: "  localhost:8000 ", want: "http://localhost:8000/ap/v1"},
		{in: "https://agents.example/agents/writer", want: "https://agents.example/agents/writer/ap/v1"},
		{in: "https://agents.example/agents/writer/ap/v1", want: "https://agents.example/agents/writer/ap/v1"},
		{in: "", err: "empty"},
		{in: "ftp://host", err: "scheme"},
		{in: "http://", err: "no host"},
		{in: "http://host/?page=2", err: "query"},
		{in: "http://host/#top", err: "fragment"},
		{in: "http://[::1", err: "bad server URL"},
	} {
		c, err := New(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("New(%q) = %v, want an error saying %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("New(%q): %v", tc.in, err)
		case tc.err == "" && c.URL() != tc.want:
			t.Errorf("New(%q).URL() = %q, want %q", tc.in, c.URL(), tc.want)
		}
	}
}

// request is what a fake server was sent.
type request struct {
	method, path, query, contentType, auth string
	body                                   string
}

// recorder is a fake Agent Protocol server: it records each request and
// answers with the JSON its answer function gives.
type recorder struct {
	mu       sync.Mutex
	requests []request
}

func (rec *recorder) serve(t *testing.T, answer func(r *http.Request) (int, string)) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.requests = append(rec.requests, request{method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
			contentType: r.Header.Get("Content-Type"), auth: r.Header.Get("Authorization"), body: string(b)})
		rec.mu.Unlock()
		status, body := answer(r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (rec *recorder) last() request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.requests[len(rec.requests)-1]
}

func mustNew(t *testing.T, url string) *Client {
	t.Helper()
	c, err := New(url)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	taskJSON     = `{"task_id":"t/1","input":"hi","additional_input":{"k":1},"artifacts":[{"artifact_id":"a1","agent_created":true,"file_name":"out.txt","relative_path":null}]}`
	stepJSON     = `{"task_id":"t/1","step_id":"s1","name":"write","status":"completed","input":"go","additional_input":{},"output":"done","additional_output":{"n":2},"artifacts":[],"is_last":true}`
	artifactJSON = `{"artifact_id":"a1","agent_created":false,"file_name":"in.txt","relative_path":"docs"}`
	pageJSON     = `"pagination":{"total_items":1,"total_pages":1,"current_page":2,"page_size":5}`
)

func TestClientEachOperationSendsItsRequestAndDecodesItsAnswer(t *testing.T) {
	var rec recorder
	ts := rec.serve(t, func(r *http.Request) (int, string) {
		switch p := r.URL.EscapedPath(); {
		case strings.HasSuffix(p, "/steps") && r.Method == "GET":
			return 200, `{"steps":[` + stepJSON + `],` + pageJSON + `}`
		case strings.Contains(p, "/steps"):
			return 200, stepJSON
		case strings.HasSuffix(p, "/artifacts"):
			return 200, `{"artifacts":[` + artifactJSON + `],` + pageJSON + `}`
		case strings.HasSuffix(p, "/tasks") && r.Method == "GET":
			return 200, `{"tasks":[` + taskJSON + `],` + pageJSON + `}`
		}
		return 200, taskJSON
	})
	c := mustNew(t, ts.URL)
	ctx := context.Background()
	input := "hi"
	for _, tc := range []struct {
		name string
		call func() (any, error)
		want request
		// check tells what is wrong with the answer, or "".
		check func(v any) string
	}{
		{"create task", func() (any, error) {
			return c.CreateTask(ctx, TaskRequestBody{Input: &input, AdditionalInput: json.RawMessage(`{"k":1}`)})
		}, request{method: "POST", path: "/ap/v1/agent/tasks", contentType: "application/json", body: `{"input":"hi","additional_input":{"k":1}}`},
			func(v any) string {
				task := v.(*Task)
				if task.TaskID != "t/1" || *task.Input != "hi" || string(task.AdditionalInput) != `{"k":1}` ||
					len(task.Artifacts) != 1 || task.Artifacts[0].RelativePath != nil || !task.Artifacts[0].AgentCreated {
					return fmt.Sprintf("%+v", task)
				}
				return ""
			}},
		{"create task without a body's fields", func() (any, error) { return c.CreateTask(ctx, TaskRequestBody{}) },
			request{method: "POST", path: "/ap/v1/agent/tasks", contentType: "application/json", body: `{}`}, nil},
		{"list tasks", func() (any, error) { return c.ListTasks(ctx, Page{Current: 2, Size: 5}) },
			request{method: "GET", path: "/ap/v1/agent/tasks", query: "current_page=2&page_size=5"},
			func(v any) string {
				l := v.(*TaskListResponse)
				if len(l.Tasks) != 1 || l.Pagination != (Pagination{TotalItems: 1, TotalPages: 1, CurrentPage: 2, PageSize: 5}) {
					return fmt.Sprintf("%+v", l)
				}
				return ""
			}},
		{"list tasks, server's page", func() (any, error) { return c.ListTasks(ctx, Page{}) },
			request{method: "GET", path: "/ap/v1/agent/tasks"}, nil},
		{"get task", func() (any, error) { return c.GetTask(ctx, "t/1") },
			request{method: "GET", path: "/ap/v1/agent/tasks/t%2F1"}, nil},
		{"execute step", func() (any, error) { return c.ExecuteStep(ctx, "t/1", StepRequestBody{Input: &input}) },
			request{method: "POST", path: "/ap/v1/agent/tasks/t%2F1/steps", contentType: "application/json", body: `{"input":"hi"}`},
			func(v any) string {
				s := v.(*Step)
				if s.StepID != "s1" || *s.Name != "write" || s.Status != StatusCompleted || *s.Output != "done" ||
					string(s.AdditionalOutput) != `{"n":2}` || !s.IsLast {
					return fmt.Sprintf("%+v", s)
				}
				return ""
			}},
		{"list steps", func() (any, error) { return c.ListSteps(ctx, "t/1", Page{Size: 5}) },
			request{method: "GET", path: "/ap/v1/agent/tasks/t%2F1/steps", query: "page_size=5"},
			func(v any) string {
				if l := v.(*TaskStepsListResponse); len(l.Steps) != 1 || l.Steps[0].StepID != "s1" {
					return fmt.Sprintf("%+v", l)
				}
				return ""
			}},
		{"get step", func() (any, error) { return c.GetStep(ctx, "t/1", "s 1") },
			request{method: "GET", path: "/ap/v1/agent/tasks/t%2F1/steps/s%201"}, nil},
		{"list artifacts", func() (any, error) { return c.ListArtifacts(ctx, "t/1", Page{Current: 3}) },
			request{method: "GET", path: "/ap/v1/agent/tasks/t%2F1/artifacts", query: "current_page=3"},
			func(v any) string {
				l := v.(*TaskArtifactsListResponse)
				if len(l.Artifacts) != 1 || *l.Artifacts[0].RelativePath != "docs" || l.Artifacts[0].FileName != "in.txt" {
					return fmt.Sprintf("%+v", l)
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.last(); got != tc.want {
				t.Errorf("request\n got %+v\nwant %+v", got, tc.want)
			}
			if tc.check != nil {
				if bad := tc.check(v); bad != "" {
					t.Errorf("answer decoded as %s", bad)
				}
			}
		})
	}
}

func TestClientAnEmptyIDIsRefusedBeforeAnyRequest(t *testing.T) {
	var rec recorder
	ts := rec.serve(t, func(*http.Request) (int, string) { return 200, `{}` })
	c := mustNew(t, ts.URL)
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"get task":     func() error { _, err := c.GetTask(ctx, ""); return err },
		"execute step": func() error { _, err := c.ExecuteStep(ctx, "", StepRequestBody{}); return err },
		"get step":     func() error { _, err := c.GetStep(ctx, "t", ""); return err },
		"download": func() error {
			_, err := c.DownloadArtifact(ctx, "t", "", io.Discard, nil)
			return err
		},
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "id is empty") {
			t.Errorf("%s with an empty id: %v, want an error", name, err)
		}
	}
	if len(rec.requests) != 0 {
		t.Errorf("requests were sent: %+v", rec.requests)
	}
}

func TestClientTheAPIKeyIsSentAsABearerTokenWhenSet(t *testing.T) {
	var rec recorder
	ts := rec.serve(t, func(*http.Request) (int, string) { return 200, taskJSON })
	c := mustNew(t, ts.URL)
	if _, err := c.GetTask(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if auth := rec.last().auth; auth != "" {
		t.Errorf("without a key, Authorization = %q", auth)
	}
	c.APIKey = "s3cret"
	if _, err := c.GetTask(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if auth := rec.last().auth; auth != "Bearer s3cret" {
		t.Errorf("Authorization = %q, want Bearer s3cret", auth)
	}
}

func TestClientServerErrorsAreErrorsWithStatusAndMessage(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		want      Error
		wantInMsg string
	}{
		{"agentrt's", 404, `{"message":"task \"x\" not found","code":"not_found"}`,
			Error{StatusCode: 404, Status: "404 Not Found", Message: `task "x" not found`, Code: "not_found"}, ""},
		{"a plugin failure names its step", 502, `{"message":"the plugin trapped","code":"plugin_failed","step_id":"s9"}`,
			Error{StatusCode: 502, Status: "502 Bad Gateway", Message: "the plugin trapped", Code: "plugin_failed", StepID: "s9"}, ""},
		{"FastAPI's detail", 422, `{"detail":[{"loc":["body","input"],"msg":"str type expected"}]}`,
			Error{StatusCode: 422, Status: "422 Unprocessable Entity", Message: `[{"loc":["body","input"],"msg":"str type expected"}]`}, ""},
		{"text, first line", 500, "Internal Server Error\nTraceback...\n",
			Error{StatusCode: 500, Status: "500 Internal Server Error", Message: "Internal Server Error"}, ""},
		{"no body", 401, "", Error{StatusCode: 401, Status: "401 Unauthorized"}, ""},
		{"a huge body is cut", 500, strings.Repeat("x", 1<<20), Error{StatusCode: 500, Status: "500 Internal Server Error"}, "xxx…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer ts.Close()
			_, err := mustNew(t, ts.URL).GetTask(context.Background(), "x")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is no *Error", err, err)
			}
			if tc.wantInMsg != "" {
				if len(e.Message) > maxErrorMessage+len("…") || !strings.HasSuffix(e.Message, tc.wantInMsg) {
					t.Errorf("message of %d bytes, ending %q", len(e.Message), e.Message[max(0, len(e.Message)-10):])
				}
				e.Message = ""
			}
			if *e != tc.want {
				t.Errorf("error\n got %+v\nwant %+v", *e, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "get task x: the server answered "+tc.want.Status) {
				t.Errorf("error text %q", err)
			}
		})
	}
}

func TestClientAnAnswerThatIsNotTheProtocolsJSONIsAnError(t *testing.T) {
	for name, body := range map[string]string{
		"HTML":                  "<html>hello</html>",
		"a field of wrong type": `{"task_id": 5}`,
		"cut short":             `{"task_id": "x"`,
	} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
		_, err := mustNew(t, ts.URL).GetTask(context.Background(), "x")
		ts.Close()
		if err == nil || !strings.Contains(err.Error(), "not the JSON the protocol specifies") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// pagedTasks serves n tasks in pages of at most maxSize, whatever size
// is asked for, as agentrt does past its maximum; or, if answer is set,
// the pages it gives. It counts the requests it answers in requests.
func pagedTasks(t *testing.T, n, maxSize int, answer func(page, size int) (items []int, p Pagination), requests *atomic.Int32) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		page, _ := strconv.Atoi(r.URL.Query().Get("current_page"))
		size, _ := strconv.Atoi(r.URL.Query().Get("page_size"))
		size = min(size, maxSize)
		var items []int
		var p Pagination
		if answer != nil {
			items, p = answer(page, size)
		} else {
			for i := (page - 1) * size; i < min(page*size, n); i++ {
				items = append(items, i)
			}
			p = Pagination{TotalItems: n, TotalPages: (n + size - 1) / size, CurrentPage: page, PageSize: size}
		}
		l := TaskListResponse{Tasks: []Task{}, Pagination: p}
		for _, i := range items {
			l.Tasks = append(l.Tasks, Task{TaskID: strconv.Itoa(i)})
		}
		json.NewEncoder(w).Encode(l)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestClientAllTasksFollowsThePagesToTheEnd(t *testing.T) {
	for _, tc := range []struct{ n, maxSize int }{{0, 10}, {1, 10}, {10, 10}, {25, 10}, {250, 100}, {7, 3}} {
		ts := pagedTasks(t, tc.n, tc.maxSize, nil, new(atomic.Int32))
		tasks, err := mustNew(t, ts.URL).AllTasks(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != tc.n {
			t.Errorf("%d tasks in pages of %d: got %d", tc.n, tc.maxSize, len(tasks))
			continue
		}
		for i, task := range tasks {
			if task.TaskID != strconv.Itoa(i) {
				t.Errorf("%d tasks in pages of %d: task %d is %s", tc.n, tc.maxSize, i, task.TaskID)
				break
			}
		}
	}
}

func TestClientAllTasksStopsAtPaginationThatMisleads(t *testing.T) {
	defer func(n int) { maxPages = n }(maxPages)
	maxPages = 50
	for _, tc := range []struct {
		name   string
		answer func(page, size int) ([]int, Pagination)
		want   string
	}{
		{"the same page whatever is asked", func(page, size int) ([]int, Pagination) {
			return []int{1, 2}, Pagination{TotalItems: 10, TotalPages: 5, CurrentPage: 1, PageSize: 2}
		}, "answered page 1 when asked for page 2"},
		{"pages that never end", func(page, size int) ([]int, Pagination) {
			return []int{page}, Pagination{TotalItems: 1 << 30, TotalPages: 1 << 30, CurrentPage: page, PageSize: 1}
		}, "more than 50 pages"},
	} {
		var requests atomic.Int32
		ts := pagedTasks(t, 0, 100, tc.answer, &requests)
		_, err := mustNew(t, ts.URL).AllTasks(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if n := requests.Load(); n > int32(maxPages) {
			t.Errorf("%s: %d pages read, more than %d", tc.name, n, maxPages)
		}
	}
}
