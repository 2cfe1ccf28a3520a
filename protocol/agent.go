package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// AgentConfig configures an Agent.
type AgentConfig struct {
	Limits Limits
	// PluginConfig is the operator's settings the plugin reads with the
	// host API's config function. Not for secrets: plugins log freely.
	PluginConfig map[string]string
	Log          *slog.Logger
}

// Agent is the Agent Protocol's behaviour over a Store and a Plugin: it
// creates tasks, executes steps through the plugin and records everything.
// Steps of one task run one at a time; different tasks run concurrently.
type Agent struct {
	store        Store
	plugin       Plugin
	limits       Limits
	pluginConfig []byte // JSON
	log          *slog.Logger
	locks        taskLocks
}

// NewAgent returns an Agent serving plugin's agent from store.
func NewAgent(store Store, plugin Plugin, cfg AgentConfig) *Agent {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.PluginConfig == nil {
		cfg.PluginConfig = map[string]string{}
	}
	conf, _ := json.Marshal(cfg.PluginConfig) // strings always marshal
	return &Agent{store: store, plugin: plugin, limits: cfg.Limits, pluginConfig: conf, log: cfg.Log}
}

// checkBudget refuses to run a handler for a task that has used up its
// plugin time (ELIMIT).
func (a *Agent) checkBudget(t *Task) error {
	if max := a.limits.MaxTaskTime; max > 0 && t.PluginTime >= max {
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
	remaining := a.limits.MaxTaskTime - t.PluginTime
	if a.limits.MaxTaskTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, remaining)
		defer cancel()
	}
	code, elapsed, err := call.plugin.Run(ctx, call.handler, call)
	if ErrorCode(err) == ETIMEOUT && a.limits.MaxTaskTime > 0 && elapsed >= remaining {
		err = Errorf(ETIMEOUT, "the task used up its plugin time budget of %s", a.limits.MaxTaskTime)
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
