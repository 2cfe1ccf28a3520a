package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/agentrt/agentrt/protocol"
)

// The task routes serve plain JSON, and the symbolic form to clients that
// ask for it (symbolic.go).

// handleCreateTask serves POST /ap/v1/agent/tasks.
func (s *Server) handleCreateTask(w http.ResponseWriter, r *http.Request, _ httprouter.Params, a *protocol.Agent) error {
	var body protocol.TaskRequestBody
	if err := s.decodeTaskBody(w, r, &body); err != nil {
		return err
	}
	t, err := a.CreateTask(r.Context(), body)
	if err != nil {
		return err
	}
	return s.writeTask(w, r, a, t)
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
	return s.writeTaskList(w, r, a, list)
}

// handleGetTask serves GET /ap/v1/agent/tasks/{task_id}.
func (s *Server) handleGetTask(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	t, err := a.GetTask(r.Context(), ps.ByName("task_id"))
	if err != nil {
		return err
	}
	return s.writeTask(w, r, a, t)
}

// handleUpdateTask serves PATCH /ap/v1/agent/tasks/{task_id}, an addition
// to the specification: a JSON merge patch (RFC 7396) of the task's
// title, description and version. It answers the task.
func (s *Server) handleUpdateTask(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	var patch protocol.TaskPatch
	if err := s.decodeTaskBody(w, r, &patch); err != nil {
		return err
	}
	t, err := a.UpdateTask(r.Context(), ps.ByName("task_id"), patch)
	if err != nil {
		return err
	}
	return s.writeTask(w, r, a, t)
}

// handleDeleteTask serves DELETE /ap/v1/agent/tasks/{task_id}, an addition
// to the specification: the task goes with its steps, artifacts, logs and
// workspace. It answers 204, or in the symbolic form {"✅": {"🆔": id}}.
func (s *Server) handleDeleteTask(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	taskID := ps.ByName("task_id")
	if err := a.DeleteTask(r.Context(), taskID); err != nil {
		return err
	}
	if symbolic(r) {
		s.writeSymbolic(w, http.StatusOK, symObject{{symOK, symObject{{sym(taskSymbols, "task_id"), taskID}}}})
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
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
