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
	// failed is told why the mark the delay asked for was not written.
	failed func(error)
	// events, the step's, are recorded with the mark (Step.Events), and
	// told once it is written (stepEvents.marked).
	events []Event
	live   *stepEvents

	mu      sync.Mutex
	settled bool // written, or ended unwritten
	written bool
}

// markRunning starts the running mark of step, whose handler is about to
// run under ctx: at once for a planned step (an error is the step's: it
// must not run), after delay for a new one (failed is told if that write
// fails). The caller must end it.
func markRunning(ctx context.Context, store Store, step *Step, live *stepEvents, delay time.Duration, failed func(error)) (*runningMark, error) {
	m := &runningMark{store: store, ctx: ctx, step: step, failed: failed, live: live}
	if !step.Planned {
		m.events = append(m.events, StepEvent(EventStepCreated, step, nil))
	}
	m.events = append(m.events, StepEvent(EventStepRunning, step, nil))
	if step.Planned || delay <= 0 {
		if err := m.write(); err != nil {
			return nil, err
		}
		return m, nil
	}
	// An error here is not the step's: its handler goes on, the next
	// effect tries again, and its save writes the step all the same.
	m.timer = time.AfterFunc(delay, func() {
		if err := m.write(); err != nil {
			m.failed(err)
		}
	})
	return m, nil
}

// write writes the mark unless it is settled, and returns why it is not
// written: nil once it is. A failed write settles nothing: the next one
// tries again (a failed StartStep leaves nothing behind).
func (m *runningMark) write() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.settled {
		return nil
	}
	m.step.Events = m.events
	err := m.store.StartStep(m.ctx, m.step)
	m.step.Events = nil
	if err != nil {
		return err
	}
	m.settled, m.written = true, true
	m.live.marked(m.events)
	return nil
}

// end settles the mark when the handler has returned, waiting for a write
// under way, and says whether the mark was written: whether the store
// holds the step as running. It may be called again.
func (m *runningMark) end() (written bool) {
	if m.timer != nil {
		m.timer.Stop()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settled = true
	return m.written
}
