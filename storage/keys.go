package storage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// API keys. A key is "agentrt_" + an id of 8 characters (its public part,
// which "keys list" shows and which finds its row) + "_" + 43 characters
// of base64url: 256 random bits in all past the id. Only the SHA-256 of
// the whole key is stored: a key is as hard to guess as a 256-bit secret,
// so a slow password hash would protect nothing more, and would cost
// every request its time. A presented key is hashed and compared with
// the stored hash in constant time (crypto/subtle).
//
// Keys live in the database of a data directory, and "agentrt keys"
// changes them while a server runs on it (without its LOCK: SQLite
// serialises the writes). Each change then writes a new random value to
// the file keys-changed of the directory, which the server maps into its
// memory: it compares that value on each request, without a system call
// or a database read, and reloads the keys when it differs. A key
// created or revoked is so seen by the next request.
//
// Whether requests need a key is the database's too (auth_required,
// migration 10), never a side effect of how many keys there are: it is
// set by the first key created and by a server started with
// --require-auth, and cleared only by "agentrt keys open". A server
// whose last key is revoked stays closed, answering 401 to every request
// but the health checks, and so does every later one on the directory.
// A server that cannot read the keys again after a change refuses every
// key until it can: it never opens, nor accepts a key it cannot confirm.

// keyPrefix starts every key.
const keyPrefix = "agentrt_"

// keysChangedFile is the data directory's file whose value changes with
// every change of the keys.
const keysChangedFile = "keys-changed"

var keyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Reasons auth_required records for its last change.
const (
	reasonKeyCreated  = "a key was created"
	reasonRequireAuth = "a server started with --require-auth"
	reasonOpened      = "agentrt keys open"
	// reasonKeysBefore: the directory has no record, and its keys-changed
	// file says "agentrt keys" changed keys in it, so it had keys (an
	// agentrt older than the record revoked the last).
	reasonKeysBefore = "keys were made in this directory before it recorded whether they are required"
)

// ReasonRequireAuth is the reason to give Keyring.Require for a server
// started with --require-auth.
const ReasonRequireAuth = reasonRequireAuth

// AuthState is what a data directory records of whether its API needs a
// key: as "keys list" shows it, and as a server reads it. A key that
// exists needs no record: requests need keys whenever one exists.
type AuthState struct {
	// Required is set once keys have been required (a key created, a
	// server started with --require-auth) and cleared only by
	// "agentrt keys open".
	Required bool
	// Since is when it was last set or cleared; zero when it never was.
	Since time.Time
	// Reason says what set or cleared it; "" when nothing ever did.
	Reason string
}

// OpenedByOperator reports whether an operator cleared it ("agentrt keys
// open").
func (a AuthState) OpenedByOperator() bool { return !a.Required && a.Reason == reasonOpened }

// schemaAuth is the migration that records whether keys are required.
const schemaAuth = 10

// selectAuth reads auth_required's row; none: keys were never required.
const selectAuth = `SELECT required, changed_at, reason FROM auth_required WHERE one = 1`

// setAuthRequired records that keys are required from now on, keeping
// when and why they first were if they already are.
const setAuthRequired = `INSERT INTO auth_required (one, required, changed_at, reason) VALUES (1, 1, ?, ?)
	ON CONFLICT (one) DO UPDATE SET required = 1, changed_at = excluded.changed_at, reason = excluded.reason
	WHERE auth_required.required = 0`

// authState makes the AuthState of auth_required's row, as scanned.
func authState(required bool, changedAt int64, reason string) AuthState {
	return AuthState{Required: required, Since: time.UnixMilli(changedAt).UTC(), Reason: reason}
}

// KeyInfo describes an API key, as "keys list" shows it: never the key.
type KeyInfo struct {
	Name string `json:"name"`
	// Prefix is the key's public start, "agentrt_" and its id.
	Prefix string `json:"prefix"`
	// Agents are the agents it may use; nil: every agent.
	Agents    []string   `json:"agents"`
	CreatedAt time.Time  `json:"created_at"`
	LastUsed  *time.Time `json:"last_used"`
}

// splitKey returns a key's id and whether it is shaped as a key.
func splitKey(key string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok || len(rest) != 8+1+43 || rest[8] != '_' {
		return "", false
	}
	return rest[:8], true
}

func hashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// newKey returns a new random key and its id.
func newKey() (key, id string) {
	var b [5 + 32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	id = strings.ToLower(base32.StdEncoding.EncodeToString(b[:5]))
	return keyPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(b[5:]), id
}

// KeyAdmin changes the API keys of a data directory: "agentrt keys". It
// works whether or not a server runs on the directory.
type KeyAdmin struct {
	dir string
	db  *sql.DB
	// schema is the database's migration; below schemaAuth (a server
	// of an older agentrt runs on it) nothing records whether keys are
	// required, and that server needs them only while one exists.
	schema int
}

// OpenKeyAdmin opens the keys of the data directory dir. When no server
// runs on it, the store is opened first (and its schema brought up to
// date, which creates a new directory); when one runs, its database is
// used beside it, and must be at a schema that has keys.
func OpenKeyAdmin(ctx context.Context, dir string) (*KeyAdmin, error) {
	s, err := Open(ctx, dir, Config{})
	switch {
	case err == nil:
		s.Close()
	case !errors.Is(err, errInUse):
		return nil, err
	}
	path := filepath.Join(dir, "agentrt.db")
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", "immediate")
	// openDB, as the server does: the last to close the database keeps
	// its log, which a start on a full disk needs (openDB).
	db, err := openDB("file:" + path + "?" + q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	var version int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if version < schemaKeys {
		db.Close()
		return nil, fmt.Errorf("the agentrt serving %s is older than API keys: stop it, or upgrade it", dir)
	}
	return &KeyAdmin{dir: dir, db: db, schema: version}, nil
}

// schemaKeys is the migration that added API keys.
const schemaKeys = 8

// Close closes the database.
func (k *KeyAdmin) Close() error { return k.db.Close() }

// Create makes a new key named name for agents (none: every agent) and
// returns it: the only time the key is seen. A name already in use is
// protocol.ECONFLICT; a bad name protocol.EINVALID.
func (k *KeyAdmin) Create(ctx context.Context, name string, agents []string) (string, error) {
	if !keyName.MatchString(name) {
		return "", protocol.Errorf(protocol.EINVALID, "bad key name %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	var agentsJSON any
	if len(agents) > 0 {
		b, _ := json.Marshal(agents)
		agentsJSON = string(b)
	}
	key, id := newKey()
	err := k.change(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE name = ?`, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return protocol.Errorf(protocol.ECONFLICT, "a key named %q exists; revoke it first, or choose another name", name)
		}
		now := millis(time.Now())
		if _, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, name, hash, agents, created_at) VALUES (?, ?, ?, ?, ?)`,
			id, name, hashKey(key), agentsJSON, now); err != nil {
			return err
		}
		if k.schema < schemaAuth {
			return nil
		}
		_, err := tx.ExecContext(ctx, setAuthRequired, now, reasonKeyCreated)
		return err
	})
	if err != nil {
		return "", err
	}
	return key, nil
}

// Revoke removes the key named name; protocol.ENOTFOUND when there is
// none. A server running on the directory refuses it from its next
// request on. Revoking the last key leaves the directory closed: every
// request is then refused until a key is created, or OpenToAnyone.
func (k *KeyAdmin) Revoke(ctx context.Context, name string) error {
	return k.change(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM api_keys WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return protocol.Errorf(protocol.ENOTFOUND, "no key named %q", name)
		}
		return nil
	})
}

// OpenToAnyone records that the data directory needs no key: a server
// running on it sees that at its next request, logs it and answers every
// request without a key, and so does every later one, until a key is
// created or a server starts with --require-auth. It is the only way a
// directory that needed keys stops needing them. With keys left it is
// protocol.ECONFLICT (they are revoked first: while one exists, keys are
// required). It reports whether the directory needed keys; when it did
// not, nothing changes.
func (k *KeyAdmin) OpenToAnyone(ctx context.Context) (opened bool, err error) {
	if k.schema < schemaAuth {
		return false, fmt.Errorf("the agentrt serving %s is older than \"keys open\": it needs keys only while one exists; stop it, or upgrade it", k.dir)
	}
	err = k.change(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return protocol.Errorf(protocol.ECONFLICT, "%d key(s) exist, and while one does every request needs one: revoke them first", n)
		}
		var required bool
		switch err := tx.QueryRowContext(ctx, selectAuth).Scan(&required, new(int64), new(string)); {
		case errors.Is(err, sql.ErrNoRows):
			// Closed only if keys were made here before the record.
			required = keysChangedBefore(k.dir)
		case err != nil:
			return err
		}
		if !required {
			// Nothing to open: nothing is written, and keys-changed is
			// not, so that no later start reads it as keys made here.
			return errUnchanged
		}
		// A row even where there was none: the operator's choice, which
		// no later start second-guesses.
		_, err := tx.ExecContext(ctx, `INSERT INTO auth_required (one, required, changed_at, reason) VALUES (1, 0, ?, ?)
			ON CONFLICT (one) DO UPDATE SET required = 0, changed_at = excluded.changed_at, reason = excluded.reason`,
			millis(time.Now()), reasonOpened)
		opened = err == nil && required
		return err
	})
	if err != nil {
		return false, fmt.Errorf("open %s to anyone: %w", k.dir, err)
	}
	return opened, nil
}

// Auth reads what the data directory records of whether keys are
// required. Beside a server of an agentrt older than that record, it is
// the zero AuthState with a Reason saying so.
func (k *KeyAdmin) Auth(ctx context.Context) (AuthState, error) {
	if k.schema < schemaAuth {
		return AuthState{Reason: "the agentrt serving this directory is older, and needs keys only while one exists"}, nil
	}
	var (
		required  bool
		changedAt int64
		reason    string
	)
	switch err := k.db.QueryRowContext(ctx, selectAuth).Scan(&required, &changedAt, &reason); {
	case errors.Is(err, sql.ErrNoRows) && keysChangedBefore(k.dir):
		return AuthState{Required: true, Reason: reasonKeysBefore}, nil
	case errors.Is(err, sql.ErrNoRows):
		return AuthState{}, nil
	case err != nil:
		return AuthState{}, fmt.Errorf("read whether keys are required: %w", err)
	}
	return authState(required, changedAt, reason), nil
}

// errUnchanged is what a change's fn returns when it changed nothing:
// the transaction is rolled back and no server is told.
var errUnchanged = errors.New("unchanged")

// change runs fn in a transaction and, once it is committed, tells a
// server running on the directory that the keys changed.
func (k *KeyAdmin) change(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := k.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("change keys: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); errors.Is(err, errUnchanged) {
		return nil
	} else if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("change keys: %w", err)
	}
	return signalKeysChanged(k.dir)
}

// List describes every key, by name.
func (k *KeyAdmin) List(ctx context.Context) ([]KeyInfo, error) {
	return listKeys(ctx, k.db)
}

// listKeys reads the keys' descriptions from db.
func listKeys(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) ([]KeyInfo, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, name, agents, created_at, last_used_at FROM api_keys ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	keys := []KeyInfo{}
	for rows.Next() {
		var (
			k        KeyInfo
			id       string
			agents   sql.NullString
			created  int64
			lastUsed sql.NullInt64
		)
		if err := rows.Scan(&id, &k.Name, &agents, &created, &lastUsed); err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		k.Prefix = keyPrefix + id
		if agents.Valid {
			if err := json.Unmarshal([]byte(agents.String), &k.Agents); err != nil {
				return nil, fmt.Errorf("list keys: agents of %s: %w", k.Name, err)
			}
		}
		k.CreatedAt = time.UnixMilli(created).UTC()
		if lastUsed.Valid {
			t := time.UnixMilli(lastUsed.Int64).UTC()
			k.LastUsed = &t
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// keysChangedBefore reports whether the directory's keys-changed file
// was written by "agentrt keys" (a server only creates it, zero): keys
// were made in the directory. An unreadable file counts as written, so
// that the answer fails closed.
func keysChangedBefore(dir string) bool {
	f, err := os.Open(filepath.Join(dir, keysChangedFile))
	if errors.Is(err, os.ErrNotExist) {
		return false
	} else if err != nil {
		return true
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], 0); err != nil && !errors.Is(err, io.EOF) {
		return true
	}
	return binary.LittleEndian.Uint64(b[:]) != 0
}

// signalKeysChanged writes a new random value to the directory's
// keys-changed file.
func signalKeysChanged(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, keysChangedFile), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("tell the server the keys changed: %w", err)
	}
	defer f.Close()
	var b [8]byte
	rand.Read(b[:])
	if _, err := f.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("tell the server the keys changed: %w", err)
	}
	return nil
}

// Key is an API key as a server knows it.
type Key struct {
	Name string
	// Agents are the agents it may use; nil: every agent.
	Agents []string
	id     string
	hash   []byte
}

// Keyring is the API keys a server checks requests against, and whether
// requests need one: loaded from the store, and loaded again whenever
// keys-changed changes. Safe for concurrent use.
type Keyring struct {
	s       *Store
	changed []byte // keys-changed, mapped
	mu      sync.RWMutex
	seen    uint64 // the value of keys-changed the keys were loaded at
	byID    map[string]*Key
	auth    AuthState // as last loaded
	// failed: the last reload failed. Until one succeeds, keys are
	// required and none is accepted: a key revoked in the change that
	// could not be read must not pass, nor may the server open.
	failed bool
	// hadKeys: when the keyring was opened, the directory had no record
	// and keys-changed was not zero: keys were made in it before the
	// record was kept. Until a record exists, keys are required.
	hadKeys bool
	usedMu  sync.Mutex
	used    map[string]time.Time // by key id, since the last flush
	stop    chan struct{}
	stopped chan struct{}
}

// Keys opens the keyring of the store's data directory. It flushes when
// keys were last used to the database every flushEvery, and on Close.
func (s *Store) Keys(ctx context.Context) (*Keyring, error) {
	path := filepath.Join(s.dir, keysChangedFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if fi.Size() < 8 {
		if err := f.Truncate(8); err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	k := &Keyring{s: s, changed: m, used: map[string]time.Time{}, stop: make(chan struct{}), stopped: make(chan struct{})}
	if err := k.load(ctx); err != nil {
		syscall.Munmap(m)
		return nil, err
	}
	if err := k.recordKeys(ctx); err != nil {
		// Keys exist: they are required whether or not this is written.
		s.log.Warn("recording that API keys are required failed; tried again at the next change of the keys", "err", err)
	}
	if err := k.recordPastKeys(ctx, binary.LittleEndian.Uint64(m) != 0); err != nil {
		// hadKeys holds for this run whether or not this is written.
		s.log.Warn("recording that API keys are required failed; keys are required all the same, and it is tried again at the next start", "err", err)
	}
	if k.auth.OpenedByOperator() && len(k.byID) == 0 {
		s.log.Warn("authentication is off: turned off by operator command (agentrt keys open); every request is answered without a key",
			"since", k.auth.Since)
	}
	go k.flushLoop()
	return k, nil
}

// flushEvery is how often when keys were last used is written down.
const flushEvery = time.Minute

// load reads every key, and whether keys are required, from the
// database, in one snapshot. A failure leaves the keyring failed: keys
// required, none accepted.
func (k *Keyring) load(ctx context.Context) error {
	seen := binary.LittleEndian.Uint64(k.changed)
	byID, auth, err := k.read(ctx)
	k.mu.Lock()
	if err != nil {
		k.failed = true
		k.mu.Unlock()
		return err
	}
	reload := k.byID != nil
	wasRequired := k.auth.Required || len(k.byID) > 0 || k.hadKeys && k.auth.Reason == ""
	k.byID, k.auth, k.seen, k.failed = byID, auth, seen, false
	required := auth.Required || len(byID) > 0 || k.hadKeys && auth.Reason == ""
	k.mu.Unlock()
	switch {
	case !reload:
	case wasRequired && !required && auth.OpenedByOperator():
		k.s.log.Warn("authentication turned off by operator command (agentrt keys open): every request is answered without a key",
			"since", auth.Since)
	case wasRequired && !required:
		k.s.log.Warn("authentication turned off: the database no longer records that keys are required (changed by hand?)")
	case !wasRequired && required:
		k.s.log.Info("authentication turned on: every request but the health checks needs an API key", "reason", auth.Reason)
	}
	return nil
}

// recordKeys records that keys are required when a key exists and the
// database does not say so yet: a key made by an agentrt older than that
// record, beside this server. Without it, revoking that key would open
// the directory.
func (k *Keyring) recordKeys(ctx context.Context) error {
	k.mu.RLock()
	unrecorded := !k.failed && len(k.byID) > 0 && !k.auth.Required && k.s.schema >= schemaAuth
	k.mu.RUnlock()
	if !unrecorded {
		return nil
	}
	return k.Require(ctx, reasonKeyCreated)
}

// recordPastKeys records that keys are required in a directory that had
// keys before it kept the record: one with no record whose keys-changed
// (changed) was written by "agentrt keys" (a server only creates it,
// zero), so that a directory whose last key an older agentrt revoked
// stays closed. Until the record is written, hadKeys keeps it closed.
func (k *Keyring) recordPastKeys(ctx context.Context, changed bool) error {
	k.mu.Lock()
	k.hadKeys = changed && !k.failed && k.auth.Reason == "" && k.s.schema >= schemaAuth
	had := k.hadKeys
	k.mu.Unlock()
	if !had {
		return nil
	}
	k.s.log.Info("keys were made in this data directory before it recorded whether they are required: they are required from now on (agentrt keys open undoes it)")
	return k.Require(ctx, reasonKeysBefore)
}

// read reads every key and auth_required in one read transaction.
func (k *Keyring) read(ctx context.Context) (map[string]*Key, AuthState, error) {
	byID := map[string]*Key{}
	var auth AuthState
	err := k.s.readTx(ctx, func(r db) error {
		rows, err := r.query(`SELECT id, name, hash, agents FROM api_keys`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key Key
			var agents sql.NullString
			if err := rows.Scan(&key.id, &key.Name, &key.hash, &agents); err != nil {
				return err
			}
			if agents.Valid {
				if err := json.Unmarshal([]byte(agents.String), &key.Agents); err != nil {
					return fmt.Errorf("agents of %s: %w", key.Name, err)
				}
			}
			byID[key.id] = &key
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if k.s.schema < schemaAuth {
			return nil // a test's older schema
		}
		var (
			required  bool
			changedAt int64
			reason    string
		)
		switch err := r.scanOne(selectAuth, nil, &required, &changedAt, &reason); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			auth = authState(required, changedAt, reason)
		}
		return nil
	})
	if err != nil {
		return nil, AuthState{}, fmt.Errorf("load keys: %w", err)
	}
	return byID, auth, nil
}

// current loads the keys again when keys-changed changed since they were
// loaded, or the last load failed. A failure to reload leaves the
// keyring failed (keys required, none accepted), and is tried again at
// the next request.
func (k *Keyring) current(ctx context.Context) {
	k.mu.RLock()
	stale := k.failed || binary.LittleEndian.Uint64(k.changed) != k.seen
	k.mu.RUnlock()
	if stale {
		ctx := context.WithoutCancel(ctx)
		if err := k.load(ctx); err != nil {
			k.s.log.ErrorContext(ctx, "reloading the API keys failed; until they are read again every request needing a key is refused", "err", err)
		} else if err := k.recordKeys(ctx); err != nil {
			k.s.log.WarnContext(ctx, "recording that API keys are required failed; tried again at the next change of the keys", "err", err)
		}
	}
}

// Required reports whether requests need a key: when the directory
// records that they do, when a key exists, and while the keys cannot be
// read. Revoking keys never makes it false; only "agentrt keys open"
// does.
func (k *Keyring) Required(ctx context.Context) bool {
	k.current(ctx)
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.failed || k.auth.Required || len(k.byID) > 0 || k.hadKeys && k.auth.Reason == ""
}

// Require records that the data directory needs keys from now on, as a
// server started with --require-auth does, so that a later start without
// the flag stays closed: reason says why. It writes (one synced
// transaction) only when the directory did not need keys already.
func (k *Keyring) Require(ctx context.Context, reason string) error {
	k.current(ctx)
	k.mu.RLock()
	already := k.auth.Required && !k.failed
	k.mu.RUnlock()
	if already {
		return nil
	}
	err := k.s.inTx(ctx, noTasks, 1, func(w db) error {
		_, err := w.exec(setAuthRequired, millis(time.Now()), reason)
		return err
	})
	if err != nil {
		return fmt.Errorf("record that keys are required: %w", err)
	}
	return k.load(ctx)
}

// dummyHash is compared with when no key has a presented key's id, so
// that an unknown id costs what a known one does.
var dummyHash = hashKey("")

// Check returns the key secret is, or nil when it is none (malformed,
// unknown or revoked) or the keys cannot be read since they changed. The comparison of hashes takes constant time.
func (k *Keyring) Check(ctx context.Context, secret string) *Key {
	k.current(ctx)
	id, ok := splitKey(secret)
	hash := hashKey(secret)
	k.mu.RLock()
	key, failed := k.byID[id], k.failed
	k.mu.RUnlock()
	want := dummyHash
	if key != nil {
		want = key.hash
	}
	if subtle.ConstantTimeCompare(hash, want) != 1 || !ok || key == nil || failed {
		return nil
	}
	k.usedMu.Lock()
	k.used[key.id] = time.Now()
	k.usedMu.Unlock()
	return key
}

// flushLoop writes when keys were last used, every flushEvery.
func (k *Keyring) flushLoop() {
	defer close(k.stopped)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			k.flush()
			return
		case <-t.C:
			k.flush()
		}
	}
}

// flush writes when the keys used since the last flush were last used.
// Unsynced: a power cut may lose a minute of it.
func (k *Keyring) flush() {
	k.usedMu.Lock()
	used := k.used
	k.used = map[string]time.Time{}
	k.usedMu.Unlock()
	if len(used) == 0 {
		return
	}
	ids := make([]string, 0, len(used))
	for id := range used {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	err := k.s.inTxUnsynced(context.Background(), noTasks, len(ids), func(w db) error {
		for _, id := range ids {
			if _, err := w.exec(`UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, 0), ?) WHERE id = ?`,
				millis(used[id]), id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		k.s.log.Warn("recording when API keys were last used failed", "err", err)
	}
}

// Close writes when keys were last used and releases the keyring.
func (k *Keyring) Close() error {
	close(k.stop)
	<-k.stopped
	return syscall.Munmap(k.changed)
}
