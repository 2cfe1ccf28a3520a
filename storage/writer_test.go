package storage

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/google/uuid"
)

func mustWrite(t *testing.T, s *Store, query string) {
	t.Helper()
	err := s.inTx(context.Background(), anyTasks, 1, func(w db) error {
		_, err := w.exec(query)
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func count(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.reader(context.Background()).scanOne(`SELECT COUNT(*) FROM `+table, nil, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// holdWriter starts a write that holds the writer until release is
// called, then runs then (if not nil) in its transaction; the write's
// result arrives on done. Writes asked for meanwhile queue behind it.
func holdWriter(t *testing.T, s *Store, then func(db) error) (release func(), done <-chan error) {
	t.Helper()
	running, hold := make(chan struct{}), make(chan struct{})
	result := make(chan error, 1)
	go func() {
		result <- s.inTx(context.Background(), anyTasks, 1, func(w db) error {
			close(running)
			<-hold
			if then != nil {
				return then(w)
			}
			return nil
		})
	}()
	<-running
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	return release, result
}

// waitQueuedWrites waits until n writes wait in the writer's queue.
func waitQueuedWrites(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(s.writes) < n {
		if len(s.writes) == cap(s.writes) {
			t.Fatalf("the writer's queue is full at %d writes: %d writes cannot wait there to be committed together", cap(s.writes), n)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes wait for the writer, want %d", len(s.writes), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestACommitRefusedByAConstraintIsRolledBackAndTheWriterGoesOn(t *testing.T) {
	s := mustOpen(t, "")
	ctx := context.Background()
	mustWrite(t, s, `CREATE TABLE p (id INTEGER PRIMARY KEY)`)
	mustWrite(t, s, `CREATE TABLE c (pid INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED)`)
	// The insert succeeds; the COMMIT is refused and leaves the
	// transaction open, for the writer to roll back.
	err := s.inTx(ctx, anyTasks, 1, func(w db) error {
		_, err := w.exec(`INSERT INTO c (pid) VALUES (42)`)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Fatalf("a commit that breaks a deferred reference: %v", err)
	}
	mustTask(t, s) // would fail if the transaction were still open
	if n := count(t, s, "c"); n != 0 {
		t.Errorf("the refused row is there: %d rows", n)
	}
	if n := count(t, s, "tasks"); n != 1 {
		t.Errorf("%d tasks after the refused commit, want 1", n)
	}
}

func TestAWriterWhoseRollbackFailsStartsOverOnANewConnection(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	ctx := context.Background()
	mustWrite(t, s, `CREATE TABLE refuse (x INTEGER NOT NULL)`)
	broken := errors.New("failed on purpose")
	err := s.inTx(ctx, anyTasks, 1, func(d db) error {
		if _, err := d.exec(`INSERT INTO schema_migrations (version, name) VALUES (100, 'half done')`); err != nil {
			return err
		}
		// Make the ROLLBACK that follows fail while the transaction
		// is open: the connection can no longer be trusted.
		d.w.stmts["ROLLBACK"].Close()
		st, err := d.w.conn.PrepareContext(ctx, `INSERT INTO refuse (x) VALUES (NULL)`)
		if err != nil {
			return err
		}
		d.w.stmts["ROLLBACK"] = st
		return broken
	})
	if !errors.Is(err, broken) {
		t.Fatalf("the write whose rollback failed: %v", err)
	}
	id := mustTask(t, s) // on a new connection, outside any transaction
	if n := count(t, s, "schema_migrations WHERE version = 100"); n != 0 {
		t.Errorf("the failed write was kept")
	}
	s.Close()
	s = mustOpen(t, dir)
	if _, err := s.GetTask(ctx, id); err != nil {
		t.Errorf("the task written on the new connection: %v", err)
	}
}

func TestWritesQueuedWhenTheStoreClosesFailInsteadOfHanging(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	ctx := context.Background()
	// A write in progress holds the writer while others queue behind it.
	first := uuid.NewString()
	release, firstErr := holdWriter(t, s, func(w db) error {
		_, err := w.exec(`INSERT INTO tasks (id, additional_input, created_at) VALUES (?, '{}', 0)`, first)
		return err
	})
	const n = 50
	ids := make([]string, n)
	errs := make(chan error, n)
	for i := range n {
		ids[i] = uuid.NewString()
		go func() {
			errs <- s.CreateTask(ctx, &protocol.Task{TaskID: ids[i], AdditionalInput: []byte("{}"), CreatedAt: time.Now()}, nil, nil)
		}()
	}
	waitQueuedWrites(t, s, n)
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	<-s.quit
	release()

	deadline := time.After(20 * time.Second)
	for range n {
		select {
		case err := <-errs:
			if err == nil || !strings.Contains(err.Error(), "closed") {
				t.Errorf("a write queued behind the close: %v, want the store is closed", err)
			}
		case <-deadline:
			t.Fatal("writes queued when the store closed never returned")
		}
	}
	if err := <-firstErr; err != nil {
		t.Errorf("the write in progress at the close: %v", err)
	}
	<-closed

	s = mustOpen(t, dir)
	if _, err := s.GetTask(ctx, first); err != nil {
		t.Errorf("the write in progress at the close is gone: %v", err)
	}
	if got := count(t, s, "tasks"); got != 1 {
		t.Errorf("%d tasks after the close, want only the one in progress", got)
	}
}

func TestAWriteOfManyRowsCommitsWithoutTheWritesQueuedBehindIt(t *testing.T) {
	s := mustOpen(t, "")
	ctx := context.Background()
	// A write in progress holds the writer while others queue behind it.
	release, _ := holdWriter(t, s, nil)
	heavy := uuid.NewString()
	results := make(chan error, 11)
	go func() {
		results <- s.inTx(ctx, anyTasks, maxBatchRows, func(w db) error {
			_, err := w.exec(`INSERT INTO tasks (id, additional_input, created_at) VALUES (?, '{}', 0)`, heavy)
			return err
		})
	}()
	waitQueuedWrites(t, s, 1)
	// Writes queued after it see it committed: they run in a transaction
	// of their own, not in the heavy write's.
	var mu sync.Mutex
	var sawHeavy []int
	for range 10 {
		go func() {
			results <- s.inTx(ctx, anyTasks, 1, func(w db) error {
				var n int
				if err := s.reader(ctx).scanOne(`SELECT COUNT(*) FROM tasks WHERE id = ?`, []any{heavy}, &n); err != nil {
					return err
				}
				mu.Lock()
				sawHeavy = append(sawHeavy, n)
				mu.Unlock()
				return nil
			})
		}()
	}
	waitQueuedWrites(t, s, 11)
	release()
	for range 11 {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	for _, n := range sawHeavy {
		if n != 1 {
			t.Fatalf("writes queued behind a write of %d rows ran in its transaction (they saw it uncommitted: %v)", maxBatchRows, sawHeavy)
		}
	}
}

func TestACommittedWriteIsNotKeptReachableByTheWriter(t *testing.T) {
	s := mustOpen(t, "")
	ctx := context.Background()
	collected := make(chan struct{})
	func() {
		big := make([]byte, 1<<20) // what a write holds: a step's output, say
		runtime.SetFinalizer(&big[0], func(*byte) { close(collected) })
		err := s.inTx(ctx, anyTasks, 1, func(w db) error {
			_, err := w.exec(`INSERT INTO tasks (id, additional_input, created_at) VALUES (?, '{}', ?)`, uuid.NewString(), len(big))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}()
	// No write follows: nothing else would overwrite the writer's batch.
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-deadline:
			t.Fatal("the memory of a committed write is still reachable after it returned")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// syncLevel reads the writer connection's synchronous setting with a
// statement prepared anew (one prepared before answers with the value of
// its preparation): 2 is FULL, 1 NORMAL.
func syncLevel(w db) (int, error) {
	var v int
	err := w.w.conn.QueryRowContext(w.ctx, "PRAGMA synchronous").Scan(&v)
	return v, err
}

func TestAnUnsyncedWriteCommitsWithoutASyncAndTheWritesAfterItWithOne(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	// level makes a write, unsynced or not, and says under which
	// synchronous setting it ran.
	level := func(unsynced bool) (int, error) {
		write := s.inTx
		if unsynced {
			write = s.inTxUnsynced
		}
		var v int
		err := write(context.Background(), anyTasks, 1, func(w db) (err error) { v, err = syncLevel(w); return err })
		return v, err
	}
	want := map[bool]int{false: 2, true: 1}
	for i, unsynced := range []bool{false, true, false, true} {
		got, err := level(unsynced)
		if err != nil {
			t.Fatal(err)
		}
		if got != want[unsynced] {
			t.Errorf("write %d (unsynced %v) ran under synchronous=%d, want %d", i, unsynced, got, want[unsynced])
		}
	}

	// Queued together, each still commits as asked.
	release, held := holdWriter(t, s, nil)
	type result struct {
		unsynced bool
		level    int
	}
	results := make(chan result, 2)
	for _, unsynced := range []bool{true, false} {
		go func() {
			v, err := level(unsynced)
			if err != nil {
				t.Error(err)
			}
			results <- result{unsynced, v}
		}()
	}
	waitQueuedWrites(t, s, 2)
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := <-results
		if r.level != want[r.unsynced] {
			t.Errorf("queued with a synced write, a write (unsynced %v) ran under synchronous=%d, want %d", r.unsynced, r.level, want[r.unsynced])
		}
	}
}

// Read transactions, as many as may be open at once, that then each
// prepare a statement the pool has not seen all finish: had they held
// every connection of the read pool, each would wait for another to
// prepare on, and none would be given back.
func TestReadTransactionsLeaveAConnectionToPrepareOn(t *testing.T) {
	s := mustOpen(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const txs = 40
	inside, release := make(chan struct{}, txs), make(chan struct{})
	errs := make(chan error, txs)
	for i := range txs {
		go func() {
			errs <- s.readTx(ctx, func(r db) error {
				inside <- struct{}{}
				<-release
				var v int
				return r.scanOne(fmt.Sprintf("SELECT %d", i), nil, &v)
			})
		}()
	}
	for range cap(s.readTxs) { // every transaction that may be open is
		<-inside
	}
	close(release)
	for range txs {
		if err := <-errs; err != nil {
			t.Fatalf("a read transaction preparing a statement: %v", err)
		}
	}
}
