package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/storage"
)

// Steps run in the background (Prefer: respond-async) and the task event
// log they are watched through (docs/EVENTS.md) are bounded by the
// flags below, each a field of the configuration. None of them can be
// switched off: 0 or less is refused naming the flag or the field, not
// read as a default or as no bound (docs/SECURITY.md, "Background steps
// and the event log").

// addBackgroundFlags defines the flags of background steps and the event
// log on fs, each setting a field of doc.
func addBackgroundFlags(fs *flag.FlagSet, doc *Config) {
	h, l, sb, d := &doc.HTTP, &doc.Limits, &doc.Sandbox, &doc.Data
	fs.Var(&sb.StepTimeout, "step-timeout", "time limit (a `DURATION`) of a step run in the background (Prefer: respond-async), more than 0s; a waiting client's step has -call-timeout")
	fs.IntVar(&l.MaxBackgroundSteps, "max-background-steps", l.MaxBackgroundSteps, "steps one agent runs in the background at once, 1 or more; beyond, 503 with Retry-After")
	fs.IntVar(&sb.MaxBackgroundStepsTotal, "max-background-steps-total", sb.MaxBackgroundStepsTotal, "steps every agent runs in the background together, 1 or more; beyond, 503 with Retry-After")
	fs.BoolVar(&h.CancelOnDisconnect, "cancel-on-disconnect", h.CancelOnDisconnect, "cancel a step whose client disconnects before its answer (recorded as cancelled); without it, the step runs to its end and is recorded")
	fs.IntVar(&d.MaxTaskEvents, "max-task-events", d.MaxTaskEvents, "progress and log events one task's event log holds, 1 or more; past it, the oldest are trimmed")
	fs.Var(&d.MaxTaskEventBytes, "max-task-event-bytes", "bytes (a `SIZE`) of the progress and log events one task's event log holds, at least 256KiB; past it, the oldest are trimmed")
	fs.Var(&h.EventHeartbeat, "event-heartbeat", "silence (a `DURATION`) after which an event stream sends a comment line, so that proxies keep it open; more than 0s")
	fs.Var(&h.EventWriteTimeout, "event-write-timeout", "time (a `DURATION`) one write to an event stream may take before the stream is cut; more than 0s")
}

// applyBackground makes cfg's background steps and event log what doc
// says, refusing a bound that would be off or too small: name names the
// flag that set a value, or the field of the file.
func (cfg *runConfig) applyBackground(doc *Config, name func(flagName, field string) string) error {
	h, l, sb, d := doc.HTTP, doc.Limits, doc.Sandbox, doc.Data
	for _, v := range []struct {
		flag, field string
		v           duration
	}{
		{"step-timeout", "sandbox.step_timeout", sb.StepTimeout},
		{"event-heartbeat", "http.event_heartbeat", h.EventHeartbeat},
		{"event-write-timeout", "http.event_write_timeout", h.EventWriteTimeout},
	} {
		if v.v <= 0 {
			return &usageError{fmt.Sprintf("bad %s %s: want more than 0s", name(v.flag, v.field), &v.v)}
		}
	}
	for _, v := range []struct {
		flag, field string
		v           int
	}{
		{"max-background-steps", "limits.max_background_steps", l.MaxBackgroundSteps},
		{"max-background-steps-total", "sandbox.max_background_steps_total", sb.MaxBackgroundStepsTotal},
		{"max-task-events", "data.max_task_events", d.MaxTaskEvents},
	} {
		if v.v < 1 {
			return &usageError{fmt.Sprintf("bad %s %d: want 1 or more", name(v.flag, v.field), v.v)}
		}
	}
	if b := d.MaxTaskEventBytes; b < storage.MinEventBytes {
		min := size(storage.MinEventBytes)
		return &usageError{fmt.Sprintf("bad %s %s: want at least %s", name("max-task-event-bytes", "data.max_task_event_bytes"), &b, &min)}
	}
	cfg.stepTimeout, cfg.maxBackgroundTotal, cfg.cancelOnDisconnect = time.Duration(sb.StepTimeout), sb.MaxBackgroundStepsTotal, h.CancelOnDisconnect
	cfg.eventBounds = protocol.EventBounds{Count: d.MaxTaskEvents, Bytes: int64(d.MaxTaskEventBytes)}
	cfg.eventHeartbeat, cfg.eventWriteTimeout = time.Duration(h.EventHeartbeat), time.Duration(h.EventWriteTimeout)
	return nil
}
