package httpapi

import (
	"fmt"
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
