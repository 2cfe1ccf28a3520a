package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// refusing is a fake server that answers its first refusals requests
// with refuse, and every later one with accept; it records the body of
// each request, but with unread refuses without reading it.
type refusing struct {
	mu       sync.Mutex
	bodies   [][]byte
	unread   bool
	refusals int
	refuse   func(w http.ResponseWriter, r *http.Request, n int)
	accept   func(w http.ResponseWriter, r *http.Request)
}

func (f *refusing) serve(t *testing.T) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		n := len(f.bodies) + 1
		refused := n <= f.refusals
		if !refused || !f.unread {
			b, _ := io.ReadAll(r.Body)
			f.bodies = append(f.bodies, b)
		} else {
			f.bodies = append(f.bodies, nil) // refused before its body is read
		}
		f.mu.Unlock()
		if refused {
			f.refuse(w, r, n)
			return
		}
		f.accept(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (f *refusing) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

// refuseWith answers 503 (or status) with Retry-After retryAfter ("" for
// none) and agentrt's error body, its message numbered.
func refuseWith(status int, retryAfter, body string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, n int) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if body == "" {
			body = `{"message":"busy %d","code":"unavailable"}`
		}
		fmt.Fprintf(w, body, n)
	}
}

func answerJSON(body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

// instantWaits makes c's retry waits end at once and records them, and
// reads Retry-After dates against now.
func instantWaits(c *Client, now time.Time) *[]time.Duration {
	var waits []time.Duration
	c.nowFunc = func() time.Time { return now }
	c.afterFunc = func(d time.Duration) <-chan time.Time {
		waits = append(waits, d)
		ch := make(chan time.Time, 1)
		ch <- now.Add(d)
		return ch
	}
	return &waits
}

// noWaits fails the test if c waits to retry.
func noWaits(t *testing.T, c *Client) {
	c.afterFunc = func(d time.Duration) <-chan time.Time {
		t.Errorf("the client waits %s to send the request again", d)
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
}

// A refusal with Retry-After, in seconds or as a date, on 503 or 429, is
// followed by the same request after at least that long, and a little
// more, but never beyond MaxRetryWait.
func TestClientRetriesARefusalAfterItsRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		want       time.Duration
	}{
		{"503, seconds", 503, "3", 3 * time.Second},
		{"429, seconds", 429, "2", 2 * time.Second},
		{"503, a date", 503, now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second},
		{"503, a date past", 503, now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"503, zero", 503, "0", 0},
		{"503, the most waited", 503, "30", 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &refusing{refusals: 2, refuse: refuseWith(tc.status, tc.retryAfter, ""), accept: answerJSON(stepJSON)}
			c := mustNew(t, f.serve(t).URL)
			waits := instantWaits(c, now)
			input := "go"
			s, err := c.ExecuteStep(context.Background(), "t/1", StepRequestBody{Input: &input})
			if err != nil || s.StepID != "s1" {
				t.Fatalf("ExecuteStep = %+v, %v; want the step, after the refusals", s, err)
			}
			if len(f.bodies) != 3 {
				t.Fatalf("%d requests, want 3", len(f.bodies))
			}
			for i, b := range f.bodies {
				if string(b) != `{"input":"go"}` {
					t.Errorf("request %d sent %q, not the step's body", i+1, b)
				}
			}
			if len(*waits) != 2 {
				t.Fatalf("waits %v, want 2", *waits)
			}
			for _, w := range *waits {
				if w < tc.want || w > max(tc.want*3/2, tc.want+minJitter) || w > c.MaxRetryWait {
					t.Errorf("waited %s for a Retry-After of %s", w, tc.want)
				}
			}
		})
	}
}

// A request refused more than MaxRetries times returns the last refusal:
// its status, message, Retry-After, and how often it was sent again.
func TestClientGivesUpAfterMaxRetriesWithTheLastRefusal(t *testing.T) {
	for _, retries := range []int{0, 1, DefaultMaxRetries} {
		t.Run(fmt.Sprint(retries), func(t *testing.T) {
			f := &refusing{refusals: 100, refuse: refuseWith(503, "1", ""), accept: answerJSON(taskJSON)}
			c := mustNew(t, f.serve(t).URL)
			if retries != DefaultMaxRetries {
				c.MaxRetries = retries
			}
			waits := instantWaits(c, time.Now())
			_, err := c.GetTask(context.Background(), "t/1")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is no *Error", err)
			}
			want := Error{StatusCode: 503, Status: "503 Service Unavailable", Code: "unavailable",
				Message: fmt.Sprintf("busy %d", retries+1), RetryAfter: time.Second, Retries: retries}
			if *e != want {
				t.Errorf("error\n got %+v\nwant %+v", *e, want)
			}
			if f.requests() != retries+1 || len(*waits) != retries {
				t.Errorf("%d requests after %d waits, want %d after %d", f.requests(), len(*waits), retries+1, retries)
			}
			if retries > 0 && !strings.Contains(err.Error(), fmt.Sprintf("(sent %d times)", retries+1)) {
				t.Errorf("error text %q does not say how often it was sent", err)
			}
		})
	}
}

// What waiting would not mend is answered at once, sent once: an error
// that is no refusal for now, a refusal without Retry-After, one that
// says the step was recorded (agentrt's interrupted step), one that asks
// for a wait longer than MaxRetryWait.
func TestClientDoesNotRetryWhatWaitingWouldNotMend(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		body       string
		wantAfter  time.Duration
	}{
		{"503 without Retry-After", 503, "", "", 0},
		{"429 without Retry-After", 429, "", `{"message":"task used up its budget %d","code":"limit_reached"}`, 0},
		{"500 with Retry-After", 500, "1", "", time.Second},
		{"502", 502, "", `{"message":"the plugin trapped %d","code":"plugin_failed","step_id":"s1"}`, 0},
		{"404 with Retry-After", 404, "1", "", time.Second},
		{"503 for a step recorded as interrupted", 503, "1",
			`{"message":"the server stopped %d","code":"interrupted","step_id":"s1"}`, time.Second},
		{"503 naming a step", 503, "1", `{"message":"x %d","code":"unavailable","step_id":"s1"}`, time.Second},
		{"503 with a Retry-After past MaxRetryWait", 503, "31", "", 31 * time.Second},
		{"503 with a Retry-After of years", 503, "99999999999999999999", "", time.Duration(1<<63 - 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &refusing{refusals: 1, refuse: refuseWith(tc.status, tc.retryAfter, tc.body), accept: answerJSON(stepJSON)}
			c := mustNew(t, f.serve(t).URL)
			noWaits(t, c)
			_, err := c.ExecuteStep(context.Background(), "t/1", StepRequestBody{})
			var e *Error
			if !errors.As(err, &e) || e.StatusCode != tc.status || e.Retries != 0 || e.RetryAfter != tc.wantAfter {
				t.Fatalf("error %v (%+v), want the first answer, %d, with its Retry-After %s", err, e, tc.status, tc.wantAfter)
			}
			if n := f.requests(); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// A Retry-After that cannot be read still says to retry: after a backoff
// that doubles from defaultBackoff, up to MaxRetryWait.
func TestClientAnUnreadableRetryAfterBacksOffAndDoubles(t *testing.T) {
	f := &refusing{refusals: 7, refuse: refuseWith(503, "soon", ""), accept: answerJSON(taskJSON)}
	c := mustNew(t, f.serve(t).URL)
	c.MaxRetries, c.MaxRetryWait = 10, 10*time.Second
	waits := instantWaits(c, time.Now())
	if _, err := c.GetTask(context.Background(), "t/1"); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{1, 2, 4, 8, 10, 10, 10}
	if len(*waits) != len(want) {
		t.Fatalf("waits %v, want %d", *waits, len(want))
	}
	for i, w := range *waits {
		least := want[i] * time.Second
		if w < least || w > least*3/2 || w > c.MaxRetryWait {
			t.Errorf("wait %d: %s, want %s to %s", i+1, w, least, min(least*3/2, c.MaxRetryWait))
		}
	}
}

// The waits of many clients refused at once, with one Retry-After, are
// spread: they do not all come back at the same instant.
func TestClientRetryWaitsOfAStormAreSpread(t *testing.T) {
	c := mustNew(t, "http://127.0.0.1:1")
	h := http.Header{"Retry-After": {"1"}}
	seen := map[time.Duration]bool{}
	for range 20 {
		d, ok := c.retryWait(&Error{StatusCode: 503}, h, 0)
		if !ok || d < time.Second || d > 3*time.Second/2 {
			t.Fatalf("retryWait = %s, %v; want 1 s to 1.5 s", d, ok)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 clients refused with Retry-After: 1 wait %d different times: %v", len(seen), seen)
	}
}

// Cancelling a request's context while it waits to be sent again ends
// the wait at once: the call returns the context's error and the
// refusal, and the request is not sent again.
func TestClientACancelledContextEndsARetryWait(t *testing.T) {
	f := &refusing{refusals: 1, refuse: refuseWith(503, "20", ""), accept: answerJSON(taskJSON)}
	c := mustNew(t, f.serve(t).URL)
	waiting := make(chan time.Duration, 1)
	c.afterFunc = func(d time.Duration) <-chan time.Time {
		waiting <- d
		return make(chan time.Time) // a wait only the context can end
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.GetTask(ctx, "t/1")
		done <- err
	}()
	select {
	case d := <-waiting:
		if d < 20*time.Second {
			t.Errorf("waits %s for a Retry-After of 20 s", d)
		}
	case err := <-done:
		t.Fatalf("answered without waiting to retry: %v", err)
	}
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a bound on a hang, not a measure
		t.Fatal("the wait went on after its context was cancelled")
	}
	var e *Error
	if !errors.Is(err, context.Canceled) || !errors.As(err, &e) || e.StatusCode != 503 || e.RetryAfter != 20*time.Second {
		t.Errorf("error %v, want the context's and the refusal", err)
	}
	if n := f.requests(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// An upload is sent again only when its file can be read again from
// where it began (an io.Seeker): each sending carries the whole file.
// Any other reader is sent once and its refusal returned.
func TestClientRetriesAnUploadOnlyWhenItsFileCanBeReadAgain(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789"), 100_000) // past what a server drains unread
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, content, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		reader   func(t *testing.T) io.Reader
		offset   int // where the reader starts in content
		readBody bool
		replay   bool
	}{
		{"a file, refused after its body was read", func(t *testing.T) io.Reader { return mustOpen(t, path, 0) }, 0, true, true},
		{"a file, refused before its body was read", func(t *testing.T) io.Reader { return mustOpen(t, path, 0) }, 0, false, true},
		{"a file read from an offset", func(t *testing.T) io.Reader { return mustOpen(t, path, 7) }, 7, true, true},
		{"a bytes.Reader", func(*testing.T) io.Reader { return bytes.NewReader(content) }, 0, true, true},
		{"a reader that cannot seek", func(*testing.T) io.Reader { return io.MultiReader(bytes.NewReader(content)) }, 0, true, false},
		{"a pipe", func(t *testing.T) io.Reader {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			go func() { pw.Write(content); pw.Close() }()
			t.Cleanup(func() { pr.Close() })
			return pr
		}, 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &refusing{refusals: 2, unread: !tc.readBody, refuse: refuseWith(503, "1", ""), accept: answerJSON(artifactJSON)}
			c := mustNew(t, f.serve(t).URL)
			waits := instantWaits(c, time.Now())
			want := content[tc.offset:]
			a, err := c.UploadArtifact(context.Background(), "t1", "f.txt", "", tc.reader(t), int64(len(want)), nil)
			switch {
			case tc.replay && err != nil:
				t.Fatalf("upload: %v", err)
			case tc.replay && a.ArtifactID != "a1":
				t.Fatalf("artifact %+v", a)
			case !tc.replay:
				var e *Error
				if !errors.As(err, &e) || e.StatusCode != 503 || e.Retries != 0 {
					t.Fatalf("error %v, want the first refusal", err)
				}
				if f.requests() != 1 || len(*waits) != 0 {
					t.Fatalf("%d requests after %d waits; a reader read once is sent once", f.requests(), len(*waits))
				}
				return
			}
			if f.requests() != 3 {
				t.Fatalf("%d requests, want 3", f.requests())
			}
			for i, b := range f.bodies {
				if b == nil {
					continue // refused unread
				}
				if !bytes.Contains(b, want) || (tc.offset > 0 && bytes.Contains(b, content)) || len(b) > len(want)+1000 {
					t.Errorf("sending %d (%d bytes) does not carry the file from where it began", i+1, len(b))
				}
			}
		})
	}
}

func mustOpen(t *testing.T, path string, offset int64) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	return f
}

// A download refused for now is asked for again, and its bytes written
// once.
func TestClientRetriesARefusedDownloadAndWritesItsBytesOnce(t *testing.T) {
	f := &refusing{refusals: 1, refuse: refuseWith(503, "1", ""), accept: func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		io.WriteString(w, "the bytes")
	}}
	c := mustNew(t, f.serve(t).URL)
	instantWaits(c, time.Now())
	var out bytes.Buffer
	n, err := c.DownloadArtifact(context.Background(), "t1", "a1", &out, nil)
	if err != nil || n != 9 || out.String() != "the bytes" || f.requests() != 2 {
		t.Errorf("download = %d, %v, %q after %d requests; want the bytes once, after 2", n, err, out.String(), f.requests())
	}
}

// The body of a sending replaced by another reads nothing more of the
// file, which the next sending reads again from its start: the transport
// may go on reading an old body after its answer.
func TestClientARetiredUploadBodyReadsNothingMoreOfTheFile(t *testing.T) {
	file := strings.NewReader("0123456789")
	u := &uploadReader{r: file, size: 10}
	p := make([]byte, 4)
	if n, err := u.Read(p); n != 4 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	u.retire()
	if n, err := u.Read(p); n != 0 || !errors.Is(err, errRetired) {
		t.Errorf("a retired body read %d bytes, %v; want none, errRetired", n, err)
	}
	if left := file.Len(); left != 6 {
		t.Errorf("the file was read on after the body was retired: %d bytes left, want 6", left)
	}
	if u.failure() != nil {
		t.Errorf("retiring a body is taken for the file's failure: %v", u.failure())
	}
}
