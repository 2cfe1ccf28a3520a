package httpapi

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// Request bodies at the edge: a body must have come by BodyTimeout after
// the request plus one second for every MinBodyRate bytes received, give
// or take a second (the deadline is moved a second ahead at a time, so that
// a small body costs no more than setting it and lifting it). A client
// slower than that gets ESLOWBODY, and net/http closes its connection.
// Without this (and uploadSlots), clients trickling uploads at a byte a
// second each held a staging file and a descriptor for as long as they
// liked. The pace is an average: a client may send a burst and then idle
// until the average catches up with it.

// paceUnread gives a request's body, if one is coming, its first deadline
// before any handler runs: net/http itself drains a small body that no
// handler read before it answers, and a body that never came held the
// answer back for as long as the client liked. Handlers that read the
// body move the deadline on as it comes (body).
func (s *Server) paceUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 { // else no body: net/http reads ahead for the next request, with its own deadlines
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout + paceSlack))
	}
}

// Answers at the edge are held to the pace of request bodies: a client
// must have taken an answer by BodyTimeout after it starts plus a second
// for every MinBodyRate bytes written so far, give or take a second; else
// the write fails, and net/http closes the connection. Without this,
// clients that asked for big answers (a page of steps: 126 MB) and never
// read them held each, and its goroutine and connection, for as long as
// they liked. The deadline moves on with what is written, not with the
// answer's size: a client that stops reading is cut off after what the
// kernel's buffers took, at the pace, however big the answer.

// pace is how slowly a client may take an answer.
type pace struct {
	grace time.Duration
	rate  int64 // bytes per second
}

// deadline is when n bytes of an answer that started at start must have
// been taken.
func (p pace) deadline(start time.Time, n int64) time.Time {
	return start.Add(p.grace + time.Duration(float64(n)/float64(p.rate)*float64(time.Second)))
}

// answerWriter returns w paced as the server paces answers.
func (s *Server) answerWriter(w http.ResponseWriter) *pacedAnswer {
	return newPacedAnswer(w, pace{grace: s.cfg.BodyTimeout, rate: s.cfg.MinBodyRate})
}

// pacedAnswer is an answer written at a pace: the write deadline moves on
// as bytes are written, a second ahead at a time and at most
// maxPacedWrite bytes at a time, so an answer taken at the pace goes on
// however long it takes and one the client stops reading is cut off.
// Not every ResponseWriter supports deadlines (a recorder in a test);
// then the answer is not paced.
type pacedAnswer struct {
	http.ResponseWriter
	rc    *http.ResponseController
	pace  pace
	start time.Time
	n     int64     // bytes written so far
	set   time.Time // the write deadline set last
	limit time.Time // no deadline is set past it, when not zero (cap)
}

// maxPacedWrite is the most a pacedAnswer writes under one deadline.
const maxPacedWrite = 64 << 10

// newPacedAnswer returns w paced by p from now; the headers (and an empty
// answer: net/http writes it after the handler returns) must be taken by
// p's grace time.
func newPacedAnswer(w http.ResponseWriter, p pace) *pacedAnswer {
	a := &pacedAnswer{ResponseWriter: w, rc: http.NewResponseController(w), pace: p, start: time.Now()}
	a.extendTo(p.deadline(a.start, 0))
	return a
}

func (a *pacedAnswer) extendTo(d time.Time) {
	if !a.limit.IsZero() && d.After(a.limit) {
		d = a.limit
	}
	if a.rc.SetWriteDeadline(d) == nil {
		a.set = d
	}
}

// cap keeps the write deadline at limit or sooner, whatever the pace
// allows (the zero time lifts the cap): a writer that must end by a
// deadline of its own, a plugin's call, is not held past it by a slow
// client.
func (a *pacedAnswer) cap(limit time.Time) {
	if limit.Equal(a.limit) {
		return
	}
	a.limit = limit
	if !limit.IsZero() && (a.set.IsZero() || a.set.After(limit)) {
		a.extendTo(limit)
	} else if limit.IsZero() {
		a.extendTo(a.pace.deadline(a.start, a.n).Add(paceSlack))
	}
}

// finish sends what the answer's writer still buffers while the pace
// holds: net/http would flush it after the handler, with no deadline (it
// lifts the write deadline once the request is done).
// An answer that wrote nothing is not flushed: its handler may yet
// answer an error instead (a download's unsatisfiable Range).
func (a *pacedAnswer) finish() {
	if a.n > 0 && !a.set.IsZero() {
		a.rc.Flush()
	}
}

func (a *pacedAnswer) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxPacedWrite)]
		if d := a.pace.deadline(a.start, a.n+int64(len(chunk))); d.After(a.set) {
			a.extendTo(d.Add(paceSlack))
		}
		n, err := a.ResponseWriter.Write(chunk)
		a.n += int64(n)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// ReadFrom writes what r holds, at the pace, maxPacedWrite at a time,
// through the ResponseWriter's own ReadFrom: for a file (a download), the
// kernel copies it to the connection (sendfile) instead of the server
// reading it into a buffer and writing it out again.
func (a *pacedAnswer) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := a.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(writerOnly{a}, r)
	}
	var written int64
	for {
		chunk := &io.LimitedReader{R: r, N: maxPacedWrite}
		if lr, ok := r.(*io.LimitedReader); ok {
			// One level of LimitedReader around a file is what sendfile
			// takes: keep it so.
			if lr.N <= 0 {
				return written, nil
			}
			chunk = &io.LimitedReader{R: lr.R, N: min(lr.N, maxPacedWrite)}
		}
		if d := a.pace.deadline(a.start, a.n+chunk.N); d.After(a.set) {
			a.extendTo(d.Add(paceSlack))
		}
		want := chunk.N
		n, err := rf.ReadFrom(chunk)
		a.n += n
		written += n
		if lr, ok := r.(*io.LimitedReader); ok {
			lr.N -= n
		}
		if err != nil || n < want {
			return written, err
		}
	}
}

// writerOnly hides a writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

// Unwrap is the writer pacedAnswer paces, for http.ResponseController.
func (a *pacedAnswer) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// body returns r's body, for a handler to read, limited to max bytes and
// paced. The deadline is lifted when the body ends, and only then: it must
// not outlive the body, or net/http's background read of the connection
// (to notice a client that goes away, started at the body's end) would
// time out while the request is still being served, and cancel it; and it
// must hold as long as the body has not ended, since net/http drains what
// the handler left of it before it answers.
func (s *Server) body(w http.ResponseWriter, r *http.Request, max int64) *pacedBody {
	return &pacedBody{
		r:     http.MaxBytesReader(w, r.Body, max),
		rc:    http.NewResponseController(w),
		start: time.Now(),
		grace: s.cfg.BodyTimeout,
		rate:  s.cfg.MinBodyRate,
	}
}

// pacedBody is a request body read at the server's pace.
type pacedBody struct {
	r     io.Reader
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64     // bytes per second
	n     int64     // bytes read so far
	set   time.Time // the read deadline set last
}

// paceSlack is how far ahead of the pace the deadline is moved each time.
const paceSlack = time.Second

// deadlineAt is when the body must have come, n bytes of it read.
func (b *pacedBody) deadlineAt(n int64) time.Time {
	return b.start.Add(b.grace + time.Duration(float64(n)/float64(b.rate)*float64(time.Second)))
}

// extendTo sets the connection's read deadline. Not every ResponseWriter
// supports deadlines (a recorder in a test); then the body is only
// size-limited.
func (b *pacedBody) extendTo(d time.Time) {
	if err := b.rc.SetReadDeadline(d); err == nil || errors.Is(err, http.ErrNotSupported) {
		b.set = d
	}
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if d := b.deadlineAt(b.n); d.After(b.set) {
		b.extendTo(d.Add(paceSlack))
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err == io.EOF {
		// The body has ended: nothing is left to drain, and net/http now
		// reads the connection in the background.
		b.rc.SetReadDeadline(time.Time{})
		b.set = time.Time{}
	}
	if err != nil && isTimeout(err) {
		return n, protocol.Errorf(protocol.ESLOWBODY, "the request body came too slowly: %d bytes in %s; the server waits %s for it and then at least a second per %d bytes",
			b.n, time.Since(b.start).Round(time.Millisecond), b.grace, b.rate)
	}
	return n, err
}

// drain reads what is left of the body, at the same pace, so that it
// ends (and the deadline is lifted) before a handler goes on to slow work
// (an artifact handler): what follows a multipart body's last part, say.
func (b *pacedBody) drain() error {
	_, err := io.Copy(io.Discard, b)
	return err
}

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
