package storage

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// db runs statements on a connection pool or in a transaction. Every
// statement is prepared once per pool and reused: parsing SQL was a fifth
// of the server's time per step before.
type db struct {
	ctx  context.Context
	s    *Store
	pool *sql.DB
	tx   *sql.Tx
}

type stmtKey struct {
	pool  *sql.DB
	query string
}

// stmt returns query prepared for d.
func (d db) stmt(query string) (*sql.Stmt, error) {
	key := stmtKey{d.pool, query}
	v, ok := d.s.stmts.Load(key)
	if !ok {
		st, err := d.pool.PrepareContext(d.ctx, query)
		if err != nil {
			return nil, err
		}
		if v, ok = d.s.stmts.LoadOrStore(key, st); ok {
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
	return db{ctx: ctx, s: s, pool: s.read}
}

// readTx runs fn in a read transaction: its queries see one snapshot.
func (s *Store) readTx(ctx context.Context, fn func(db) error) error {
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(db{ctx: ctx, s: s, pool: s.read, tx: tx})
}

// Group commit. Every write goes through one goroutine, which runs the
// writes waiting for it in one transaction and commits them with one fsync
// (a failing write is retried alone, so that it fails alone).
// Each write returns when its transaction is durable; under load many
// writes share a sync instead of queueing for one each.

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

type writeReq struct {
	fn   func(db) error
	done chan error
}

var errClosed = errors.New("the store is closed")

// inTx runs fn in a write transaction and returns once the transaction is
// committed and synced to disk. fn may run together with other writes in
// one transaction; its own changes are kept or dropped as one (a
// savepoint). ctx is not used for the write itself: once asked for, a
// write happens, so that what a client was told is what is on disk.
func (s *Store) inTx(ctx context.Context, fn func(db) error) error {
	req := &writeReq{fn: fn, done: make(chan error, 1)}
	select {
	case s.writes <- req:
	case <-s.quit:
		return errClosed
	}
	if err := <-req.done; err != nil {
		return storageError("write", err)
	}
	return nil
}

// writeLoop is the writer goroutine: it takes the waiting writes, up to
// maxBatch, and commits them together.
func (s *Store) writeLoop() {
	defer close(s.writerDone)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		select {
		case req := <-s.writes:
			batch = append(batch[:0], req)
		case <-s.quit:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case req := <-s.writes:
				batch = append(batch, req)
			default:
				break more
			}
		}
		s.commit(batch)
	}
}

// commit runs a batch of writes in one transaction. Writes rarely fail, so
// the batch runs without savepoints; if one write fails, the transaction is
// rolled back and each write of the batch runs again in a transaction of
// its own, so that the failure stays its own.
func (s *Store) commit(batch []*writeReq) {
	if len(batch) > 1 {
		if err := s.runTx(batch); err == nil {
			for _, req := range batch {
				req.done <- nil
			}
			return
		}
	}
	for _, req := range batch {
		req.done <- s.runTx([]*writeReq{req})
	}
}

// runTx runs writes in one transaction and commits it, or rolls it back
// at the first error.
func (s *Store) runTx(writes []*writeReq) error {
	ctx := context.Background()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	w := db{ctx: ctx, s: s, pool: s.write, tx: tx}
	for _, req := range writes {
		if err := req.fn(w); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// stopWriter stops the writer goroutine after the write in progress; later
// writes fail with errClosed.
func (s *Store) stopWriter() {
	s.quitOnce.Do(func() { close(s.quit) })
	<-s.writerDone
}

// writerState is the group commit's part of a Store.
type writerState struct {
	writes     chan *writeReq
	quit       chan struct{}
	quitOnce   sync.Once
	writerDone chan struct{}
	// writerStarted: Open may fail before the writer goroutine starts.
	writerStarted bool
	stmts         sync.Map // stmtKey → *sql.Stmt
}
