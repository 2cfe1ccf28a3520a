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
	"database/sql/driver"
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
	"sync/atomic"
	"syscall"
	"time"

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
	// interrupted is the steps a dead process left running whose marks
	// wait for disk room (leftRunning); nil when none wait.
	interrupted atomic.Pointer[leftRunning]
	// interruptedSince is when their marks were deferred, in Unix
	// nanoseconds; 0 if they were not.
	interruptedSince atomic.Int64
	// retryFirst is how long retryInterrupted first waits; retryDone is
	// closed once it has stopped (nil if it never started).
	retryFirst time.Duration
	retryDone  chan struct{}
	// readers is the read pool's connections; dbCacheKiB each
	// connection's page cache (Config.DBCacheBytes), the writer's too.
	readers    int
	dbCacheKiB int64
	// events bounds each task's event log.
	events protocol.EventBounds
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
	// TaskCacheBytes bounds the tasks kept in memory to answer reads
	// (taskCache): 0, DefaultTaskCacheBytes; NoTaskCache keeps none.
	TaskCacheBytes int64
	// DBCacheBytes bounds SQLite's page caches, the store's connections
	// together, each holding an equal share (at least minDBCacheBytes):
	// 0, DefaultDBCacheBytes.
	DBCacheBytes int64
	// EventBounds bound each task's event log (protocol.EventBounds):
	// zero fields take protocol.DefaultEventBounds'. A Count below 1 or
	// Bytes below MinEventBytes is refused: a bound never switches off.
	EventBounds protocol.EventBounds
	// Log receives what the store had to set aside rather than lose (a
	// workspace file an upload's rollback could not put back) and errors
	// nobody else sees.
	Log *slog.Logger
	// retryInterrupted, for tests, is how long the store first waits
	// before it tries again to mark interrupted steps it could not mark
	// for want of disk (0: interruptedRetry).
	retryInterrupted time.Duration
}

const (
	// DefaultTaskCacheBytes is Config.TaskCacheBytes's default: some
	// 48,000 tasks of a short input.
	DefaultTaskCacheBytes = 16 << 20
	// NoTaskCache is the Config.TaskCacheBytes of a store that keeps no
	// task in memory: every read queries the database.
	NoTaskCache = -1
	// DefaultDBCacheBytes is Config.DBCacheBytes's default, SQLite's own
	// (2,000 KiB a connection) for the 8 connections of a 2-core machine.
	DefaultDBCacheBytes = 16 << 20
	// minDBCacheBytes is the least a connection's page cache holds.
	minDBCacheBytes = 256 << 10
)

// Connections is how many connections to the database a store keeps
// open: the writer's, and 2 readers a P (GOMAXPROCS). Each holds a page
// cache of its own, DBCacheBytes / Connections().
func Connections() int { return 1 + readConnections() }

func readConnections() int { return 2 * runtime.GOMAXPROCS(0) }

// Caches is what the store's caches hold and may hold, in bytes.
type Caches struct {
	// Tasks is what the cache of tasks holds (about, as a cached task is
	// counted), TasksLimit the most it may (Config.TaskCacheBytes).
	Tasks, TasksLimit int64
	// DBLimit is the most SQLite's page caches may hold, the connections
	// together: each connection's share of Config.DBCacheBytes, at least
	// its least.
	DBLimit int64
}

// Caches returns what the store's caches hold and may hold.
func (s *Store) Caches() Caches {
	return Caches{Tasks: s.cache.held(), TasksLimit: s.cache.limit, DBLimit: s.dbCacheKiB << 10 * int64(1+s.readers)}
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
	if cfg.TaskCacheBytes < 0 && cfg.TaskCacheBytes != NoTaskCache || cfg.DBCacheBytes < 0 {
		lock.Close()
		return nil, fmt.Errorf("open data directory %s: a negative cache size", dir)
	}
	if cfg.EventBounds.Count == 0 {
		cfg.EventBounds.Count = protocol.DefaultEventBounds.Count
	}
	if cfg.EventBounds.Bytes == 0 {
		cfg.EventBounds.Bytes = protocol.DefaultEventBounds.Bytes
	}
	if cfg.EventBounds.Count < 1 || cfg.EventBounds.Bytes < MinEventBytes {
		lock.Close()
		return nil, fmt.Errorf("open data directory %s: the event log's bounds must be at least 1 event and %d bytes a task", dir, MinEventBytes)
	}
	if cfg.TaskCacheBytes == 0 {
		cfg.TaskCacheBytes = DefaultTaskCacheBytes
	}
	if cfg.DBCacheBytes == 0 {
		cfg.DBCacheBytes = DefaultDBCacheBytes
	}
	if cfg.retryInterrupted == 0 {
		cfg.retryInterrupted = interruptedRetry
	}
	s := &Store{core: &core{dir: dir, lock: lock, floor: floor, log: cfg.Log, retryFirst: cfg.retryInterrupted, events: cfg.EventBounds, writerState: writerState{
		cache:  newTaskCache(max(cfg.TaskCacheBytes, 0)),
		writes: make(chan *writeReq, maxBatch), quit: make(chan struct{}), writerDone: make(chan struct{}),
	}}}
	s.readers = readConnections()
	s.dbCacheKiB = max(cfg.DBCacheBytes/int64(1+s.readers), minDBCacheBytes) >> 10
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
	q.Set("_pragma", fmt.Sprintf("cache_size(-%d)", s.dbCacheKiB))
	var err error
	if s.write, err = openDB("file:" + path + "?" + q.Encode()); err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	// Writes come only from the writer goroutine, on one connection.
	s.write.SetMaxOpenConns(1)
	s.write.SetMaxIdleConns(1)
	s.write.SetConnMaxLifetime(0)
	s.write.SetConnMaxIdleTime(0)
	w, err := newWriter(ctx, s.write)
	if err != nil {
		return s.openError(path, err)
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
	if s.read, err = openDB("file:" + path + "?" + q.Encode()); err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	n := s.readers
	s.readTxs = make(chan struct{}, n-1)
	s.read.SetMaxOpenConns(n)
	s.read.SetMaxIdleConns(n)
	s.read.SetConnMaxLifetime(0)
	s.read.SetConnMaxIdleTime(0)
	if err := s.read.PingContext(ctx); err != nil {
		return s.openError(path, err)
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
	if err := s.recoverInterruptedSteps(ctx); err != nil {
		return err
	}
	return s.sweepWorkspaceTemps(unsettled)
}

// openDB opens a pool of connections to the database of dsn that keep
// its log (agentrt.db-wal) and the log's index (agentrt.db-shm) when the
// last of them closes (SQLITE_FCNTL_PERSIST_WAL). SQLite removes both by
// default, and must then make the index again (32 KiB) at the next open
// before it can read anything: a data directory stopped cleanly and then
// filled could not be opened to serve reads. The log stays the size it
// grew to (a few MiB: it is checkpointed every thousand pages), after a
// checkpoint that copied all of it into agentrt.db, which is whole
// without it.
func openDB(dsn string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(persistWAL{c}), nil
}

// persistWAL makes each connection keep the log (openDB).
type persistWAL struct{ driver.Connector }

func (p persistWAL) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := p.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	fc, ok := conn.(sqlite.FileControl)
	if !ok {
		conn.Close()
		return nil, errors.New("the SQLite driver's connection has no file controls")
	}
	if _, err := fc.FileControlPersistWAL("main", 1); err != nil {
		conn.Close()
		return nil, fmt.Errorf("keep the database's log: %w", err)
	}
	return conn, nil
}

// openError is why the database at path could not be opened; on a full
// disk, what it needs. SQLite needs room for its log's index (32 KiB)
// when agentrt.db-shm is missing: a directory last closed by an agentrt
// before openDB kept it, or one copied without it.
func (s *Store) openError(path string, err error) error {
	if isDiskFull(err) {
		return fmt.Errorf("open database %s: the disk is full (%s free): SQLite needs at least 32 KiB to make %s-shm; free some space and start again: %w",
			path, s.freeSpace(), filepath.Base(path), err)
	}
	return fmt.Errorf("open database %s: %w", path, err)
}

// freeSpace is the free space on the data directory's file system, for
// messages.
func (s *Store) freeSpace() string {
	free, _, err := s.floor.statfs(s.dir)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%d bytes", free)
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
	if s.retryDone != nil {
		<-s.retryDone // it stops once the writer has
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
//
// A migration is a write, which a full disk refuses: the store does not
// open then (this agentrt cannot read a database it has not migrated),
// and the error says how much room to make (migrationError). The
// migration is not applied: each commits whole or not at all.
func (s *Store) migrate(ctx context.Context, w *writer, schema fs.FS) error {
	if _, err := w.conn.ExecContext(ctx,
		`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`); err != nil {
		return s.migrationError("the schema's version table", err)
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
			return s.migrationError(filepath.Base(name), err)
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

// migrationError is err, a migration's (what) failure; on a full disk it
// names the room to make. A migration may rewrite tables, and SQLite
// writes what it rewrites to the log before it commits: room for the
// database again (agentrt.db and its log as they are) is always enough.
func (s *Store) migrationError(what string, err error) error {
	if !isDiskFull(err) {
		return err
	}
	var size int64
	for _, name := range []string{"agentrt.db", "agentrt.db-wal"} {
		if fi, err := os.Stat(filepath.Join(s.dir, name)); err == nil {
			size += fi.Size()
		}
	}
	return fmt.Errorf("the disk is full (%s free), and upgrading the database's schema (%s) needs room to write: up to %d bytes, the database's size; it was not applied: free that much and start again: %w",
		s.freeSpace(), what, size, err)
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

// isDiskFull reports whether err is a full disk: the system's, SQLite's
// (its database or log could not grow), or SQLite's log index that could
// not grow (SQLite writes a byte to each new page of it, so that a full
// disk is an error rather than a fault on first use).
func isDiskFull(err error) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var serr *sqlite.Error
	if errors.As(err, &serr) {
		return serr.Code()&0xff == sqlite3.SQLITE_FULL || serr.Code() == sqlite3.SQLITE_IOERR_SHMSIZE
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
// placements it could not settle (the host's I/O failed, or a full disk
// refused a quarantined file's note), whose journal, staged bytes and
// replaced file stay for the next start: it logs them and goes on rather
// than refuse to start. Bytes it could not move into place or remove stay
// in staging/ for the next start too (a recorded artifact's are served
// from there meanwhile: OpenArtifact); it logs them once.
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
	var left []string
	var firstErr error
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".ws") || unsettled[name] {
			continue
		}
		taskID, rec, err := recorded(name)
		if err != nil {
			return nil, fmt.Errorf("recover staged %s: %w", name, err)
		}
		if rec {
			err = s.promote(taskID, name)
		} else {
			err = os.RemoveAll(filepath.Join(s.dir, "staging", name))
		}
		if err != nil {
			if left = append(left, name); len(left) == 1 {
				firstErr = err
			}
		}
	}
	if len(left) > 0 {
		s.log.Error("staged artifact bytes a stopped process left could not be moved into place or removed; they stay in staging/, are served from there, and the next start tries again",
			"files", len(left), "first", filepath.Join(s.dir, "staging", left[0]), "err", firstErr)
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
