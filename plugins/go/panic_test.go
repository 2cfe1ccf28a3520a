//go:build !wasm

package agent

import (
	"fmt"
	"strings"
	"testing"
)

// A stack as runtime/debug.Stack writes it in a Go plugin, from a handler
// that panicked on an index out of range two calls below the handler.
const wasmStack = `goroutine 1 gp=0x2821c0 m=0 mp=0x18da00 [running]:
runtime/debug.Stack()
	runtime/debug/stack.go:26 +0x5
github.com/agentrt/agentrt/plugins/go.guard.func1()
	github.com/agentrt/agentrt/plugins/go/agent.go:262 +0x4
panic({0x2e4a0, 0x2c8318})
	runtime/panic.go:792 +0x13
runtime.goPanicIndex(0x5, 0x0)
	runtime/panic.go:115 +0x7
main.count(...)
	example.com/notes/count.go:14
main.step(0x2b6000)
	example.com/notes/main.go:31 +0x9
github.com/agentrt/agentrt/plugins/go.onStep.func1()
	github.com/agentrt/agentrt/plugins/go/agent.go:160 +0x3
github.com/agentrt/agentrt/plugins/go.guard(0x2b4f48)
	github.com/agentrt/agentrt/plugins/go/agent.go:265 +0x6
github.com/agentrt/agentrt/plugins/go.onStep()
	github.com/agentrt/agentrt/plugins/go/agent.go:160 +0x16
github.com/agentrt/agentrt/plugins/go.exportOnStep(...)
	github.com/agentrt/agentrt/plugins/go/exports.go:17
`

func TestAPanicNamesWhereTheHandlerPanickedBelowTheRuntimeAndAboveTheKit(t *testing.T) {
	for n, want := range map[int]string{
		1: "[main.count notes/count.go:14]",
		2: "[main.count notes/count.go:14 main.step notes/main.go:31]",
		5: "[main.count notes/count.go:14 main.step notes/main.go:31]",
	} {
		if got := fmt.Sprint(panicSite(wasmStack, n)); got != want {
			t.Errorf("panicSite(%d) = %s, want %s", n, got, want)
		}
	}
	if got := panicSite("goroutine 1 [running]:\n", 2); len(got) != 0 {
		t.Errorf("a stack without frames gave %q", got)
	}
}

func TestThePanicsStackIsLoggedFromThePanicDown(t *testing.T) {
	got := fromPanic(wasmStack)
	if !strings.HasPrefix(got, "goroutine 1 gp=0x2821c0 m=0 mp=0x18da00 [running]:\npanic({0x2e4a0, 0x2c8318})\n") {
		t.Errorf("the logged stack starts:\n%s", got)
	}
	if strings.Contains(got, "debug.Stack") || strings.Contains(got, "guard.func1") {
		t.Errorf("the logged stack keeps the kit's recovering frames:\n%s", got)
	}
	if !strings.HasSuffix(got, "exports.go:17\n") || !strings.Contains(got, "main.step(0x2b6000)") {
		t.Errorf("the logged stack lost frames below the panic:\n%s", got)
	}
	for _, s := range []string{"", "goroutine 1 [running]:\n", "goroutine 1 [running]:\nmain.f()\n\tmain.go:3\n"} {
		if got := fromPanic(s); got != s {
			t.Errorf("fromPanic(%q) = %q, want it whole", s, got)
		}
	}
}
