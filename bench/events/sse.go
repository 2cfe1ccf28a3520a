package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// frame is one block of a Server-Sent Events stream, the lines up to a
// blank line: an event (its data), or fields and comments alone, as
// agentrt's first "retry: 2000" and its ": keep-alive" heartbeats are.
type frame struct {
	ID       string // the last id: field's value; HasID says whether there was one
	HasID    bool
	Event    string   // the event: field's value ("" when none)
	Data     string   // the data: lines, joined with "\n"
	HasData  bool     // at least one data: line
	Retry    int      // the retry: field's milliseconds, -1 when none (or not digits)
	Comments []string // the comment lines' text, after ":" and one space
}

// maxLine bounds one line of a stream: agentrt's event is at most a few
// tens of KiB (a progress report's output is at most 16 KiB).
const maxLine = 1 << 20

// sseReader reads frames from a stream, as the HTML Living Standard's
// "interpreting an event stream" reads them: a line ends at "\n" or
// "\r\n" (a lone "\r" is not taken as an end: agentrt never writes one);
// a line starting with ":" is a comment; otherwise "name: value" with
// one space after the colon dropped, or a name alone; blank lines end a
// frame, and a frame the stream ends in the middle of is dropped.
type sseReader struct {
	r    *bufio.Reader
	line []byte
}

func newSSEReader(r io.Reader) *sseReader {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 4096)
	}
	return &sseReader{r: br}
}

// errLineTooLong is a line longer than maxLine.
var errLineTooLong = errors.New("event stream: a line longer than 1 MiB")

// next returns the stream's next frame; io.EOF when the stream ended
// between frames or in the middle of one.
func (s *sseReader) next() (frame, error) {
	f := frame{Retry: -1}
	var data []string
	lines := 0
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.EOF
			}
			return frame{}, err
		}
		if len(line) == 0 {
			if lines == 0 {
				continue // blank lines between frames
			}
			if f.HasData {
				f.Data = strings.Join(data, "\n")
			}
			return f, nil
		}
		lines++
		if line[0] == ':' {
			f.Comments = append(f.Comments, string(trimOneSpace(line[1:])))
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = trimOneSpace(value)
		switch string(name) {
		case "data":
			data = append(data, string(value))
			f.HasData = true
		case "id":
			if !bytes.ContainsRune(value, 0) {
				f.ID, f.HasID = string(value), true
			}
		case "event":
			f.Event = string(value)
		case "retry":
			if n, err := strconv.Atoi(string(value)); err == nil && n >= 0 && isDigits(value) {
				f.Retry = n
			}
		}
	}
}

// readLine reads one line without its end; io.ErrUnexpectedEOF when the
// stream ends in a line.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		s.line = append(s.line, chunk...)
		if len(s.line) > maxLine {
			return nil, errLineTooLong
		}
		switch {
		case err == nil:
			line := s.line[:len(s.line)-1]
			return bytes.TrimSuffix(line, []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(s.line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

func trimOneSpace(b []byte) []byte {
	if len(b) > 0 && b[0] == ' ' {
		return b[1:]
	}
	return b
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// event is what the bench reads of an agentrt event's JSON (a frame's
// data).
type event struct {
	ID     int64  `json:"id"`
	Type   string `json:"type"`
	StepID string `json:"step_id"`
	Data   struct {
		Message string `json:"message"`
	} `json:"data"`
}

// stepEnded says whether an event's type ends a step.
func stepEnded(typ string) bool {
	return typ == "step.completed" || typ == "step.failed" || typ == "step.cancelled"
}

// sentAt reads the guest's clock from a progress report of the bench's
// plugin: its message, Unix nanoseconds.
func sentAt(message string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(message), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("a progress message that is not a time in nanoseconds: %.60q", message)
	}
	return n, nil
}
