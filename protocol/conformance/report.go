package conformance

import (
	"fmt"
	"io"
	"strings"
)

// Status is how a check went.
type Status string

// The statuses of a check.
const (
	StatusPass Status = "pass"
	StatusFail Status = "fail"
	StatusSkip Status = "skip"
)

// Result is how one check went.
type Result struct {
	ID    string `json:"id"`
	Group string `json:"group"`
	Level Level  `json:"level"`
	// Status is pass, fail or skip.
	Status Status `json:"status"`
	// Message is what the check asserts when it passed; when it failed,
	// the request that showed it, what was wanted and what came back;
	// when it was skipped, why.
	Message string `json:"message"`
	// Request and Response are the exchange that failed the check, or
	// the check's last one when it passed.
	Request  *Request  `json:"request,omitempty"`
	Response *Response `json:"response,omitempty"`
}

// Request is a request a check sent.
type Request struct {
	Method string `json:"method"`
	// Path is the request's path and query on the server.
	Path string `json:"path"`
	// Body is an excerpt of the body sent, or a description of it (a
	// multipart upload).
	Body string `json:"body,omitempty"`
}

// Response is what came back.
type Response struct {
	// Status is the HTTP status; 0 when no answer came (see Error).
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// Body is an excerpt of the body, cut to a few hundred bytes.
	Body string `json:"body,omitempty"`
	// Error says why no answer came.
	Error string `json:"error,omitempty"`
}

// Report is how a run went.
type Report struct {
	// URL is the API root checked.
	URL     string   `json:"url"`
	Results []Result `json:"checks"`
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	Skipped int      `json:"skipped"`
}

func (r *Report) add(res Result) {
	r.Results = append(r.Results, res)
	switch res.Status {
	case StatusPass:
		r.Passed++
	case StatusFail:
		r.Failed++
	case StatusSkip:
		r.Skipped++
	}
}

// Summary is the report's closing line: "N passed, N failed, N skipped".
func (r *Report) Summary() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", r.Passed, r.Failed, r.Skipped)
}

// WriteText writes the report for a person: the checks by group, one line
// each (status, level, id, what it asserts), a failure's or a skip's
// reason on the line under it, and the summary last.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Agent Protocol v1 conformance of %s\n", r.URL)
	idWidth := 0
	for _, res := range r.Results {
		idWidth = max(idWidth, len(res.ID))
	}
	group := ""
	for _, res := range r.Results {
		if res.Group != group {
			group = res.Group
			fmt.Fprintf(&b, "\n%s\n", group)
		}
		status := string(res.Status)
		if res.Status == StatusFail {
			status = "FAIL"
		}
		c, _ := lookup(res.ID)
		fmt.Fprintf(&b, "  %-4s  %-6s  %-*s  %s\n", status, res.Level, idWidth, res.ID, c.Asserts)
		if res.Status != StatusPass {
			fmt.Fprintf(&b, "  %-4s  %-6s  %-*s  %s\n", "", "", idWidth, "", indent(res.Message, 4+2+6+2+idWidth+2+2))
		}
	}
	fmt.Fprintf(&b, "\n%s\n", r.Summary())
	_, err := io.WriteString(w, b.String())
	return err
}

// lookup finds a check by id.
func lookup(id string) (Check, bool) {
	for _, c := range checks {
		if c.ID == id {
			return c, true
		}
	}
	return Check{}, false
}

// indent indents every line of s after the first by n spaces.
func indent(s string, n int) string {
	return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat(" ", n))
}
