package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// CORS lets browser front ends on other origins talk to the server. The
// zero value allows no origin: the server sends no CORS header, as
// before.
type CORS struct {
	// Origins are the origins allowed ("https://app.example"), or "*"
	// for any.
	Origins []string
	// Methods and Headers are what a preflight allows; empty: the
	// defaults below.
	Methods []string
	Headers []string
	// MaxAge is how long a browser may keep a preflight's answer.
	MaxAge time.Duration
}

// Defaults of CORS.
var (
	DefaultCORSMethods = []string{"GET", "POST", "PATCH", "DELETE"}
	DefaultCORSHeaders = []string{"Authorization", "X-API-Key", "Content-Type", "Accept", RequestIDHeader,
		"Range", "If-Match", "If-None-Match", "If-Range", "If-Modified-Since", "If-Unmodified-Since"}
)

// corsExposed are the answer headers a browser lets the page read.
const corsExposed = "X-Request-Id, Content-Disposition, Retry-After, Content-Range, Accept-Ranges, ETag, Last-Modified"

func (c *CORS) enabled() bool { return len(c.Origins) > 0 }

func (c *CORS) allows(origin string) bool {
	return slices.Contains(c.Origins, "*") || slices.Contains(c.Origins, origin)
}

// cors adds the CORS headers r's origin is allowed, and answers a
// preflight itself: handled reports that it did.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) (handled bool) {
	c := &s.cfg.CORS
	origin := r.Header.Get("Origin")
	if !c.enabled() || origin == "" {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if !c.allows(origin) {
		if preflight {
			s.writeError(w, r, protocol.Errorf(protocol.EFORBIDDEN, "origin %q may not use this server", origin))
			return true
		}
		return false // served as to any client; the browser keeps the answer from the page
	}
	if slices.Contains(c.Origins, "*") {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
	}
	if !preflight {
		h.Set("Access-Control-Expose-Headers", corsExposed)
		return false
	}
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", strings.Join(c.Methods, ", "))
	h.Set("Access-Control-Allow-Headers", strings.Join(c.Headers, ", "))
	if c.MaxAge > 0 {
		h.Set("Access-Control-Max-Age", strconv.Itoa(int(c.MaxAge.Seconds())))
	}
	w.WriteHeader(http.StatusNoContent)
	return true
}
