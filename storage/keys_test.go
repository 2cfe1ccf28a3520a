package storage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	if ring.Required(ctx) {
		t.Fatal("a new directory needs keys")
	}

	admin := mustKeyAdmin(t, dir) // "agentrt keys", beside the server
	key, err := admin.Create(ctx, "ci", []string{"echo"})
	if err != nil {
		t.Fatal(err)
	}
	if !ring.Required(ctx) {
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

// openRing opens the store of dir, as a server does, and its keyring,
// logging to log. stop closes both, as a server that stops does; the
// test's end does, if it was not called.
func openRing(t *testing.T, dir string, log *bytes.Buffer) (ring *Keyring, stop func()) {
	t.Helper()
	s, err := Open(context.Background(), dir, Config{Log: logTo(log)})
	if err != nil {
		t.Fatal(err)
	}
	if ring, err = s.Keys(context.Background()); err != nil {
		s.Close()
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := errors.Join(ring.Close(), s.Close()); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return ring, stop
}

// Keys stay required once a key has existed: revoking the last one,
// emptying the table by hand and restarting leave the directory closed;
// only OpenToAnyone opens it, refused while a key is left, and a running
// server logs it.
func TestRevokingTheLastKeyLeavesTheDirectoryClosedUntilOpened(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var log bytes.Buffer
	ring, stop := openRing(t, dir, &log)
	admin := mustKeyAdmin(t, dir)
	key, err := admin.Create(ctx, "only", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ring.Required(ctx) || ring.Check(ctx, key) == nil {
		t.Fatal("the key made beside the server does not hold")
	}
	if err := admin.Revoke(ctx, "only"); err != nil {
		t.Fatal(err)
	}
	if !ring.Required(ctx) {
		t.Fatal("revoking the last key made keys no longer required")
	}
	if ring.Check(ctx, key) != nil {
		t.Fatal("the revoked key is accepted")
	}
	if auth, err := admin.Auth(ctx); err != nil || !auth.Required || auth.Reason != reasonKeyCreated || auth.Since.IsZero() {
		t.Errorf("keys list reads %+v, %v; want required since a key was created", auth, err)
	}

	// A restart reads the record, with no key left.
	stop()
	ring, stop = openRing(t, dir, &log)
	if !ring.Required(ctx) {
		t.Fatal("after a restart with no key left, keys are no longer required")
	}

	// A table emptied by hand is no key revoked more.
	if _, err := admin.Create(ctx, "again", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.db.ExecContext(ctx, `DELETE FROM api_keys`); err != nil {
		t.Fatal(err)
	}
	if err := signalKeysChanged(dir); err != nil {
		t.Fatal(err)
	}
	if !ring.Required(ctx) {
		t.Fatal("emptying the key table by hand opened the server")
	}

	// Opening is refused while a key is left, and opens once none is.
	if _, err := admin.Create(ctx, "left", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.OpenToAnyone(ctx); protocol.ErrorCode(err) != protocol.ECONFLICT {
		t.Fatalf("opening with a key left: %v, want ECONFLICT", err)
	}
	if !ring.Required(ctx) {
		t.Fatal("a refused opening opened the server")
	}
	if err := admin.Revoke(ctx, "left"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "turned off") {
		t.Fatalf("the server logged an opening before there was one:\n%s", log.String())
	}
	if opened, err := admin.OpenToAnyone(ctx); err != nil || !opened {
		t.Fatalf("opening: %v, %v", opened, err)
	}
	if ring.Required(ctx) {
		t.Fatal("the running server did not see the opening")
	}
	if !strings.Contains(log.String(), "authentication turned off by operator command") {
		t.Errorf("the running server did not log the opening:\n%s", log.String())
	}
	if opened, err := admin.OpenToAnyone(ctx); err != nil || opened {
		t.Errorf("opening an open directory: %v, %v; want nothing done", opened, err)
	}
	if auth, err := admin.Auth(ctx); err != nil || auth.Required || !auth.OpenedByOperator() {
		t.Errorf("after opening, keys list reads %+v, %v", auth, err)
	}

	// Open across a restart, which says so; the next key closes it.
	stop()
	log.Reset()
	ring, _ = openRing(t, dir, &log)
	if ring.Required(ctx) {
		t.Fatal("an opened directory is closed after a restart")
	}
	if !strings.Contains(log.String(), "authentication is off: turned off by operator command") {
		t.Errorf("a start on an opened directory does not say it is open:\n%s", log.String())
	}
	if _, err := admin.Create(ctx, "closes", nil); err != nil {
		t.Fatal(err)
	}
	if err := admin.Revoke(ctx, "closes"); err != nil {
		t.Fatal(err)
	}
	if !ring.Required(ctx) {
		t.Error("a key created after an opening did not close the directory again")
	}
}

// A server that cannot read the keys again after they changed requires
// keys and accepts none until it can: neither the opening of a server
// nor a revoked key comes through a failed reload.
func TestAFailedReloadOfTheKeysRefusesEveryKeyAndNeverOpens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var log bytes.Buffer
	ring, _ := openRing(t, dir, &log)
	admin := mustKeyAdmin(t, dir)
	if ring.Required(ctx) {
		t.Fatal("a new directory needs keys")
	}
	breakKeys := func() {
		t.Helper()
		if _, err := admin.db.ExecContext(ctx, `ALTER TABLE api_keys RENAME TO api_keys_away`); err != nil {
			t.Fatal(err)
		}
	}
	mendKeys := func() {
		t.Helper()
		if _, err := admin.db.ExecContext(ctx, `ALTER TABLE api_keys_away RENAME TO api_keys`); err != nil {
			t.Fatal(err)
		}
	}

	// The first key is created, but the server cannot read it: closed.
	key, err := admin.Create(ctx, "first-key", nil)
	if err != nil {
		t.Fatal(err)
	}
	breakKeys()
	if !ring.Required(ctx) {
		t.Error("an open server whose reload failed stays open")
	}
	if ring.Check(ctx, key) != nil {
		t.Error("a key is accepted while the keys cannot be read")
	}
	if !strings.Contains(log.String(), "reloading the API keys failed") {
		t.Errorf("the failed reload is not logged:\n%s", log.String())
	}
	mendKeys()
	if !ring.Required(ctx) || ring.Check(ctx, key) == nil {
		t.Fatal("once the keys read again, the key does not hold")
	}

	// The key is revoked, and the reload fails: the key is refused.
	if err := admin.Revoke(ctx, "first-key"); err != nil {
		t.Fatal(err)
	}
	breakKeys()
	if ring.Check(ctx, key) != nil {
		t.Error("a revoked key is accepted while the keys cannot be read")
	}
	if !ring.Required(ctx) {
		t.Error("keys are not required while they cannot be read")
	}
	mendKeys()

	// The directory is opened, and the reload fails: still closed.
	if _, err := admin.OpenToAnyone(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.db.ExecContext(ctx, `ALTER TABLE auth_required RENAME TO auth_required_away`); err != nil {
		t.Fatal(err)
	}
	if !ring.Required(ctx) {
		t.Error("an opening the server could not read opened it")
	}
	if _, err := admin.db.ExecContext(ctx, `ALTER TABLE auth_required_away RENAME TO auth_required`); err != nil {
		t.Fatal(err)
	}
	if ring.Required(ctx) {
		t.Error("once it reads again, the server does not see the opening")
	}
}

// A server started with --require-auth records it: a later start
// without the flag, and with no key ever made, stays closed.
func TestRequiringKeysOnceIsKeptAcrossARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var log bytes.Buffer
	ring, stop := openRing(t, dir, &log)
	if err := ring.Require(ctx, ReasonRequireAuth); err != nil {
		t.Fatal(err)
	}
	if !ring.Required(ctx) {
		t.Fatal("Require did not require keys")
	}
	stop()
	ring, _ = openRing(t, dir, &log)
	if !ring.Required(ctx) {
		t.Fatal("a restart forgot that keys are required")
	}
	if auth, err := mustKeyAdmin(t, dir).Auth(ctx); err != nil || !auth.Required || auth.Reason != ReasonRequireAuth {
		t.Errorf("keys list reads %+v, %v", auth, err)
	}
}

// A key made without the record (by an older agentrt's "keys create"
// beside this server, or by hand) is recorded by the server that sees it:
// revoking it then leaves the directory closed.
func TestAKeyMadeWithoutTheRecordIsRecorded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var log bytes.Buffer
	ring, _ := openRing(t, dir, &log)
	admin := mustKeyAdmin(t, dir)
	key, id := newKey()
	if _, err := admin.db.ExecContext(ctx, `INSERT INTO api_keys (id, name, hash, created_at) VALUES (?, 'old', ?, 1)`, id, hashKey(key)); err != nil {
		t.Fatal(err)
	}
	if err := signalKeysChanged(dir); err != nil {
		t.Fatal(err)
	}
	if !ring.Required(ctx) || ring.Check(ctx, key) == nil {
		t.Fatal("the server does not use the key")
	}
	if err := admin.Revoke(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if !ring.Required(ctx) {
		t.Error("revoking a key made without the record opened the server")
	}
}

// A directory with keys when migration 10 runs needs them from then on;
// one without stays open.
func TestMigrationToTheAuthRecordClosesADirectoryWithKeys(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		withKey  bool
		required bool
	}{
		{"with a key", true, true},
		{"without", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old := openAtSchema(t, dir, 9)
			if tc.withKey {
				oldWrite(t, old, `INSERT INTO api_keys (id, name, hash, created_at) VALUES ('abcdefgh', 'k', x'00', 1)`)
			}
			old.Close()
			s := openAtSchema(t, dir, 10) // the migration alone, before any server reads the keys
			if rows := queryRows(t, s, `SELECT required, reason FROM auth_required`); (len(rows) == 1) != tc.required {
				t.Errorf("after the migration auth_required holds %v", rows)
			}
			s.Close()
			var log bytes.Buffer
			ring, _ := openRing(t, dir, &log)
			if tc.withKey {
				if err := mustKeyAdmin(t, dir).Revoke(ctx, "k"); err != nil {
					t.Fatal(err)
				}
			}
			if got := ring.Required(ctx); got != tc.required {
				t.Errorf("after the migration (and revoking the key), keys required: %v, want %v", got, tc.required)
			}
		})
	}
}

// A directory whose last key an agentrt older than the record revoked
// has no record and no key, but its keys-changed file was written by
// "agentrt keys": it stays closed, and "keys list" says so, until an
// operator opens it; a directory that never had keys stays open, and
// "keys open" on it does not close it at the next start.
func TestADirectoryThatHadKeysBeforeTheRecordStaysClosed(t *testing.T) {
	ctx := context.Background()
	t.Run("had keys", func(t *testing.T) {
		dir := t.TempDir()
		mustOpen(t, dir).Close()
		// What an older agentrt left: keys made and all revoked, no record.
		if err := signalKeysChanged(dir); err != nil {
			t.Fatal(err)
		}
		if state, err := mustKeyAdmin(t, dir).Auth(ctx); err != nil || !state.Required {
			t.Errorf("keys list reads %+v, %v; want required", state, err)
		}
		var log bytes.Buffer
		ring, stop := openRing(t, dir, &log)
		if !ring.Required(ctx) {
			t.Fatal("a directory whose keys were all revoked before the record answers without a key")
		}
		stop()
		ring, stop = openRing(t, dir, &log)
		if !ring.Required(ctx) {
			t.Fatal("the next start answers without a key")
		}
		stop()
		if opened, err := mustKeyAdmin(t, dir).OpenToAnyone(ctx); err != nil || !opened {
			t.Fatalf("keys open: %v, %v; want opened", opened, err)
		}
		ring, _ = openRing(t, dir, &log)
		if ring.Required(ctx) {
			t.Error("after keys open, the directory still needs a key")
		}
	})
	t.Run("never had keys", func(t *testing.T) {
		dir := t.TempDir()
		var log bytes.Buffer
		ring, stop := openRing(t, dir, &log)
		if ring.Required(ctx) {
			t.Fatal("a new directory needs a key")
		}
		stop()
		if opened, err := mustKeyAdmin(t, dir).OpenToAnyone(ctx); err != nil || opened {
			t.Fatalf("keys open on an open directory: %v, %v; want nothing opened", opened, err)
		}
		ring, _ = openRing(t, dir, &log)
		if ring.Required(ctx) {
			t.Error("keys open on a directory that never had keys closed it at the next start")
		}
	})
}
