package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// AgentConfig configures an Agent.
type AgentConfig struct {
	// Name is the agent's name. Its tasks are its own: no other agent
	// sees them. Every step records it.
	Name string
	Log  *slog.Logger
}

// Agent is the Agent Protocol's behaviour over a Store and a Build (a
// plugin and its limits): it creates tasks, executes steps through the
// plugin and records everything. Steps of one task run one at a time;
// different tasks run concurrently. The build can be replaced while the
// agent serves (Serve).
type Agent struct {
	name  string
	store Store
	build buildSlot
	log   *slog.Logger
	locks taskLocks
}

// NewAgent returns an Agent serving build from store; a nil build serves
// none until Serve gives it one.
func NewAgent(store Store, build *Build, cfg AgentConfig) *Agent {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a := &Agent{name: cfg.Name, store: store, log: cfg.Log}
	if build != nil {
		a.Serve(build)
	}
	return a
}

// Name is the agent's name.
func (a *Agent) Name() string { return a.name }

// checkBudget refuses to run a handler for a task that has used up its
// plugin time (ELIMIT).
func checkBudget(l *Limits, t *Task) error {
	if max := l.MaxTaskTime; max > 0 && t.PluginTime >= max {
		return Errorf(ELIMIT, "task %s has used up its plugin time budget of %s", t.TaskID, max)
	}
	return nil
}

// run runs a handler for task t within what is left of the task's time
// budget, and returns how long it ran. No handler runs while the disk is at
// its floor (EINSUFFICIENT): what it did could not be recorded, its time
// not counted against the task's budget.
func (a *Agent) run(ctx context.Context, t *Task, call *Call) (int32, time.Duration, error) {
	if err := a.store.CheckSpace(ctx); err != nil {
		return 0, 0, err
	}
	max := call.build.Limits.MaxTaskTime
	remaining := max - t.PluginTime
	if max > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, remaining)
		defer cancel()
	}
	code, elapsed, err := call.build.Plugin.Run(ctx, call.handler, call)
	// The budget's deadline may pass before the plugin's time is counted
	// (while the call waits for an instance): that is the budget too.
	if ErrorCode(err) == ETIMEOUT && max > 0 && (elapsed >= remaining || errors.Is(ctx.Err(), context.DeadlineExceeded)) {
		err = Errorf(ETIMEOUT, "the task used up its plugin time budget of %s", max)
	}
	return code, elapsed, err
}

// handlerError names the handler in a plugin failure. Failures of our own
// (a full disk, say) pass through unchanged.
func handlerError(h Handler, err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		return &Error{Code: EINTERNAL, Message: "internal error"}
	}
	switch e.Code {
	case EPLUGIN, ETIMEOUT:
		// The cause may be the plugin's own text (its error, or its
		// function names in wazero's account of a trap): a client sees,
		// and a step records, at most maxPluginText of it.
		return &Error{Code: e.Code, Message: fmt.Sprintf("%s handler failed: %s", h, cutText(e.Message, maxPluginText))}
	}
	return e
}
