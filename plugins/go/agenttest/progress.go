package agenttest

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentrt/agentrt/plugins/abi"
)

// A call's log limit, as agentrt keeps it (protocol's Call.Log and
// Call.Progress): log lines and progress reports count against it, each
// as a record of its text as stored (a JSON string without HTML escaping,
// invalid UTF-8 as U+FFFD) plus 64 bytes. A line that would put the log
// over the limit fills it: it is dropped, the log says so once, and every
// later line and report is refused. A report that would put it over is
// dropped and refused, and leaves the log as it was.

// defaultMaxLog is agentrt's default log limit of a call (--max-log).
const defaultMaxLog = 64 << 10

// logRecordOverhead is what a record costs beyond its text.
const logRecordOverhead = 64

// Progress is one progress report of a step's handler.
type Progress struct {
	Message string
	// Output is the step's output so far it reported ("" for none).
	Output string
}

func (c *call) maxLog() int {
	if m := c.task.host.MaxLog; m > 0 {
		return m
	}
	return defaultMaxLog
}

func (c *call) Log(level int32, msg []byte) int32 {
	if level < abi.LevelDebug || level > abi.LevelError {
		return c.fail(abi.ErrInvalid, "unknown log level %d", level)
	}
	max := c.maxLog()
	if c.logFull {
		return c.fail(abi.ErrLimit, "the log limit of %d bytes was reached", max)
	}
	if c.logBytes+logRecordSize(msg) > max {
		c.logFull = true
		c.logs = append(c.logs, Log{Level: abi.LevelName(abi.LevelWarn), Message: fmt.Sprintf("log limit of %d bytes reached; later lines dropped", max)})
		return c.fail(abi.ErrLimit, "the log limit of %d bytes was reached", max)
	}
	c.logBytes += logRecordSize(msg)
	c.logs = append(c.logs, Log{Level: abi.LevelName(level), Message: strings.ToValidUTF8(string(msg), "\uFFFD")})
	return 0
}

func (c *call) Progress(msg, output []byte) int32 {
	if len(msg) > abi.MaxProgressMessageBytes {
		return c.fail(abi.ErrLimit, "progress message of %d bytes is over its limit of %d bytes", len(msg), abi.MaxProgressMessageBytes)
	}
	if len(output) > abi.MaxProgressOutputBytes {
		return c.fail(abi.ErrLimit, "progress output of %d bytes is over its limit of %d bytes", len(output), abi.MaxProgressOutputBytes)
	}
	if c.handler != abi.HandlerStep {
		return c.fail(abi.ErrNotAllowed, "only the step handler reports progress")
	}
	max := c.maxLog()
	if c.logFull {
		return c.fail(abi.ErrLimit, "the log limit of %d bytes was reached", max)
	}
	// As agentrt says it: the least the report could take when that is
	// already too much, else what it takes.
	size := logRecordOverhead + len(msg) + len(output)
	if c.logBytes+size <= max {
		size = logRecordSize(msg) + logRecordSize(output) - logRecordOverhead
	}
	if c.logBytes+size > max {
		return c.fail(abi.ErrLimit, "a progress report of %d bytes would put the call over its log limit of %d bytes", size, max)
	}
	c.logBytes += size
	c.progress = append(c.progress, Progress{Message: strings.ToValidUTF8(string(msg), "\uFFFD"), Output: strings.ToValidUTF8(string(output), "\uFFFD")})
	return 0
}

// logRecordSize is what a record of text counts against a log limit, as
// agentrt counts it: 64 bytes, plus the text as a JSON string without
// HTML escaping (a quote, a backslash and \b \f \n \r \t take 2 bytes,
// another control character 6, U+2028 and U+2029 6), each byte that is
// not UTF-8 counted as U+FFFD (3 bytes).
func logRecordSize(text []byte) int {
	n := logRecordOverhead
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(text[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 3
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
