package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// idleResult is what holding idle event streams cost the server.
type idleResult struct {
	n, opened, heartbeats int
	failures              []string // the first few
	failed                int
	openTook, hold        time.Duration
	// The server before the streams, once each had its first event,
	// and after the hold (a heartbeat written to each).
	before, open, held          procStatus
	fdsBefore, fdsOpen, fdsHeld int
	// The kernel's TCP memory, every socket's: the server's and the
	// bench's ends together.
	tcpBefore, tcpOpen, tcpHeld uint64
	// The server's goroutines (go_goroutines of its /metrics).
	goBefore, goOpen, goHeld int
	serverFiles, benchFiles  string
	serverEnd                string
}

func (r *idleResult) fail(err error) {
	r.failed++
	if len(r.failures) < 3 {
		r.failures = append(r.failures, err.Error())
	}
}

// measureIdle starts a server, runs one step on a task (so the task's log
// has an event, step.completed, to replay), then opens c.subscribers
// event streams on that task, -open-concurrency at a time, each until it
// has read its first event. It reads the server's memory, descriptors and
// the kernel's TCP memory before, then, and after c.hold, in which every
// stream is written a heartbeat; then it checks each stream got one.
func measureIdle(c config) (*idleResult, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil, fmt.Errorf("read the limit of open files: %w", err)
	}
	if need := uint64(c.subscribers) + 256; lim.Cur < need {
		return nil, fmt.Errorf("-subscribers %d needs %d open files in this process, and its limit is %d (ulimit -n)", c.subscribers, need, lim.Cur)
	}
	srv, err := startServer(c.agentrt, c.echo, c.tmp, c.serverFlags)
	if err != nil {
		return nil, err
	}
	res := &idleResult{n: c.subscribers, hold: c.hold, serverFiles: openFilesLimit(srv.pid()),
		benchFiles: fmt.Sprintf("%d (hard %d)", lim.Cur, lim.Max)}
	stopped := false
	defer func() {
		if !stopped {
			res.serverEnd = srv.stop()
		}
	}()
	ctx := context.Background()
	a := newAPI(srv.url, 2)
	task, err := a.createTask(ctx)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := a.syncStep(ctx, task, stepBody("hi"), &buf); err != nil {
		return nil, err
	}
	a.client.CloseIdleConnections()
	time.Sleep(2 * time.Second) // what the step and its connection left settles
	if res.before, err = readStatus(srv.pid()); err != nil {
		return nil, err
	}
	res.fdsBefore, _ = countFDs(srv.pid())
	res.tcpBefore = tcpMem()
	res.goBefore = srv.goroutines()

	logf("idle: opening %d event streams on one task, %d at a time", c.subscribers, c.openConcurrency)
	streams := make([]*stream, c.subscribers)
	defer func() {
		for _, s := range streams {
			if s != nil {
				s.close()
			}
		}
	}()
	path := srv.eventsPath(task)
	var mu sync.Mutex
	start := time.Now()
	forEach(c.subscribers, c.openConcurrency, func(i int) {
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		s, err := openStream(octx, srv.host, path)
		if err == nil {
			var f frame
			if f, err = s.untilEvent(time.Minute); err == nil && f.ID != "1" {
				err = fmt.Errorf("the first event's id is %q, not 1", f.ID)
			}
			if err != nil {
				s.close()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			res.fail(err)
			return
		}
		streams[i] = s
		res.opened++
	})
	res.openTook = time.Since(start)
	if res.open, err = readStatus(srv.pid()); err != nil {
		return nil, err
	}
	res.fdsOpen, _ = countFDs(srv.pid())
	res.tcpOpen = tcpMem()
	res.goOpen = srv.goroutines()
	logf("idle: %d streams had their first event in %.1f s (%d failed); holding them %s", res.opened, res.openTook.Seconds(), res.failed, c.hold)

	time.Sleep(c.hold)
	if res.held, err = readStatus(srv.pid()); err != nil {
		return nil, err
	}
	res.fdsHeld, _ = countFDs(srv.pid())
	res.tcpHeld = tcpMem()
	res.goHeld = srv.goroutines()

	// Each stream was written a heartbeat in the hold, and is still open.
	var beats atomic.Int64
	held := slices.DeleteFunc(slices.Clone(streams), func(s *stream) bool { return s == nil })
	forEach(len(held), c.openConcurrency, func(i int) {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			f, err := held[i].next(time.Until(deadline))
			if err != nil {
				return
			}
			if slices.Contains(f.Comments, "keep-alive") {
				beats.Add(1)
				return
			}
		}
	})
	res.heartbeats = int(beats.Load())
	// The server first, so that it is the one to close the streams
	// (shutting down ends them): the bench's ends then leave no port
	// waiting.
	res.serverEnd, stopped = srv.stop(), true
	return res, nil
}

// forEach calls f(i) for i in [0, n), conc at a time, and waits.
func forEach(n, conc int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}
