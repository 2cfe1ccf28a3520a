package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// "agentrt client" sends a call the server refuses for now (503 with
// Retry-After) again, as often as --retries says: 5 unless told, 0
// never; a negative count is a usage error.
func TestClientCommandRetriesARefusedCallAsToldByRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		refusals  int64
		wantCalls int64
		wantErr   string
	}{
		{"by default, through refusals", nil, 2, 3, ""},
		{"by default, 5 times at most", nil, 100, 6, "503 Service Unavailable: busy 6 (sent 6 times)"},
		{"--retries 0: never", []string{"--retries", "0"}, 1, 1, "503 Service Unavailable: busy 1"},
		{"--retries 1", []string{"--retries", "1"}, 100, 2, "busy 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				if n <= tc.refusals {
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(503)
					fmt.Fprintf(w, `{"message":"busy %d","code":"unavailable"}`, n)
					return
				}
				io.WriteString(w, `{"task_id":"t1","input":"hi","artifacts":[]}`)
			}))
			defer fake.Close()
			out, errOut, err := clientCall{}.run(t, append([]string{"task", "t1", "--url", fake.URL}, tc.args...)...)
			switch {
			case tc.wantErr == "" && (err != nil || !strings.Contains(out, "t1")):
				t.Errorf("agentrt client task: %v, printed %q; stderr %q", err, out, errOut)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("agentrt client task: %v, want an error saying %q", err, tc.wantErr)
			}
			if n := calls.Load(); n != tc.wantCalls {
				t.Errorf("the server was called %d times, want %d", n, tc.wantCalls)
			}
		})
	}
	_, _, err := clientCall{}.run(t, "tasks", "--retries", "-1")
	var u *usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "bad --retries") {
		t.Errorf("--retries -1: %v, want a usage error", err)
	}
}
