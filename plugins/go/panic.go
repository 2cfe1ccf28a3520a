package agent

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// A panic in a handler fails the call with the panic's message and where
// it happened; the whole stack goes to the call's log, at level error.

// panicFrames is how many frames of the panicking goroutine's stack the
// error names.
const panicFrames = 2

// panicError is the error a handler's panic with value r fails the call
// with: "panic: r (at main.step main.go:12, main.handle main.go:30)". It
// logs the stack. TinyGo, whose runtime neither recovers nor keeps
// stacks, never gets here: its runtime prints the panic before it traps,
// and agentrt reads the cause from what it printed.
func panicError(r any, stack []byte) error {
	msg := fmt.Sprintf("panic: %v", r)
	if len(stack) == 0 {
		return fmt.Errorf("%s", msg)
	}
	Log(Error, msg+"\n\n"+fromPanic(string(stack)))
	frames := panicSite(string(stack), panicFrames)
	if len(frames) == 0 {
		return fmt.Errorf("%s (the stack is in the log)", msg)
	}
	return fmt.Errorf("%s (at %s; the stack is in the log)", msg, strings.Join(frames, ", "))
}

// panicSite returns the first n frames of a goroutine's stack, as
// runtime/debug.Stack writes it, below the panic and the runtime's
// functions and above the kit's call of the handler: where the handler
// panicked, and what called it. Each is the function and its file's last
// two path elements with the line.
func panicSite(stack string, n int) []string {
	lines := strings.Split(stack, "\n")
	var frames []string
	seenPanic := false
frames:
	for i := 1; i+1 < len(lines) && len(frames) < n; i += 2 {
		fn, loc := lines[i], strings.TrimSpace(lines[i+1])
		if fn == "" || strings.HasPrefix(fn, "created by ") {
			break // the end of the goroutine's frames
		}
		if j := strings.LastIndexByte(fn, '('); j > 0 {
			fn = fn[:j]
		}
		switch {
		case fn == "panic":
			seenPanic = true
			continue
		case kitFrame(fn) && len(frames) > 0:
			break frames // the kit called the handler: its frames end here
		case !seenPanic, strings.HasPrefix(fn, "runtime."), kitFrame(fn):
			continue
		}
		if j := strings.LastIndex(loc, " +0x"); j > 0 {
			loc = loc[:j]
		}
		if parts := strings.Split(loc, "/"); len(parts) > 2 {
			loc = strings.Join(parts[len(parts)-2:], "/")
		}
		frames = append(frames, fn+" "+loc)
	}
	return frames
}

// fromPanic is a goroutine's stack from its panic down, as Go prints an
// unrecovered panic: without the frames of the kit's recovering it
// (debug.Stack, the deferred function). A stack without a panic frame is
// returned whole.
func fromPanic(stack string) string {
	header, frames, ok := strings.Cut(stack, "\n")
	if !ok {
		return stack
	}
	if strings.HasPrefix(frames, "panic(") {
		return stack
	}
	i := strings.Index(frames, "\npanic(")
	if i < 0 {
		return stack
	}
	return header + "\n" + frames[i+1:]
}

// kitFrame reports whether fn is the kit's own code that calls a handler
// (onStep, guard, ...), not the handler's.
func kitFrame(fn string) bool {
	rest, ok := strings.CutPrefix(fn, "github.com/agentrt/agentrt/plugins/go.")
	if !ok {
		return false
	}
	for _, f := range []string{"guard", "onStep", "onTask", "onArtifact", "exportOnStep", "exportOnTask", "exportOnArtifact"} {
		if rest == f || strings.HasPrefix(rest, f+".") {
			return true
		}
	}
	return false
}

// stack is the panicking goroutine's stack.
func stack() []byte { return debug.Stack() }
