package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol/conformance"
)

// runCheck runs "agentrt check args..." and returns what it printed.
func runCheck(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = runMain(context.Background(), append([]string{"check"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

// lastLine is the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestCheckPassesAgainstAgentrtInEveryLanguage(t *testing.T) {
	// The URL as the protocol's clients take it, and as agentrt prints it.
	suffixes := map[string]string{"go": "", "tinygo": "/ap/v1", "rust": "/ap/v1/"}
	want := fmt.Sprintf("%d passed, 0 failed, 0 skipped", len(conformance.Checks()))
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			ts := serve(t, examplePlugin(t, "washington-"+lang))
			out, _, err := runCheck(t, ts.URL+suffixes[lang])
			if err != nil || lastLine(out) != want {
				t.Fatalf("agentrt check: %v; last line %q, want %q\n%s", err, lastLine(out), want, out)
			}
		})
	}
}

// notFoundAs500 is agentrt with a fault: every 404 it answers becomes a 500.
type notFoundAs500 struct{ http.ResponseWriter }

func (w notFoundAs500) WriteHeader(status int) {
	if status == http.StatusNotFound {
		status = http.StatusInternalServerError
	}
	w.ResponseWriter.WriteHeader(status)
}

func TestCheckFailsAndExitsOneAgainstABrokenServer(t *testing.T) {
	ts := serve(t, examplePlugin(t, "washington-go"))
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.srv.handler.ServeHTTP(notFoundAs500{w}, r)
	}))
	defer broken.Close()

	out, _, err := runCheck(t, broken.URL, "--only", "errors")
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "checks failed") {
		t.Fatalf("error %v (exit %d), want one saying checks failed (exit 1)", err, exitCode(err))
	}
	for _, want := range []string{
		"  FAIL  spec    errors.unknown-task ",
		": want 404 with a JSON body {\"message\": …}; got 500 application/json {\"message\":",
		"  pass  strict  errors.wrong-method ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report does not say %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(lastLine(out), " failed, 0 skipped") || strings.HasPrefix(lastLine(out), "0 passed") {
		t.Errorf("last line %q, want some passed and some failed", lastLine(out))
	}
}

func TestCheckJSONReportAndOnly(t *testing.T) {
	ts := serve(t, examplePlugin(t, "washington-go"))
	for _, tc := range []struct {
		only  string
		group func(string) bool
		level string
	}{
		{"spec,uploads", func(g string) bool { return g == "uploads" }, "spec"},
		{"downloads,errors.unknown-task", func(g string) bool { return g == "downloads" || g == "errors" }, ""},
		{"strict", func(string) bool { return true }, "strict"},
	} {
		out, _, err := runCheck(t, "--json", ts.URL, "--only", tc.only)
		if err != nil {
			t.Fatalf("--only %s: %v\n%s", tc.only, err, out)
		}
		var report conformance.Report
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("--only %s: the report is not JSON: %v\n%s", tc.only, err, out)
		}
		want, _ := conformance.Select(strings.Split(tc.only, ","))
		if len(report.Results) != len(want) || report.Passed != len(want) || report.Failed != 0 || report.Skipped != 0 {
			t.Errorf("--only %s: %d checks, %d/%d/%d; want the %d selected, all passed", tc.only, len(report.Results),
				report.Passed, report.Failed, report.Skipped, len(want))
		}
		for _, res := range report.Results {
			if !tc.group(res.Group) || (tc.level != "" && string(res.Level) != tc.level) || res.Status != conformance.StatusPass ||
				res.Request == nil || res.Response == nil || res.Message == "" {
				t.Errorf("--only %s: %+v", tc.only, res)
			}
		}
	}
}

func TestCheckListsItsChecksWithoutAServer(t *testing.T) {
	out, _, err := runCheck(t, "--list")
	if err != nil || strings.Count(out, "\n") != len(conformance.Checks()) || !strings.Contains(out, "tasks.create ") {
		t.Errorf("check --list: %v\n%s", err, out)
	}
	out, _, err = runCheck(t, "--list", "--only", "strict", "--json")
	var checks []conformance.Check
	if err != nil || json.Unmarshal([]byte(out), &checks) != nil || len(checks) == 0 {
		t.Fatalf("check --list --only strict --json: %v\n%s", err, out)
	}
	for _, c := range checks {
		if c.Level != conformance.LevelStrict || c.Asserts == "" {
			t.Errorf("listed %+v", c)
		}
	}
}

func TestCheckAgainstNoServerFailsAtOnceSayingSo(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	out, _, err := runCheck(t, url, "--timeout", "5s")
	if exitCode(err) != 1 || !strings.Contains(out, "connection refused") ||
		lastLine(out) != fmt.Sprintf("0 passed, 1 failed, %d skipped", len(conformance.Checks())-1) {
		t.Errorf("error %v (exit %d), want exit 1 and the refused connection said\n%s", err, exitCode(err), out)
	}
}

func TestCheckCommandLineMistakesAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "check needs the URL"},
		{[]string{"--json"}, "check needs the URL"},
		{[]string{"http://a", "http://b"}, "check takes one URL; got 2"},
		{[]string{"ftp://host"}, `bad URL "ftp://host"`},
		{[]string{"http://host", "--only", "uploadz"}, `bad -only: unknown group, level or check "uploadz"`},
		{[]string{"http://host", "--only", "strict,tasks.create"}, "selects no check"},
		{[]string{"http://host", "--timeout", "0s"}, "bad -timeout"},
		{[]string{"http://host", "--frobnicate"}, "flag provided but not defined: -frobnicate"},
	} {
		_, _, err := runCheck(t, tc.args...)
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) || exitCode(err) != 2 {
			t.Errorf("agentrt check %s: %v (exit %d), want a usage error saying %q", strings.Join(tc.args, " "), err, exitCode(err), tc.want)
		}
	}
	_, errOut, err := runCheck(t, "--help")
	if !errors.Is(err, flag.ErrHelp) || exitCode(err) != 0 || !strings.Contains(errOut, "Usage: agentrt check URL [flags]") ||
		!strings.Contains(errOut, "-only LIST") {
		t.Errorf("agentrt check --help: %v (exit %d)\n%s", err, exitCode(err), errOut)
	}
}
