package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// An event stream (text/event-stream) is read as the HTML standard's
// "Server-sent events" section parses one: lines ended by CRLF, LF or CR
// alone; a leading byte order mark dropped; a line starting with a colon
// a comment; "field: value" (one space after the colon dropped) or a
// field alone with an empty value; the fields event, data (lines joined
// with LF), id (refused if it holds NUL) and retry (digits only); other
// fields ignored; an event dispatched by an empty line, and only if it
// has data. What the stream holds when it ends is not an event: a frame
// cut off by a dropped connection is never dispatched.

// maxSSELine bounds one line of a stream, and the data of one event: an
// agentrt event is its JSON on one line, a few KiB (a progress event's
// partial output is the largest). A server that sends more is refused,
// rather than held in memory.
const maxSSELine = 8 << 20

// maxSSERetry bounds the reconnection time a stream may set, so that it
// can be held in a time.Duration; the watch bounds it further.
const maxSSERetry = time.Hour

// sseFrame is one event of a stream, dispatched.
type sseFrame struct {
	event string // "message" when the frame names none
	data  string
	// id is the frame's own id field, if it had one (hasID): unlike the
	// standard's last event ID, it is not carried over from the frames
	// before, so that an event without one is not taken for the last.
	id    string
	hasID bool
}

// sseReader reads the frames of a stream.
type sseReader struct {
	sc      *bufio.Scanner
	started bool // the first line was read (its BOM, if any, dropped)
	// retry is the reconnection time the stream last set (retry: ms);
	// -1 when it set none.
	retry time.Duration
	// lines counts the lines read that were not the retry field alone:
	// comments (heartbeats) and events. A stream that read some was
	// alive.
	lines int64
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSSELine)
	sc.Split(scanSSELines)
	return &sseReader{sc: sc, retry: -1}
}

// errSSETooLong is a line or an event's data past maxSSELine.
var errSSETooLong = fmt.Errorf("the server sent an event longer than %d bytes", maxSSELine)

// next returns the stream's next event: io.EOF when the stream ended
// (what it held of an event not dispatched), or the error that ended it.
func (r *sseReader) next() (sseFrame, error) {
	var f sseFrame
	var data bytes.Buffer
	hasData := false
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if len(line) == 0 {
			if !hasData {
				f = sseFrame{} // nothing to dispatch: the standard resets the event type
				continue
			}
			if f.event == "" {
				f.event = "message"
			}
			f.data = string(bytes.TrimSuffix(data.Bytes(), []byte("\n")))
			return f, nil
		}
		if line[0] == ':' {
			r.lines++
			continue
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found {
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "event":
			f.event = string(value)
		case "data":
			if data.Len()+len(value)+1 > maxSSELine {
				return sseFrame{}, errSSETooLong
			}
			data.Write(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				f.id, f.hasID = string(value), true
			}
		case "retry":
			if len(value) > 0 && len(bytes.Trim(value, "0123456789")) == 0 {
				ms, err := strconv.ParseInt(string(value), 10, 64)
				if err != nil || ms > maxSSERetry.Milliseconds() {
					ms = maxSSERetry.Milliseconds() // digits past int64
				}
				r.retry = time.Duration(ms) * time.Millisecond
			}
			continue
		}
		r.lines++
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return sseFrame{}, errSSETooLong
		}
		return sseFrame{}, err
	}
	return sseFrame{}, io.EOF
}

// scanSSELines splits a stream into lines ended by CRLF, LF or CR. A CR
// at the end of what was read waits for the next byte, which may be its
// LF. What follows the last line end when the stream ends is dropped: a
// line cut off.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0 && atEOF:
		return len(data), nil, nil
	case i < 0:
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data) && data[i+1] == '\n':
		return i + 2, data[:i], nil
	case i+1 < len(data) || atEOF:
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // a CR last: its LF may follow
}
