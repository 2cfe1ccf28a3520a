package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// RequestObserver is told of every request the server answers: what
// metrics count. Every value it is given is from a bounded set (a route
// pattern, a method, a status, the name of an agent the server serves),
// never a client's own text. Its methods must be quick and safe for
// concurrent use.
type RequestObserver interface {
	// RequestDone says that a request to route (a route pattern such as
	// "/ap/v1/agent/tasks/:task_id"; "unmatched" when none matched),
	// of agent (the agent served, "" when none was) was answered
	// status after d.
	RequestDone(route, method string, status int, agent string, d time.Duration)
	// ArtifactBytes says that a request of agent uploaded in and
	// downloaded out bytes of artifacts.
	ArtifactBytes(agent string, in, out int64)
}

// requestInfo is what the server learns of a request while it serves it,
// for the access log and the observer.
type requestInfo struct {
	route  string // the route pattern matched
	agent  string // the agent served
	key    string // the name of the API key used
	grant  []string
	authed bool // a key was checked and accepted
	// artifactIn and artifactOut are the artifact bytes uploaded and
	// downloaded.
	artifactIn, artifactOut int64
}

type requestInfoKey struct{}

// info returns the requestInfo of r (a blank one outside ServeHTTP, as in
// tests that call a handler directly).
func info(r *http.Request) *requestInfo {
	if i, ok := r.Context().Value(requestInfoKey{}).(*requestInfo); ok {
		return i
	}
	return &requestInfo{}
}

// recorder is a ResponseWriter that keeps the status and the bytes of the
// answer.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// ReadFrom passes r on to the wrapped writer's ReadFrom, so that a file
// is still sent by the kernel (sendfile).
func (w *recorder) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(writerOnly{w.ResponseWriter}, r)
	}
	w.bytes += n
	return n, err
}

// Unwrap is the writer recorder wraps, for http.ResponseController.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// knownMethods are the methods observed by name; any other is "other".
var knownMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// done logs and observes a request once it is answered.
func (s *Server) done(ctx context.Context, w *recorder, r *http.Request, in *requestInfo, start time.Time) {
	d := time.Since(start)
	status := w.status
	if status == 0 {
		status = http.StatusOK // a handler that wrote nothing
	}
	if o := s.cfg.Observer; o != nil {
		method := r.Method
		if !knownMethods[method] {
			method = "other"
		}
		o.RequestDone(in.route, method, status, in.agent, d)
		if in.artifactIn > 0 || in.artifactOut > 0 {
			o.ArtifactBytes(in.agent, in.artifactIn, in.artifactOut)
		}
	}
	if s.cfg.AccessLog {
		// The path without its query (a client may put anything there),
		// and never a header: keys travel in headers.
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", status),
			slog.Int64("bytes", w.bytes),
			slog.Float64("ms", float64(d.Microseconds())/1000),
			slog.String("remote", r.RemoteAddr),
		}
		if in.agent != "" {
			attrs = append(attrs, slog.String("agent", in.agent))
		}
		if in.key != "" {
			attrs = append(attrs, slog.String("key_name", in.key))
		}
		s.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
	}
}
