package storage

import (
	"context"
	"os"
	"path/filepath"
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
	s, err := Open(context.Background(), dir)
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
	b, err := s.StageArtifact(id)
	if err != nil {
		t.Fatal(err)
	}
	b.Write([]byte(data))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return protocol.Artifact{ArtifactID: id, TaskID: taskID, FileName: "f.txt", Size: int64(len(data)), CreatedAt: time.Now()}
}

func readArtifact(t *testing.T, s *Store, a protocol.Artifact) string {
	t.Helper()
	f, err := s.OpenArtifact(&a)
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
	if _, err := Open(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "in use by another agentrt process") {
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
	err := s.inTx(context.Background(), func(w db) error {
		_, err := w.exec(`INSERT INTO schema_migrations (version, name) VALUES (99, 'future')`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "newer than this agentrt knows") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

func TestRecoveryRemovesUnrecordedBytesAndPromotesRecordedOnes(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	taskID := mustTask(t, s)
	orphan := mustStage(t, s, taskID, "never recorded")
	kept := mustStage(t, s, taskID, "recorded")
	if err := s.AddArtifacts(context.Background(), taskID, []protocol.Artifact{kept}, nil, 0); err != nil {
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
			if _, err := s.PlaceUpload(taskID, "a.txt", a.ArtifactID); err != nil {
				t.Fatal(err)
			}
		}, "old"},
		{"placed and recorded: kept", true, func(t *testing.T, s *Store, taskID string, a protocol.Artifact) {
			if _, err := s.PlaceUpload(taskID, "a.txt", a.ArtifactID); err != nil {
				t.Fatal(err)
			}
			if err := s.AddArtifacts(ctx, taskID, []protocol.Artifact{a}, nil, 0); err != nil {
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
			if err := s.WriteFile(taskID, "a.txt", []byte("old")); err != nil {
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
			files, _ := s.ListFiles(taskID, "")
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
	if err := s.WriteFile(taskID, "keep/a.txt", []byte("kept")); err != nil {
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
	if err := s.WriteFile(taskID, "b.txt", []byte("new")); err != nil {
		t.Errorf("a write after the sweep: %v", err)
	}
}

func TestAPlacementThatCannotBeRolledBackStopsOpenAndLosesNothing(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	taskID := mustTask(t, s)
	if err := s.WriteFile(taskID, "a.txt", []byte("old")); err != nil {
		t.Fatal(err)
	}
	a := mustStage(t, s, taskID, "new")
	if _, err := s.PlaceUpload(taskID, "a.txt", a.ArtifactID); err != nil {
		t.Fatal(err)
	}
	s.Close() // killed before the artifact was recorded
	// Something now stands where the old file must go back.
	placed := filepath.Join(s.workspaceDir(taskID), filesDir, "a.txt")
	if err := os.Remove(placed); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(placed, "x"), 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), dir); err == nil || !strings.Contains(err.Error(), `restore "a.txt"`) {
		t.Fatalf("open with a placement that cannot be rolled back: %v", err)
	}
	if err := os.RemoveAll(placed); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	if b, err := s.ReadFile(taskID, "a.txt", 100); err != nil || string(b) != "old" {
		t.Errorf("after the second open a.txt = %q (%v), want the old file back", b, err)
	}
}

func TestPlacementRollbackRestoresTheReplacedFile(t *testing.T) {
	s := mustOpen(t, "")
	taskID := mustTask(t, s)
	s.WriteFile(taskID, "dir/a.txt", []byte("old"))
	a := mustStage(t, s, taskID, "new")
	p, err := s.PlaceUpload(taskID, "dir/a.txt", a.ArtifactID)
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
	p, err = s.PlaceUpload(taskID, "new/b.txt", b.ArtifactID)
	if err != nil {
		t.Fatal(err)
	}
	p.Rollback()
	if _, err := s.StatFile(taskID, "new/b.txt"); protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("after rolling back a new file: %v", err)
	}
}

func TestWorkspaceRefusesToFollowLinks(t *testing.T) {
	s := mustOpen(t, "")
	taskID := mustTask(t, s)
	s.WriteFile(taskID, "x", []byte("x"))
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
		if err := s.WriteFile(taskID, name, []byte("pwned")); err == nil && name == "dir-link/secret" {
			t.Errorf("wrote %s through a link", name)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Errorf("the file outside the workspace now reads %q", b)
	}
	list, err := s.ListFiles(taskID, "")
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
	const n = 200
	errs := make([]error, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = uuid.NewString()
			task := &protocol.Task{TaskID: ids[i], AdditionalInput: []byte("{}"), CreatedAt: time.Now()}
			var planned []protocol.Step
			if i%10 == 0 {
				// Two planned steps with one id: the second insert fails
				// after the task's row was written.
				dup := uuid.NewString()
				for range 2 {
					planned = append(planned, protocol.Step{TaskID: ids[i], StepID: dup, Status: protocol.StatusCreated,
						AdditionalInput: []byte("{}"), CreatedAt: time.Now()})
				}
			}
			errs[i] = s.CreateTask(ctx, task, planned, nil)
		}()
	}
	wg.Wait()
	for i := range n {
		_, err := s.GetTask(ctx, ids[i])
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
	if err != nil || total != n-n/10 {
		t.Errorf("%d tasks recorded (%v), want %d", total, err, n-n/10)
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
		_, err := Open(context.Background(), dir)
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
