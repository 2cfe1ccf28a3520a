package storage

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

func mustKeyAdmin(t *testing.T, dir string) *KeyAdmin {
	t.Helper()
	k, err := OpenKeyAdmin(context.Background(), dir)
	if err != nil {
		t.Fatalf("open the keys of %s: %v", dir, err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// A server running on a data directory sees keys created and revoked
// beside it at its next request, without a restart.
func TestARunningServerSeesKeysCreatedAndRevokedBesideIt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir) // the server, holding the directory's LOCK
	ring, err := s.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	if ring.Any(ctx) {
		t.Fatal("a new directory has keys")
	}

	admin := mustKeyAdmin(t, dir) // "agentrt keys", beside the server
	key, err := admin.Create(ctx, "ci", []string{"echo"})
	if err != nil {
		t.Fatal(err)
	}
	if !ring.Any(ctx) {
		t.Fatal("the server did not see the key created beside it")
	}
	got := ring.Check(ctx, key)
	if got == nil || got.Name != "ci" || len(got.Agents) != 1 || got.Agents[0] != "echo" {
		t.Fatalf("the new key checks as %+v", got)
	}
	if err := admin.Revoke(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if ring.Check(ctx, key) != nil {
		t.Error("a revoked key is still accepted")
	}
	if err := admin.Revoke(ctx, "ci"); protocol.ErrorCode(err) != protocol.ENOTFOUND {
		t.Errorf("revoking it again: %v, want ENOTFOUND", err)
	}
}

func TestOnlyAKeysHashIsStoredAndOnlyTheKeyItselfChecks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	admin := mustKeyAdmin(t, dir) // no server: the store is opened first
	key, err := admin.Create(ctx, "all", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Create(ctx, "all", nil); protocol.ErrorCode(err) != protocol.ECONFLICT {
		t.Errorf("a second key of the same name: %v, want ECONFLICT", err)
	}
	if _, err := admin.Create(ctx, "../bad name", nil); protocol.ErrorCode(err) != protocol.EINVALID {
		t.Errorf("a bad name: %v, want EINVALID", err)
	}
	list, err := admin.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if k := list[0]; k.Name != "all" || !strings.HasPrefix(key, k.Prefix) || len(k.Prefix) >= len(key)/2 || k.Agents != nil || k.LastUsed != nil {
		t.Errorf("listed as %+v for key of %d characters", k, len(key))
	}
	admin.Close()

	// Nothing in the directory holds the key.
	// The secret is all past the id: "agentrt_" ID "_" SECRET, where the
	// secret's base64url may itself hold "_".
	parts := strings.SplitN(key, "_", 3)
	if len(parts) != 3 || len(parts[2]) != 43 {
		t.Fatalf("the key %q is not agentrt_ID_SECRET with a secret of 43 characters", key)
	}
	secret := parts[2]
	filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the key", path)
			}
		}
		return nil
	})

	s := mustOpen(t, dir)
	ring, err := s.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := "A"
	if strings.HasSuffix(key, "A") {
		last = "B"
	}
	wrongSecret := key[:len(key)-1] + last
	for name, try := range map[string]string{
		"empty":                 "",
		"the prefix alone":      list[0].Prefix,
		"another secret":        wrongSecret,
		"the key with a suffix": key + "x",
		"the key in lower case": strings.ToLower(key),
	} {
		if ring.Check(ctx, try) != nil {
			t.Errorf("%s is accepted", name)
		}
	}
	if ring.Check(ctx, key) == nil {
		t.Fatal("the key is refused")
	}
	ring.Close()                               // writes when it was last used
	list, err = mustKeyAdmin(t, dir).List(ctx) // beside the store, which holds the LOCK
	if err != nil || list[0].LastUsed == nil {
		t.Errorf("after use the key lists as %+v, %v; want a last use", list, err)
	}
}
