package protocol

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"
)

// AgentConfig configures an Agent.
type AgentConfig struct {
	// Name is the agent's name. Its tasks are its own: no other agent
	// sees them. Every step records it.
	Name string
	// Log receives what the agent has to say. Requests' contexts are
	// passed with every line (the request's id, say, for a handler that
	// reads it).
	Log *slog.Logger
	// Observer, when set, is told of every handler call.
	Observer Observer
	// StepTimeout is the time limit of a step run in the background
	// (ExecuteStepAsync); 0 is DefaultStepTimeout.
	StepTimeout time.Duration
	// Background, when set, bounds the steps run in the background by
	// every agent that shares it, beside each agent's own bound
	// (Limits.MaxBackgroundSteps).
	Background *BackgroundSlots
	// CancelOnDisconnect cancels a synchronous step whose client went
	// away before its answer (ECANCELLED, as CancelStep does). Unset, the
	// step runs to its end and is recorded, for the client to read later.
	CancelOnDisconnect bool
	// RunningMarkDelay is how long a new step's handler runs before the
	// step is marked running in the store, if it has not by then done
	// what outlasts its call (runningMark); 0 is
	// DefaultRunningMarkDelay, a negative delay marks it before the
	// handler runs.
	RunningMarkDelay time.Duration
}

// Observer is told what an agent's handler calls did: what metrics count.
// Its methods must be quick and safe for concurrent use. One that is also
// a TaskWaitObserver is told of the requests that wait for a busy task.
type Observer interface {
	// HandlerDone says that a call of handler h of agent ran for d and
	// ended well (cause "") or failed for cause (a Cause constant).
	HandlerDone(agent string, h Handler, d time.Duration, cause string)
}

// Agent is the Agent Protocol's behaviour over a Store and a Build (a
// plugin and its limits): it creates tasks, executes steps through the
// plugin and records everything. Steps of one task run one at a time;
// different tasks run concurrently. The build can be replaced while the
// agent serves (Serve).
type Agent struct {
	name     string
	store    Store
	build    buildSlot
	log      *slog.Logger
	observer Observer
	// markDelay is AgentConfig.RunningMarkDelay.
	markDelay time.Duration
	locks     taskLocks
	tasks     taskCalls
	// feed brings watchers the events of their tasks.
	feed feed
	// bg is the steps running in the background; slots the server's
	// bound on them, if any.
	bg          background
	slots       *BackgroundSlots
	stepTimeout time.Duration
	// cancelOnDisconnect is AgentConfig.CancelOnDisconnect.
	cancelOnDisconnect bool
	// stopping is cancelled by Interrupt, with the reason as its cause:
	// every handler call runs under it.
	stopping context.Context
	stop     context.CancelCauseFunc
}

// NewAgent returns an Agent serving build from store; a nil build serves
// none until Serve gives it one.
func NewAgent(store Store, build *Build, cfg AgentConfig) *Agent {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.RunningMarkDelay == 0 {
		cfg.RunningMarkDelay = DefaultRunningMarkDelay
	}
	a := &Agent{name: cfg.Name, store: store, log: cfg.Log, observer: cfg.Observer, markDelay: cfg.RunningMarkDelay}
	a.locks.observe(cfg.Name, cfg.Observer)
	a.feed.store = store
	a.slots, a.stepTimeout, a.cancelOnDisconnect = cfg.Background, cfg.StepTimeout, cfg.CancelOnDisconnect
	if a.stepTimeout <= 0 {
		a.stepTimeout = DefaultStepTimeout
	}
	a.stopping, a.stop = context.WithCancelCause(context.Background())
	if build != nil {
		a.Serve(build)
	}
	return a
}

// Interrupt stops every handler call running, and every one that starts
// from now on, with why: a step so stopped is recorded as failed with the
// error code EINTERRUPTED and why as its message, and its client is
// answered the same. The server calls it when it shuts down and its
// steps did not end in the time it gave them.
func (a *Agent) Interrupt(why string) {
	a.stop(&Error{Code: EINTERRUPTED, Message: why, RetryAfter: 1})
}

// observe tells the observer, if any, of a handler call that ran for d
// and ended with err, its result read: calls that did not run (err is
// not a plugin's failure) are not told.
func (a *Agent) observe(h Handler, d time.Duration, err error) {
	if a.observer == nil {
		return
	}
	cause := ""
	if err != nil {
		f, ok := errors.AsType[*PluginFailure](err)
		if !ok {
			return
		}
		cause = f.Cause
	}
	a.observer.HandlerDone(a.name, h, d, cause)
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
	// The budget is a deadline the plugin keeps (Call.Deadline), with
	// its own call timeout: one timer a call, not two.
	max := call.build.Limits.MaxTaskTime
	if max > 0 {
		call.deadline = time.Now().Add(max - t.PluginTime)
	}
	code, elapsed, err := call.build.Plugin.Run(ctx, call.handler, call)
	err = call.explainFailure(err)
	a.logCall(ctx, call, elapsed)
	// The budget's deadline may pass before the plugin's time is counted
	// (while the call waits for an instance): that is the budget too.
	if f, ok := errors.AsType[*PluginFailure](err); ok && f.Cause == CauseTimeout && max > 0 && !time.Now().Before(call.deadline) {
		err = NewPluginFailure(CauseTimeout, "the task used up its plugin time budget of %s", max)
	}
	return code, elapsed, err
}

// callContext is the context a handler call for a request runs under: it
// keeps ctx's values, and ends when the agent is interrupted (Interrupt)
// and, unless detached, when ctx ends; its cause says why.
func (a *Agent) callContext(ctx context.Context, detached bool) (context.Context, context.CancelCauseFunc) {
	if detached {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(a.stopping, func() { cancel(context.Cause(a.stopping)) })
	return ctx, func(cause error) {
		stop()
		cancel(cause)
	}
}

// stopCause is why ctx, a callContext, was stopped: the *Error given to
// Interrupt or to the task's stop (a deletion), nil if it was not.
func stopCause(ctx context.Context) *Error {
	if ctx.Err() == nil {
		return nil
	}
	e, _ := errors.AsType[*Error](context.Cause(ctx))
	return e
}

// handlerError names handler h in a plugin's failure (PluginFailure.of).
// Failures of our own (a full disk, say) pass through unchanged.
func handlerError(h Handler, err error) error {
	if f, ok := errors.AsType[*PluginFailure](err); ok {
		return f.of(h)
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	return &Error{Code: EINTERNAL, Message: "internal error"}
}
