package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
)

// Every request has an id: the client's X-Request-Id when it sends one
// fit to log, else one the server makes. It is sent back as X-Request-Id
// and carried by every log line of the request (LogHandler), the access
// log's included.

// RequestIDHeader is the header a request's id travels in, both ways.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDBytes bounds a client's request id: past it, or with a
// character not in requestIDChar, the server makes its own.
const maxRequestIDBytes = 128

// requestIDKey carries a request's id in its context.
type requestIDKey struct{}

// RequestID returns the id of the request ctx belongs to, "" outside one.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestIDs makes request ids: a random prefix chosen when the process
// starts, then a counter. Unique across restarts (the prefix) and cheap
// (no random bytes per request).
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	rand.Read(b[:])
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

func (g *requestIDs) next() string {
	return g.prefix + strconv.FormatUint(g.n.Add(1), 36)
}

// requestIDOf is r's id: the client's when it is fit to log and echo, a
// new one else.
func (g *requestIDs) of(r *http.Request) string {
	if id := r.Header.Get(RequestIDHeader); validRequestID(id) {
		return id
	}
	return g.next()
}

// validRequestID reports whether a client's request id may be used:
// 1 to maxRequestIDBytes letters, digits and -_.:/+=@.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '/', c == '+', c == '=', c == '@':
		default:
			return false
		}
	}
	return true
}

// LogHandler returns h adding, to every record logged with the context of
// a request, the request's id (request_id).
func LogHandler(h slog.Handler) slog.Handler { return requestLogHandler{h} }

type requestLogHandler struct{ slog.Handler }

func (h requestLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestLogHandler) WithGroup(name string) slog.Handler {
	return requestLogHandler{h.Handler.WithGroup(name)}
}
