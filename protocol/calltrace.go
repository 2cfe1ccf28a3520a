package protocol

import (
	"context"
	"log/slog"
	"time"
)

// Every handler call is told to the server log at level debug, with what
// the plugin logged and printed: what "agentrt run --dev" shows in the
// terminal as requests arrive. At the usual levels it costs one check.

// logCall logs, at level debug, that call ran for elapsed, and each line
// it logged. A task handler's call names no task: the task may not be
// created.
func (a *Agent) logCall(ctx context.Context, call *Call, elapsed time.Duration) {
	if !a.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	call.flushOutput()
	attrs := []any{"handler", string(call.handler), "elapsed", elapsed.Round(time.Microsecond)}
	if call.handler != HandlerTask {
		attrs = append(attrs, "task_id", call.task.TaskID)
	}
	if call.step != nil {
		attrs = append(attrs, "step_id", call.step.StepID)
	}
	a.log.DebugContext(ctx, "handler ran", append(attrs, "log_lines", len(call.logs))...)
	for _, r := range call.logs {
		a.log.DebugContext(ctx, "plugin log", "handler", string(call.handler), "level", r.Level, "message", r.Message)
	}
}
