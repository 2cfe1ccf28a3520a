package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"sync"
)

// db runs statements either on the read pool (in a read transaction when
// tx is set) or, for the writer goroutine, on the writer's connection.
// Every statement is prepared once and reused: parsing SQL was a fifth of
// the server's time per step before.
type db struct {
	ctx context.Context
	s   *Store
	tx  *sql.Tx // a read transaction, or nil
	w   *writer // the writer's connection, or nil
}

// stmt returns query prepared for d.
func (d db) stmt(query string) (*sql.Stmt, error) {
	if d.w != nil {
		return d.w.stmt(d.ctx, query)
	}
	v, ok := d.s.stmts.Load(query)
	if !ok {
		st, err := d.s.read.PrepareContext(d.ctx, query)
		if err != nil {
			return nil, err
		}
		if v, ok = d.s.stmts.LoadOrStore(query, st); ok {
			st.Close() // another goroutine won
		} else {
			v = st
		}
	}
	st := v.(*sql.Stmt)
	if d.tx != nil {
		return d.tx.StmtContext(d.ctx, st), nil
	}
	return st, nil
}

func (d db) exec(query string, args ...any) (sql.Result, error) {
	st, err := d.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(d.ctx, args...)
}

func (d db) query(query string, args ...any) (*sql.Rows, error) {
	st, err := d.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(d.ctx, args...)
}

// scanOne scans the first row of query into dest; sql.ErrNoRows if none.
func (d db) scanOne(query string, args []any, dest ...any) error {
	rows, err := d.query(query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

// reader runs queries on the read pool.
func (s *Store) reader(ctx context.Context) db {
	return db{ctx: ctx, s: s}
}

// readTx runs fn in a read transaction: its queries see one snapshot.
//
// A transaction holds a connection of the read pool while a statement
// its queries use for the first time is prepared on the pool, on another:
// read transactions take at most all the pool's connections but one
// (readTxs), so that the preparing always finds one. Had every
// connection been held, each by a transaction waiting to prepare, none
// would have been given back.
func (s *Store) readTx(ctx context.Context, fn func(db) error) error {
	select {
	case s.readTxs <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.readTxs }()
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(db{ctx: ctx, s: s, tx: tx})
}

// Group commit. Every write goes through one goroutine, which runs the
// writes waiting for it in one transaction and commits them with one fsync
// (a failing write is retried alone, so that it fails alone).
// Each write returns when its transaction is durable; under load many
// writes share a sync instead of queueing for one each.

// maxBatch bounds the writes of one transaction, and maxBatchRows the
// rows they write: a batch is closed once it holds either. A write of many
// rows (a task with its planned steps, a step with its artifacts) so
// commits alone, or with few others, and the writes queued behind it go in
// the next transaction, a few milliseconds later, instead of waiting for
// hundreds of such writes to commit together.
const (
	maxBatch     = 256
	maxBatchRows = 1024
)

type writeReq struct {
	// task is a task's row the write inserts (CreateTask), or nil; the
	// writer inserts the rows of consecutive writes together, before fn
	// runs (insertTasks).
	task   *taskRow
	fn     func(db) error // nil when task is all the write is
	effect taskEffect     // what the write does to the cached tasks
	rows   int            // rows the write inserts or updates, about
	done   chan error     // buffered: the writer never waits on a client
	// unsynced writes are answered once written, without waiting for
	// the disk (inTxUnsynced).
	unsynced bool
}

var errClosed = errors.New("the store is closed")

// inTx runs fn, which writes about rows rows, in a write transaction and
// returns once the transaction is committed and synced to disk. fn may run together with other writes in
// one transaction; its own changes are kept or dropped as one. ctx is not
// used for the write itself: once asked for, a write happens, so that what
// a client was told is what is on disk.
//
// e says which task the write changes, and how (taskEffect).
func (s *Store) inTx(ctx context.Context, e taskEffect, rows int, fn func(db) error) error {
	return s.write1(&writeReq{fn: fn, effect: e, rows: max(rows, 1), done: make(chan error, 1)})
}

// inTxUnsynced is inTx for a write that need survive the process, not the
// machine: it returns once the transaction is committed to the database's
// log, in the operating system's cache, without waiting for the disk. A
// process killed after it returns keeps the write; a power cut may lose
// it. The log keeps writes in order, so a synced write that follows it
// makes it durable too; nothing may be acknowledged to a client on its
// strength alone.
//
// The writer commits the unsynced writes waiting for it before the synced
// ones queued with them, in a transaction of their own: an unsynced write
// must not depend on a synced write that is not yet acknowledged.
func (s *Store) inTxUnsynced(ctx context.Context, e taskEffect, rows int, fn func(db) error) error {
	return s.write1(&writeReq{fn: fn, effect: e, rows: max(rows, 1), done: make(chan error, 1), unsynced: true})
}

// write1 hands req to the writer and waits for its answer, unless the
// disk is at its floor.
func (s *Store) write1(req *writeReq) error {
	if _, err := s.floor.reserve(0); err != nil {
		return err
	}
	return s.hand(req)
}

// hand is write1 without the disk floor: for the store's own recovery
// writes, a few rows each, which the floor keeps room for.
func (s *Store) hand(req *writeReq) error {
	select {
	case s.writes <- req:
	case <-s.quit:
		return errClosed
	}
	var err error
	select {
	case err = <-req.done:
	case <-s.writerDone:
		// The writer stopped; it may have finished this write first.
		select {
		case err = <-req.done:
		default:
			err = errClosed
		}
	}
	if err != nil {
		return storageError("write", err)
	}
	return nil
}

// writeLoop is the writer goroutine: it takes the waiting writes, up to
// maxBatch of them or maxBatchRows rows, and commits them together. Writes are queued in a buffered
// channel: a client hands its write over and is woken once, by the answer
// (an unbuffered hand-over woke it a second time, for nothing).
func (s *Store) writeLoop(w *writer) {
	defer close(s.writerDone)
	defer w.close()
	batch := make([]*writeReq, 0, maxBatch)
	for {
		select { // stopping comes before writes still queued
		case <-s.quit:
			return
		default:
		}
		select {
		case <-s.quit:
			return
		case req := <-s.writes:
			batch = append(batch[:0], req)
		}
		rows := batch[0].rows
	more:
		for len(batch) < maxBatch && rows < maxBatchRows {
			select {
			case req := <-s.writes:
				batch = append(batch, req)
				rows += req.rows
			default:
				break more
			}
		}
		if err := s.markInterrupted(w); err != nil {
			// Nothing is written before the steps a dead process left
			// running are marked (markInterrupted).
			for _, req := range batch {
				req.done <- err
			}
		} else {
			s.commitBatch(w, batch)
		}
		// The batch's array is reused: drop its requests, whose closures
		// hold what they wrote (a step's output, its log), so that they
		// are not kept reachable until a later batch overwrites them.
		clear(batch)
	}
}

// commitBatch commits a batch's unsynced writes, then its synced ones.
func (s *Store) commitBatch(w *writer, batch []*writeReq) {
	synced := batch
	if slices.ContainsFunc(batch, func(r *writeReq) bool { return r.unsynced }) {
		var unsynced []*writeReq
		synced = nil
		for _, r := range batch {
			if r.unsynced {
				unsynced = append(unsynced, r)
			} else {
				synced = append(synced, r)
			}
		}
		s.commitUnsynced(w, unsynced)
	}
	if len(synced) > 0 {
		s.commit(w, synced)
	}
}

// commitUnsynced commits writes without syncing: synchronous=NORMAL, which
// in WAL mode writes a commit to the log and syncs nothing (but at a
// checkpoint).
func (s *Store) commitUnsynced(w *writer, batch []*writeReq) {
	ctx := context.Background()
	if err := w.exec(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		for _, req := range batch {
			req.done <- err
		}
		return
	}
	s.commit(w, batch)
	if err := w.exec(ctx, "PRAGMA synchronous = FULL"); err != nil {
		// Every later commit must be synced: a connection that cannot
		// be told so is not used again.
		s.log.Error("restoring synchronous=FULL failed; reconnecting", "err", err)
		if w.conn != nil {
			w.discard()
		}
	}
}

// commit runs a batch of writes in one transaction. Writes rarely fail, so
// the batch runs without savepoints; if one write fails, the transaction is
// rolled back and each write of the batch runs again in a transaction of
// its own, so that the failure stays its own. A transaction that could not
// even begin (the database busy or its connection broken) is no write's
// fault, and every write of the batch gets its error.
//
// The cached tasks the batch changes are settled (taskCache) before any
// write of it is answered.
func (s *Store) commit(w *writer, batch []*writeReq) {
	effects := make([]taskEffect, len(batch))
	for i, req := range batch {
		effects[i] = req.effect
	}
	s.cache.begin(effects)
	errs := make([]error, len(batch))
	began, err := false, error(nil)
	if len(batch) > 1 {
		began, err = s.runTx(w, batch)
		for i := range errs {
			errs[i] = err
		}
	}
	if len(batch) == 1 || err != nil && began {
		for i, req := range batch {
			_, errs[i] = s.runTx(w, []*writeReq{req})
		}
	}
	s.cache.end(effects, errs)
	for i, req := range batch {
		req.done <- errs[i]
	}
}

// runTx runs writes in one transaction and commits it, or rolls it back
// at the first error. The task rows of consecutive writes are inserted
// together (insertTasks), each before its own write's fn runs and after
// the fn of every write before it.
func (s *Store) runTx(w *writer, writes []*writeReq) (began bool, err error) {
	ctx := context.Background()
	d := db{ctx: ctx, s: s, w: w}
	if slices.ContainsFunc(writes, func(r *writeReq) bool { return r.task == nil }) {
		w.forgetTasks()
	}
	defer func() {
		if err != nil {
			w.forgetTasks()
		}
	}()
	return w.transact(ctx, func() error {
		from := 0 // writes[from:] may have task rows not yet inserted
		for i, req := range writes {
			if req.fn == nil {
				continue
			}
			if err := insertTasks(d, writes[from:i+1]); err != nil {
				return err
			}
			from = i + 1
			if err := req.fn(d); err != nil {
				return err
			}
		}
		return insertTasks(d, writes[from:])
	})
}

// stopWriter stops the writer goroutine after the write in progress; later
// writes fail with errClosed.
func (s *Store) stopWriter() {
	s.quitOnce.Do(func() { close(s.quit) })
	<-s.writerDone
}

// writer is the one connection that writes. The writer goroutine owns it
// (and migrate, before that goroutine starts). Its statements, BEGIN and
// COMMIT included, are prepared once: database/sql's Tx would parse both
// again for every transaction.
type writer struct {
	pool  *sql.DB
	conn  *sql.Conn // nil after a failure broke it, until the next use
	stmts map[string]*sql.Stmt
	// What insertTasks fills for each batch, kept for the next.
	taskRows []*taskRow
	taskArgs []any
	// What insertTasks read of the tasks, kept from one transaction to
	// the next while only tasks are created (forgetTasks): the highest
	// seq given, 0 when unknown, and the position each agent's next task
	// takes.
	taskSeq      int64
	nextPosition map[string]int64
}

// forgetTasks drops what the writer knows of the tasks table: a write
// that is not a task's creation may insert, delete or number tasks, and a
// transaction rolled back may have given seqs and positions it did not
// keep.
func (w *writer) forgetTasks() {
	w.taskSeq = 0
	clear(w.nextPosition)
}

// txStatements are prepared as soon as a connection opens: ending a failed
// transaction must not depend on preparing a statement. SQLite applies a
// PRAGMA that sets synchronous when it prepares it (and again each time
// it runs): preparing these leaves the connection at FULL, the last,
// whatever the connection string said.
var txStatements = []string{"BEGIN IMMEDIATE", "COMMIT", "ROLLBACK", "PRAGMA synchronous = NORMAL", "PRAGMA synchronous = FULL"}

func newWriter(ctx context.Context, pool *sql.DB) (*writer, error) {
	w := &writer{pool: pool, nextPosition: map[string]int64{}}
	if err := w.connect(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *writer) connect(ctx context.Context) error {
	conn, err := w.pool.Conn(ctx)
	if err != nil {
		return err
	}
	w.conn, w.stmts = conn, map[string]*sql.Stmt{}
	for _, q := range txStatements {
		if _, err := w.stmt(ctx, q); err != nil {
			w.discard()
			return err
		}
	}
	return nil
}

func (w *writer) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if w.conn == nil {
		if err := w.connect(ctx); err != nil {
			return nil, err
		}
	}
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = st
	return st, nil
}

func (w *writer) exec(ctx context.Context, query string) error {
	st, err := w.stmt(ctx, query)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx)
	return err
}

// transact runs fn in a transaction and commits it; if fn or the commit
// fails, the transaction is rolled back. began reports whether the
// transaction started.
func (w *writer) transact(ctx context.Context, fn func() error) (began bool, err error) {
	if err := w.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		w.rollback(ctx)
		return false, err
	}
	err = fn()
	if err == nil {
		err = w.exec(ctx, "COMMIT")
	}
	if err != nil {
		w.rollback(ctx)
	}
	return true, err
}

// rollback ends whatever transaction a failure left open (a COMMIT refused
// by a constraint or a busy database leaves it open). After some failures,
// a full disk say, SQLite has rolled back already and ROLLBACK finds no
// transaction. If ROLLBACK fails otherwise, the connection cannot be
// trusted to be outside a transaction: it is dropped, and the next
// statement opens a new one.
func (w *writer) rollback(ctx context.Context) {
	if w.conn == nil {
		return
	}
	err := w.exec(ctx, "ROLLBACK")
	if err != nil && !strings.Contains(err.Error(), "no transaction is active") {
		w.discard()
	}
}

// discard closes the connection for good: database/sql closes a
// connection that reports driver.ErrBadConn instead of reusing it.
func (w *writer) discard() {
	w.closeStmts()
	w.conn.Raw(func(any) error { return driver.ErrBadConn })
	w.conn.Close()
	w.conn, w.stmts = nil, nil
}

func (w *writer) close() {
	if w.conn != nil {
		w.closeStmts()
		w.conn.Close()
	}
}

// closeStmts closes the statements prepared on the connection. They must
// be closed before the connection: SQLite keeps a connection closed under
// open statements, and its locks, alive until they are finalized.
func (w *writer) closeStmts() {
	for _, st := range w.stmts {
		st.Close()
	}
}

// writerState is the group commit's part of a Store.
type writerState struct {
	writes     chan *writeReq
	quit       chan struct{}
	quitOnce   sync.Once
	writerDone chan struct{}
	// writerStarted: Open may fail before the writer goroutine starts.
	writerStarted bool
	stmts         sync.Map // query → *sql.Stmt on the read pool
	// readTxs counts the read transactions open (readTx): one fewer
	// than the read pool's connections.
	readTxs chan struct{}
	// cache holds tasks as GetTask read them; the writer keeps it true.
	cache *taskCache
}
