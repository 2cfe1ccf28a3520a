package protocol

import (
	"context"
	"sync"
	"time"
)

// DefaultRunningMarkDelay is how long a new step's handler runs before the
// step is marked running in the store, unless it does sooner what
// outlasts its call (AgentConfig.RunningMarkDelay).
const DefaultRunningMarkDelay = 10 * time.Millisecond

// runningMark writes, once, the mark that a step is running
// (Store.StartStep), so that a process that dies while the step's
// handler runs leaves it to be marked failed at the next start. It is
// written when the handler has run for the mark's delay, or before it
// does what outlasts its call (a workspace write or removal, an
// outbound request: Call.BeforeEffect), whichever comes first. A step
// that ends sooner having done neither is recorded by its save alone, one
// write where it would take two: a process that dies while it runs
// leaves no trace of it, and nothing it did outlasts it (its log, its
// result and its artifacts are kept by the save), and its client, which
// had no answer, knows no step id.
//
// A planned step is marked before its handler runs: its mark is also its
// claim on the planned row.
type runningMark struct {
	store Store
	ctx   context.Context
	step  *Step
	timer *time.Timer

	mu      sync.Mutex
	settled bool // written, failed, or ended unwritten
	written bool
	err     error // why it was not written
}

// markRunning starts the running mark of step, whose handler is about to
// run under ctx: at once for a planned step (an error is the step's: it
// must not run), after delay for a new one.
func markRunning(ctx context.Context, store Store, step *Step, delay time.Duration) (*runningMark, error) {
	m := &runningMark{store: store, ctx: ctx, step: step}
	if step.Planned || delay <= 0 {
		if err := m.write(); err != nil {
			return nil, err
		}
		return m, nil
	}
	// An error here is not the step's: its handler goes on, and its save
	// writes it all the same.
	m.timer = time.AfterFunc(delay, func() { m.write() })
	return m, nil
}

// write writes the mark unless it is settled, and returns why it is not
// written: nil once it is.
func (m *runningMark) write() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.settled {
		m.settled = true
		m.err = m.store.StartStep(m.ctx, m.step)
		m.written = m.err == nil
	}
	return m.err
}

// end settles the mark when the handler has returned, waiting for a write
// under way, and says whether the mark was written: whether the store
// holds the step as running.
func (m *runningMark) end() (written bool) {
	if m.timer != nil {
		m.timer.Stop()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settled = true
	return m.written
}
