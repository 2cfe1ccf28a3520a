// Package storage keeps tasks, steps and artifacts durable: rows in SQLite
// (WAL, synchronous=FULL, embedded append-only migrations) and artifact bytes
// as files under the data directory, synced before anything that refers to
// them is committed.
//
// Layout of a data directory:
//
//	agentrt.db         SQLite database (+ -wal, -shm)
//	LOCK               held (flock) by the one process using the directory
//	staging/<id>       an artifact's bytes until its row is committed
//	artifacts/<task>/<id>
//	                   an artifact's bytes once its row is committed
//	workspaces/<task>/ a task's workspace files
//	keys-changed       a random value "agentrt keys" changes with the API keys
//
// Staged bytes whose artifact row was never committed are removed when the
// store opens; staged bytes whose row was committed are moved into place;
// files left half-written in a workspace's .tmp/ are removed; the bytes
// of tasks deleted by a process that died before removing them are
// removed; steps a dead process left running are marked failed
// (interrupted). So a killed process leaves neither half-written
// artifacts, rows without bytes, bytes without rows, nor steps running
// forever.
package storage

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"github.com/agentrt/agentrt/protocol"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is an open data directory, as one agent sees it: the tasks it
// creates belong to that agent, and it finds no other agent's (ENOTFOUND,
// as for a task that does not exist). Open returns the view of the agent
// named "" (a data directory's tasks from before agents had names);
// Agent returns another agent's. Views share everything else: one
// database, one writer, one directory.
type Store struct {
	*core
	agent string
}

// Agent returns the view of the store of the agent named name.
func (s *Store) Agent(name string) *Store { return &Store{core: s.core, agent: name} }

// core is what every view of a data directory shares.
type core struct {
	dir    string
	write  *sql.DB // one connection, used by the writer goroutine only
	read   *sql.DB // a pool of query-only connections
	lock   *os.File
	floor  *diskFloor
	log    *slog.Logger
	closed bool
	// schema is the number of migrations the database is at: all that
	// are embedded, but in tests of older schemas.
	schema int
	writerState
}

// Config tunes a Store. The zero Config keeps no disk floor and logs
// nothing.
type Config struct {
	// MinFreeDisk is the free space, in bytes, that writes must leave on
	// the data directory's file system; a write that would go below is
	// refused with protocol.EINSUFFICIENT. AutoMinFreeDisk: the smaller of
	// 1 GiB and 5% of the file system. 0: no floor.
	MinFreeDisk int64
	// Log receives what the store had to set aside rather than lose (a
	// workspace file an upload's rollback could not put back) and errors
	// nobody else sees.
	Log *slog.Logger
}

// Open opens (creating if needed) the data directory dir, takes its lock,
// brings the database schema up to date and finishes or removes artifact
// bytes a killed process left staged.
func Open(ctx context.Context, dir string, cfg Config) (*Store, error) {
	return openWith(ctx, dir, cfg, migrations)
}

// openWith is Open with the migrations in schema (migrations/NNNN_*.sql).
func openWith(ctx context.Context, dir string, cfg Config, schema fs.FS) (*Store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	for _, sub := range []string{"staging", "artifacts", "workspaces"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o750); err != nil {
			return nil, fmt.Errorf("create data directory %s: %w", dir, err)
		}
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	floor, err := newDiskFloor(dir, cfg.MinFreeDisk)
	if err != nil {
		lock.Close()
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Store{core: &core{dir: dir, lock: lock, floor: floor, log: cfg.Log, writerState: writerState{
		cache:  newTaskCache(),
		writes: make(chan *writeReq, maxBatch), quit: make(chan struct{}), writerDone: make(chan struct{}),
	}}}
	if err := s.open(ctx, schema); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) open(ctx context.Context, schema fs.FS) error {
	path := filepath.Join(s.dir, "agentrt.db")
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "1")
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	var err error
	if s.write, err = sql.Open("sqlite", "file:"+path+"?"+q.Encode()); err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	// Writes come only from the writer goroutine, on one connection.
	s.write.SetMaxOpenConns(1)
	s.write.SetMaxIdleConns(1)
	s.write.SetConnMaxLifetime(0)
	s.write.SetConnMaxIdleTime(0)
	w, err := newWriter(ctx, s.write)
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	if err := s.migrate(ctx, w, schema); err != nil {
		w.close()
		return fmt.Errorf("migrate database %s: %w", path, err)
	}
	s.writerStarted = true
	go s.writeLoop(w)

	q.Del("_journal_mode") // persistent, set by the writer
	q.Set("_query_only", "1")
	q.Set("_txlock", "deferred")
	if s.read, err = sql.Open("sqlite", "file:"+path+"?"+q.Encode()); err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	n := 2 * runtime.GOMAXPROCS(0)
	s.readTxs = make(chan struct{}, n-1)
	s.read.SetMaxOpenConns(n)
	s.read.SetMaxIdleConns(n)
	s.read.SetConnMaxLifetime(0)
	s.read.SetConnMaxIdleTime(0)
	if err := s.read.PingContext(ctx); err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	unsettled, err := s.recoverStaging(ctx)
	if err != nil {
		return err
	}
	if s.schema >= schemaDeletions {
		if err := s.finishDeletions(ctx); err != nil {
			return err
		}
	}
	if n, err := s.failInterruptedSteps(ctx); err != nil {
		return err
	} else if n > 0 {
		s.log.Warn("steps running when the last process stopped are marked failed (interrupted)", "steps", n)
	}
	return s.sweepWorkspaceTemps(unsettled)
}

// Close closes the database and releases the directory's lock.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.writerStarted {
		s.stopWriter()
	}
	s.stmts.Range(func(_, v any) bool {
		v.(*sql.Stmt).Close()
		return true
	})
	var errs []error
	if s.read != nil {
		errs = append(errs, s.read.Close())
	}
	if s.write != nil {
		errs = append(errs, s.write.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close()) // closing releases the flock
	}
	return errors.Join(errs...)
}

// Ping is nil when the store answers a query: GET /readyz asks it.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.reader(ctx).scanOne(`SELECT 1`, nil, &one); err != nil {
		return fmt.Errorf("the store does not answer: %w", err)
	}
	return nil
}

// Dir returns the data directory.
func (s *Store) Dir() string { return s.dir }

// MinFreeDisk is the free space, in bytes, that writes leave on the data
// directory's file system (0: no floor).
func (s *Store) MinFreeDisk() int64 { return s.floor.Min() }

// errInUse is a data directory whose LOCK another process holds.
var errInUse = errors.New("in use by another agentrt process")

// lockDir takes an exclusive, non-blocking flock on dir/LOCK so that two
// processes never share a data directory.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("data directory %s is not writable: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is %w", dir, errInUse)
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	return f, nil
}

// migrate applies, in order and each in its own transaction, the embedded
// migrations the database has not seen. Migrations are append-only: a file,
// once released, never changes. They run as SQLite's procedure for
// rebuilding a table asks: with foreign keys off, checked with
// foreign_key_check before each commits.
func (s *Store) migrate(ctx context.Context, w *writer, schema fs.FS) error {
	if _, err := w.conn.ExecContext(ctx,
		`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`); err != nil {
		return err
	}
	names, err := fs.Glob(schema, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	var applied int
	if err := w.conn.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return err
	}
	if applied > len(names) {
		return fmt.Errorf("the database is at schema version %d, newer than this agentrt knows (%d); use a newer agentrt", applied, len(names))
	}
	s.schema = len(names)
	if applied == len(names) {
		return nil
	}
	if _, err := w.conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return err
	}
	for i, name := range names {
		version := i + 1
		if version <= applied {
			continue
		}
		if !strings.HasPrefix(filepath.Base(name), fmt.Sprintf("%04d_", version)) {
			return fmt.Errorf("migration %s is out of sequence (want %04d_*)", name, version)
		}
		body, err := fs.ReadFile(schema, name)
		if err != nil {
			return err
		}
		_, err = w.transact(ctx, func() error {
			if _, err := w.conn.ExecContext(ctx, string(body)); err != nil { // several statements
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := checkForeignKeys(ctx, w.conn); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			_, err := w.conn.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, version, filepath.Base(name))
			return err
		})
		if err != nil {
			return err
		}
	}
	if _, err := w.conn.ExecContext(ctx, `PRAGMA foreign_keys = ON`); err != nil {
		return err
	}
	// A migration that rebuilt tables grew the WAL to their size; give
	// that disk back now rather than at the next clean shutdown.
	_, err = w.conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

// checkForeignKeys fails if any row refers to a row that does not exist.
func checkForeignKeys(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return err
	}
	defer rows.Close()
	if rows.Next() {
		var table string
		var rowid sql.NullInt64
		var parent string
		var fkid int
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return err
		}
		return fmt.Errorf("row %d of %s refers to a missing row of %s", rowid.Int64, table, parent)
	}
	return rows.Err()
}

// storageError turns a full disk into protocol.EINSUFFICIENT, keeps domain
// errors as they are and wraps everything else with op.
func storageError(op string, err error) error {
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return err
	}
	if isDiskFull(err) {
		return &protocol.Error{Code: protocol.EINSUFFICIENT, Message: "the server's disk is full; nothing was saved"}
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isDiskFull(err error) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var serr *sqlite.Error
	if errors.As(err, &serr) {
		return serr.Code()&0xff == sqlite3.SQLITE_FULL
	}
	return false
}

// taskDir is the directory of a task's artifact bytes. Ids reach here only
// after protocol has checked them to be canonical UUIDs.
func (s *Store) taskDir(taskID string) string {
	return filepath.Join(s.dir, "artifacts", taskID)
}

func (s *Store) stagingPath(artifactID string) string {
	return filepath.Join(s.dir, "staging", artifactID)
}

func (s *Store) artifactPath(taskID, artifactID string) string {
	return filepath.Join(s.taskDir(taskID), artifactID)
}

// recoverStaging finishes what a killed process left in staging/: uploads
// placed in a workspace are kept or rolled back, bytes of a recorded
// artifact move into place, anything else is removed. It returns the
// placements it could not settle (the host's I/O failed), whose journal,
// staged bytes and replaced file stay for the next start: it logs them and
// goes on rather than refuse to start.
func (s *Store) recoverStaging(ctx context.Context) (unsettled map[string]bool, err error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, "staging"))
	if err != nil {
		return nil, fmt.Errorf("read staging directory: %w", err)
	}
	recorded := func(id string) (string, bool, error) {
		var taskID string
		err := s.reader(ctx).scanOne(`SELECT task_id FROM artifacts WHERE id = ?`, []any{id}, &taskID)
		if errors.Is(err, sql.ErrNoRows) {
			return "", false, nil
		}
		return taskID, err == nil, err
	}
	unsettled = map[string]bool{}
	// Placements first: rolling one back needs its staged bytes.
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".ws")
		if !ok {
			continue
		}
		_, rec, err := recorded(id)
		if err != nil {
			return nil, fmt.Errorf("recover staged %s: %w", e.Name(), err)
		}
		if err := s.recoverPlacement(id, rec); err != nil {
			s.log.Error("an upload a stopped process left half done could not be settled; it is kept as it is and the next start tries again",
				"journal", filepath.Join(s.dir, "staging", e.Name()), "err", err)
			unsettled[id] = true
		}
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".ws") || unsettled[name] {
			continue
		}
		taskID, rec, err := recorded(name)
		switch {
		case err != nil:
			return nil, fmt.Errorf("recover staged %s: %w", name, err)
		case rec:
			if err := s.promote(taskID, name); err != nil {
				return nil, fmt.Errorf("recover staged %s: %w", name, err)
			}
		default:
			if err := os.RemoveAll(filepath.Join(s.dir, "staging", name)); err != nil {
				return nil, fmt.Errorf("remove staged %s: %w", name, err)
			}
		}
	}
	return unsettled, nil
}

// syncDir makes a directory's entries (a rename, a new file) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The store is all the persistence an Agent needs.
var _ protocol.Store = (*Store)(nil)
