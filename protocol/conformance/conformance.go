// Package conformance checks a server against the Agent Protocol v1: the
// letter of its specification (openapi.yml), everything the protocol's
// official compliance suite asserts, and the stricter reading agentrt
// serves where the specification is silent. It speaks plain HTTP to any
// server and knows nothing of agentrt's own code; "agentrt check" runs it.
//
// Each Check has a group (tasks, steps, artifacts, pagination, errors,
// uploads, downloads, events) and a level: LevelSpec for what the
// specification or the official suite requires, LevelStrict for
// behaviour clients can rely on from agentrt but that another conforming
// server may lack, LevelAdded for agentrt's additions to the protocol
// (skipped, saying so, by a server without them). Run
// runs the checks one after another and returns a Report: each check
// passed, failed (with the request that showed it and what came back) or
// was skipped (with why).
//
// The checks create tasks, steps and artifacts and never delete any (the
// protocol has no delete). They do not need the server to be empty: lists
// are reasoned about relative to what the server reports. They do need
// nobody else to create tasks while they run, or the pagination checks may
// see lists move under them. They need no particular agent: a check that
// needs the agent to do something (create an artifact, mark a step
// is_last) says so and is skipped when it does not.
//
// What a run costs: about 300 requests, each small but for one 64 KiB
// upload and its download, and about 60 tasks, 20 to 30 steps and 30
// artifacts left on the server.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Level says how firmly a check's behaviour is required.
type Level string

const (
	// LevelSpec is the letter of the specification, or an assertion of
	// the official compliance suite.
	LevelSpec Level = "spec"
	// LevelStrict is agentrt's stricter reading where the specification
	// is silent: what clients of agentrt rely on beyond the letter.
	LevelStrict Level = "strict"
	// LevelAdded is what agentrt adds to the protocol, the routes and
	// headers its openapi.json marks "x-agentrt-addition" (steps in the
	// background, cancel, a task's events). A server without them has
	// these checks skipped, saying so.
	LevelAdded Level = "added"
)

// Groups are the check groups, in the order checks run and are reported.
var Groups = []string{"tasks", "steps", "artifacts", "pagination", "errors", "uploads", "downloads", "events"}

// Levels are the check levels.
var Levels = []Level{LevelSpec, LevelStrict, LevelAdded}

// Check is one conformance check.
type Check struct {
	ID    string `json:"id"`    // group.name, unique
	Group string `json:"group"` // one of Groups
	Level Level  `json:"level"`
	// Asserts says what the check asserts, in a line.
	Asserts string `json:"asserts"`
	// Official names the assertions of the official compliance suite
	// (folder / request: test) that the check re-expresses, if any.
	Official []string `json:"official,omitempty"`
	// Needs says what the check needs of the agent, if anything; without
	// it the check is skipped.
	Needs string `json:"needs,omitempty"`

	run func(s *session) error
}

// checks is every check, in the order they run.
var checks = func() []Check {
	var all []Check
	for _, group := range [][]Check{taskChecks, stepChecks, stepAdditionChecks, artifactChecks, paginationChecks, errorChecks,
		uploadChecks, downloadChecks, eventChecks} {
		all = append(all, group...)
	}
	return all
}()

// Checks returns every check, in the order they run.
func Checks() []Check { return slices.Clone(checks) }

// Select returns the checks that only names: each name is a group, a level
// or a check id. A check is selected when its group or id is among the
// names (or none of the names is a group or an id) and its level is among
// them (or none is a level). No names select every check. An unknown name
// is an error that lists the known ones.
func Select(names []string) ([]Check, error) {
	var groups, ids, levels []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			continue
		case slices.Contains(Groups, n):
			groups = append(groups, n)
		case slices.Contains(Levels, Level(n)):
			levels = append(levels, n)
		case slices.ContainsFunc(checks, func(c Check) bool { return c.ID == n }):
			ids = append(ids, n)
		default:
			return nil, fmt.Errorf("unknown group, level or check %q (groups: %s; levels: spec, strict, added; or a check id such as %s)",
				n, strings.Join(Groups, ", "), checks[0].ID)
		}
	}
	var sel []Check
	for _, c := range checks {
		inScope := len(groups)+len(ids) == 0 || slices.Contains(groups, c.Group) || slices.Contains(ids, c.ID)
		atLevel := len(levels) == 0 || slices.Contains(levels, string(c.Level))
		if inScope && atLevel {
			sel = append(sel, c)
		}
	}
	return sel, nil
}

// APIRoot turns what a user gives as a server's address into the root of
// its Agent Protocol API, the URL that /agent/tasks follows: a base URL
// (http://host:8000, as the official clients take it) gets /ap/v1
// appended; a URL that already ends in /ap/v1 (or /ap/v1/agent, or
// /ap/v1/agent/tasks) is cut back to it. A URL without a scheme is taken
// as http.
func APIRoot(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, errors.New("no URL given")
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parse URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("URL %q: want an http or https URL", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("URL %q has no host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("URL %q: want a URL without a query or fragment", raw)
	}
	p := strings.TrimRight(u.Path, "/")
	for _, suffix := range []string{"/agent/tasks", "/agent"} {
		if strings.HasSuffix(p, "/ap/v1"+suffix) {
			p = strings.TrimSuffix(p, suffix)
		}
	}
	if !strings.HasSuffix(p, "/ap/v1") {
		p += "/ap/v1"
	}
	u.Path, u.RawPath, u.User = p, "", nil
	return u, nil
}

// DefaultTimeout is how long a request may take, answer included, unless
// Config says otherwise.
const DefaultTimeout = 30 * time.Second

// Config says what to check and how.
type Config struct {
	// Root is the server's API root, as APIRoot returns it. Required.
	Root *url.URL
	// Checks are the checks to run, in order (Select); nil runs them all.
	Checks []Check
	// Timeout bounds each request, from sending it to the last byte of
	// its answer; 0 is DefaultTimeout.
	Timeout time.Duration
	// Transport sends the requests; nil is a fresh http.Transport that
	// uses no proxy from the environment.
	Transport http.RoundTripper
	// APIKey, when set, is sent with every request as
	// "Authorization: Bearer APIKey". Reports never show it.
	APIKey string
}

// Run runs the configured checks against the server, one after another,
// and reports each. A request that gets no answer (the server is not
// reachable, or does not answer within the timeout) fails its check, and
// the checks after it are skipped rather than each waiting in turn. A
// cancelled ctx stops the run in the same way.
func Run(ctx context.Context, cfg Config) *Report {
	selected := cfg.Checks
	if selected == nil {
		selected = checks
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	transport := cfg.Transport
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		transport = t
		defer t.CloseIdleConnections()
	}
	s := &session{
		ctx:    ctx,
		apiKey: cfg.APIKey,
		root:   cfg.Root,
		client: &http.Client{Transport: transport, Timeout: timeout, CheckRedirect: noRedirects},
	}
	report := &Report{URL: cfg.Root.String()}
	for _, c := range selected {
		report.add(s.run(c))
	}
	return report
}

// noRedirects hands a redirect to the check as it came: the protocol has
// none, and following one would hide what the server answered.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// session is the state of one run: the server, and what its checks share.
type session struct {
	ctx    context.Context
	apiKey string
	root   *url.URL
	client *http.Client
	// gone names the check whose request got no answer; the checks after
	// it are not run.
	gone string
	// running is the id of the check running, and last its last
	// exchange.
	running string
	last    *exchange
	// officialRun is what asking the agent to write Washington to a file
	// did, once some check needed it.
	officialRun *washingtonRun
}

// run runs one check and says how it went.
func (s *session) run(c Check) Result {
	r := Result{ID: c.ID, Group: c.Group, Level: c.Level}
	if s.gone != "" {
		r.Status, r.Message = StatusSkip, "not run: the server stopped answering (see "+s.gone+")"
		return r
	}
	if err := s.ctx.Err(); err != nil {
		r.Status, r.Message = StatusSkip, fmt.Sprintf("not run: %v", err)
		return r
	}
	s.last, s.running = nil, c.ID
	err := c.run(s)
	var f *failure
	var sk *skipped
	switch {
	case err == nil:
		r.Status, r.Message = StatusPass, c.Asserts
		r.Request, r.Response = s.last.report()
	case errors.As(err, &sk):
		r.Status, r.Message = StatusSkip, sk.why
	case errors.As(err, &f):
		r.Status, r.Message = StatusFail, f.Error()
		r.Request, r.Response = f.ex.report()
	default:
		r.Status, r.Message = StatusFail, err.Error()
	}
	return r
}

// skipped ends a check that cannot run against this server or agent.
type skipped struct{ why string }

func (s *skipped) Error() string { return s.why }

func skipf(format string, args ...any) error {
	return &skipped{fmt.Sprintf(format, args...)}
}
