package httpapi

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/agentrt/agentrt/protocol"
)

// handleExecuteStep serves POST /ap/v1/agent/tasks/{task_id}/steps.
func (s *Server) handleExecuteStep(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	var body protocol.StepRequestBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if prefersAsync(r) {
		// RFC 7240: answered at once, 202 and where to find the step.
		st, err := a.ExecuteStepAsync(r.Context(), ps.ByName("task_id"), body)
		if err != nil {
			return err
		}
		w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/")+"/"+st.StepID)
		w.Header().Set("Preference-Applied", "respond-async")
		s.writeJSON(w, http.StatusAccepted, st)
		return nil
	}
	st, err := a.ExecuteStep(r.Context(), ps.ByName("task_id"), body)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, st)
	return nil
}

// handleListSteps serves GET /ap/v1/agent/tasks/{task_id}/steps.
func (s *Server) handleListSteps(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	p, err := pageOf(r)
	if err != nil {
		return err
	}
	list, err := a.ListSteps(r.Context(), ps.ByName("task_id"), p)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, list)
	return nil
}

// handleGetStep serves GET /ap/v1/agent/tasks/{task_id}/steps/{step_id}.
func (s *Server) handleGetStep(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	st, err := a.GetStep(r.Context(), ps.ByName("task_id"), ps.ByName("step_id"))
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, st)
	return nil
}

// handleGetStepLogs serves GET /ap/v1/agent/tasks/{task_id}/steps/{step_id}/logs,
// an extension: what the plugin logged, printed to stdout or stderr while
// running the step.
func (s *Server) handleGetStepLogs(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	logs, err := a.StepLogs(r.Context(), ps.ByName("task_id"), ps.ByName("step_id"))
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, logList{Logs: logs})
	return nil
}
