package main

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// frames reads every frame of text, and the error that ended the read.
func frames(t *testing.T, r io.Reader) ([]frame, error) {
	t.Helper()
	s := newSSEReader(r)
	var out []frame
	for {
		f, err := s.next()
		if err != nil {
			return out, err
		}
		out = append(out, f)
		if len(out) > 100 {
			t.Fatal("more than 100 frames: the reader does not advance")
		}
	}
}

func TestEventStreamFramesAreReadAsTheStandardSays(t *testing.T) {
	none := -1
	tests := []struct {
		name, in string
		want     []frame
	}{
		{"agentrt's first frame, an event and a heartbeat",
			"retry: 2000\n\nid: 7\nevent: step.progress\ndata: {\"id\":7}\n\n: keep-alive\n\n",
			[]frame{
				{Retry: 2000},
				{ID: "7", HasID: true, Event: "step.progress", Data: `{"id":7}`, HasData: true, Retry: none},
				{Retry: none, Comments: []string{"keep-alive"}},
			}},
		{"data lines are joined with newlines",
			"data: a\ndata: b\ndata\n\n",
			[]frame{{Data: "a\nb\n", HasData: true, Retry: none}}},
		{"one space after the colon is dropped, no more",
			"data:x\nevent:  two\n\n",
			[]frame{{Data: "x", HasData: true, Event: " two", Retry: none}}},
		{"CRLF ends a line as LF does",
			"id: 1\r\ndata: a\r\n\r\n",
			[]frame{{ID: "1", HasID: true, Data: "a", HasData: true, Retry: none}}},
		{"blank lines between frames make no empty frames",
			"\n\n\ndata: a\n\n\n\ndata: b\n\n",
			[]frame{{Data: "a", HasData: true, Retry: none}, {Data: "b", HasData: true, Retry: none}}},
		{"an empty id is an id",
			"id:\ndata: a\n\n",
			[]frame{{HasID: true, Data: "a", HasData: true, Retry: none}}},
		{"a retry that is not digits and unknown fields are ignored",
			"retry: 2s\nretry: +5\nfoo: bar\ndata: a\n\n",
			[]frame{{Data: "a", HasData: true, Retry: none}}},
		{"a frame the stream ends in is dropped",
			"data: a\n\ndata: b\n",
			[]frame{{Data: "a", HasData: true, Retry: none}}},
		{"a line the stream ends in is dropped with its frame",
			"data: a\n\ndata: b",
			[]frame{{Data: "a", HasData: true, Retry: none}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A byte at a time too: a frame split across reads is
			// the same frame.
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				got, err := frames(t, r)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("read ended with %v, want io.EOF", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("frames\n got %+v\nwant %+v", got, tt.want)
				}
			}
		})
	}
}

func TestAnEventLongerThanTheReadersBufferIsReadWhole(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	got, err := frames(t, strings.NewReader("data: "+long+"\n\n"))
	if !errors.Is(err, io.EOF) || len(got) != 1 || got[0].Data != long {
		t.Fatalf("got %d frames (err %v), want one of %d bytes", len(got), err, len(long))
	}
}

func TestALineLongerThanTheBoundIsAnError(t *testing.T) {
	_, err := frames(t, strings.NewReader("data: "+strings.Repeat("x", maxLine+1)+"\n\n"))
	if !errors.Is(err, errLineTooLong) {
		t.Fatalf("err %v, want errLineTooLong", err)
	}
}

func TestAProgressMessageGivesTheGuestsClock(t *testing.T) {
	tests := []struct {
		msg  string
		want int64
		ok   bool
	}{
		{"1795915631346143661", 1795915631346143661, true},
		{" 42\n", 42, true},
		{"", 0, false},
		{"0", 0, false},
		{"-5", 0, false},
		{"step 3 of 10", 0, false},
	}
	for _, tt := range tests {
		got, err := sentAt(tt.msg)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("sentAt(%q) = %d, %v; want %d, ok %v", tt.msg, got, err, tt.want, tt.ok)
		}
	}
}
