package storage

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// artifactColumns lists an artifact's columns from the table aliased as alias.
func artifactColumns(alias string) string {
	a := alias + "."
	return a + "id, " + a + "step_id, " + a + "agent_created, " + a + "file_name, " +
		a + "relative_path, " + a + "size, " + a + "created_at, " + a + "uri, " + a + "sha256"
}

// artifactRow scans artifactColumns, which may all be NULL in a LEFT JOIN.
type artifactRow struct {
	id, stepID, fileName, relativePath, uri, sha256 sql.NullString
	agentCreated                                    sql.NullBool
	size, created                                   sql.NullInt64
}

func (r *artifactRow) dest() []any {
	return []any{&r.id, &r.stepID, &r.agentCreated, &r.fileName, &r.relativePath, &r.size, &r.created, &r.uri, &r.sha256}
}

func (r *artifactRow) artifact(taskID string) protocol.Artifact {
	return protocol.Artifact{
		ArtifactID:   r.id.String,
		AgentCreated: r.agentCreated.Bool,
		FileName:     r.fileName.String,
		RelativePath: r.relativePath.String,
		URI:          r.uri.String,
		TaskID:       taskID,
		StepID:       r.stepID.String,
		Size:         r.size.Int64,
		SHA256:       r.sha256.String,
		CreatedAt:    time.UnixMilli(r.created.Int64),
	}
}

func insertArtifacts(w db, artifacts []protocol.Artifact) error {
	for _, a := range artifacts {
		_, err := w.exec(`
			INSERT INTO artifacts (id, task_id, step_id, agent_created, file_name, relative_path, size, created_at, uri, sha256)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ArtifactID, a.TaskID, nullText(a.StepID), boolInt(a.AgentCreated), a.FileName, a.RelativePath, a.Size, millis(a.CreatedAt),
			nullText(a.URI), nullText(a.SHA256))
		if err != nil {
			return err
		}
	}
	return nil
}

// nullText stores "" as NULL.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// AddArtifacts records artifacts of a task created outside a step (an
// upload, and what the artifact handler made of it), whose bytes were
// staged, appends logs to the task's log (one row: the task's earlier log
// is not read) and adds the artifact handler's time to the task's, in one
// transaction.
func (s *Store) AddArtifacts(ctx context.Context, taskID string, artifacts []protocol.Artifact, log protocol.TaskLog, pluginTime time.Duration) error {
	records, err := encodeLogs(log.Records) // here, not in the writer goroutine
	if err != nil {
		return err
	}
	err = s.inTx(ctx, changesTask(taskID), 3+len(artifacts), func(w db) error {
		if err := taskExists(w, taskID, s.agent); err != nil {
			return err
		}
		if err := addTaskUsage(w, taskID, pluginTime, 0); err != nil {
			return err
		}
		if err := appendTaskLog(w, taskID, records, log.Bytes); err != nil {
			return err
		}
		if err := insertArtifacts(w, artifacts); err != nil {
			return err
		}
		return s.recordEvents(w, taskID, artifactEvents(taskID, artifacts))
	})
	if err != nil {
		return fmt.Errorf("add artifacts: %w", err)
	}
	s.promoteAll(artifacts)
	return nil
}

// artifactEvents are the events of artifacts of task taskID created.
func artifactEvents(taskID string, artifacts []protocol.Artifact) []protocol.Event {
	evs := make([]protocol.Event, len(artifacts))
	for i := range artifacts {
		evs[i] = protocol.ArtifactEvent(taskID, &artifacts[i])
	}
	return evs
}

// GetArtifact returns an artifact of a task, or protocol.ENOTFOUND when the
// task has no such artifact.
func (s *Store) GetArtifact(ctx context.Context, taskID, artifactID string) (*protocol.Artifact, error) {
	var r artifactRow
	err := s.reader(ctx).scanOne(`SELECT `+artifactColumns("a")+` FROM artifacts a
		WHERE a.id = ? AND a.task_id = ? AND EXISTS (SELECT 1 FROM tasks WHERE id = a.task_id AND agent = ?)`,
		[]any{artifactID, taskID, s.agent}, r.dest()...)
	if err == sql.ErrNoRows {
		return nil, protocol.Errorf(protocol.ENOTFOUND, "artifact %q not found in task %q", artifactID, taskID)
	} else if err != nil {
		return nil, fmt.Errorf("get artifact: %w", err)
	}
	a := r.artifact(taskID)
	return &a, nil
}

// ListArtifacts returns a page of a task's artifacts in creation order and
// the task's number of artifacts; protocol.ENOTFOUND when there is no such
// task.
func (s *Store) ListArtifacts(ctx context.Context, taskID string, p protocol.Page) ([]protocol.Artifact, int, error) {
	artifacts := []protocol.Artifact{}
	var total int
	err := s.readTx(ctx, func(r db) error {
		if err := taskExists(r, taskID, s.agent); err != nil {
			return err
		}
		if err := r.scanOne(`SELECT COUNT(*) FROM artifacts WHERE task_id = ?`, []any{taskID}, &total); err != nil {
			return err
		}
		if p.Offset() >= total {
			return nil
		}
		rows, err := r.query(`SELECT `+artifactColumns("a")+` FROM artifacts a WHERE a.task_id = ? ORDER BY a.seq LIMIT ? OFFSET ?`,
			taskID, p.Size, p.Offset())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a artifactRow
			if err := rows.Scan(a.dest()...); err != nil {
				return err
			}
			artifacts = append(artifacts, a.artifact(taskID))
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list artifacts: %w", err)
	}
	return artifacts, total, nil
}

// OpenArtifact opens a recorded artifact's bytes for reading. For an
// artifact recorded before agentrt kept the sha256 of its bytes, it reads
// them to compute it, records it and sets a.SHA256: once per artifact.
func (s *Store) OpenArtifact(ctx context.Context, a *protocol.Artifact) (io.ReadSeekCloser, error) {
	if a.URI != "" {
		return nil, fmt.Errorf("open artifact %s: it is a URI artifact, with no bytes", a.ArtifactID)
	}
	f, err := os.Open(s.artifactPath(a.TaskID, a.ArtifactID))
	if errors.Is(err, fs.ErrNotExist) {
		// Recorded, but not yet moved out of staging; or moved just now.
		if f, err = os.Open(s.stagingPath(a.ArtifactID)); errors.Is(err, fs.ErrNotExist) {
			f, err = os.Open(s.artifactPath(a.TaskID, a.ArtifactID))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open artifact %s: %w", a.ArtifactID, err)
	}
	if a.SHA256 == "" {
		if err := s.backfillSHA256(ctx, a, f); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// backfillSHA256 computes the sha256 of an artifact's bytes, read from f
// (which it rewinds), and records it.
func (s *Store) backfillSHA256(ctx context.Context, a *protocol.Artifact, f *os.File) error {
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("hash artifact %s: %w", a.ArtifactID, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("hash artifact %s: %w", a.ArtifactID, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	err := s.inTx(ctx, changesTask(a.TaskID), 1, func(w db) error {
		_, err := w.exec(`UPDATE artifacts SET sha256 = ? WHERE id = ? AND sha256 IS NULL`, sum, a.ArtifactID)
		return err
	})
	if err != nil && protocol.ErrorCode(err) != protocol.EINSUFFICIENT {
		return fmt.Errorf("record the sha256 of artifact %s: %w", a.ArtifactID, err)
	}
	// At the disk floor it is not recorded, but served all the same.
	a.SHA256 = sum
	return nil
}

// StageArtifact starts writing the bytes of a new artifact. They stay
// staged, invisible, until the artifact is recorded (CreateTask, SaveStep,
// AddArtifact); bytes never recorded are removed by Discard or, after a
// crash, when the store next opens.
func (s *Store) StageArtifact(ctx context.Context, artifactID string) (protocol.Blob, error) {
	path := s.stagingPath(artifactID)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, storageError("stage artifact", err)
	}
	b := &blob{f: f, path: path, floor: s.floor, hash: sha256.New()}
	b.w = bufio.NewWriterSize(blobFile{b}, blobBuffer)
	return b, nil
}

// blobBuffer is what a blob gathers before it writes to its file: uploads
// arrive a few KiB at a time, and a write of each cost a 1 GiB upload a
// quarter of a million system calls.
const blobBuffer = 128 << 10

// blob is a staged artifact file being written, or linked (hash nil: its
// bytes were written elsewhere).
type blob struct {
	f     *os.File
	w     *bufio.Writer // to f, through the disk floor (blobFile)
	path  string
	size  int64
	done  bool
	floor *diskFloor
	hash  hash.Hash // of what was written
}

// Write takes the next bytes. They reach the file when the buffer fills,
// or at Close: an error of the file (a full disk) may be returned by a
// later Write, or by Close.
func (b *blob) Write(p []byte) (int, error) {
	n, err := b.w.Write(p)
	b.size += int64(n)
	b.hash.Write(p[:n])
	return n, err
}

// blobFile is a blob's file, written through the disk floor.
type blobFile struct{ b *blob }

func (f blobFile) Write(p []byte) (int, error) {
	done, err := f.b.floor.reserve(int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := f.b.f.Write(p)
	if err != nil {
		return n, storageError("write artifact", err)
	}
	return n, nil
}

func (b *blob) Size() int64 { return b.size }

// SHA256 is the sha256 of what was written, or, for a linked file, of
// the file: it is read (its size was checked against its limits first).
func (b *blob) SHA256() (string, error) {
	if b.hash != nil {
		return hex.EncodeToString(b.hash.Sum(nil)), nil
	}
	f, err := os.Open(b.path)
	if err != nil {
		return "", storageError("hash artifact", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", storageError("hash artifact", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Close writes what is buffered and syncs the bytes to disk.
func (b *blob) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	if err := b.w.Flush(); err != nil {
		b.f.Close()
		return err
	}
	if err := b.f.Sync(); err != nil {
		b.f.Close()
		return storageError("sync artifact", err)
	}
	if err := b.f.Close(); err != nil {
		return storageError("close artifact", err)
	}
	if err := syncDir(filepath.Dir(b.path)); err != nil {
		return storageError("sync staging directory", err)
	}
	return nil
}

// Discard removes the staged bytes.
func (b *blob) Discard() {
	if !b.done {
		b.done = true
		b.f.Close()
	}
	os.Remove(b.path)
}

// promoteAll moves recorded artifacts' bytes out of staging. A failure here
// loses nothing: OpenArtifact reads from staging, and the next Open retries.
func (s *Store) promoteAll(artifacts []protocol.Artifact) {
	for _, a := range artifacts {
		s.promote(a.TaskID, a.ArtifactID)
	}
}

func (s *Store) promote(taskID, artifactID string) error {
	dir := s.taskDir(taskID)
	if _, err := os.Stat(dir); err != nil {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(dir)); err != nil { // the new directory's entry
			return err
		}
	}
	if err := os.Rename(s.stagingPath(artifactID), filepath.Join(dir, artifactID)); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return syncDir(filepath.Join(s.dir, "staging"))
}
