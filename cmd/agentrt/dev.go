package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// "agentrt run --dev" (or "agentrt dev") is run for a plugin's author: the
// server log in the terminal, readable, with a line per request and each
// handler call's log as it ends; and the plugin reloaded whenever its
// file changes (a rebuild): the fleet follows it (fleet.Config.Watch),
// and a build that fails to load leaves the previous one serving.

// consoleHandler is a slog.Handler for a terminal: one short line a
// record, "15:04:05 message key=value ...", a request as
// "POST /ap/v1/agent/tasks 200 3.1ms", and a plugin's log lines indented
// under the call that logged them. What a plugin wrote is shown with its
// control characters escaped: it cannot drive the terminal.
type consoleHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	level slog.Leveler
	attrs []slog.Attr
}

// consoleTime is the time of a console line.
const consoleTime = "15:04:05.000"

func newConsoleHandler(w io.Writer, level slog.Leveler) *consoleHandler {
	return &consoleHandler{mu: &sync.Mutex{}, w: w, level: level}
}

func (h *consoleHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *consoleHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

// WithGroup keeps the group's attributes unqualified: a console line is
// short.
func (h *consoleHandler) WithGroup(string) slog.Handler { return h }

func (h *consoleHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	var rest []string
	add := func(a slog.Attr) bool {
		v := a.Value.Resolve().String()
		attrs[a.Key] = v
		switch a.Key {
		case "agent", "handler", "level", "message", "method", "path", "status", "ms",
			"bytes", "remote", "key_name", "request_id": // for a terminal, noise
		default:
			rest = append(rest, a.Key+"="+printableLine(v, 200))
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	var line string
	switch r.Message {
	case "request":
		line = fmt.Sprintf("%s %s %s %sms", attrs["method"], printableLine(attrs["path"], 200), attrs["status"], attrs["ms"])
	case "plugin log":
		// Its lines after the first under its first, past the time.
		line = fmt.Sprintf("  │ %-6s %s", attrs["level"], indented(attrs["message"], strings.Repeat(" ", len(consoleTime)+1)+"  │        "))
		rest = nil
	case "handler ran":
		line = fmt.Sprintf("%s handler ran", attrs["handler"])
	default:
		line = r.Message
		if r.Level >= slog.LevelWarn {
			line = strings.ToUpper(r.Level.String()) + " " + line
		}
	}
	if len(rest) > 0 {
		line += "  " + strings.Join(rest, " ")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := fmt.Fprintf(h.w, "%s %s\n", r.Time.Format(consoleTime), line)
	return err
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
