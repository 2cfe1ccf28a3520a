package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

// mustOpen opens a store in dir (a new temporary one if "").
func mustOpen(t *testing.T, dir string) *Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := Open(context.Background(), dir, Config{})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mustTask records a new task and returns its id.
func mustTask(t *testing.T, s *Store) string {
	t.Helper()
	id := uuid.NewString()
	err := s.CreateTask(context.Background(), &protocol.Task{TaskID: id, AdditionalInput: []byte("{}"), CreatedAt: time.Now()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// mustStage stages an artifact's bytes and returns the artifact.
func mustStage(t *testing.T, s *Store, taskID, data string) protocol.Artifact {
	t.Helper()
	id := uuid.NewString()
	b, err := s.StageArtifact(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	b.Write([]byte(data))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return protocol.Artifact{ArtifactID: id, TaskID: taskID, FileName: "f.txt", Size: int64(len(data)), CreatedAt: time.Now()}
}

// ReadFile reads a workspace file whole, for tests (the host reads files
// into a plugin's memory with ReadFileInto).
func (s *Store) ReadFile(taskID, name string, max int64) ([]byte, error) {
	fi, err := s.statFile(taskID, name)
	if err != nil {
		return nil, err
	}
	if fi.Size > max {
		return nil, protocol.Errorf(protocol.ETOOLARGE, "%q is %d bytes, more than can be read at once (%d)", name, fi.Size, max)
	}
	buf := make([]byte, fi.Size)
	n, err := s.readFileInto(taskID, name, buf)
	if err != nil {
		return nil, err
	}
	if n > int64(len(buf)) { // replaced meanwhile by a larger file
		return nil, protocol.Errorf(protocol.EUNAVAILABLE, "%q changed while it was read", name)
	}
	return buf[:n], nil
}

func readArtifact(t *testing.T, s *Store, a protocol.Artifact) string {
	t.Helper()
	f, err := s.OpenArtifact(context.Background(), &a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 100)
	n, _ := f.Read(b)
	return string(b[:n])
}

func TestADataDirectoryServesOneProcess(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, dir)
	if _, err := Open(context.Background(), dir, Config{}); err == nil || !strings.Contains(err.Error(), "in use by another agentrt process") {
		t.Fatalf("second open: %v", err)
	}
}

func TestMigrationsRunOnceAndANewerSchemaIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	id := mustTask(t, s)
	s.Close()
	s = mustOpen(t, dir) // migrations already applied: nothing happens
	if _, err := s.GetTask(context.Background(), id); err != nil {
		t.Fatalf("task after reopening: %v", err)
	}
	err := s.inTx(context.Background(), anyTasks, 1, func(w db) error {
		_, err := w.exec(`INSERT INTO schema_migrations (version, name) VALUES (99, 'future')`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(context.Background(), dir, Config{}); err == nil || !strings.Contains(err.Error(), "newer than this agentrt knows") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

func TestRecoveryRemovesUnrecordedBytesAndPromotesRecordedOnes(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	taskID := mustTask(t, s)
	orphan := mustStage(t, s, taskID, "never recorded")
	kept := mustStage(t, s, taskID, "recorded")
	if err := s.AddArtifacts(context.Background(), taskID, []protocol.Artifact{kept}, protocol.TaskLog{}, 0); err != nil {
		t.Fatal(err)
	}
	// As if the process died between the commit and the move out of staging.
	if err := os.Rename(s.artifactPath(taskID, kept.ArtifactID), s.stagingPath(kept.ArtifactID)); err != nil {
		t.Fatal(err)
	}
	if got := readArtifact(t, s, kept); got != "recorded" {
		t.Errorf("a recorded artifact still in staging reads %q", got)
	}
	s.Close()

	s = mustOpen(t, dir)
	if _, err := os.Stat(s.stagingPath(orphan.ArtifactID)); !os.IsNotExist(err) {
		t.Errorf("unrecorded bytes survived recovery: %v", err)
	}
	if _, err := os.Stat(s.artifactPath(taskID, kept.ArtifactID)); err != nil {
		t.Errorf("recorded bytes were not moved into place: %v", err)
	}
	if got := readArtifact(t, s, kept); got != "recorded" {
		t.Errorf("after recovery the artifact reads %q", got)
	}
}

func TestPlacementsAreRolledBackOrKeptAfterACrash(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		recorded bool
		crash    func(t *testing.T, s *Store, taskID string, a protocol.Artifact)
		want     string
	}{
		{"placed, not recorded: rolled back", false, func(t *testing.T, s *Store, taskID string, a protocol.Artifact) {
			if _, err := s.placeUpload(taskID, "a.txt", a.ArtifactID); err != nil {
				t.Fatal(err)
			}
		}, "old"},
		{"placed and recorded: kept", true, func(t *testing.T, s *Store, taskID string, a protocol.Artifact) {
			if _, err := s.placeUpload(taskID, "a.txt", a.ArtifactID); err != nil {
				t.Fatal(err)
			}
			if err := s.AddArtifacts(ctx, taskID, []protocol.Artifact{a}, protocol.TaskLog{}, 0); err != nil {
				t.Fatal(err)
			}
		}, "new"},
		{"journal written, nothing moved yet: untouched", false, func(t *testing.T, s *Store, taskID string, a protocol.Artifact) {
			if err := writeSynced(s.journalPath(a.ArtifactID), []byte(`{"task_id":"`+taskID+`","path":"a.txt"}`)); err != nil {
				t.Fatal(err)
			}
		}, "old"},
		{"torn journal: untouched", false, func(t *testing.T, s *Store, taskID string, a protocol.Artifact) {
			if err := os.WriteFile(s.journalPath(a.ArtifactID), []byte(`{"task_`), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir)
			taskID := mustTask(t, s)
			if err := s.writeFile(taskID, "a.txt", []byte("old")); err != nil {
				t.Fatal(err)
			}
			a := mustStage(t, s, taskID, "new")
			tc.crash(t, s, taskID, a)
			s.Close()

			s = mustOpen(t, dir)
			b, err := s.ReadFile(taskID, "a.txt", 100)
			if err != nil || string(b) != tc.want {
				t.Errorf("after recovery a.txt = %q (%v), want %q", b, err, tc.want)
			}
			if entries, _ := os.ReadDir(filepath.Join(dir, "staging")); len(entries) != 0 {
				t.Errorf("staging holds %d entries after recovery", len(entries))
			}
			if entries, _ := os.ReadDir(filepath.Join(s.workspaceDir(taskID), tmpDir)); len(entries) != 0 {
				t.Errorf("the workspace's .tmp holds %d entries after recovery", len(entries))
			}
			files, _ := s.listFiles(taskID, "")
			if len(files) != 1 {
				t.Errorf("workspace files = %+v", files)
			}
		})
	}
}

func TestStartupRemovesTemporaryFilesAKilledProcessLeftInWorkspaces(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	taskID := mustTask(t, s)
	if err := s.writeFile(taskID, "keep/a.txt", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	// As if the process died while writing a file and while making one.
	tmp := filepath.Join(s.workspaceDir(taskID), tmpDir)
	if err := os.WriteFile(filepath.Join(tmp, uuid.NewString()), []byte("half a fi"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tmp, "odd", "dir"), 0o750); err != nil {
		t.Fatal(err)
	}
	empty := mustTask(t, s) // a task whose workspace never had a .tmp
	if err := os.MkdirAll(s.workspaceDir(empty), 0o750); err != nil {
		t.Fatal(err)
	}
	odd := mustTask(t, s) // a workspace whose .tmp is a file
	if err := os.MkdirAll(s.workspaceDir(odd), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.workspaceDir(odd), tmpDir), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	// Not a workspace at all.
	if err := os.WriteFile(filepath.Join(dir, "workspaces", "README"), []byte("notes"), 0o640); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = mustOpen(t, dir)
	if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
		t.Errorf(".tmp holds %d entries after start-up (%v)", len(entries), err)
	}
	if b, err := s.ReadFile(taskID, "keep/a.txt", 100); err != nil || string(b) != "kept" {
		t.Errorf("a workspace file after the sweep: %q, %v", b, err)
	}
	if err := s.writeFile(taskID, "b.txt", []byte("new")); err != nil {
		t.Errorf("a write after the sweep: %v", err)
	}
}

// logTo returns a logger writing to buf, for tests that check what a
// store logged.
func logTo(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}

// quarantined returns the file a rollback set aside for artifact id, and
// the path its note says it came from.
func quarantined(t *testing.T, s *Store, taskID, id string) (data, path string) {
	t.Helper()
	dir := filepath.Join(s.workspaceDir(taskID), quarantineDir)
	b, err := os.ReadFile(filepath.Join(dir, id))
	if err != nil {
		t.Fatalf("nothing in quarantine: %v", err)
	}
	var note quarantineNote
	raw, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil || json.Unmarshal(raw, &note) != nil {
		t.Fatalf("quarantine note: %s %v", raw, err)
	}
	if note.TaskID != taskID {
		t.Errorf("note names task %q", note.TaskID)
	}
	return string(b), note.Path
}

// What an artifact handler can do to the path of the upload it handles,
// before failing: each leaves the rollback unable to put the replaced
// file back where it was.
var handlerMischief = []struct {
	name  string
	path  string
	do    func(t *testing.T, files string)
	check func(t *testing.T, s *Store, taskID string)
}{
	{"a non-empty directory where the file was", "a.txt", func(t *testing.T, files string) {
		must(t, os.Remove(filepath.Join(files, "a.txt")))
		must(t, os.MkdirAll(filepath.Join(files, "a.txt", "x"), 0o750))
		must(t, os.WriteFile(filepath.Join(files, "a.txt", "x", "f"), []byte("mine"), 0o640))
	}, func(t *testing.T, s *Store, taskID string) {
		if b, err := s.ReadFile(taskID, "a.txt/x/f", 100); err != nil || string(b) != "mine" {
			t.Errorf("the handler's file: %q %v", b, err)
		}
	}},
	{"a file where a directory of the path was", "d/a.txt", func(t *testing.T, files string) {
		must(t, os.RemoveAll(filepath.Join(files, "d")))
		must(t, os.WriteFile(filepath.Join(files, "d"), []byte("mine"), 0o640))
	}, func(t *testing.T, s *Store, taskID string) {
		if b, err := s.ReadFile(taskID, "d", 100); err != nil || string(b) != "mine" {
			t.Errorf("the handler's file: %q %v", b, err)
		}
	}},
	{"its own file in place of the upload", "a.txt", func(t *testing.T, files string) {
		must(t, os.Remove(filepath.Join(files, "a.txt")))
		must(t, os.WriteFile(filepath.Join(files, "a.txt"), []byte("mine"), 0o640))
	}, func(t *testing.T, s *Store, taskID string) {
		if b, err := s.ReadFile(taskID, "a.txt", 100); err != nil || string(b) != "mine" {
			t.Errorf("the handler's file: %q %v", b, err)
		}
	}},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestARollbackBlockedByTheArtifactHandlerQuarantinesTheReplacedFile(t *testing.T) {
	for _, tc := range handlerMischief {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			s, err := Open(context.Background(), t.TempDir(), Config{Log: logTo(&log)})
			must(t, err)
			defer s.Close()
			taskID := mustTask(t, s)
			must(t, s.writeFile(taskID, tc.path, []byte("old")))
			a := mustStage(t, s, taskID, "new")
			p, err := s.placeUpload(taskID, tc.path, a.ArtifactID)
			must(t, err)
			tc.do(t, filepath.Join(s.workspaceDir(taskID), filesDir))
			if err := p.Rollback(); err != nil {
				t.Fatalf("rollback: %v", err)
			}
			tc.check(t, s, taskID) // the handler's work stays
			if data, path := quarantined(t, s, taskID, a.ArtifactID); data != "old" || path != tc.path {
				t.Errorf("quarantined %q from %q, want the old file from %q", data, path, tc.path)
			}
			if n := strings.Count(log.String(), "kept aside"); n != 1 || !strings.Contains(log.String(), taskID) {
				t.Errorf("logged %d times, want once with the task:\n%s", n, log.String())
			}
			if _, err := os.Stat(s.journalPath(a.ArtifactID)); !os.IsNotExist(err) {
				t.Errorf("the journal is still there: %v", err)
			}
			// The quarantined file is the task's: it counts in its usage.
			bytes, _, err := s.workspaceUsage(taskID)
			if err != nil || bytes < int64(len("old")+len("mine")) {
				t.Errorf("usage %d bytes (%v): the quarantined file is not counted", bytes, err)
			}
		})
	}
}

func TestARollbackPutsTheReplacedFileBackWhereTheHandlerLeftThePlaceFree(t *testing.T) {
	s := mustOpen(t, "")
	taskID := mustTask(t, s)
	must(t, s.writeFile(taskID, "d/e/a.txt", []byte("old")))
	a := mustStage(t, s, taskID, "new")
	p, err := s.placeUpload(taskID, "d/e/a.txt", a.ArtifactID)
	must(t, err)
	// The handler deletes the upload; its directories go with it.
	if _, err := s.removeFile(taskID, "d/e/a.txt"); err != nil {
		t.Fatal(err)
	}
	must(t, p.Rollback())
	if b, err := s.ReadFile(taskID, "d/e/a.txt", 100); err != nil || string(b) != "old" {
		t.Errorf("after rollback d/e/a.txt = %q (%v), want the old file back", b, err)
	}
	if _, err := os.Stat(filepath.Join(s.workspaceDir(taskID), quarantineDir)); !os.IsNotExist(err) {
		t.Errorf("something was quarantined: %v", err)
	}
}

func TestStartupQuarantinesAPlacementItCannotRollBackAndStarts(t *testing.T) {
	for _, tc := range handlerMischief {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir)
			taskID := mustTask(t, s)
			must(t, s.writeFile(taskID, tc.path, []byte("old")))
			a := mustStage(t, s, taskID, "new")
			if _, err := s.placeUpload(taskID, tc.path, a.ArtifactID); err != nil {
				t.Fatal(err)
			}
			tc.do(t, filepath.Join(s.workspaceDir(taskID), filesDir))
			s.Close() // killed before the artifact was recorded

			var log bytes.Buffer
			s, err := Open(context.Background(), dir, Config{Log: logTo(&log)})
			if err != nil {
				t.Fatalf("open after a placement the plugin made impossible to roll back: %v", err)
			}
			defer s.Close()
			tc.check(t, s, taskID)
			if data, path := quarantined(t, s, taskID, a.ArtifactID); data != "old" || path != tc.path {
				t.Errorf("quarantined %q from %q", data, path)
			}
			if !strings.Contains(log.String(), "kept aside") || !strings.Contains(log.String(), taskID) {
				t.Errorf("not logged with its task:\n%s", log.String())
			}
			if entries, _ := os.ReadDir(filepath.Join(dir, "staging")); len(entries) != 0 {
				t.Errorf("staging holds %d entries after recovery", len(entries))
			}
		})
	}
}

func TestAPlacementTheHostCannotSettleIsKeptForTheNextStartWhichStillStarts(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	taskID := mustTask(t, s)
	must(t, s.writeFile(taskID, "a.txt", []byte("old")))
	a := mustStage(t, s, taskID, "new")
	if _, err := s.placeUpload(taskID, "a.txt", a.ArtifactID); err != nil {
		t.Fatal(err)
	}
	placed := filepath.Join(s.workspaceDir(taskID), filesDir, "a.txt")
	must(t, os.Remove(placed))
	must(t, os.MkdirAll(filepath.Join(placed, "x"), 0o750))
	// The quarantine cannot be made (as if the host's disk failed there).
	blocker := filepath.Join(s.workspaceDir(taskID), quarantineDir)
	must(t, os.WriteFile(blocker, nil, 0o640))
	s.Close()

	var log bytes.Buffer
	s, err := Open(context.Background(), dir, Config{Log: logTo(&log)})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if !strings.Contains(log.String(), "next start tries again") {
		t.Errorf("the unsettled placement was not logged:\n%s", log.String())
	}
	// Nothing of it was swept away meanwhile.
	if _, err := os.Stat(s.journalPath(a.ArtifactID)); err != nil {
		t.Errorf("the journal is gone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.workspaceDir(taskID), backupName(a.ArtifactID))); err != nil {
		t.Errorf("the replaced file is gone: %v", err)
	}
	s.Close()

	must(t, os.Remove(blocker))
	s = mustOpen(t, dir)
	if data, _ := quarantined(t, s, taskID, a.ArtifactID); data != "old" {
		t.Errorf("quarantined %q, want the old file", data)
	}
}

func TestPlacementRollbackRestoresTheReplacedFile(t *testing.T) {
	s := mustOpen(t, "")
	taskID := mustTask(t, s)
	s.writeFile(taskID, "dir/a.txt", []byte("old"))
	a := mustStage(t, s, taskID, "new")
	p, err := s.placeUpload(taskID, "dir/a.txt", a.ArtifactID)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := s.ReadFile(taskID, "dir/a.txt", 100); string(b) != "new" {
		t.Errorf("placed file reads %q", b)
	}
	p.Rollback()
	if b, _ := s.ReadFile(taskID, "dir/a.txt", 100); string(b) != "old" {
		t.Errorf("after rollback the file reads %q, want the old one", b)
	}
	b := mustStage(t, s, taskID, "fresh")
	p, err = s.placeUpload(taskID, "new/b.txt", b.ArtifactID)
	if err != nil {
		t.Fatal(err)
	}
	p.Rollback()
	if _, err := s.statFile(taskID, "new/b.txt"); protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("after rolling back a new file: %v", err)
	}
}

func TestWorkspaceRefusesToFollowLinks(t *testing.T) {
	s := mustOpen(t, "")
	taskID := mustTask(t, s)
	s.writeFile(taskID, "x", []byte("x"))
	// A link planted in the workspace (agentrt never makes one) still does
	// not lead outside it.
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret"), 0o600)
	files := filepath.Join(s.workspaceDir(taskID), filesDir)
	os.Symlink(outside, filepath.Join(files, "abs-link"))
	os.Symlink("../../../../../../"+outside, filepath.Join(files, "rel-link"))
	os.Symlink(filepath.Dir(outside), filepath.Join(files, "dir-link"))
	for _, name := range []string{"abs-link", "rel-link", "dir-link/secret"} {
		if b, err := s.ReadFile(taskID, name, 100); err == nil {
			t.Errorf("read %s through a link: %q", name, b)
		}
		if err := s.writeFile(taskID, name, []byte("pwned")); err == nil && name == "dir-link/secret" {
			t.Errorf("wrote %s through a link", name)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Errorf("the file outside the workspace now reads %q", b)
	}
	list, err := s.listFiles(taskID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range list {
		if f.Path == "dir-link/secret" {
			t.Errorf("list followed a link: %+v", list)
		}
	}
}

func TestConcurrentWritesCommitTogetherAndFailAlone(t *testing.T) {
	s := mustOpen(t, "")
	ctx := context.Background()
	// createAll asks for the tasks' writes at once, each on a goroutine
	// of its own; wait returns what each returned.
	createAll := func(tasks []*protocol.Task, planned func(i int) []protocol.Step) (wait func() []error) {
		errs := make([]error, len(tasks))
		var wg sync.WaitGroup
		for i, task := range tasks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.CreateTask(ctx, task, planned(i), nil)
			}()
		}
		return func() []error { wg.Wait(); return errs }
	}
	newTasks := func(n int) []*protocol.Task {
		tasks := make([]*protocol.Task, n)
		for i := range tasks {
			tasks[i] = &protocol.Task{TaskID: uuid.NewString(), AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
		}
		return tasks
	}
	none := func(int) []protocol.Step { return nil }

	// Writes that wait for the writer together commit in one transaction
	// (one fsync): a write queued behind them, run in the same transaction,
	// sees none of them committed by another connection yet.
	const together = 100
	release, _ := holdWriter(t, s, nil)
	tasks := newTasks(together)
	wait := createAll(tasks, none)
	waitQueuedWrites(t, s, together)
	committedSeen := -1
	probe := make(chan error, 1)
	go func() {
		probe <- s.inTx(ctx, anyTasks, 1, func(db) error {
			return s.reader(ctx).scanOne(`SELECT COUNT(*) FROM tasks`, nil, &committedSeen)
		})
	}()
	waitQueuedWrites(t, s, together+1)
	release()
	if err := <-probe; err != nil {
		t.Fatal(err)
	}
	for i, err := range wait() {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if committedSeen != 0 {
		t.Errorf("%d writes queued together were committed before the last of them ran: they were not committed in one transaction", committedSeen)
	}

	// A write that fails in such a transaction fails alone: the others are
	// committed without it.
	const n = 200
	release, _ = holdWriter(t, s, nil)
	tasks = newTasks(n)
	failing := func(i int) []protocol.Step {
		if i%10 != 0 {
			return nil
		}
		// Two planned steps with one id: the second insert fails after
		// the task's row was written.
		dup := uuid.NewString()
		var planned []protocol.Step
		for range 2 {
			planned = append(planned, protocol.Step{TaskID: tasks[i].TaskID, StepID: dup, Status: protocol.StatusCreated,
				AdditionalInput: []byte("{}"), CreatedAt: time.Now()})
		}
		return planned
	}
	wait = createAll(tasks, failing)
	waitQueuedWrites(t, s, n)
	release()
	errs := wait()
	for i, task := range tasks {
		_, err := s.GetTask(ctx, task.TaskID)
		if i%10 == 0 {
			if errs[i] == nil || protocol.ErrorCode(err) != protocol.ENOTFOUND {
				t.Errorf("write %d should have failed alone: create %v, then get %v", i, errs[i], err)
			}
			continue
		}
		if errs[i] != nil || err != nil {
			t.Errorf("write %d: create %v, get %v", i, errs[i], err)
		}
	}
	_, total, err := s.ListTasks(ctx, protocol.Page{Number: 1, Size: 10})
	if want := together + n - n/10; err != nil || total != want {
		t.Errorf("%d tasks recorded (%v), want %d", total, err, want)
	}
}

func TestWritesAfterCloseFail(t *testing.T) {
	s := mustOpen(t, "")
	s.Close()
	err := s.CreateTask(context.Background(), &protocol.Task{TaskID: uuid.NewString(), AdditionalInput: []byte("{}")}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("write after close: %v", err)
	}
}

func TestACorruptDatabaseFailsOpenWithAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agentrt.db"), []byte(strings.Repeat("not a database ", 1000)), 0o640); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Open(context.Background(), dir, Config{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a corrupt database opened")
		}
		t.Logf("open: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Open hung on a corrupt database")
	}
}

func TestAppendingToATaskLogDoesNotReadWhatItHolds(t *testing.T) {
	s := mustOpen(t, "")
	ctx := context.Background()
	taskID := mustTask(t, s)
	line := strings.Repeat("l", 60<<10)
	call := func() protocol.TaskLog {
		logs := []protocol.LogRecord{{Time: time.Now(), Level: "info", Message: line}}
		return protocol.TaskLog{Records: logs, Bytes: protocol.LogSize(logs)}
	}
	appendOne := func() uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := s.AddArtifacts(ctx, taskID, nil, call(), 0); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	first := appendOne()
	for range 100 { // a task log of 6 MiB
		appendOne()
	}
	last := appendOne()
	t.Logf("appending 60 KiB allocated %d KiB to an empty log, %d KiB to a log of 6 MiB", first>>10, last>>10)
	if last > 2*first+256<<10 {
		t.Errorf("appending to a log of 6 MiB allocated %d KiB, against %d KiB to an empty one: the log is read back", last>>10, first>>10)
	}
	logs, err := s.TaskLogs(ctx, taskID)
	if err != nil || len(logs) != 102 {
		t.Errorf("the task log holds %d records (%v), want 102", len(logs), err)
	}
}

func TestPluginTimeKeepsCallsShorterThanAMillisecond(t *testing.T) {
	s := mustOpen(t, "")
	ctx := context.Background()
	taskID := mustTask(t, s)
	for range 300 {
		st := protocol.Step{TaskID: taskID, StepID: uuid.NewString(), Status: protocol.StatusCompleted,
			AdditionalInput: []byte("{}"), CreatedAt: time.Now(), PluginTime: 300 * time.Microsecond}
		if err := s.SaveStep(ctx, &st, nil); err != nil {
			t.Fatal(err)
		}
	}
	task, err := s.GetTask(ctx, taskID)
	if err != nil {
		t.Fatal(err)
	}
	if task.PluginTime != 90*time.Millisecond {
		t.Errorf("300 calls of 0.3 ms used %v of the task's time, want 90ms", task.PluginTime)
	}
}

func TestTheDiskFloorRefusesWritesThatWouldGoBelowItAndAsksBeforeRefusing(t *testing.T) {
	free := int64(100 << 20)
	asked := 0
	d := &diskFloor{dir: "x", min: 50 << 20, interval: time.Hour, statfs: func(string) (int64, int64, error) {
		asked++
		return free, 1 << 30, nil
	}}
	d.free.Store(free)
	d.asked.Store(time.Now().UnixNano())
	for range 4 { // 40 MiB in all: within the estimate, no asking
		done, err := d.reserve(10 << 20)
		if err != nil {
			t.Fatal(err)
		}
		done()
	}
	if asked != 0 {
		t.Errorf("asked the file system %d times within the interval", asked)
	}
	// The 40 MiB were written. The estimate says no to 20 MiB more; the
	// file system is asked, and says so too.
	free = 60 << 20
	if _, err := d.reserve(20 << 20); protocol.ErrorCode(err) != protocol.EINSUFFICIENT || asked != 1 {
		t.Errorf("a write past the floor: %v (asked %d times)", err, asked)
	}
	// Space was freed meanwhile: the asking before a refusal finds it.
	free = 200 << 20
	done, err := d.reserve(20 << 20)
	if err != nil || asked != 2 {
		t.Errorf("after space was freed: %v (asked %d times)", err, asked)
	}
	// That write is still being written when the file system is asked
	// again (it says 200 MiB free, not knowing of the write): a write of
	// 140 MiB more would go 10 MiB below the floor.
	d.asked.Store(0)
	if _, err := d.reserve(140 << 20); protocol.ErrorCode(err) != protocol.EINSUFFICIENT {
		t.Errorf("a write past the floor while another is being written: %v", err)
	}
	done()
	d.asked.Store(0)
	if done, err := d.reserve(140 << 20); err != nil {
		t.Errorf("once the other write finished: %v", err)
	} else {
		done()
	}
}

func TestValuesStoredBeforeTextWasCheckedAreServedAsStrictJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"k":"plain"}`:                    `{"k":"plain"}`,
		"{\"k\":\"a\xffb\"}":               "{\"k\":\"a\uFFFDb\"}",
		`{"k":"\ud800"}`:                   `{"k":"\ufffd"}`,
		`{"k":"\udc00x"}`:                  `{"k":"\ufffdx"}`,
		`{"k":"\ud83d\ude00"}`:             `{"k":"\ud83d\ude00"}`,
		`{"k":"\\ud800"}`:                  `{"k":"\\ud800"}`, // an escaped backslash, then text
		`{"k":"\ud800\ud83d\ude00\udc00"}`: `{"k":"\ufffd\ud83d\ude00\ufffd"}`,
		`{"\udbff":1}`:                     `{"\ufffd":1}`,
	} {
		if got := string(rawJSON(in)); got != want {
			t.Errorf("rawJSON(%s) = %s, want %s", in, got, want)
		}
	}
}
