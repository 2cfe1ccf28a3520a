package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/agentrt/agentrt/protocol"
)

// Health checks, open to every client whether or not keys are required:
// GET /healthz answers 200 while the process serves; GET /readyz 200 when
// the server is ready for work (ServerConfig.Ready: its store open, its
// plugins loaded) and 503 when it is not, or is shutting down (Drain).

// healthBody is the body of the health checks.
type healthBody struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// handleHealthz serves GET /healthz.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.writeJSON(w, http.StatusOK, healthBody{Status: "ok"})
}

// handleReadyz serves GET /readyz.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.draining.Load() {
		s.writeJSON(w, http.StatusServiceUnavailable, healthBody{Status: "draining", Message: "the server is shutting down"})
		return
	}
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(r.Context()); err != nil {
			s.writeJSON(w, http.StatusServiceUnavailable, healthBody{Status: "not ready", Message: protocol.ErrorMessage(err)})
			return
		}
	}
	s.writeJSON(w, http.StatusOK, healthBody{Status: "ready"})
}

// handleMetrics serves GET /metrics: ServerConfig.Metrics (404 without),
// to a key for every agent when keys are required.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if err := authorizeAll(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.Metrics == nil {
		s.writeError(w, r, protocol.Errorf(protocol.ENOTFOUND, "this server keeps no metrics"))
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

// Drain makes /readyz answer 503 from now on: the server is shutting
// down, and load balancers should send it nothing new. Event streams
// end: their clients reconnect, with Last-Event-ID, to another server or
// to this one restarted, and miss nothing.
func (s *Server) Drain() {
	s.draining.Store(true)
	s.drainOnce.Do(func() {
		close(s.streamsEnd)
		s.streams.close()
	})
}

// isHealthCheck reports whether path is a health check, open to all.
func isHealthCheck(path string) bool { return path == "/healthz" || path == "/readyz" }
