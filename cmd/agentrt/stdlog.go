package main

import (
	"bytes"
	"fmt"
	"log"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/hostapi/egress"
)

// The standard library's logger, routed into the server's log. Go's HTTP
// transport and server write a few things with package log, some of them
// bytes a remote server sent (an unsolicited response on an idle
// connection: "Unsolicited response received on idle HTTP channel
// starting with %q", up to 4 KiB of it, quoted), and by default they go
// to stderr as they are, a secret included. So every line written with
// package log, and by agentrt's own HTTP servers (http.Server.ErrorLog),
// goes to the server's log (slog: its format, its level filter) as a
// warning, scrubbed of every secret the server holds (all agents'),
// then cut to maxStdLogLine bytes; and at most stdLogBurst lines at once
// and one a second after, the lines past that counted and the count
// logged with the next line that passes: a server that answers garbage on
// every idle connection cannot flood the log.

const (
	// maxStdLogLine bounds one line, scrubbed, in the server's log.
	maxStdLogLine = 1024
	// stdLogBurst lines may be logged at once; then one every
	// stdLogEvery.
	stdLogBurst = 20
	stdLogEvery = time.Second
)

// stdLog writes the standard library's log lines into the server's log.
// It is an io.Writer for a *log.Logger, which writes one line a call.
type stdLog struct {
	log   *slog.Logger
	scrub *egress.Scrubber
	now   func() time.Time
	// logger writes here, for http.Server.ErrorLog.
	logger *log.Logger

	mu      sync.Mutex
	tokens  float64 // lines that may be logged now, up to stdLogBurst
	last    time.Time
	dropped int // lines not logged since the last that was
}

func newStdLog(l *slog.Logger, scrub *egress.Scrubber, now func() time.Time) *stdLog {
	s := &stdLog{log: l, scrub: scrub, now: now, tokens: stdLogBurst, last: now()}
	s.logger = log.New(s, "", 0)
	return s
}

// routeStdLog sends the standard library's logger into l, scrubbed of
// every secret of grants, until restore is called. The returned stdLog's
// logger is for agentrt's own HTTP servers.
func routeStdLog(l *slog.Logger, grants *egress.Grants) (s *stdLog, restore func()) {
	s = newStdLog(l, grants.Scrubber(), time.Now)
	w, flags, prefix := log.Writer(), log.Flags(), log.Prefix()
	log.SetOutput(s)
	log.SetFlags(0) // the server's log has the time
	log.SetPrefix("")
	return s, func() {
		log.SetOutput(w)
		log.SetFlags(flags)
		log.SetPrefix(prefix)
	}
}

// Write logs the line p, or counts it when over the rate. It never
// fails: a logger has nowhere to report it.
func (s *stdLog) Write(p []byte) (int, error) {
	dropped, ok := s.take()
	if !ok {
		return len(p), nil
	}
	// Scrubbed whole, then cut: a cut first could leave a secret's
	// beginning.
	line := s.scrub.String(string(bytes.TrimRight(p, "\n")))
	attrs := []any{"line", cutLine(line, maxStdLogLine)}
	if dropped > 0 {
		attrs = append(attrs, "dropped_before", dropped)
	}
	s.log.Warn("standard library log", attrs...)
	return len(p), nil
}

// take takes a line from the rate: whether it may be logged, and how
// many were dropped before it.
func (s *stdLog) take() (dropped int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.tokens = min(stdLogBurst, s.tokens+float64(now.Sub(s.last))/float64(stdLogEvery))
	s.last = now
	if s.tokens < 1 {
		s.dropped++
		return 0, false
	}
	s.tokens--
	dropped, s.dropped = s.dropped, 0
	return dropped, true
}

// cutLine is line cut to at most max bytes, on a rune's boundary, saying
// how long it was.
func cutLine(line string, max int) string {
	if len(line) <= max {
		return line
	}
	n := max
	for n > 0 && !utf8.RuneStart(line[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes)", line[:n], len(line))
}
