package client

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// readFrames reads every frame of a stream, and the retry it set last.
func readFrames(r io.Reader) ([]sseFrame, time.Duration, error) {
	sr := newSSEReader(r)
	var frames []sseFrame
	for {
		f, err := sr.next()
		if err == io.EOF {
			return frames, sr.retry, nil
		} else if err != nil {
			return frames, sr.retry, err
		}
		frames = append(frames, f)
	}
}

// A stream is parsed as the HTML standard says, whatever its line ends
// and however its bytes arrive: one at a time (a CR at the end of a read,
// its LF in the next) or all at once.
func TestSSEParsingFollowsTheStandard(t *testing.T) {
	ev := func(event, id, data string) sseFrame {
		return sseFrame{event: event, data: data, id: id, hasID: id != ""}
	}
	for _, tc := range []struct {
		name   string
		stream string
		want   []sseFrame
		retry  time.Duration // -1: none set
	}{
		{"an event", "id: 1\nevent: step.created\ndata: {\"id\":1}\n\n",
			[]sseFrame{ev("step.created", "1", `{"id":1}`)}, -1},
		{"data on several lines, joined by LF", "data: one\ndata: two\ndata:\ndata: four\n\n",
			[]sseFrame{ev("message", "", "one\ntwo\n\nfour")}, -1},
		{"CRLF line ends", "id: 2\r\nevent: x\r\ndata: a\r\ndata: b\r\n\r\n",
			[]sseFrame{ev("x", "2", "a\nb")}, -1},
		{"CR line ends", "id: 3\revent: x\rdata: a\r\r",
			[]sseFrame{ev("x", "3", "a")}, -1},
		{"mixed line ends", "data: a\r\ndata: b\rdata: c\n\r\n",
			[]sseFrame{ev("message", "", "a\nb\nc")}, -1},
		{"comments are skipped", ": keep-alive\n\n: hello\ndata: x\n: more\n\n",
			[]sseFrame{ev("message", "", "x")}, -1},
		{"a byte order mark at the start is dropped", "\xEF\xBB\xBFdata: x\n\n",
			[]sseFrame{ev("message", "", "x")}, -1},
		{"a byte order mark elsewhere is data", "data: a\n\ndata: \xEF\xBB\xBFb\n\n",
			[]sseFrame{ev("message", "", "a"), ev("message", "", "\xEF\xBB\xBFb")}, -1},
		{"a field without a colon has an empty value", "data\ndata\n\nevent\ndata: x\n\n",
			[]sseFrame{ev("message", "", "\n"), ev("message", "", "x")}, -1},
		{"one space after the colon is dropped, no more", "data:x\ndata:  y\n\n",
			[]sseFrame{ev("message", "", "x\n y")}, -1},
		{"a value may hold colons", "data: {\"a\":\"b:c\"}\n\n",
			[]sseFrame{ev("message", "", `{"a":"b:c"}`)}, -1},
		{"unknown fields are ignored", "foo: bar\nid: 4\ndata: x\n\n",
			[]sseFrame{ev("message", "4", "x")}, -1},
		{"an id with NUL is ignored", "id: 5\x006\ndata: x\n\n",
			[]sseFrame{ev("message", "", "x")}, -1},
		{"no data: nothing dispatched, the event type dropped", "event: trimmed\n\ndata: x\n\n",
			[]sseFrame{ev("message", "", "x")}, -1},
		{"an id is not carried to the next event", "id: 7\ndata: a\n\ndata: b\n\n",
			[]sseFrame{ev("message", "7", "a"), ev("message", "", "b")}, -1},
		{"retry in milliseconds", "retry: 2000\n\ndata: x\n\n",
			[]sseFrame{ev("message", "", "x")}, 2 * time.Second},
		{"retry that is not digits is ignored", "retry: 2000\nretry: 1e3\nretry: -5\nretry: +5\nretry:\n\n", nil, 2 * time.Second},
		{"retry too large is bounded", "retry: 99999999999999999999999\n\n", nil, maxSSERetry},
		{"an event not ended by an empty line is not dispatched", "data: a\n\ndata: cut", []sseFrame{ev("message", "", "a")}, -1},
		{"a frame cut after its data line is not dispatched", "data: a\n\nid: 9\ndata: b\n", []sseFrame{ev("message", "", "a")}, -1},
		{"an empty stream", "", nil, -1},
	} {
		for _, reads := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{{"at once", func(r io.Reader) io.Reader { return r }}, {"byte by byte", iotest.OneByteReader}} {
			t.Run(tc.name+"/"+reads.name, func(t *testing.T) {
				frames, retry, err := readFrames(reads.wrap(strings.NewReader(tc.stream)))
				if err != nil {
					t.Fatal(err)
				}
				if len(frames) != len(tc.want) {
					t.Fatalf("frames %+v, want %+v", frames, tc.want)
				}
				for i := range frames {
					if frames[i] != tc.want[i] {
						t.Errorf("frame %d: %+v, want %+v", i, frames[i], tc.want[i])
					}
				}
				if retry != tc.retry {
					t.Errorf("retry %s, want %s", retry, tc.retry)
				}
			})
		}
	}
}

// A line, or an event's data, longer than maxSSELine is refused rather
// than held.
func TestSSEAnEventPastTheBoundIsRefused(t *testing.T) {
	long := strings.Repeat("x", maxSSELine/2)
	for name, stream := range map[string]string{
		"one line":   "data: " + long + long + "\n\n",
		"many lines": strings.Repeat("data: "+long[:maxSSELine/8]+"\n", 9) + "\n",
	} {
		_, _, err := readFrames(strings.NewReader(stream))
		if !errors.Is(err, errSSETooLong) {
			t.Errorf("%s: %v, want errSSETooLong", name, err)
		}
	}
}

// Comments and events count as a stream alive; the retry field alone
// does not.
func TestSSEHeartbeatsCountAsAlive(t *testing.T) {
	for stream, alive := range map[string]bool{
		"retry: 2000\n\n":                 false,
		"retry: 2000\n\n: keep-alive\n\n": true,
		"retry: 2000\n\ndata: x\n\n":      true,
	} {
		r := newSSEReader(strings.NewReader(stream))
		for {
			if _, err := r.next(); err != nil {
				break
			}
		}
		if got := r.lines > 0; got != alive {
			t.Errorf("%q: alive %v, want %v", stream, got, alive)
		}
	}
}
