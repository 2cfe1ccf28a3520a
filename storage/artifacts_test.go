package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

func hexSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A URI artifact is a row with its URI and no bytes; an artifact of bytes
// keeps the sha256 of what was written, or of the workspace file it links.
func TestArtifactsKeepTheirURIOrTheSHA256OfTheirBytes(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, "")
	task := mustTask(t, s)
	writtenID := uuid.NewString()
	written, err := s.StageArtifact(ctx, writtenID)
	if err != nil {
		t.Fatal(err)
	}
	written.Write([]byte("written "))
	written.Write([]byte("bytes"))
	must(t, written.Close())
	writtenSum, err := written.SHA256()
	if err != nil || writtenSum != hexSHA256("written bytes") {
		t.Errorf("a written blob's sha256 %s, %v", writtenSum, err)
	}
	ws := s.Workspace(task, protocol.WorkspaceQuota{Bytes: 1 << 20, Entries: 10})
	must(t, ws.Write(ctx, "w.txt", []byte("workspace bytes")))
	linkedID := uuid.NewString()
	linked, err := ws.StageArtifact(ctx, "w.txt", linkedID)
	if err != nil {
		t.Fatal(err)
	}
	linkedSum, err := linked.SHA256()
	if err != nil || linkedSum != hexSHA256("workspace bytes") {
		t.Errorf("a linked blob's sha256 %s, %v", linkedSum, err)
	}
	now := time.Now()
	artifacts := []protocol.Artifact{
		{ArtifactID: writtenID, TaskID: task, FileName: "a.txt", Size: written.Size(), SHA256: writtenSum, CreatedAt: now},
		{ArtifactID: linkedID, TaskID: task, FileName: "w.txt", Size: linked.Size(), SHA256: linkedSum, CreatedAt: now},
		{ArtifactID: uuid.NewString(), TaskID: task, FileName: "r.pdf", URI: "s3://b/r.pdf", CreatedAt: now},
	}
	must(t, s.AddArtifacts(ctx, task, artifacts, protocol.TaskLog{}, 0))
	for i, want := range []string{"written bytes", "workspace bytes"} {
		got, err := s.GetArtifact(ctx, task, artifacts[i].ArtifactID)
		if err != nil || got.SHA256 != hexSHA256(want) || got.URI != "" || readArtifact(t, s, *got) != want {
			t.Errorf("artifact %d reads back as %+v, %v", i, got, err)
		}
	}
	got, err := s.GetArtifact(ctx, task, artifacts[2].ArtifactID)
	if err != nil || got.URI != "s3://b/r.pdf" || got.SHA256 != "" || got.Size != 0 {
		t.Errorf("the URI artifact reads back as %+v, %v", got, err)
	}
	if _, err := s.OpenArtifact(ctx, got); err == nil {
		t.Error("the bytes of a URI artifact opened")
	}
}

// Artifacts recorded before agentrt kept their sha256 get it at their
// first opening, once: it is recorded, and not computed again.
func TestAnArtifactRecordedWithoutItsSHA256GetsItWhenItIsFirstOpened(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	task := mustTask(t, s)
	a := mustStage(t, s, task, "old bytes") // SHA256 left empty, as before migration 6
	if err := s.AddArtifacts(ctx, task, []protocol.Artifact{a}, protocol.TaskLog{}, 0); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetArtifact(ctx, task, a.ArtifactID)
	if got.SHA256 != "" {
		t.Fatalf("recorded with sha256 %q", got.SHA256)
	}
	f, err := s.OpenArtifact(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 100)
	n, _ := f.Read(b) // rewound after hashing
	f.Close()
	if got.SHA256 != hexSHA256("old bytes") || string(b[:n]) != "old bytes" {
		t.Errorf("opened: sha256 %q, bytes %q", got.SHA256, b[:n])
	}
	again, _ := s.GetArtifact(ctx, task, a.ArtifactID)
	if again.SHA256 != hexSHA256("old bytes") {
		t.Errorf("the sha256 was not recorded: %q", again.SHA256)
	}
}
