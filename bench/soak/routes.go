package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// route is one kind of request the soak makes; each has its own latency
// and failure figures.
type route int

const (
	createTask route = iota
	stepRecent
	stepOld
	getTask
	listFirst
	listLast
	listSteps
	uploadArtifact
	listArtifacts
	downloadArtifact
	nRoutes
)

var routeNames = [nRoutes]string{
	"create-task", "step-recent", "step-old", "get-task", "list-tasks-first", "list-tasks-last",
	"list-steps", "upload-artifact", "list-artifacts", "download-artifact",
}

func (r route) String() string { return routeNames[r] }

// column is the route's name as a CSV column's prefix.
func (r route) column() string { return strings.ReplaceAll(routeNames[r], "-", "_") }

// defaultMix weighs the requests each client makes between its paced
// creates and uploads: reads over writes, as a service's clients do, with
// every route of the protocol a task goes through.
const defaultMix = "step-recent=2,step-old=2,get-task=4,list-tasks-first=1,list-tasks-last=1,list-steps=2,list-artifacts=1,download-artifact=1"

// mix is a weighted choice of routes: route i is chosen with probability
// weight[i]/total.
type mix struct {
	weight [nRoutes]int
	total  int
}

// parseMix reads "route=weight,..." (create-task is paced, not mixed; a
// route left out has weight 0).
func parseMix(s string) (mix, error) {
	var m mix
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, w, ok := strings.Cut(item, "=")
		if !ok {
			return mix{}, fmt.Errorf("mix %q: want route=weight", item)
		}
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 0 {
			return mix{}, fmt.Errorf("mix %q: the weight must be an integer ≥ 0", item)
		}
		r := route(-1)
		for i, rn := range routeNames {
			if rn == strings.TrimSpace(name) {
				r = route(i)
			}
		}
		switch r {
		case -1:
			return mix{}, fmt.Errorf("mix %q: no route %q (routes: %s)", item, name, strings.Join(routeNames[1:], ", "))
		case createTask:
			return mix{}, fmt.Errorf("mix %q: create-task is paced by -tasks and -duration, not mixed", item)
		}
		m.total += n - m.weight[r]
		m.weight[r] = n
	}
	if m.total == 0 {
		return mix{}, fmt.Errorf("mix %q: no route with a weight above 0", s)
	}
	return m, nil
}

// pick is the route that a number n drawn uniformly from [0, total)
// selects.
func (m mix) pick(n int) route {
	for r, w := range m.weight {
		if n < w {
			return route(r)
		}
		n -= w
	}
	return route(nRoutes - 1) // not reached for n < total
}

// recorder collects the latency of every request and its failures, by
// route, for the interval being sampled.
type recorder struct {
	routes [nRoutes]struct {
		mu    sync.Mutex
		h     histogram
		fails int64
	}
}

func (r *recorder) record(rt route, d time.Duration, ok bool) {
	s := &r.routes[rt]
	s.mu.Lock()
	s.h.record(d)
	if !ok {
		s.fails++
	}
	s.mu.Unlock()
}

// fail counts a failure of a request whose latency is recorded already.
func (r *recorder) fail(rt route) {
	s := &r.routes[rt]
	s.mu.Lock()
	s.fails++
	s.mu.Unlock()
}

// swap returns what was recorded since the last swap and starts afresh.
func (r *recorder) swap() (hs [nRoutes]histogram, fails [nRoutes]int64) {
	for i := range r.routes {
		s := &r.routes[i]
		s.mu.Lock()
		hs[i], fails[i] = s.h, s.fails
		s.h, s.fails = histogram{}, 0
		s.mu.Unlock()
	}
	return hs, fails
}

// failures counts every failed request by route and keeps the first few
// in full, for the summary.
type failures struct {
	mu      sync.Mutex
	byRoute [nRoutes]int64
	first   []string
}

const keepFailures = 10

func (f *failures) add(phase string, rt route, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byRoute[rt]++
	if len(f.first) < keepFailures {
		f.first = append(f.first, fmt.Sprintf("%s, %s: %s", phase, rt, what))
	}
}

func (f *failures) total() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, c := range f.byRoute {
		n += c
	}
	return n
}
