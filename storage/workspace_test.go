package storage

import (
	"context"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// A task's workspace handle holds it to its quota of bytes and entries
// (files and directories alike) for writes and placed uploads, counting a
// replaced file's bytes once and the directories a write makes or a
// removal leaves, and refuses before it changes anything.
func TestAWorkspaceHoldsItsQuotaForWritesAndUploads(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir())
	task := mustTask(t, s)
	ws := s.Workspace(task, protocol.WorkspaceQuota{Bytes: 10, Entries: 3})
	code := func(err error) string { return protocol.ErrorCode(err) }
	steps := []struct {
		what string
		err  error
		want string
	}{
		{"5 bytes at a/b.txt (2 entries)", ws.Write(ctx, "a/b.txt", []byte("12345")), ""},
		{"6 more bytes: 11 over 10", ws.Write(ctx, "c.txt", []byte("123456")), protocol.ETOOLARGE},
		{"a/b.txt replaced by 9 bytes", ws.Write(ctx, "a/b.txt", []byte("123456789")), ""},
		{"d/e.txt: 4 entries over 3", ws.Write(ctx, "d/e.txt", []byte("1")), protocol.ETOOLARGE},
		{"a/b.txt removed, and a/ with it", ws.Remove(ctx, "a/b.txt"), ""},
		{"d/e.txt now fits", ws.Write(ctx, "d/e.txt", []byte("1")), ""},
	}
	for _, st := range steps {
		if code(st.err) != st.want {
			t.Errorf("%s: %v, want code %q", st.what, st.err, st.want)
		}
	}
	if _, err := ws.Stat(ctx, "c.txt"); code(err) != protocol.ENOTFOUND {
		t.Errorf("a refused write left c.txt: %v", err)
	}

	// An upload is held to the same quota, before it is placed.
	big := mustStage(t, s, task, "0123456789")
	if _, err := ws.Place(ctx, "big.txt", big.ArtifactID); code(err) != protocol.ETOOLARGE {
		t.Errorf("placing 10 bytes beside 1 under a quota of 10: %v", err)
	}
	if _, err := ws.Stat(ctx, "big.txt"); code(err) != protocol.ENOTFOUND {
		t.Errorf("a refused upload was placed: %v", err)
	}
	small := mustStage(t, s, task, "123")
	p, err := ws.Place(ctx, "d/e.txt", small.ArtifactID) // replaces 1 byte by 3
	if err != nil {
		t.Fatalf("placing 3 bytes over a 1-byte file: %v", err)
	}
	p.Commit()
	// A new handle counts what is there: 3 bytes, 2 entries.
	ws = s.Workspace(task, protocol.WorkspaceQuota{Bytes: 10, Entries: 3})
	if err := ws.Write(ctx, "f.txt", []byte("1234567")); err != nil {
		t.Errorf("7 bytes beside 3 under a quota of 10: %v", err)
	}
	if err := ws.Write(ctx, "g.txt", nil); code(err) != protocol.ETOOLARGE {
		t.Errorf("a fourth entry under a quota of 3: %v", err)
	}
}
