package protocol

import (
	"context"
	"errors"
	"strings"
)

// What a plugin said before it stopped: a trap or an exit ends a call
// without a result the host reads, but the kits leave the cause first. The
// Rust kit sets a result carrying the panic's message before the panic
// traps; Go's and TinyGo's runtimes print "panic: ..." or "fatal error:
// ..." before they exit or trap. explainFailure puts that cause in front
// of the host's account of the stop.

// explainFailure returns err, the failure of call c, with the cause the
// plugin gave before it stopped, when it gave one: the error of the last
// result it set, else the last panic or fatal error its runtime printed.
// A failure that is not the plugin's, or is a timeout, is returned
// unchanged.
func (c *Call) explainFailure(err error) error {
	f, ok := errors.AsType[*PluginFailure](err)
	if !ok || f.Cause == CauseTimeout {
		return err
	}
	c.flushOutput()
	oom := f.Cause == CauseOutOfMemory
	cause := c.resultFailure()
	if cause == "" {
		cause = c.printedFailure(oom)
	}
	if over := goStackOverflow(c.logs); over != "" && oom {
		return NewPluginFailure(f.Cause, "%s; %s", f.Message, over)
	}
	if cause == "" {
		return err
	}
	return NewPluginFailure(f.Cause, "%s (%s)", cutText(cause, maxPluginText), f.Message)
}

// resultFailure is the error of the result the call set last, "" if none.
func (c *Call) resultFailure() string {
	if !c.hasResult {
		return ""
	}
	var res result
	var err error
	switch c.handler {
	case HandlerStep:
		res, err = c.codec.DecodeStepResult(c.result)
	case HandlerTask:
		res, err = c.codec.DecodeTaskResult(c.result, 0)
	case HandlerArtifact:
		res, err = c.codec.DecodeArtifactResult(c.result)
	}
	if err != nil || res == nil {
		return ""
	}
	return res.failure()
}

// printedFailure is the last line the plugin printed that a Go or TinyGo
// runtime prints as it dies ("panic: ...", "fatal error: ..."), "" if
// none. A fatal error the host already names (out of memory, when oom)
// adds nothing.
func (c *Call) printedFailure(oom bool) string {
	for i := len(c.logs) - 1; i >= 0; i-- {
		r := c.logs[i]
		if r.Level != "stdout" && r.Level != "stderr" {
			continue
		}
		msg := strings.TrimSpace(r.Message)
		if !strings.HasPrefix(msg, "panic: ") && !strings.HasPrefix(msg, "fatal error: ") {
			continue
		}
		if oom && strings.Contains(msg, "out of memory") {
			return ""
		}
		return msg
	}
	return ""
}

// goStackOverflow says why a Go plugin that ran out of memory most likely
// overflowed its stack: Go grows a goroutine's stack by copying it into
// memory twice its size, and says where it was when that failed.
func goStackOverflow(logs []LogRecord) string {
	for _, r := range logs {
		if r.Level != "stderr" {
			continue
		}
		if strings.HasPrefix(r.Message, "fatal error: stack overflow") || strings.HasPrefix(r.Message, "runtime.newstack(") {
			return "it was growing its stack: most likely a stack overflow (a recursion too deep)"
		}
	}
	return ""
}

// What the server log keeps of a failed task handler's log: no task holds
// it (none was created), so the last lines go to the server's log, each
// cut short, so that a client creating failing tasks cannot fill the log
// faster than with requests.
const (
	failedTaskLines    = 20
	failedTaskLineSize = 1024
)

// logFailedTask tells the server log that a task handler failed and no
// task was created, with the last lines the handler logged.
func (a *Agent) logFailedTask(ctx context.Context, call *Call, err error) {
	call.flushOutput()
	logs := call.logs
	if len(logs) > failedTaskLines {
		logs = logs[len(logs)-failedTaskLines:]
	}
	a.log.WarnContext(ctx, "task handler failed; no task was created", "err", logText(err), "log_lines", len(call.logs))
	for _, r := range logs {
		a.log.WarnContext(ctx, "failed task handler's log", "level", r.Level, "message", cutText(r.Message, failedTaskLineSize))
	}
}
