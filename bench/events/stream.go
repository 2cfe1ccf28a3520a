package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// stream is one event stream the bench holds: its connection, and the
// frames of its body. It is opened on a connection of its own, the
// request written by hand: net/http's client would spend two goroutines
// and their buffers on each, where the bench holds 10,000.
type stream struct {
	conn net.Conn
	sse  *sseReader
}

// openStream opens the event stream at path on host ("GET path",
// Accept: text/event-stream) and reads its answer's headers; a status
// other than 200, or another content type, is an error.
func openStream(ctx context.Context, host, path string) (*stream, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", host, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAccept: text/event-stream\r\nUser-Agent: bench-events\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("request %s: %w", path, err)
	}
	br := bufio.NewReaderSize(conn, 2048)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read the answer to GET %s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		conn.Close()
		return nil, fmt.Errorf("GET %s: %s, %q", path, res.Status, res.Header.Get("Content-Type"))
	}
	conn.SetDeadline(time.Time{})
	// The body: the rest of the connection as agentrt writes it (no
	// length, no chunks), or its chunks undone by net/http.
	return &stream{conn: conn, sse: newSSEReader(bufio.NewReaderSize(res.Body, 2048))}, nil
}

// next reads the stream's next frame, within d (0: no deadline).
func (s *stream) next(d time.Duration) (frame, error) {
	if d > 0 {
		s.conn.SetReadDeadline(time.Now().Add(d))
		defer s.conn.SetReadDeadline(time.Time{})
	}
	return s.sse.next()
}

// untilEvent reads frames until one with an id (an event of the log),
// within d in all, and returns it.
func (s *stream) untilEvent(d time.Duration) (frame, error) {
	s.conn.SetReadDeadline(time.Now().Add(d))
	defer s.conn.SetReadDeadline(time.Time{})
	for {
		f, err := s.sse.next()
		if err != nil || f.HasID {
			return f, err
		}
	}
}

func (s *stream) close() { s.conn.Close() }
