package protocol

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Request bodies at the edge: how long one may take to arrive, and how
// many uploads may be received at once. Without these, clients trickling
// uploads at a byte a second each held a staging file and a descriptor for
// as long as they liked.

// body returns r's body limited to max bytes and to the server's pace: it
// must have arrived by BodyTimeout after the handler started plus one
// second for every MinBodyRate bytes received. The connection's read
// deadline is moved forward as bytes come in; a client slower than that
// gets ESLOWBODY, and net/http closes its connection. Call finish once
// the body is read: the deadline must not outlive it, or net/http's
// background read of the connection would time out while the request is
// still being served, and cancel it.
func (s *Server) body(w http.ResponseWriter, r *http.Request, max int64) *pacedBody {
	return &pacedBody{
		r:     http.MaxBytesReader(w, r.Body, max),
		rc:    http.NewResponseController(w),
		start: time.Now(),
		grace: s.cfg.BodyTimeout,
		rate:  s.cfg.MinBodyRate,
	}
}

type pacedBody struct {
	r      io.Reader
	rc     *http.ResponseController
	start  time.Time
	grace  time.Duration
	rate   int64 // bytes per second
	n      int64 // bytes read so far
	failed bool  // a read failed: the deadline stays, for net/http's own reads too
}

// deadline is when the body, n bytes of it read so far, must have come.
func (b *pacedBody) deadline() time.Time {
	return b.start.Add(b.grace + time.Duration(float64(b.n)/float64(b.rate)*float64(time.Second)))
}

func (b *pacedBody) Read(p []byte) (int, error) {
	// Not every ResponseWriter supports deadlines (a recorder in a test);
	// then the body is only size-limited.
	err := b.rc.SetReadDeadline(b.deadline())
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err == io.EOF {
		b.finish()
	} else if err != nil {
		b.failed = true
	}
	if err != nil && isTimeout(err) {
		return n, Errorf(ESLOWBODY, "the request body came too slowly: %d bytes in %s; the server waits %s for it and then at least a second per %d bytes",
			b.n, time.Since(b.start).Round(time.Millisecond), b.grace, b.rate)
	}
	return n, err
}

// finish lifts the deadline once the handler is done reading the body,
// unless a read failed: then net/http's own reads of what is left of the
// body (it drains a small one before answering) must fail as fast.
func (b *pacedBody) finish() {
	if !b.failed {
		b.rc.SetReadDeadline(time.Time{})
	}
}

// paceUnread gives a request's body, if it has one, the same deadline
// before any handler runs: net/http drains a small body no handler read
// (up to 256 KiB) before it answers, and a body that never came held the
// answer back for as long as the client liked.
func (s *Server) paceUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return // no body: net/http reads ahead for the next request, with its own deadlines
	}
	n := min(max(r.ContentLength, 0), 256<<10)
	deadline := time.Now().Add(s.cfg.BodyTimeout + time.Duration(float64(n)/float64(s.cfg.MinBodyRate)*float64(time.Second)))
	http.NewResponseController(w).SetReadDeadline(deadline)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// uploadSlots counts the uploads being received, in all and per client
// address.
type uploadSlots struct {
	mu        sync.Mutex
	max       int
	perClient int // < 0: no limit
	total     int
	byClient  map[string]int
}

// acquire takes a slot for an upload from r's client, or refuses it with
// EUNAVAILABLE; release gives it back.
func (u *uploadSlots) acquire(r *http.Request) (release func(), err error) {
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		client = r.RemoteAddr
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.total >= u.max:
		return nil, &Error{Code: EUNAVAILABLE, RetryAfter: 1,
			Message: fmt.Sprintf("the server is receiving %d uploads, the most it takes at once; retry shortly", u.total)}
	case u.perClient >= 0 && u.byClient[client] >= u.perClient:
		return nil, &Error{Code: EUNAVAILABLE, RetryAfter: 1,
			Message: fmt.Sprintf("%d uploads from your address are being received, the most one client may send at once; retry when one is done", u.byClient[client])}
	}
	u.total++
	u.byClient[client]++
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.total--
		if u.byClient[client]--; u.byClient[client] <= 0 {
			delete(u.byClient, client)
		}
	}, nil
}
