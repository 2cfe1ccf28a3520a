package storage

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentrt/agentrt/protocol"
)

// AutoMinFreeDisk, as Config.MinFreeDisk, keeps free the smaller of 1 GiB
// and 5% of the data directory's file system.
const AutoMinFreeDisk = -1

// diskFloor keeps a minimum of free space on the data directory's file
// system: a write that would go below it is refused with
// protocol.EINSUFFICIENT instead of filling the disk, so that the server,
// SQLite and the operator keep room to work with, however many tasks fill
// their quotas.
//
// Asking the file system (statfs, about a microsecond) for every write
// would cost create-task a few percent, so free space is estimated: the
// last answer minus what was reserved since, asked again once a second,
// and always before a write is refused. Space freed meanwhile is seen at
// the next asking. Writes reserved but not yet on disk (a workspace file
// of hundreds of MiB takes seconds) are kept apart, so that asking again
// does not forget them. Within the second, a reservation is a few atomic
// operations.
type diskFloor struct {
	dir      string
	min      int64 // 0: no floor
	interval time.Duration
	statfs   func(dir string) (free, total int64, err error)

	free     atomic.Int64 // estimated free bytes
	asked    atomic.Int64 // when free was last asked, in Unix nanoseconds
	inflight atomic.Int64 // bytes reserved whose writes have not finished
	mu       sync.Mutex   // one asking at a time
}

// newDiskFloor keeps floor bytes free on dir's file system
// (AutoMinFreeDisk: the smaller of 1 GiB and 5% of it; 0: no floor).
func newDiskFloor(dir string, floor int64) (*diskFloor, error) {
	d := &diskFloor{dir: dir, min: floor, statfs: statfs, interval: time.Second}
	free, total, err := d.statfs(dir)
	if err != nil {
		return nil, fmt.Errorf("free space of %s: %w", dir, err)
	}
	if floor == AutoMinFreeDisk {
		d.min = min(1<<30, total/20)
	}
	d.free.Store(free)
	d.asked.Store(time.Now().UnixNano())
	return d, nil
}

// Min is the floor in bytes (0: none).
func (d *diskFloor) Min() int64 { return d.min }

// reserve accounts for n bytes about to be written, refusing them when they
// would leave less than the floor free. Call done once the write has
// finished, written or not.
func (d *diskFloor) reserve(n int64) (done func(), err error) {
	if d == nil || d.min <= 0 {
		return func() {}, nil
	}
	d.inflight.Add(n)
	if time.Now().UnixNano()-d.asked.Load() < int64(d.interval) {
		if d.free.Add(-n) >= d.min {
			return d.release(n), nil
		}
		d.free.Add(n) // not taken: ask the file system before refusing
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	free, _, err := d.statfs(d.dir)
	if err != nil {
		d.inflight.Add(-n)
		return nil, fmt.Errorf("free space of %s: %w", d.dir, err)
	}
	free -= d.inflight.Load() // this write's bytes among them
	d.asked.Store(time.Now().UnixNano())
	if free < d.min {
		d.inflight.Add(-n)
		d.free.Store(free + n)
		return nil, &protocol.Error{Code: protocol.EINSUFFICIENT, Message: fmt.Sprintf(
			"the server's disk is full: %d bytes free, and it keeps at least %d free; nothing was saved", max(free+n, 0), d.min)}
	}
	d.free.Store(free)
	return d.release(n), nil
}

// release is reserve's done for n bytes: for none (a check before a write
// of unknown size, every saved step's), nothing to undo and nothing
// allocated.
func (d *diskFloor) release(n int64) func() {
	if n == 0 {
		return func() {}
	}
	return func() { d.inflight.Add(-n) }
}

// CheckSpace is protocol.EINSUFFICIENT when the disk is at the floor the
// store keeps free.
func (s *Store) CheckSpace(ctx context.Context) error {
	_, err := s.floor.reserve(0)
	return err
}

func statfs(dir string) (free, total int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil
}
