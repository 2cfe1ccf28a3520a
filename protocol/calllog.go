package protocol

import (
	"bytes"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// The levels of a log line a plugin logs. What it writes to stdout and
// stderr is logged with levels "stdout" and "stderr".
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// Log keeps one log line of the given level (LevelDebug...). message may
// be the plugin's memory: it is checked against the call's log limit
// before anything is copied, and kept as UTF-8 (invalid bytes become
// U+FFFD). Past the limit, lines are dropped and ETOOLARGE returned; the
// log then ends with a line saying so.
func (c *Call) Log(level string, message []byte) error {
	switch level {
	case LevelDebug, LevelInfo, LevelWarn, LevelError:
		return c.addLog(level, message)
	}
	return Errorf(EUNPROCESSABLE, "unknown log level %q", level)
}

// addLog counts a record as LogRecordSize does: as it is stored, and
// with an overhead so that empty records are not free.
func (c *Call) addLog(level string, message []byte) error {
	max := c.build.Limits.MaxLogBytes
	if c.logFull {
		return Errorf(ETOOLARGE, "the log limit of %d bytes was reached", max)
	}
	// A record takes at least its message's length stored, so a message
	// that cannot fit is refused before a byte of it is read: it may be
	// all of the plugin's memory.
	size := LogRecordOverhead + len(message)
	if c.logBytes+size <= max {
		size = LogRecordSize(message)
	}
	if c.logBytes+size > max {
		c.logFull = true
		c.logs = append(c.logs, LogRecord{Time: time.Now(), Level: "warn",
			Message: fmt.Sprintf("log limit of %d bytes reached; later lines dropped", max)})
		c.logEvent()
		return Errorf(ETOOLARGE, "the log limit of %d bytes was reached", max)
	}
	c.logBytes += size
	if !utf8.Valid(message) {
		message = bytes.ToValidUTF8(message, []byte("\uFFFD"))
	}
	c.logs = append(c.logs, LogRecord{Time: time.Now(), Level: level, Message: string(message)})
	c.logEvent()
	return nil
}

// logEvent makes the log record just kept a step.log event, in a step's
// call.
func (c *Call) logEvent() {
	if c.events != nil {
		c.events.add(logEvent(c.step, c.logs[len(c.logs)-1]))
	}
}

// Stdout and Stderr receive what the plugin writes to its standard output
// and error; each line becomes a log record of level "stdout" or "stderr".
func (c *Call) Stdout() io.Writer { return &c.stdout }

// Stderr: see Stdout.
func (c *Call) Stderr() io.Writer { return &c.stderr }

// flushOutput logs what the plugin printed without a final newline.
func (c *Call) flushOutput() {
	c.stdout.flush()
	c.stderr.flush()
}

// lineWriter turns a byte stream into log records, one per line.
type lineWriter struct {
	call    *Call
	level   string
	partial []byte
	wrote   bool
}

// maxLine caps a line held while waiting for its newline.
const maxLine = 4096

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	w.wrote = w.wrote || n > 0
	// Once the log is full, later lines are dropped unread: p may be all
	// of the plugin's memory.
	for len(p) > 0 && !w.call.logFull {
		// A line is looked for only as far as the held line has room:
		// no byte is read beyond what is kept.
		room := maxLine - len(w.partial)
		i := bytes.IndexByte(p[:min(len(p), room+1)], '\n')
		if i < 0 {
			if len(p) <= room {
				w.partial = append(w.partial, p...)
				break
			}
			w.partial = append(w.partial, p[:room]...)
			p = p[room:]
			w.emit()
			continue
		}
		w.partial = append(w.partial, p[:i]...)
		p = p[i+1:]
		w.emit() // an empty line too: it is a record, and counts as one
	}
	// Writes never fail: a plugin printing past its log limit loses the
	// lines, not its step.
	return n, nil
}

// flush logs what was printed after the last newline, if anything.
func (w *lineWriter) flush() {
	if len(w.partial) > 0 {
		w.emit()
	}
}

// emit logs the held line, empty or not, as one record. Every record
// counts against the call's log limit (LogRecordOverhead at least), so a
// buffer of newlines fills the log after a thousand or so of them, and
// Write leaves the rest unread.
func (w *lineWriter) emit() {
	w.call.addLog(w.level, w.partial)
	w.partial = w.partial[:0]
}
