package httpapi

import (
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"sync"

	"github.com/agentrt/agentrt/protocol"
)

// How many uploads may be received at once, in all and from one client
// address: each holds a staging file, a descriptor and a goroutine while
// its body comes.

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
		return nil, &protocol.Error{Code: protocol.EUNAVAILABLE, RetryAfter: 1,
			Message: fmt.Sprintf("the server is receiving %d uploads, the most it takes at once; retry shortly", u.total)}
	case u.perClient >= 0 && u.byClient[client] >= u.perClient:
		return nil, &protocol.Error{Code: protocol.EUNAVAILABLE, RetryAfter: 1,
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

// maxPartHeaderBytes bounds the header of one part of an upload's
// multipart body (with what precedes it: a boundary, a preamble). Go's
// multipart reader lets a part's header grow to 10 MiB, parsed in memory,
// and a body may hold one after another. A part's header here is a
// Content-Disposition with a name (a few hundred bytes) and a
// Content-Type.
const maxPartHeaderBytes = 16 << 10

// multipartReadAhead is what a multipart reader reads of a body ahead of
// what it parses (its buffer).
const multipartReadAhead = 4096

// partHeaders is an upload's body as its multipart reader reads it,
// bounding what the reader takes of it while it reads a part's header
// (nextPart), and reading ahead of it while it reads a part's bytes: the
// multipart reader asks for 4 KiB at a time, and a read of the
// connection for each cost a 1 GiB upload a quarter of a million system
// calls. While a header is read nothing is read ahead, so the bound
// holds of the body itself.
type partHeaders struct {
	r    io.Reader
	left int64 // what the header may still take; < 0 while no header is read
	// ahead holds what was read of the body and not yet taken, at
	// buf[head:tail]; err is what the read that filled it returned.
	buf        []byte
	head, tail int
	err        error
}

// partReadAhead is how much of an upload's body is read at once while a
// part's bytes are read: what each upload being received holds.
const partReadAhead = 64 << 10

func (h *partHeaders) Read(p []byte) (int, error) {
	if h.left == 0 {
		return 0, errPartHeaderTooLarge
	}
	if h.left > 0 {
		p = p[:min(int64(len(p)), h.left)]
	}
	if h.head == h.tail {
		if h.err != nil {
			return 0, h.err
		}
		if h.left > 0 { // a header: nothing read ahead
			n, err := h.r.Read(p)
			h.left -= int64(n)
			return n, err
		}
		if h.buf == nil {
			h.buf = make([]byte, partReadAhead)
		}
		h.head = 0
		h.tail, h.err = h.r.Read(h.buf)
		if h.tail == 0 {
			return 0, h.err
		}
	}
	n := copy(p, h.buf[h.head:h.tail])
	h.head += n
	if h.left > 0 {
		h.left -= int64(n)
	}
	return n, nil
}

var errPartHeaderTooLarge = protocol.Errorf(protocol.ETOOLARGE, "a part of the multipart body has a header larger than %d bytes", maxPartHeaderBytes)

// nextPart is mr.NextPart, reading mr's body through h: the part's
// header, and what precedes it, may take maxPartHeaderBytes.
func nextPart(mr *multipart.Reader, h *partHeaders) (*multipart.Part, error) {
	h.left = maxPartHeaderBytes + multipartReadAhead
	defer func() { h.left = -1 }()
	part, err := mr.NextPart()
	if err != nil && err != io.EOF && h.left == 0 {
		// The reader may call what it got of a line cut short malformed.
		return nil, errPartHeaderTooLarge
	}
	return part, err
}
