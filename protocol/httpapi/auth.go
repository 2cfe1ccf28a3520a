package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/agentrt/agentrt/protocol"
)

// API keys. Once keys are required (Keys.Required), every route but the
// health checks (and a CORS preflight, which browsers send without
// credentials) needs a key, as "Authorization: Bearer KEY" or
// "X-API-Key: KEY": without one, or with one that is not a key (unknown,
// revoked, malformed), the answer is 401. A key limited to some agents
// is answered 403 on the routes of any other, and sees only its own
// agents in GET /agents; /metrics, which describes every agent, needs a
// key for every agent. A key is never logged, echoed in an error or used
// as a metric label: the access log names the key by its name.

// Keys are the API keys requests are checked against.
type Keys interface {
	// Required reports whether requests need a key.
	Required(ctx context.Context) bool
	// Check returns the name of key and the agents it may use (nil:
	// every agent); ok is false when key is not a valid key.
	Check(ctx context.Context, key string) (name string, agents []string, ok bool)
}

// presentedKey is the key r carries, and whether it carries one.
func presentedKey(r *http.Request) (string, bool) {
	if v := r.Header.Get("Authorization"); v != "" {
		scheme, key, _ := strings.Cut(v, " ")
		if strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(key), true
		}
		return "", true // another scheme: not a key of ours
	}
	if v := r.Header.Get("X-API-Key"); v != "" {
		return strings.TrimSpace(v), true
	}
	return "", false
}

// authenticate checks r's key when keys are required, and keeps what it
// may use in in: EUNAUTHORIZED without a valid key.
func (s *Server) authenticate(r *http.Request, in *requestInfo) error {
	keys := s.cfg.Keys
	if keys == nil || !keys.Required(r.Context()) {
		return nil
	}
	key, sent := presentedKey(r)
	if !sent {
		return protocol.Errorf(protocol.EUNAUTHORIZED, "this server needs an API key: send it as \"Authorization: Bearer KEY\" or \"X-API-Key: KEY\"")
	}
	name, agents, ok := keys.Check(r.Context(), key)
	if !ok {
		return protocol.Errorf(protocol.EUNAUTHORIZED, "the API key is not valid: unknown, revoked or malformed")
	}
	in.authed, in.key, in.grant = true, name, agents
	return nil
}

// mayUse reports whether the request's key, if it had to show one, may
// use the agent named agent.
func (in *requestInfo) mayUse(agent string) bool {
	return !in.authed || in.grant == nil || slices.Contains(in.grant, agent)
}

// authorize is EFORBIDDEN when r's key may not use the agent named agent.
func authorize(r *http.Request, agent string) error {
	if !info(r).mayUse(agent) {
		return protocol.Errorf(protocol.EFORBIDDEN, "this API key may not use agent %q", agent)
	}
	return nil
}

// authorizeAll is EFORBIDDEN when r's key is limited to some agents: for
// what describes every agent.
func authorizeAll(r *http.Request) error {
	if in := info(r); in.authed && in.grant != nil {
		return protocol.Errorf(protocol.EFORBIDDEN, "this API key is limited to some agents; this route needs a key for every agent")
	}
	return nil
}

// Route is a method and a path pattern the server serves (httprouter's
// syntax: ":task_id" names a segment).
type Route struct{ Method, Path string }

// GuardedRoutes lists every route that needs a key while keys are
// required: all the server serves but the health checks. Tests that must
// reach every route read it, so that a route added later is not missed.
func (s *Server) GuardedRoutes() []Route {
	var out []Route
	for _, r := range s.routes {
		if !isHealthCheck(r.path) {
			out = append(out, Route{r.method, r.path})
		}
	}
	return out
}
