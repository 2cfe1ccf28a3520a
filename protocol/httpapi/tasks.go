package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/agentrt/agentrt/protocol"
)

// handleCreateTask serves POST /ap/v1/agent/tasks.
func (s *Server) handleCreateTask(w http.ResponseWriter, r *http.Request, _ httprouter.Params, a *protocol.Agent) error {
	var body protocol.TaskRequestBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	t, err := a.CreateTask(r.Context(), body)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, t)
	return nil
}

// handleListTasks serves GET /ap/v1/agent/tasks.
func (s *Server) handleListTasks(w http.ResponseWriter, r *http.Request, _ httprouter.Params, a *protocol.Agent) error {
	p, err := pageOf(r)
	if err != nil {
		return err
	}
	list, err := a.ListTasks(r.Context(), p)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, list)
	return nil
}

// handleGetTask serves GET /ap/v1/agent/tasks/{task_id}.
func (s *Server) handleGetTask(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	t, err := a.GetTask(r.Context(), ps.ByName("task_id"))
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, t)
	return nil
}

// handleGetTaskLogs serves GET /ap/v1/agent/tasks/{task_id}/logs, an
// extension: what the task handler logged when the task was created.
func (s *Server) handleGetTaskLogs(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	logs, err := a.TaskLogs(r.Context(), ps.ByName("task_id"))
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, logList{Logs: logs})
	return nil
}

// logList is the body of the log extension endpoints.
type logList struct {
	Logs []protocol.LogRecord `json:"logs"`
}
