package protocoltest

import (
	"context"

	"github.com/agentrt/agentrt/protocol"
)

// addEvents records evs after the task's events, giving each its id;
// s.Mu is held.
func (s *Store) addEvents(taskID string, evs []protocol.Event) {
	if s.Log == nil {
		s.Log = map[string][]protocol.Event{}
	}
	log := s.Log[taskID]
	for i := range evs {
		evs[i].ID = int64(len(log) + 1)
		evs[i].TaskID = taskID
		log = append(log, evs[i])
	}
	s.Log[taskID] = log
}

func (s *Store) AppendEvents(ctx context.Context, taskID string, evs []protocol.Event) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if _, ok := s.Tasks[taskID]; !ok {
		return notFound("task", taskID)
	}
	s.addEvents(taskID, evs)
	return nil
}

func (s *Store) Events(ctx context.Context, taskID string, after int64, limit int) (*protocol.EventPage, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if _, ok := s.Tasks[taskID]; !ok {
		return nil, notFound("task", taskID)
	}
	log := s.Log[taskID]
	page := &protocol.EventPage{Events: []protocol.Event{}, Last: int64(len(log))}
	for _, e := range log {
		if e.ID > after && len(page.Events) < limit {
			page.Events = append(page.Events, e)
		}
	}
	return page, nil
}
