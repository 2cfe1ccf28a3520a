package httpapi

import (
	"context"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/agentrt/agentrt/protocol"
)

// Agents are the agents a Server serves, by name.
type Agents interface {
	// Agent returns the agent named name, or the default agent for "".
	// ENOTFOUND when there is no such agent (or no default).
	Agent(name string) (*protocol.Agent, error)
	// List describes every agent, in name order.
	List(ctx context.Context) ([]protocol.AgentInfo, error)
	// Info describes the agent named name. ENOTFOUND when there is none.
	Info(ctx context.Context, name string) (*protocol.AgentInfo, error)
}

// The nouns that describe an agent are the domain's (protocol/agentinfo.go),
// so that every front end describes agents alike; these names are kept
// for the callers that knew them here, as os.FileInfo is io/fs's.
type (
	AgentInfo    = protocol.AgentInfo
	StartInfo    = protocol.StartInfo
	OutboundHTTP = protocol.OutboundHTTP
	HeldSecret   = protocol.HeldSecret
)

// agentList is the body of GET /agents.
type agentList struct {
	Agents []protocol.AgentInfo `json:"agents"`
}

// handleListAgents serves GET /agents.
func (s *Server) handleListAgents(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	all, err := s.agents.List(r.Context())
	if err != nil {
		return err
	}
	list := []protocol.AgentInfo{}
	for _, a := range all {
		if info(r).mayUse(a.Name) { // a key limited to some agents sees only them
			list = append(list, a)
		}
	}
	s.writeJSON(w, http.StatusOK, agentList{Agents: list})
	return nil
}

// handleGetAgent serves GET /agents/{agent}.
func (s *Server) handleGetAgent(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if err := authorize(r, ps.ByName("agent")); err != nil {
		return err
	}
	info, err := s.agents.Info(r.Context(), ps.ByName("agent"))
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, info)
	return nil
}
