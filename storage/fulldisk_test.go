package storage

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/storage/disktest"
	"github.com/google/uuid"
)

// lockedBuffer is a log the store's goroutines write while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The messages a store logs when it defers the marks of interrupted
// steps for want of disk, and when it writes them after all.
const (
	deferredLine = "the disk is full: steps running when the last process stopped"
	markedLine   = "the disk has room again: steps running when the last process stopped are now recorded"
)

// leftRunningOnAFullDisk makes a data directory on the small file system
// mnt with two steps a dead process left running (a new step, and a
// planned one, the next still planned) beside an artifact, fills the file
// system and opens the store on it with cfg. It returns the store, the
// filler and the steps.
func leftRunningOnAFullDisk(t *testing.T, mnt string, cfg Config) (s *Store, dir, filler string, fresh, planned protocol.Step, art protocol.Artifact) {
	t.Helper()
	ctx := context.Background()
	dir = filepath.Join(mnt, "data")
	s = mustOpen(t, dir)
	taskID := mustTask(t, s)
	art = mustStage(t, s, taskID, "bytes to read back")
	if err := s.AddArtifacts(ctx, taskID, []protocol.Artifact{art}, protocol.TaskLog{}, 0); err != nil {
		t.Fatal(err)
	}
	fresh = protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusRunning,
		Input: ptr("long work"), AdditionalInput: []byte("{}"), CreatedAt: time.Now(), Build: &protocol.StepBuild{Agent: "a", SHA256: "b"}}
	if err := s.StartStep(ctx, &fresh); err != nil {
		t.Fatal(err)
	}
	plannedTask := uuid.NewString()
	steps := []protocol.Step{}
	for _, name := range []string{"first", "second"} {
		steps = append(steps, protocol.Step{TaskID: plannedTask, StepID: uuid.NewString(), Name: ptr(name), Status: protocol.StatusCreated,
			AdditionalInput: []byte("{}"), Planned: true, CreatedAt: time.Now()})
	}
	if err := s.CreateTask(ctx, &protocol.Task{TaskID: plannedTask, AdditionalInput: []byte("{}"), CreatedAt: time.Now()}, steps, nil); err != nil {
		t.Fatal(err)
	}
	planned = steps[0]
	planned.Status = protocol.StatusRunning
	if err := s.StartStep(ctx, &planned); err != nil {
		t.Fatal(err)
	}
	s.Close() // as a killed process: no SaveStep

	filler = disktest.Fill(t, mnt)
	s, err := Open(ctx, dir, cfg)
	if err != nil {
		t.Fatalf("the store does not open on a full disk: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir, filler, fresh, planned, art
}

// stepStatus is a step's status as the database holds it.
func stepStatus(t *testing.T, s *Store, id string) string {
	t.Helper()
	var status string
	if err := s.reader(context.Background()).scanOne(`SELECT status FROM steps WHERE id = ?`, []any{id}, &status); err != nil {
		t.Fatal(err)
	}
	return status
}

// A store opens on a full disk though steps were left running: every read
// shows them as interrupted, exactly as the mark it cannot write yet will,
// writes are refused as on any full disk, and once there is room the marks
// are written by themselves, logged once when deferred and once when done.
func TestAStoreOpensOnAFullDiskAndMarksInterruptedStepsOnceThereIsRoom(t *testing.T) {
	disktest.Run(t, "size=8m", func(t *testing.T, mnt string) {
		ctx := context.Background()
		var log lockedBuffer
		s, dir, filler, fresh, planned, art := leftRunningOnAFullDisk(t, mnt, Config{Log: slog.New(slog.NewTextHandler(&log, nil)), retryInterrupted: 10 * time.Millisecond})

		if n := strings.Count(log.String(), deferredLine); n != 1 {
			t.Errorf("the deferred marks are logged %d times, want once:\n%s", n, log.String())
		}
		// Reads, while the marks wait.
		readAll := func(s *Store) (fresh1, planned1 *protocol.Step, list []protocol.Step, sums map[string]protocol.StepSummary) {
			t.Helper()
			var err error
			if fresh1, err = s.GetStep(ctx, fresh.TaskID, fresh.StepID); err != nil {
				t.Fatal(err)
			}
			if planned1, err = s.GetStep(ctx, planned.TaskID, planned.StepID); err != nil {
				t.Fatal(err)
			}
			if list, _, err = s.ListSteps(ctx, planned.TaskID, protocol.Page{Number: 1, Size: 10}); err != nil {
				t.Fatal(err)
			}
			if sums, err = s.StepSummaries(ctx, []string{fresh.TaskID, planned.TaskID}); err != nil {
				t.Fatal(err)
			}
			return
		}
		fresh1, planned1, list1, sums1 := readAll(s)
		for _, st := range []*protocol.Step{fresh1, planned1, &list1[0]} {
			if st.Status != protocol.StatusCompleted || st.Output != nil || st.IsLast || !strings.Contains(string(st.AdditionalOutput), `"code":"interrupted"`) {
				t.Errorf("a step left running reads %s %v %s on a full disk, want completed, interrupted", st.Status, st.Output, st.AdditionalOutput)
			}
		}
		if list1[1].Status != protocol.StatusCreated {
			t.Errorf("the step planned next reads %s, want created", list1[1].Status)
		}
		if sum := sums1[fresh.TaskID]; sum.Running != 0 || sum.Failed != 1 {
			t.Errorf("the task's summary on a full disk: %+v, want one failed step and none running", sum)
		}
		if got := readArtifact(t, s, art); got != "bytes to read back" {
			t.Errorf("an artifact reads %q on a full disk", got)
		}
		if stepStatus(t, s, fresh.StepID) != "running" {
			t.Fatalf("the mark was written on a full disk: the test did not fill it")
		}
		// Writes are refused, as on any full disk.
		err := s.CreateTask(ctx, &protocol.Task{TaskID: uuid.NewString(), AdditionalInput: []byte("{}"), CreatedAt: time.Now()}, nil, nil)
		if protocol.ErrorCode(err) != protocol.EINSUFFICIENT {
			t.Errorf("a write on a full disk: %v, want %s", err, protocol.EINSUFFICIENT)
		}

		// Room again: the marks are written without any write asking.
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the marks written once there is room", func() bool {
			return stepStatus(t, s, fresh.StepID) == "completed" && stepStatus(t, s, planned.StepID) == "completed"
		})
		eventually(t, "the marks logged as written", func() bool { return strings.Contains(log.String(), markedLine) })
		if n := strings.Count(log.String(), markedLine); n != 1 {
			t.Errorf("the written marks are logged %d times, want once:\n%s", n, log.String())
		}
		s.Close()

		// What was read before the marks is what is read after them.
		log2 := &lockedBuffer{}
		s2, err := Open(ctx, dir, Config{Log: slog.New(slog.NewTextHandler(log2, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		if strings.Contains(log2.String(), "interrupted") {
			t.Errorf("the next start found steps still running:\n%s", log2.String())
		}
		fresh2, planned2, list2, sums2 := readAll(s2)
		for _, c := range []struct {
			what        string
			full, after any
		}{{"the new step", fresh1, fresh2}, {"the planned step", planned1, planned2}, {"the planned task's steps", list1, list2}, {"the summaries", sums1, sums2}} {
			if !reflect.DeepEqual(c.full, c.after) {
				t.Errorf("%s read on the full disk:\n%+v\nonce marked:\n%+v", c.what, c.full, c.after)
			}
		}
		if err := s2.CreateTask(ctx, &protocol.Task{TaskID: uuid.NewString(), AdditionalInput: []byte("{}"), CreatedAt: time.Now()}, nil, nil); err != nil {
			t.Errorf("a write once there is room: %v", err)
		}
	})
}

// The first write that finds room writes the marks first, in a
// transaction of their own: no step of this process is ever recorded
// running beside one a dead process left.
func TestTheFirstWriteThatFindsRoomMarksTheInterruptedStepsBeforeItself(t *testing.T) {
	disktest.Run(t, "size=8m", func(t *testing.T, mnt string) {
		ctx := context.Background()
		var log lockedBuffer
		// The store's own retries would come only after an hour.
		s, _, filler, fresh, _, _ := leftRunningOnAFullDisk(t, mnt, Config{Log: slog.New(slog.NewTextHandler(&log, nil)), retryInterrupted: time.Hour})

		next := protocol.Step{TaskID: fresh.TaskID, StepID: uuid.NewString(), Status: protocol.StatusRunning, AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
		if err := s.StartStep(ctx, &next); protocol.ErrorCode(err) != protocol.EINSUFFICIENT {
			t.Fatalf("a step started on a full disk: %v, want %s", err, protocol.EINSUFFICIENT)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		if err := s.StartStep(ctx, &next); err != nil {
			t.Fatal(err)
		}
		if got := stepStatus(t, s, fresh.StepID); got != "completed" {
			t.Errorf("a step of this process is recorded running while the one a dead process left is %s", got)
		}
		if got := stepStatus(t, s, next.StepID); got != "running" {
			t.Errorf("the step started is %s", got)
		}
		if !strings.Contains(log.String(), markedLine) {
			t.Errorf("the marks written are not logged:\n%s", log.String())
		}
	})
}

// Close stops the goroutine that retries the marks, though they still
// wait: it is the store's, and nothing of it outlives the store.
func TestCloseStopsRetryingTheMarksOfInterruptedSteps(t *testing.T) {
	disktest.Run(t, "size=8m", func(t *testing.T, mnt string) {
		s, _, _, _, _, _ := leftRunningOnAFullDisk(t, mnt, Config{retryInterrupted: time.Millisecond})
		if s.retryDone == nil {
			t.Fatal("no goroutine retries the marks")
		}
		s.Close()
		select {
		case <-s.retryDone:
		default:
			t.Error("Close returned while the goroutine retrying the marks still runs")
		}
	})
}

// A data directory stopped cleanly opens on a full disk and serves reads:
// SQLite keeps its log and the log's index, which it could not make again
// without room.
func TestAStoreStoppedCleanlyOpensOnAFullDisk(t *testing.T) {
	disktest.Run(t, "size=8m", func(t *testing.T, mnt string) {
		ctx := context.Background()
		dir := filepath.Join(mnt, "data")
		s := mustOpen(t, dir)
		taskID := mustTask(t, s)
		s.Close()

		filler := disktest.Fill(t, mnt)
		s, err := Open(ctx, dir, Config{})
		if err != nil {
			t.Fatalf("a store stopped cleanly does not open on a full disk: %v", err)
		}
		defer s.Close()
		if _, err := s.GetTask(ctx, taskID); err != nil {
			t.Errorf("a task read on a full disk: %v", err)
		}
		os.Remove(filler)
	})
}

// agentrt keys, when it is the last to close the database, keeps its log
// as the server does: a start on a full disk after it still reads.
func TestTheKeysCommandLeavesADataDirectoryThatOpensOnAFullDisk(t *testing.T) {
	disktest.Run(t, "size=8m", func(t *testing.T, mnt string) {
		ctx := context.Background()
		dir := filepath.Join(mnt, "data")
		s := mustOpen(t, dir)
		taskID := mustTask(t, s)
		s.Close()
		admin, err := OpenKeyAdmin(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Create(ctx, "ops", nil); err != nil {
			t.Fatal(err)
		}
		admin.Close()

		filler := disktest.Fill(t, mnt)
		s, err = Open(ctx, dir, Config{})
		if err != nil {
			t.Fatalf("after agentrt keys, a store does not open on a full disk: %v", err)
		}
		defer s.Close()
		if _, err := s.GetTask(ctx, taskID); err != nil {
			t.Errorf("a task read on a full disk: %v", err)
		}
		os.Remove(filler)
	})
}

// A schema upgrade is a write: on a full disk the store does not open,
// and says how much room to make; nothing of the upgrade is applied, and
// it is, once there is room.
func TestASchemaUpgradeOnAFullDiskIsRefusedNamingTheRoomItNeeds(t *testing.T) {
	disktest.Run(t, "size=8m", func(t *testing.T, mnt string) {
		ctx := context.Background()
		dir := filepath.Join(mnt, "data")
		s := openAtSchema(t, dir, 8)
		mustTask(t, s)
		s.Close()

		filler := disktest.Fill(t, mnt)
		_, err := Open(ctx, dir, Config{})
		if err == nil {
			t.Fatal("a schema upgrade succeeded on a full disk")
		}
		for _, want := range []string{"the disk is full", "0009_", "bytes, the database's size", "free that much and start again"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refused upgrade says %q, without %q", err, want)
			}
		}
		if !isDiskFull(errors.Unwrap(err)) && !isDiskFull(err) {
			t.Errorf("the refused upgrade does not carry its cause: %v", err)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		s = mustOpen(t, dir)
		if s.schema < 9 {
			t.Errorf("after room was made the schema is %d", s.schema)
		}
	})
}

// Staged bytes of a recorded artifact that cannot be moved into place,
// the disk being full, do not stop a start: they stay staged, are served
// from there, and the next start with room moves them.
func TestStagedBytesThatCannotBeMovedIntoPlaceDoNotStopAStart(t *testing.T) {
	disktest.Run(t, "size=8m,nr_inodes=64", func(t *testing.T, mnt string) {
		// A file system with room for bytes but for few files: moving the
		// bytes into place makes the task's directory, a new file.
		dir := filepath.Join(mnt, "data")
		s := mustOpen(t, dir)
		taskID := mustTask(t, s)
		kept := mustStage(t, s, taskID, "recorded")
		if err := s.AddArtifacts(context.Background(), taskID, []protocol.Artifact{kept}, protocol.TaskLog{}, 0); err != nil {
			t.Fatal(err)
		}
		// As if the process died between the commit and the move out of
		// staging, before it made the task's directory.
		if err := os.Rename(s.artifactPath(taskID, kept.ArtifactID), s.stagingPath(kept.ArtifactID)); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(s.taskDir(taskID)); err != nil {
			t.Fatal(err)
		}
		s.Close()
		fillers := disktest.FillInodes(t, mnt)

		var log lockedBuffer
		s, err := Open(context.Background(), dir, Config{Log: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatalf("a start refused for staged bytes it could not move: %v", err)
		}
		if got := readArtifact(t, s, kept); got != "recorded" {
			t.Errorf("the artifact reads %q from staging", got)
		}
		if !strings.Contains(log.String(), "could not be moved into place") {
			t.Errorf("the bytes left staged are not logged:\n%s", log.String())
		}
		s.Close()

		if err := os.RemoveAll(fillers); err != nil {
			t.Fatal(err)
		}
		s = mustOpen(t, dir)
		if _, err := os.Stat(s.artifactPath(taskID, kept.ArtifactID)); err != nil {
			t.Errorf("the next start did not move the bytes into place: %v", err)
		}
	})
}
