package runtime

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// trace is a trap as wazero reports it: its first line, then its stack
// trace of at most 30 frames.
func trace(first string, frames ...string) string {
	s := first + "\nwasm stack trace:"
	for _, f := range frames {
		s += "\n\t" + f
	}
	if len(frames) >= 30 {
		s += "\n\t... maybe followed by omitted frames"
	}
	return s
}

func repeat(frame string, n int) []string {
	fs := make([]string, n)
	for i := range fs {
		fs[i] = frame
	}
	return fs
}

func TestStackOverflowIsToldFromADeepRecursionOrWazerosOwnStack(t *testing.T) {
	tests := []struct {
		name, trap, want string
	}{
		{"wazero's stack", trace("wasm error: stack overflow", repeat(".f()", 30)...), "calls were nested too deep"},
		{"out of bounds deep in a recursion (Rust, stripped)",
			trace("wasm error: out of bounds memory access", append([]string{".$148(i32,i32,i32) i32", ".$146(i32,i32,i32) i32"}, repeat(".$11(i64) i64", 28)...)...),
			"one function calling itself ($11): most likely a stack overflow"},
		{"out of bounds deep in a recursion (TinyGo, named)",
			trace("wasm error: out of bounds memory access", repeat(".main.recurse(i32,i32) i32", 30)...),
			"main.recurse calling itself: most likely a stack overflow"},
		{"out of bounds, shallow", trace("wasm error: out of bounds memory access", ".main.read(i32) i32", ".main.step() i32"), ""},
		{"out of bounds, a deep stack of different functions",
			trace("wasm error: out of bounds memory access", append(repeat(".a()", 15), repeat(".b()", 15)...)...), ""},
		{"unreachable deep in a recursion", trace("wasm error: unreachable", repeat(".f()", 30)...), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stackOverflow(tt.trap)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("stackOverflow = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAPluginRefusedMemoryIsOutOfMemoryEvenWhenItThenRanOutOfTime(t *testing.T) {
	mem := &instanceMemory{limit: 4 << 20, refused: 8 << 20}
	timeout := protocol.NewPluginFailure(protocol.CauseTimeout, "the plugin ran past its time limit of 1s")
	got := pluginFailure(nameCause(timeout, errors.New("deadline"), mem))
	if got.Code != protocol.EPLUGIN || got.Cause != protocol.CauseOutOfMemory || got.Message != "the plugin ran out of memory: it asked for 8 MiB, over its limit of 4 MiB; then ran past its time limit of 1s" {
		t.Errorf("timeout after a refused grow = %s (cause %s) %q", got.Code, got.Cause, got.Message)
	}
	trap := protocol.NewPluginFailure(protocol.CauseTrap, "the plugin trapped: wasm error: unreachable")
	got = pluginFailure(nameCause(trap, errors.New(trace("wasm error: unreachable")), mem))
	if got.Cause != protocol.CauseOutOfMemory || got.Message != "the plugin trapped: wasm error: unreachable (it ran out of memory: it asked for 8 MiB, over its limit of 4 MiB)" {
		t.Errorf("trap after a refused grow = (cause %s) %q", got.Cause, got.Message)
	}
	// Without a refused grow, a timeout stays a timeout.
	timeout = protocol.NewPluginFailure(protocol.CauseTimeout, "the plugin ran past its time limit of 1s")
	if got := pluginFailure(nameCause(timeout, errors.New("deadline"), &instanceMemory{limit: 4 << 20})); got.Code != protocol.ETIMEOUT {
		t.Errorf("a plain timeout became %s %q", got.Code, got.Message)
	}
	// What was not the plugin's doing is left alone.
	busy := protocol.Errorf(protocol.EUNAVAILABLE, "busy")
	if got := nameCause(busy, errors.New("x"), mem); protocol.ErrorMessage(got) != "busy" {
		t.Errorf("EUNAVAILABLE became %q", protocol.ErrorMessage(got))
	}
}

// pluginFailure is err as a plugin's failure; when it is not one, a
// failure of cause "other" that says so.
func pluginFailure(err error) *protocol.PluginFailure {
	if f, ok := errors.AsType[*protocol.PluginFailure](err); ok {
		return f
	}
	return protocol.NewPluginFailure("", "not a plugin's failure: %v", err)
}
