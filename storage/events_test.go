package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

func progress(msg string) protocol.Event {
	d, _ := json.Marshal(map[string]string{"message": msg})
	return protocol.Event{Type: protocol.EventStepProgress, StepID: "s", CreatedAt: time.Now(), Data: d}
}

func stepEnded(stepID string) protocol.Event {
	return protocol.Event{Type: protocol.EventStepCompleted, StepID: stepID, CreatedAt: time.Now(), Data: json.RawMessage(`{}`)}
}

func mustEvents(t *testing.T, s *Store, taskID string, after int64) *protocol.EventPage {
	t.Helper()
	page, err := s.Events(context.Background(), taskID, after, 100000)
	if err != nil {
		t.Fatalf("events of %s: %v", taskID, err)
	}
	return page
}

func TestEventIDsCountEachTasksEventsAndSurviveAReopen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	ctx := context.Background()
	a, b := mustTask(t, s), mustTask(t, s)
	evs := []protocol.Event{progress("1"), progress("2")}
	must(t, s.AppendEvents(ctx, a, evs))
	if evs[0].ID != 1 || evs[1].ID != 2 || evs[0].TaskID != a {
		t.Fatalf("ids given %d, %d (task %s)", evs[0].ID, evs[1].ID, evs[0].TaskID)
	}
	other := []protocol.Event{progress("b")}
	must(t, s.AppendEvents(ctx, b, other))
	if other[0].ID != 1 {
		t.Errorf("another task's first event has id %d, want 1", other[0].ID)
	}
	s.Close()
	s = mustOpen(t, dir)
	page := mustEvents(t, s, a, 0)
	if len(page.Events) != 2 || page.Last != 2 || string(page.Events[1].Data) != `{"message":"2"}` {
		t.Fatalf("after a reopen: %+v", page)
	}
	if page := mustEvents(t, s, a, 1); len(page.Events) != 1 || page.Events[0].ID != 2 {
		t.Errorf("events after 1: %+v", page.Events)
	}
	more := []protocol.Event{progress("3")}
	must(t, s.AppendEvents(ctx, a, more))
	if more[0].ID != 3 {
		t.Errorf("the next event after a reopen has id %d, want 3", more[0].ID)
	}
	_, err := s.Events(ctx, uuid.NewString(), 0, 10)
	if protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("events of no task: %v, want ENOTFOUND", err)
	}
	if _, err := s.Agent("someone-else").Events(ctx, a, 0, 10); protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("another agent reads the task's events: %v, want ENOTFOUND", err)
	}
	err = s.AppendEvents(ctx, uuid.NewString(), []protocol.Event{progress("x")})
	if protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("appending to no task: %v, want ENOTFOUND", err)
	}
}

// 10,000 events on one task: the log holds its bounds by trimming its
// oldest progress events, never a step's, never its newest; ids go on
// growing; a replay from the start says what was trimmed.
func TestTheEventLogHoldsItsBoundsTrimmingOldestProgressNeverSteps(t *testing.T) {
	s, err := Open(context.Background(), t.TempDir(), Config{EventBounds: protocol.EventBounds{Count: 100, Bytes: MinEventBytes}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	task := mustTask(t, s)
	big := strings.Repeat("x", 4000) // 100 of them would be 400 KB: the byte bound trims first
	var ended []string
	for i := range 10000 {
		var ev protocol.Event
		switch {
		case i%1000 == 999:
			id := uuid.NewString()
			ended = append(ended, id)
			ev = stepEnded(id)
		case i%2 == 0:
			ev = progress(big)
		default:
			ev = progress("small")
		}
		must(t, s.AppendEvents(ctx, task, []protocol.Event{ev}))
	}
	page := mustEvents(t, s, task, 0)
	var held, heldBytes int64
	var steps []string
	for i, e := range page.Events {
		if i > 0 && e.ID <= page.Events[i-1].ID {
			t.Fatalf("ids out of order: %d after %d", e.ID, page.Events[i-1].ID)
		}
		if protocol.Trimmable(e.Type) {
			held++
			heldBytes += int64(len(e.Data))
		} else {
			steps = append(steps, e.StepID)
		}
	}
	if held > 100 || heldBytes > MinEventBytes {
		t.Errorf("the log holds %d progress events of %d bytes; its bounds are 100 and %d", held, heldBytes, MinEventBytes)
	}
	if strings.Join(steps, ",") != strings.Join(ended, ",") {
		t.Errorf("step events kept: %d of %d", len(steps), len(ended))
	}
	if page.Last != 10000 || page.Events[len(page.Events)-1].ID != 10000 {
		t.Errorf("the newest event is %d (last %d), want 10000", page.Events[len(page.Events)-1].ID, page.Last)
	}
	kept := int64(len(page.Events))
	if page.Trimmed != 10000-kept || page.TrimmedThrough < 9000 {
		t.Errorf("a replay from the start says %d trimmed through %d; %d of 10000 are kept", page.Trimmed, page.TrimmedThrough, kept)
	}
	if p := mustEvents(t, s, task, page.TrimmedThrough); p.Trimmed != 0 {
		t.Errorf("a client past the trimmed events is told %d were trimmed", p.Trimmed)
	}
	next := []protocol.Event{progress("after")}
	must(t, s.AppendEvents(ctx, task, next))
	if next[0].ID != 10001 {
		t.Errorf("the next event has id %d, want 10001", next[0].ID)
	}
}

func TestDeletingATaskRemovesItsEvents(t *testing.T) {
	s := mustOpen(t, "")
	ctx := context.Background()
	task := mustTask(t, s)
	must(t, s.AppendEvents(ctx, task, []protocol.Event{progress("1")}))
	must(t, s.DeleteTask(ctx, task))
	var n int
	if err := s.reader(ctx).scanOne(`SELECT count(*) FROM events WHERE task_id = ?`, []any{task}, &n); err != nil || n != 0 {
		t.Errorf("%d events left of a deleted task (%v)", n, err)
	}
	if err := s.reader(ctx).scanOne(`SELECT count(*) FROM event_usage WHERE task_id = ?`, []any{task}, &n); err != nil || n != 0 {
		t.Errorf("%d event_usage rows left of a deleted task (%v)", n, err)
	}
}

// A step left running by a process that died gets its step.failed event
// when it is marked interrupted at the next open.
func TestAStepLeftRunningGetsAFailedEventAtTheNextOpen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	ctx := context.Background()
	task := mustTask(t, s)
	st := &protocol.Step{TaskID: task, StepID: uuid.NewString(), Status: protocol.StatusRunning, AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
	st.Events = []protocol.Event{protocol.StepEvent(protocol.EventStepCreated, st, nil), protocol.StepEvent(protocol.EventStepRunning, st, nil)}
	must(t, s.StartStep(ctx, st))
	s.Close()
	s = mustOpen(t, dir)
	page := mustEvents(t, s, task, 0)
	if len(page.Events) != 3 {
		t.Fatalf("events %+v, want created, running, failed", page.Events)
	}
	last := page.Events[2]
	if last.Type != protocol.EventStepFailed || last.StepID != st.StepID || last.ID != 3 || !strings.Contains(string(last.Data), `"code":"interrupted"`) {
		t.Errorf("the last event is %+v (%s); want step.failed, interrupted", last, last.Data)
	}
}

func TestEventBoundsThatWouldSwitchOffAreRefused(t *testing.T) {
	for _, b := range []protocol.EventBounds{{Count: -1}, {Bytes: -1}, {Bytes: MinEventBytes - 1}} {
		if s, err := Open(context.Background(), t.TempDir(), Config{EventBounds: b}); err == nil {
			s.Close()
			t.Errorf("opened with event bounds %+v", b)
		}
	}
}

// BenchmarkAppendEvent is the cost of one progress event appended alone,
// through the writer, unsynced: what a step's report costs the store.
func BenchmarkAppendEvent(b *testing.B) {
	s, err := Open(context.Background(), b.TempDir(), Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	task := uuid.NewString()
	if err := s.CreateTask(context.Background(), &protocol.Task{TaskID: task, AdditionalInput: []byte("{}"), CreatedAt: time.Now()}, nil, nil); err != nil {
		b.Fatal(err)
	}
	ev := progress("calling the model (turn 1)")
	b.ResetTimer()
	for range b.N {
		if err := s.AppendEvents(context.Background(), task, []protocol.Event{ev}); err != nil {
			b.Fatal(err)
		}
	}
}

// Whatever the bounds, the newest event stays: ids never go back.
func TestTrimmingNeverRemovesTheNewestEvent(t *testing.T) {
	s := mustOpen(t, "")
	task := mustTask(t, s)
	s.events = protocol.EventBounds{Count: 0, Bytes: 0} // bounds Open refuses
	must(t, s.AppendEvents(context.Background(), task, []protocol.Event{progress("a"), progress("b")}))
	page := mustEvents(t, s, task, 0)
	if len(page.Events) != 1 || page.Events[0].ID != 2 || page.Last != 2 {
		t.Errorf("left %+v; want the newest, id 2", page.Events)
	}
}

// A step's end is kept in its own row, yet reads as any other event: in
// id order among the task's others, of its type, with its failure.
func TestAStepsEndReadsAsAnEventInItsPlace(t *testing.T) {
	s := mustOpen(t, "")
	ctx := context.Background()
	task := mustTask(t, s)
	must(t, s.AppendEvents(ctx, task, []protocol.Event{progress("1"), progress("2")}))
	out := "ok"
	done := &protocol.Step{TaskID: task, StepID: uuid.NewString(), Status: protocol.StatusCompleted, Output: &out,
		AdditionalInput: []byte("{}"), CreatedAt: time.Now(), IsLast: true}
	done.Events = []protocol.Event{protocol.StepEvent(protocol.EventStepCompleted, done, nil)}
	must(t, s.SaveStep(ctx, done, nil))
	if done.Events[0].ID != 3 {
		t.Errorf("the end event was given id %d, want 3", done.Events[0].ID)
	}
	title := "t"
	must(t, s.UpdateTask(ctx, task, protocol.TaskPatch{Title: protocol.PatchField{Set: true, Value: &title}}))
	why := &protocol.Error{Code: protocol.ECANCELLED, Message: "stopped"}
	failed := &protocol.Step{TaskID: task, StepID: uuid.NewString(), Status: protocol.StatusCompleted,
		AdditionalInput: []byte("{}"), AdditionalOutput: protocol.FailureOutput(why), CreatedAt: time.Now()}
	failed.Events = []protocol.Event{protocol.StepEvent(protocol.EventStepCancelled, failed, why)}
	must(t, s.SaveStep(ctx, failed, nil))

	page := mustEvents(t, s, task, 0)
	var got []string
	for _, e := range page.Events {
		got = append(got, fmt.Sprintf("%d %s %s", e.ID, e.Type, e.StepID))
	}
	want := []string{"1 step.progress s", "2 step.progress s", "3 step.completed " + done.StepID,
		"4 task.updated ", "5 step.cancelled " + failed.StepID}
	if strings.Join(got, "|") != strings.Join(want, "|") || page.Last != 5 {
		t.Fatalf("events %q (last %d), want %q", got, page.Last, want)
	}
	if d := string(page.Events[2].Data); d != `{"name":null,"status":"completed","is_last":true}` {
		t.Errorf("the completed step's data: %s", d)
	}
	if d := string(page.Events[4].Data); !strings.Contains(d, `"error":{"code":"cancelled","message":"stopped"}`) {
		t.Errorf("the cancelled step's data: %s", d)
	}
	for _, c := range []struct {
		after int64
		limit int
		want  []int64
	}{{2, 10, []int64{3, 4, 5}}, {3, 1, []int64{4}}, {0, 3, []int64{1, 2, 3}}, {5, 10, nil}} {
		page, err := s.Events(ctx, task, c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, e := range page.Events {
			ids = append(ids, e.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(c.want) {
			t.Errorf("after %d, limit %d: ids %v, want %v", c.after, c.limit, ids, c.want)
		}
	}
}
