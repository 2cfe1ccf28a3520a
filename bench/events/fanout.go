package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// fanoutRound is one round's fan-out to a number of subscribers: the time
// from the plugin's progress call to each subscriber's reading of the
// event, over every report and every subscriber.
type fanoutRound struct {
	round, subscribers  int
	lat                 latencies
	samples             []time.Duration // sorted
	received, expected  int
	failures            int
	firstFailure        string
	stepTook, cpuPerEvt time.Duration
}

// measureFanout starts a server of the progress plugin and, for each
// round and each of c.fanouts (the order turning by round), creates a
// task, opens that many event streams on it (each read until its first
// frame), starts a step in the background whose handler reports progress
// c.reports times c.pause apart, and has every subscriber read its
// stream to the step's end, taking the time of each progress event as it
// reads it less the guest's clock in its message.
func measureFanout(c config) ([]fanoutRound, string, error) {
	srv, err := startServer(c.agentrt, c.progressPlugin, c.tmp, c.serverFlags)
	if err != nil {
		return nil, "", err
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.stop()
		}
	}()
	a := newAPI(srv.url, 2)
	clk := clockTicks()
	var out []fanoutRound
	for r := range c.fanoutRounds {
		for _, n := range turn(c.fanouts, r) {
			fr, err := fanoutOnce(c, srv, a, n, clk)
			if err != nil {
				return out, "", fmt.Errorf("round %d, %d subscribers: %w", r+1, n, err)
			}
			fr.round = r + 1
			out = append(out, fr)
			logf("fan-out round %d, %d subscribers: p50 %s p99 %s max %s, %d of %d events", fr.round, n,
				ms(fr.lat.p50), ms(fr.lat.p99), ms(fr.lat.max), fr.received, fr.expected)
		}
	}
	serverEnd := srv.stop()
	stopped = true
	return out, serverEnd, nil
}

func fanoutOnce(c config, srv *server, a *api, n int, clk float64) (fanoutRound, error) {
	ctx := context.Background()
	res := fanoutRound{subscribers: n, expected: n * c.reports}
	task, err := a.createTask(ctx)
	if err != nil {
		return res, err
	}
	path := srv.eventsPath(task)
	streams := make([]*stream, n)
	defer func() {
		for _, s := range streams {
			if s != nil {
				s.close()
			}
		}
	}()
	var mu sync.Mutex
	var openErr error
	forEach(n, c.openConcurrency, func(i int) {
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		s, err := openStream(octx, srv.host, path)
		if err == nil {
			// The first frame: "retry", the task having no events yet.
			if _, err = s.next(time.Minute); err != nil {
				s.close()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			openErr = err
			return
		}
		streams[i] = s
	})
	if openErr != nil {
		return res, fmt.Errorf("open the streams: %w", openErr)
	}

	samples := make([][]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range streams {
		samples[i] = make([]time.Duration, 0, c.reports)
		wg.Add(1)
		go func() {
			defer wg.Done()
			samples[i], errs[i] = readProgress(s, samples[i])
		}()
	}
	ticks0, _ := readCPUTicks(srv.pid())
	start := time.Now()
	var buf bytes.Buffer
	if _, err := a.asyncStep(ctx, task, stepBody(fmt.Sprintf("%d %s", c.reports, c.pause)), &buf); err != nil {
		return res, err
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	limit := time.Duration(c.reports)*c.pause + time.Minute
	select {
	case <-done:
	case <-time.After(limit):
		for _, s := range streams {
			s.close() // the readers end
		}
		<-done
		res.failures++
		res.firstFailure = fmt.Sprintf("the step had not ended on every stream after %s", limit)
	}
	res.stepTook = time.Since(start)
	ticks1, _ := readCPUTicks(srv.pid())
	var all []time.Duration
	for i := range samples {
		all = append(all, samples[i]...)
		if errs[i] != nil {
			res.failures++
			if res.firstFailure == "" {
				res.firstFailure = errs[i].Error()
			}
		}
	}
	res.received = len(all)
	res.lat = summarize(all)
	res.samples = all
	if res.received > 0 {
		res.cpuPerEvt = time.Duration(float64(ticks1-ticks0) / clk * 1e9 / float64(res.received))
	}
	return res, nil
}

// readProgress reads s until a step ends, adding to lat the time from
// each progress report's sending (its message) to its reading.
func readProgress(s *stream, lat []time.Duration) ([]time.Duration, error) {
	for {
		f, err := s.next(0)
		now := time.Now().UnixNano()
		if err != nil {
			return lat, fmt.Errorf("read the stream: %w", err)
		}
		switch {
		case f.Event == "step.progress":
			var e event
			if err := json.Unmarshal([]byte(f.Data), &e); err != nil {
				return lat, fmt.Errorf("decode a progress event: %w", err)
			}
			sent, err := sentAt(e.Data.Message)
			if err != nil {
				return lat, err
			}
			lat = append(lat, time.Duration(now-sent))
		case f.Event == "step.completed":
			return lat, nil
		case stepEnded(f.Event):
			return lat, fmt.Errorf("the step ended with %s: %.300s", f.Event, f.Data)
		}
	}
}

// turn is vs rotated left by r: the order of a round r.
func turn[T any](vs []T, r int) []T {
	if len(vs) == 0 {
		return nil
	}
	r %= len(vs)
	return append(append([]T(nil), vs[r:]...), vs[:r]...)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
