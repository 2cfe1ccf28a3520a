package protocol

import (
	"context"
	"encoding/json"
	"time"
)

// The types of a task's events (Event.Type), an addition to the
// specification: GET .../tasks/{task_id}/events serves them.
const (
	// EventStepCreated: a step exists, planned by the task handler or
	// about to run (its data names it).
	EventStepCreated = "step.created"
	// EventStepRunning: a step's handler is running.
	EventStepRunning = "step.running"
	// EventStepProgress: the running step's handler reported progress: a
	// message and, maybe, its output so far.
	EventStepProgress = "step.progress"
	// EventStepLog: the running step's handler logged a line (or printed
	// one to stdout or stderr).
	EventStepLog = "step.log"
	// EventStepAbandoned: a step marked running did not run after all
	// (no instance was free, or the disk was full): a new step is gone,
	// a planned one is planned again.
	EventStepAbandoned = "step.abandoned"
	// EventStepCompleted: a step ended well; GET the step for its output.
	EventStepCompleted = "step.completed"
	// EventStepFailed: a step's handler failed, or the server stopped
	// while it ran; its data holds the error, as the step's
	// additional_output does.
	EventStepFailed = "step.failed"
	// EventStepCancelled: a step was cancelled by a client (POST
	// .../steps/{step_id}/cancel) while it ran.
	EventStepCancelled = "step.cancelled"
	// EventArtifactCreated: an artifact was uploaded, or made by a
	// handler; its data is the artifact as GET .../artifacts lists it.
	EventArtifactCreated = "artifact.created"
	// EventTaskUpdated: the task's metadata changed (PATCH); its data is
	// the fields changed, with their new values.
	EventTaskUpdated = "task.updated"
	// EventTaskDeleted: the task was deleted. It is the last event its
	// watchers see, and is not kept: the task's log goes with it.
	EventTaskDeleted = "task.deleted"
)

// Event is one entry of a task's event log.
type Event struct {
	// ID counts the task's events from 1; it only grows. A client that
	// reconnects gives the last it saw (Last-Event-ID) and gets those
	// after it.
	ID     int64  `json:"id"`
	Type   string `json:"type"`
	TaskID string `json:"task_id"`
	// StepID names the step a step event is about; "" for the others.
	StepID    string    `json:"step_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Data is a JSON object, its members the event type's.
	Data json.RawMessage `json:"data"`
}

// Trimmable says whether an event of type typ may be trimmed from a log
// over its bounds: progress and log events may, oldest first; what a
// task's steps and artifacts are may not.
func Trimmable(typ string) bool {
	return typ == EventStepProgress || typ == EventStepLog
}

// EventPage is a page of a task's events, in id order.
type EventPage struct {
	Events []Event `json:"events"`
	// Trimmed counts the events trimmed from the task's log so far, its
	// oldest progress and log events, to hold the log to its bounds;
	// TrimmedThrough is the highest id trimmed. Both are 0 when none
	// trimmed is after the page's start: a client that kept up lost
	// nothing.
	Trimmed        int64 `json:"trimmed"`
	TrimmedThrough int64 `json:"trimmed_through"`
	// Last is the id of the task's newest event when the page was read
	// (0 for none): the page reaches it when its last event's id is
	// Last.
	Last int64 `json:"last_event_id"`
}

// EventBounds bound what one task's event log holds of its trimmable
// (progress and log) events; past either, the oldest are trimmed. The
// others are bounded by what they are about: a task's steps
// (Limits.MaxTaskSteps) and artifacts (Limits.MaxTaskArtifacts).
type EventBounds struct {
	Count int   // trimmable events a task's log holds at most
	Bytes int64 // the bytes of their data at most
}

// DefaultEventBounds are the bounds used where none are configured.
var DefaultEventBounds = EventBounds{Count: 1000, Bytes: 1 << 20}

// EventStore is the event log: the store writes the events of what it
// records (a step saved, an artifact added, a task updated) in the same
// transaction, with the events Step.Events and Task.Events carry, and
// AppendEvents writes what happens while a step runs.
type EventStore interface {
	// AppendEvents records events of the task taskID after those it
	// holds, giving each its id (set in place), and trims the task's
	// oldest trimmable events past the store's bounds. The write need
	// survive the process, not the machine (as StartStep's). ENOTFOUND
	// when the task is gone.
	AppendEvents(ctx context.Context, taskID string, events []Event) error
	// Events returns the task's events with ids above after, at most
	// limit of them, in id order. ENOTFOUND when there is no such task.
	Events(ctx context.Context, taskID string, after int64, limit int) (*EventPage, error)
}

// eventTime is t as an event keeps it: to the millisecond, as the store
// does, so that an event reads the same live and replayed.
func eventTime(t time.Time) time.Time { return t.Truncate(time.Millisecond) }

// eventData encodes an event's data, an object of the members given.
func eventData(v any) json.RawMessage {
	b, err := MarshalJSON(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

// stepEventData is what a step event says of its step.
type stepEventData struct {
	Name   *string `json:"name"`
	Status string  `json:"status"`
	IsLast bool    `json:"is_last"`
	// Error is a failed or cancelled step's failure, as its
	// additional_output holds it.
	Error *errorData `json:"error,omitempty"`
}

type errorData struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// StepEvent returns an event of type typ about step st; e, for a failed
// or cancelled step, is why.
func StepEvent(typ string, st *Step, e *Error) Event {
	d := stepEventData{Name: st.Name, Status: string(st.Status), IsLast: st.IsLast}
	if typ == EventStepCreated {
		d.Status = string(StatusCreated)
	}
	if e != nil {
		d.Error = &errorData{Code: e.Code, Message: e.Message}
	}
	return Event{Type: typ, TaskID: st.TaskID, StepID: st.StepID, CreatedAt: eventTime(time.Now()), Data: eventData(d)}
}

// progressEvent is the event of a progress report of step st.
func progressEvent(st *Step, message string, output *string) Event {
	d := struct {
		Message string  `json:"message"`
		Output  *string `json:"output,omitempty"`
	}{message, output}
	return Event{Type: EventStepProgress, TaskID: st.TaskID, StepID: st.StepID, CreatedAt: eventTime(time.Now()), Data: eventData(d)}
}

// logEvent is the event of a log record of step st.
func logEvent(st *Step, r LogRecord) Event {
	return Event{Type: EventStepLog, TaskID: st.TaskID, StepID: st.StepID, CreatedAt: eventTime(r.Time), Data: eventData(r)}
}

// ArtifactEvent is the event of artifact a of task taskID created.
func ArtifactEvent(taskID string, a *Artifact) Event {
	return Event{Type: EventArtifactCreated, TaskID: taskID, StepID: a.StepID, CreatedAt: eventTime(time.Now()), Data: eventData(a)}
}

// TaskUpdatedEvent is the event of task taskID changed by patch: the
// fields it names, with their new values (null for one removed).
func TaskUpdatedEvent(taskID string, patch TaskPatch) Event {
	d := map[string]*string{}
	for name, f := range patch.fields() {
		if f.Set {
			d[name] = f.Value
		}
	}
	return Event{Type: EventTaskUpdated, TaskID: taskID, CreatedAt: eventTime(time.Now()), Data: eventData(d)}
}

// taskDeletedEvent is the event of task taskID deleted, after the last
// it held.
func taskDeletedEvent(taskID string, after int64) Event {
	return Event{ID: after + 1, Type: EventTaskDeleted, TaskID: taskID, CreatedAt: eventTime(time.Now()), Data: json.RawMessage(`{}`)}
}
