package httpapi

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// An event stream spends most of its life waiting. Served as an ordinary
// handler, a waiting stream held what net/http keeps for a request in
// progress: two goroutines, their stacks, the connection's read and
// write buffers, the request and its contexts, some 33 KiB in all
// (bench/README.md, "Idle event streams"). So once its headers are
// written, a stream's connection is taken from net/http (hijacked) and
// parked: what stays is the connection and the stream's place in its
// task's log. A pool of writers writes to parked streams when their task
// has new events, or a heartbeat is due; none waits on a stream's
// behalf.

// streamWriters is how many parked streams are written at once. A write
// that blocks (a client that reads nothing) holds its writer until the
// write timeout, so there are many.
const streamWriters = 64

// streamHub holds the parked streams of a server.
type streamHub struct {
	heartbeat, writeTimeout time.Duration

	mu      sync.Mutex
	streams map[*parkedStream]struct{}
	queue   []*parkedStream
	ready   *sync.Cond // signalled when queue has streams or the hub closes
	closed  bool
	started bool
	quit    chan struct{} // closed with the hub
	wg      sync.WaitGroup
}

func newStreamHub(heartbeat, writeTimeout time.Duration) *streamHub {
	h := &streamHub{heartbeat: heartbeat, writeTimeout: writeTimeout, streams: map[*parkedStream]struct{}{}, quit: make(chan struct{})}
	h.ready = sync.NewCond(&h.mu)
	return h
}

// parkedStream is one parked event stream.
type parkedStream struct {
	hub   *streamHub
	conn  net.Conn
	watch *protocol.Watcher
	stop  func() // stops the watcher's change notices
	// Under hub.mu: queued while in the queue or being written, dirty
	// when a change came while it was being written, beat when a
	// heartbeat is due.
	queued, dirty, beat bool
	first               bool // no page was written yet
	lastWrite           time.Time
	done                bool
}

// park takes over conn, whose stream's headers were written, to write
// the events watch brings from now on. It returns false, leaving conn to
// the caller, when the hub is closed.
func (h *streamHub) park(conn net.Conn, watch *protocol.Watcher) bool {
	s := &parkedStream{hub: h, conn: conn, watch: watch, first: true, lastWrite: time.Now()}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	if !h.started {
		h.started = true
		h.wg.Add(streamWriters + 1)
		for range streamWriters {
			go h.writer()
		}
		go h.beats()
	}
	h.streams[s] = struct{}{}
	h.mu.Unlock()
	s.stop = watch.OnChange(func() { h.enqueue(s, false) })
	h.enqueue(s, false) // the replay
	return true
}

// enqueue queues s to be written: its new events, or a heartbeat.
func (h *streamHub) enqueue(s *parkedStream, beat bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.done || h.closed {
		return
	}
	s.beat = s.beat || beat
	if s.queued {
		s.dirty = true
		return
	}
	s.queued = true
	h.queue = append(h.queue, s)
	h.ready.Signal()
}

// writer writes queued streams until the hub closes.
func (h *streamHub) writer() {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		for len(h.queue) == 0 && !h.closed {
			h.ready.Wait()
		}
		if h.closed {
			h.mu.Unlock()
			return
		}
		s := h.queue[0]
		h.queue[0] = nil
		h.queue = h.queue[1:]
		beat := s.beat
		s.beat, s.dirty = false, false
		h.mu.Unlock()

		ok := s.write(beat)

		h.mu.Lock()
		switch {
		case !ok:
			h.endLocked(s)
			h.mu.Unlock()
			s.release()
			continue
		case s.dirty || s.beat:
			s.dirty = false
			h.queue = append(h.queue, s)
			h.ready.Signal()
		default:
			s.queued = false
		}
		h.mu.Unlock()
	}
}

// write writes what s has to say: its new events (a page at a time, the
// first page after a "trimmed" frame if events were trimmed), or a
// heartbeat when it has none and one was due. False when the stream is
// over: its client went, did not take a write in time, or its task was
// deleted.
func (s *parkedStream) write(beat bool) bool {
	var b bytes.Buffer
	for {
		page, err := s.watch.Next(context.Background(), defaultEventPage)
		if err != nil {
			return false
		}
		if s.first && page.Trimmed > 0 {
			b.Write(trimmedFrame(page))
		}
		s.first = false
		b.Write(eventFrames(page.Events))
		if n := len(page.Events); n > 0 && page.Events[n-1].Type == protocol.EventTaskDeleted {
			s.send(b.Bytes())
			return false
		}
		if len(page.Events) < defaultEventPage || b.Len() > 1<<20 {
			break
		}
	}
	if b.Len() == 0 && beat {
		b.WriteString(": keep-alive\n\n")
	}
	if b.Len() == 0 {
		return true
	}
	return s.send(b.Bytes())
}

// send writes p within the write timeout.
func (s *parkedStream) send(p []byte) bool {
	if err := s.conn.SetWriteDeadline(time.Now().Add(s.hub.writeTimeout)); err != nil {
		return false
	}
	if _, err := s.conn.Write(p); err != nil {
		return false
	}
	s.hub.mu.Lock()
	s.lastWrite = time.Now()
	s.hub.mu.Unlock()
	return true
}

// beats queues a heartbeat for each stream silent for a heartbeat, until
// the hub closes. A heartbeat is also how a stream whose client went is
// found: its write fails.
func (h *streamHub) beats() {
	defer h.wg.Done()
	tick := time.NewTicker(max(h.heartbeat/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-h.quit:
			return
		}
		h.mu.Lock()
		var due []*parkedStream
		now := time.Now()
		for s := range h.streams {
			if !s.queued && now.Sub(s.lastWrite) >= h.heartbeat {
				due = append(due, s)
			}
		}
		h.mu.Unlock()
		for _, s := range due {
			h.enqueue(s, true)
		}
	}
}

// endLocked ends s, which its caller then releases, once h.mu is not
// held (release takes the feed's lock, which is held when the feed
// queues a stream: the other order).
func (h *streamHub) endLocked(s *parkedStream) {
	s.done = true
	delete(h.streams, s)
}

// release closes s's connection and releases its watch.
func (s *parkedStream) release() {
	s.conn.Close()
	s.stop()
	s.watch.Close()
}

// close ends every parked stream and stops the writers: the server is
// shutting down, and clients reconnect (to this server restarted, or
// another) with Last-Event-ID. A write under way ends with its
// connection.
func (h *streamHub) close() {
	h.mu.Lock()
	h.closed = true
	var ended []*parkedStream
	for s := range h.streams {
		h.endLocked(s)
		ended = append(ended, s)
	}
	h.queue = nil
	h.ready.Broadcast()
	if !h.started || h.quit == nil {
		h.mu.Unlock()
		return
	}
	close(h.quit)
	h.mu.Unlock()
	for _, s := range ended {
		s.conn.Close()
	}
	h.wg.Wait()
	for _, s := range ended {
		s.stop()
		s.watch.Close()
	}
}

// count is how many event streams are parked now.
func (h *streamHub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.streams)
}

// trimmedFrame is the frame that tells a stream its replay misses events
// trimmed from the log.
func trimmedFrame(page *protocol.EventPage) []byte {
	b, _ := protocol.MarshalJSON(map[string]int64{"trimmed": page.Trimmed, "trimmed_through": page.TrimmedThrough})
	return append(append([]byte("event: trimmed\ndata: "), b...), "\n\n"...)
}

// hijackStream takes the connection of w, an event stream whose headers
// are in w.Header(), writes its status line and headers, and returns
// it; nil when the connection cannot be taken (a writer that is not
// net/http's), the caller then streams as an ordinary handler.
func hijackStream(w http.ResponseWriter) net.Conn {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil
	}
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	w.Header().Write(&head)
	// No length and no chunks: the stream ends when the connection does.
	head.WriteString("Connection: close\r\n\r\nretry: 2000\n\n")
	rw.Writer.Reset(conn) // the buffered writer is not used: drop what it may hold
	conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(head.Bytes()); err != nil {
		conn.Close()
		return hijackFailed
	}
	return conn
}

// hijackFailed is hijackStream's answer when the connection was taken but
// its headers could not be written: it is closed, and the stream over.
var hijackFailed net.Conn = closedConn{}

type closedConn struct{ net.Conn }
