package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol/conformance"
)

// The checks of agentrt's additions pass against agentrt serving the
// echo agent, whose steps end at once: none is skipped.
func TestCheckOfTheAdditionsPassesAgainstAgentrt(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	out, _, err := runCheck(t, ts.URL, "--only", "added", "--json")
	var report conformance.Report
	if err != nil || json.Unmarshal([]byte(out), &report) != nil {
		t.Fatalf("check --only added: %v\n%s", err, out)
	}
	var ids []string
	for _, res := range report.Results {
		ids = append(ids, res.ID)
		if res.Status != conformance.StatusPass {
			t.Errorf("%s: %s: %s", res.ID, res.Status, res.Message)
		}
	}
	slices.Sort(ids)
	if want := []string{"events.page", "events.stream-resume", "steps.async", "steps.cancel-ended"}; !slices.Equal(ids, want) {
		t.Errorf("checks %q, want %q", ids, want)
	}
}

// breakAdditions is agentrt with a fault in one of its additions.
type breakAdditions struct {
	h     http.Handler
	fault string
}

func (b breakAdditions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case b.fault == "no Location" && r.Header.Get("Prefer") != "":
		w = dropLocation{w}
	case b.fault == "cancel of an ended step is 200" && strings.HasSuffix(r.URL.Path, "/cancel"):
		w = conflictAs200{w}
	case b.fault == "Last-Event-ID ignored":
		r.Header.Del("Last-Event-ID")
	}
	b.h.ServeHTTP(w, r)
}

type dropLocation struct{ http.ResponseWriter }

func (w dropLocation) WriteHeader(status int) {
	w.Header().Del("Location")
	w.ResponseWriter.WriteHeader(status)
}

type conflictAs200 struct{ http.ResponseWriter }

func (w conflictAs200) WriteHeader(status int) {
	if status == http.StatusConflict {
		status = http.StatusOK
	}
	w.ResponseWriter.WriteHeader(status)
}

// Each fault in an addition fails its check, naming the request that
// showed it.
func TestCheckOfTheAdditionsFailsAgainstAgentrtWithAFault(t *testing.T) {
	ts := serve(t, examplePlugin(t, "echo-go"))
	for _, tc := range []struct{ fault, check, says string }{
		{"no Location", "steps.async", "want a Location of the step"},
		{"cancel of an ended step is 200", "steps.cancel-ended", "want 409"},
		{"Last-Event-ID ignored", "events.stream-resume", "want exactly the events after id"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			broken := httptest.NewServer(breakAdditions{ts.srv.handler, tc.fault})
			defer broken.Close()
			out, _, err := runCheck(t, broken.URL, "--only", "added")
			if exitCode(err) != 1 || !strings.Contains(out, "  FAIL  added   "+tc.check+" ") || !strings.Contains(out, tc.says) ||
				!strings.HasPrefix(lastLine(out), "3 passed, 1 failed") {
				t.Errorf("check: %v (exit %d), want %s failed saying %q:\n%s", err, exitCode(err), tc.check, tc.says, out)
			}
		})
	}
}
