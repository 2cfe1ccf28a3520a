//go:build linux

package protocol_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime/debug"
	"syscall"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// guardedBuffer returns size bytes of memory of which only the first
// readable bytes (a whole number of pages) may be touched: the rest is
// mapped without access, so reading it faults. With debug.SetPanicOnFault
// the fault is a panic the reader's caller can recover.
func guardedBuffer(t *testing.T, readable, size int) []byte {
	t.Helper()
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(b) })
	if err := syscall.Mprotect(b[readable:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return b
}

// A plugin printing a buffer of newlines (100 MiB of them, say) made the
// host loop once per newline: empty lines were dropped without counting
// against the log limit, so it never filled. Every line is a record now:
// the log fills after MaxLogBytes / LogRecordOverhead of them, and the
// rest of the buffer is never read.
func TestPrintedNewlinesFillTheLogAndTheRestIsLeftUnread(t *testing.T) {
	const page = 4096
	limits := protocol.DefaultLimits
	limits.MaxLogBytes = 64 << 10
	records := limits.MaxLogBytes / protocol.LogRecordOverhead // 1,024 empty records
	// Twice what the log can take is readable; past it, 100 MiB that
	// faults when read.
	readable := (2*records + page - 1) / page * page
	buf := guardedBuffer(t, readable, readable+100<<20)
	copy(buf[:readable], bytes.Repeat([]byte("\n"), readable))

	var fault any
	print := func(ctx context.Context, call *protocol.Call) (int32, error) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { fault = recover() }()
		// What wasm memory hands over: one view of the whole buffer,
		// which the guard makes 100 MiB of newlines as far as reading
		// the start of it tells.
		if n, err := call.Stdout().Write(buf); n != len(buf) || err != nil {
			return 0, fmt.Errorf("write returned %d, %v; want %d, nil", n, err, len(buf))
		}
		return 0, call.SetResult([]byte(`{"output":"printed"}`))
	}
	s := protocoltest.NewStore()
	a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: print}), limits)
	task := mustCreateTask(t, a)
	st, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
	if fault != nil {
		t.Fatalf("the host read the printed buffer past the log limit: %v", fault)
	}
	if err != nil {
		t.Fatal(err)
	}
	logs, err := a.StepLogs(context.Background(), task.TaskID, st.StepID)
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != records+1 {
		t.Fatalf("the log holds %d records, want %d empty lines and the notice", len(logs), records)
	}
	for _, r := range logs[:records] {
		if r.Level != "stdout" || r.Message != "" {
			t.Fatalf("record %+v, want an empty stdout line", r)
		}
	}
	if last := logs[records]; last.Level != "warn" || !bytes.Contains([]byte(last.Message), []byte("log limit of 65536 bytes reached")) {
		t.Errorf("the log ends with %+v, want the notice that it is full", last)
	}
	if size := protocol.LogSize(logs[:records]); size > int64(limits.MaxLogBytes) {
		t.Errorf("the kept records count %d bytes, over the limit of %d", size, limits.MaxLogBytes)
	}
}

// Printed text with no final newline is kept at the call's end; nothing
// printed, or a final newline, adds no record.
func TestPrintedLinesAreRecordsEmptyOnesIncluded(t *testing.T) {
	for _, tc := range []struct {
		printed []string
		want    []string
	}{
		{nil, nil},
		{[]string{""}, nil},
		{[]string{"a\n"}, []string{"a"}},
		{[]string{"a"}, []string{"a"}},
		{[]string{"\n\n"}, []string{"", ""}},
		{[]string{"a\n\nb"}, []string{"a", "", "b"}},
		{[]string{"a", "b\n", "\n", "c"}, []string{"ab", "", "c"}},
	} {
		printer := func(ctx context.Context, call *protocol.Call) (int32, error) {
			for _, p := range tc.printed {
				call.Stdout().Write([]byte(p))
			}
			return 0, call.SetResult([]byte(`{}`))
		}
		s := protocoltest.NewStore()
		a := newAgent(t, s, protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: printer}), protocol.DefaultLimits)
		task := mustCreateTask(t, a)
		st, err := a.ExecuteStep(context.Background(), task.TaskID, protocol.StepRequestBody{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range st.Logs {
			got = append(got, r.Message)
		}
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("printing %q logs %q, want %q", tc.printed, got, tc.want)
		}
	}
}
