package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/agentrt/agentrt/protocol"
)

// Prefix is where the protocol is served.
const Prefix = "/ap/v1"

// ServerConfig sets the limits the HTTP API enforces at the edge. Zero
// values take the defaults below.
type ServerConfig struct {
	// MaxBodyBytes caps a JSON request body.
	MaxBodyBytes int64
	// BodyTimeout and MinBodyRate bound how slowly a request body may
	// arrive: it must have come by BodyTimeout after the request's headers
	// plus one second for every MinBodyRate bytes of it. A client slower
	// than that gets 408 and its connection is closed.
	BodyTimeout time.Duration
	MinBodyRate int64 // bytes per second
	// MaxUploads caps the uploads being received at once, and
	// MaxUploadsPerClient those from one client address (negative: no
	// limit per client, for a server behind a proxy). Past either, an
	// upload is refused with 503 before its body is read.
	MaxUploads          int
	MaxUploadsPerClient int
	// Log receives the server's log lines, each with its request's
	// context: wrap its handler in LogHandler for request ids.
	Log *slog.Logger
	// AccessLog logs a line for every request answered, at info.
	AccessLog bool
	// Keys, when set, are the API keys requests are checked against
	// (auth.go).
	Keys Keys
	// CORS says which browser origins may call the server.
	CORS CORS
	// Observer, when set, is told of every request answered.
	Observer RequestObserver
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
	// Ready, when set, says whether the server is ready for work, for
	// GET /readyz: nil, or why not.
	Ready func(ctx context.Context) error
	// EventHeartbeat is the silence after which an event stream writes a
	// comment line; EventWriteTimeout how long one of its writes may
	// take before the stream is cut.
	EventHeartbeat    time.Duration
	EventWriteTimeout time.Duration
}

// Defaults for ServerConfig.
const (
	DefaultMaxBodyBytes        = 1 << 20
	DefaultBodyTimeout         = 10 * time.Second
	DefaultMinBodyRate         = 16 << 10
	DefaultMaxUploads          = 64
	DefaultMaxUploadsPerClient = 8
)

// Server is the Agent Protocol's HTTP API over the agents it serves. Each
// agent is served with the whole protocol under /agents/NAME (so a client
// given the base URL http://HOST/agents/NAME works unchanged), and the
// default agent, if there is one, at the root too. GET /agents lists the
// agents, GET /agents/NAME describes one.
type Server struct {
	agents   Agents
	router   *httprouter.Router
	cfg      ServerConfig
	uploads  uploadSlots
	ids      *requestIDs
	draining atomic.Bool
	// streamsEnd is closed when the server drains: event streams end,
	// those parked in streams too.
	streamsEnd chan struct{}
	drainOnce  sync.Once
	streams    *streamHub
	// routes are the routes registered, as httprouter writes them; the
	// spec served at /ap/v1/openapi.json has each (openapi_test.go).
	routes []route
}

// route is a method and a path the server serves.
type route struct{ method, path string }

// add registers h for method and path, naming the route for the access
// log and the observer by path, its pattern.
func (s *Server) add(method, path string, h httprouter.Handle) {
	s.routes = append(s.routes, route{method, path})
	s.router.Handle(method, path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		info(r).route = path
		h(w, r, ps)
	})
}

// NewServer returns the HTTP API of agents.
func NewServer(agents Agents, cfg ServerConfig) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.MinBodyRate <= 0 {
		cfg.MinBodyRate = DefaultMinBodyRate
	}
	if cfg.MaxUploads <= 0 {
		cfg.MaxUploads = DefaultMaxUploads
	}
	if cfg.MaxUploadsPerClient == 0 {
		cfg.MaxUploadsPerClient = DefaultMaxUploadsPerClient
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.EventHeartbeat <= 0 {
		cfg.EventHeartbeat = DefaultEventHeartbeat
	}
	if cfg.EventWriteTimeout <= 0 {
		cfg.EventWriteTimeout = DefaultEventWriteTimeout
	}
	if len(cfg.CORS.Methods) == 0 {
		cfg.CORS.Methods = DefaultCORSMethods
	}
	if len(cfg.CORS.Headers) == 0 {
		cfg.CORS.Headers = DefaultCORSHeaders
	}
	s := &Server{agents: agents, router: httprouter.New(), cfg: cfg, ids: newRequestIDs(), streamsEnd: make(chan struct{}),
		streams: newStreamHub(cfg.EventHeartbeat, cfg.EventWriteTimeout),
		uploads: uploadSlots{max: cfg.MaxUploads, perClient: cfg.MaxUploadsPerClient, byClient: map[string]int{}}}
	r := s.router
	for _, base := range []string{"", "/agents/:agent"} {
		base += Prefix
		s.add("GET", base+"/agent/tasks", s.handle(s.handleListTasks))
		s.add("POST", base+"/agent/tasks", s.handle(s.handleCreateTask))
		s.add("GET", base+"/agent/tasks/:task_id", s.handle(s.handleGetTask))
		s.add("PATCH", base+"/agent/tasks/:task_id", s.handle(s.handleUpdateTask))
		s.add("DELETE", base+"/agent/tasks/:task_id", s.handle(s.handleDeleteTask))
		s.add("GET", base+"/agent/tasks/:task_id/logs", s.handle(s.handleGetTaskLogs))
		s.add("GET", base+"/agent/tasks/:task_id/steps", s.handle(s.handleListSteps))
		s.add("POST", base+"/agent/tasks/:task_id/steps", s.handle(s.handleExecuteStep))
		s.add("GET", base+"/agent/tasks/:task_id/steps/:step_id", s.handle(s.handleGetStep))
		s.add("GET", base+"/agent/tasks/:task_id/steps/:step_id/logs", s.handle(s.handleGetStepLogs))
		s.add("POST", base+"/agent/tasks/:task_id/steps/:step_id/cancel", s.handle(s.handleCancelStep))
		s.add("GET", base+"/agent/tasks/:task_id/events", s.handle(s.handleEvents))
		s.add("GET", base+"/agent/tasks/:task_id/artifacts", s.handle(s.handleListArtifacts))
		s.add("POST", base+"/agent/tasks/:task_id/artifacts", s.handle(s.handleUploadArtifact))
		s.add("GET", base+"/agent/tasks/:task_id/artifacts/:artifact_id", s.handle(s.handleDownloadArtifact))
		s.add("GET", base+"/agent/artifact-schemes", s.handle(s.handleArtifactSchemes))
		s.add("GET", base+"/openapi.json", s.handle(s.handleOpenAPI))
	}
	s.add("GET", "/agents", s.handleFleet(s.handleListAgents))
	s.add("GET", "/agents/:agent", s.handleFleet(s.handleGetAgent))
	s.add("GET", "/healthz", s.handleHealthz)
	s.add("GET", "/readyz", s.handleReadyz)
	s.add("GET", "/metrics", s.handleMetrics)
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, protocol.Errorf(protocol.ENOTFOUND, "no such route: %s %s", req.Method, req.URL.Path))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, protocol.Errorf(protocol.EMETHOD, "method %s is not allowed on %s (allowed: %s)",
			req.Method, req.URL.Path, w.Header().Get("Allow")))
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		if v == http.ErrAbortHandler {
			panic(v) // net/http ends the connection without ending the answer
		}
		s.cfg.Log.ErrorContext(req.Context(), "panic serving request", "method", req.Method, "path", req.URL.Path, "panic", v)
		s.writeError(w, req, fmt.Errorf("panic: %v", v))
	}
	return s
}

// ServeHTTP serves a request: it gives it an id, answers a CORS
// preflight, checks its API key (but for the health checks), routes it,
// and logs and observes it once answered.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := s.ids.of(r)
	w.Header().Set(RequestIDHeader, id)
	in := &requestInfo{route: "unmatched"}
	ctx := context.WithValue(context.WithValue(r.Context(), requestIDKey{}, id), requestInfoKey{}, in)
	r = markSymbolic(r.WithContext(ctx))
	rec := &recorder{ResponseWriter: w}
	defer s.done(ctx, rec, r, in, start)
	s.paceUnread(rec, r)
	if s.cors(rec, r) {
		in.route = "preflight"
		return
	}
	if !isHealthCheck(r.URL.Path) {
		if err := s.authenticate(r, in); err != nil {
			s.writeError(rec, r, err)
			return
		}
	}
	s.router.ServeHTTP(rec, r)
}

// handlerFunc is a protocol route's handler, given the agent the route
// names; an error it returns is rendered by writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error

// handle finds the agent a route names (the default agent for the routes
// at the root) and runs h with it.
func (s *Server) handle(h handlerFunc) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		a, err := s.agents.Agent(ps.ByName("agent"))
		if err == nil {
			info(r).agent = a.Name()
			err = authorize(r, a.Name())
		}
		if err == nil {
			err = h(w, r, ps, a)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	}
}

// handleFleet runs a route about the agents themselves.
func (s *Server) handleFleet(h func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if err := h(w, r, ps); err != nil {
			s.writeError(w, r, err)
		}
	}
}

// statusOf maps an error code to its HTTP status. It is the only place
// where that happens.
func statusOf(code string) int {
	switch code {
	case protocol.ENOTFOUND:
		return http.StatusNotFound
	case protocol.EINVALID:
		return http.StatusBadRequest
	case protocol.EUNPROCESSABLE, protocol.EBADPATH, protocol.EREJECTED:
		return http.StatusUnprocessableEntity
	case protocol.ETOOLARGE:
		return http.StatusRequestEntityTooLarge
	case protocol.EMETHOD:
		return http.StatusMethodNotAllowed
	case protocol.ECONFLICT, protocol.EREFERENCE, protocol.ECANCELLED:
		return http.StatusConflict
	case protocol.EPLUGIN:
		return http.StatusBadGateway
	case protocol.ETIMEOUT:
		return http.StatusGatewayTimeout
	case protocol.EUNAVAILABLE:
		return http.StatusServiceUnavailable
	case protocol.ELIMIT:
		return http.StatusTooManyRequests
	case protocol.EINSUFFICIENT:
		return http.StatusInsufficientStorage
	case protocol.EABORTED:
		return http.StatusBadRequest
	case protocol.ESLOWBODY:
		return http.StatusRequestTimeout
	case protocol.ERANGE:
		return http.StatusRequestedRangeNotSatisfiable
	case protocol.EPRECONDITION:
		return http.StatusPreconditionFailed
	case protocol.EUNAUTHORIZED:
		return http.StatusUnauthorized
	case protocol.EFORBIDDEN:
		return http.StatusForbidden
	case protocol.EINTERRUPTED:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errorBody is the JSON body of every error response.
type errorBody struct {
	Message string `json:"message"`
	Code    string `json:"code"`
	StepID  string `json:"step_id,omitempty"`
}

// writeError renders err. Internal errors are logged and shown to the client
// only as "internal error". A request the client cancelled (it went away,
// or half-closed its connection) while it was served is no server error:
// it is answered EABORTED, if anyone still listens, and logged as such.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := protocol.ErrorCode(err)
	if code == protocol.EINTERNAL && r.Context().Err() != nil {
		s.cfg.Log.InfoContext(r.Context(), "request cancelled by the client", "method", r.Method, "path", r.URL.Path, "err", err)
		err, code = protocol.Errorf(protocol.EABORTED, "the request was cancelled"), protocol.EABORTED
	}
	body := errorBody{Message: protocol.ErrorMessage(err), Code: code}
	var e *protocol.Error
	if errors.As(err, &e) {
		body.StepID = e.StepID
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		}
	}
	status := statusOf(code)
	if code == protocol.EUNAUTHORIZED {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentrt"`)
	}
	if code == protocol.ESLOWBODY {
		// What is left of the body is not worth waiting for: net/http
		// closes the connection after the answer instead of draining it.
		w.Header().Set("Connection", "close")
	}
	if status == http.StatusInternalServerError || status == http.StatusInsufficientStorage {
		s.cfg.Log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if symbolic(r) {
		s.writeSymbolic(w, status, symbolicError(body))
		return
	}
	s.writeJSON(w, status, body)
}

// writeJSON writes v as the JSON response body, ended by a newline,
// without escaping for HTML (protocol.MarshalJSON). An answer over
// maxUnpacedAnswer must be taken at the server's pace (pacedAnswer), or
// its connection is closed; a smaller one fits in what the connection
// buffers, client and server side, and costs no deadline.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	s.writeJSONAs(w, status, v, "application/json")
}

// writeJSONAs is writeJSON with another Content-Type.
func (s *Server) writeJSONAs(w http.ResponseWriter, status int, v any, contentType string) {
	b, err := protocol.MarshalJSON(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"message":"internal error","code":"internal"}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if len(b) <= maxUnpacedAnswer {
		w.WriteHeader(status)
		w.Write(b)
		return
	}
	paced := s.answerWriter(w)
	defer paced.finish()
	paced.WriteHeader(status)
	paced.Write(b)
}

// maxUnpacedAnswer is the largest answer written without a deadline: it
// fits in the client's initial receive window, so it is sent even to a
// client that never reads, and nothing waits on it.
const maxUnpacedAnswer = 16 << 10

// decodeBody decodes an optional JSON request body into v: an absent or
// empty body, or null, leaves v as it is. Anything else must be one JSON
// object that agentrt can store and serve (protocol.CheckJSON: I-JSON, so
// UTF-8, no lone surrogates, no duplicate names, numbers a double holds;
// nested at most MaxJSONDepth deep) whose fields have the right
// types (EUNPROCESSABLE); a body over the limit is ETOOLARGE, one that
// arrives too slowly ESLOWBODY.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := s.readBody(w, r, fieldsOf(v))
	if err != nil || body == nil {
		return err
	}
	return decodeJSON(body, v)
}

// fieldsOf is what encoding/json matches member names to when it decodes
// into v, a pointer: readBody checks the names of a body to be decoded
// into v with it.
func fieldsOf(v any) *protocol.JSONFields {
	return protocol.JSONFieldsOf(reflect.TypeOf(v).Elem())
}

// readBody reads an optional JSON request body as decodeBody takes it:
// nil for an absent or empty body or null, else one JSON object agentrt
// can store and serve. In the same pass over it, it refuses a member
// named as a field of fields only in another case ("INPUT", or
// "\u017Fteps" for steps): encoding/json would read it as the field,
// where every other reader of the body (a proxy, an audit log, the
// client's own code) reads another name (protocol.JSONFields). Members
// that name no field are left to decoding, which ignores them: a client
// may send more than agentrt reads.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, fields *protocol.JSONFields) ([]byte, error) {
	body, err := io.ReadAll(s.body(w, r, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		var e *protocol.Error
		switch {
		case errors.As(err, &tooLarge):
			return nil, protocol.Errorf(protocol.ETOOLARGE, "the request body is larger than %d bytes", s.cfg.MaxBodyBytes)
		case errors.As(err, &e):
			return nil, e
		}
		return nil, protocol.Errorf(protocol.EABORTED, "reading the request body failed: %v", err)
	}
	// JSON's white space only: bytes.TrimSpace would take a body behind a
	// no-break space, which every strict parser refuses (so a proxy or an
	// audit log reads nothing where agentrt reads a task).
	body = bytes.Trim(body, " \t\r\n")
	if len(body) == 0 || bytes.Equal(body, []byte("null")) {
		return nil, nil
	}
	if err := protocol.CheckJSONFields(body, protocol.MaxJSONDepth, fields); err != nil {
		if _, ok := errors.AsType[*protocol.JSONNameError](err); ok {
			return nil, protocol.Errorf(protocol.EUNPROCESSABLE, "the request body is not valid: %v", err)
		}
		return nil, protocol.Errorf(protocol.EUNPROCESSABLE, "the request body is not valid JSON: %v", err)
	}
	if body[0] != '{' {
		return nil, protocol.Errorf(protocol.EUNPROCESSABLE, "the request body must be a JSON object")
	}
	return body, nil
}

// decodeJSON decodes body, one JSON object readBody accepted for v (so
// nothing follows it, and its names are v's fields' as they are written),
// into v.
func decodeJSON(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		if e, ok := errors.AsType[*protocol.Error](err); ok {
			return e // a body's own check (an update-task patch)
		}
		return protocol.Errorf(protocol.EUNPROCESSABLE, "the request body is not valid: %s", describeJSONError(err))
	}
	return nil
}

// describeJSONError says what is wrong with a body in a client's terms.
func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		want := typeErr.Type.String()
		switch {
		case strings.Contains(want, "string"):
			want = "a string or null"
		case strings.Contains(want, "RawMessage"):
			want = "a JSON value"
		}
		return fmt.Sprintf("field %q must be %s, not %s", typeErr.Field, want, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of input"
	}
	return err.Error()
}

// maxPageNumber keeps page arithmetic far from overflow (the spec's int32).
const maxPageNumber = 1<<31 - 1

// pageOf reads current_page and page_size from the query. Absent values take
// their defaults; page_size above MaxPageSize is lowered to it; anything
// that is not an integer in range is EINVALID.
func pageOf(r *http.Request) (protocol.Page, error) {
	q := r.URL.Query()
	p := protocol.Page{Number: 1, Size: protocol.DefaultPageSize}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"current_page", &p.Number}, {"page_size", &p.Size}} {
		v, ok := q[f.name]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
		if err != nil || n < 1 || n > maxPageNumber {
			return protocol.Page{}, protocol.Errorf(protocol.EINVALID, "%s must be an integer from 1 to %d, not %q", f.name, maxPageNumber, v[0])
		}
		*f.dst = int(n)
	}
	if p.Size > protocol.MaxPageSize {
		p.Size = protocol.MaxPageSize
	}
	return p, nil
}
