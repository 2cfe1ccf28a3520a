package runtime

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/protocol"
)

// Naming the cause of a failed call where wazero's words do not: a plugin
// out of memory traps (or, for a runtime whose collector works ever
// harder near the limit, runs out its time) in its own language's words,
// and a stack overflow is an out-of-bounds access or wazero's own "stack
// overflow".

// nameCause returns failure, of a call that stopped with err, with its
// most likely cause named: memory the plugin asked for and was refused,
// or a stack overflow. A failure that is not the plugin's is returned
// unchanged.
func nameCause(failure error, err error, mem *instanceMemory) error {
	f, ok := errors.AsType[*protocol.PluginFailure](failure)
	if !ok {
		return failure
	}
	if mem != nil && mem.refused > 0 {
		oom := fmt.Sprintf("it ran out of memory: it asked for %s, over its limit of %s", byteSize(mem.refused), byteSize(mem.limit))
		if f.Cause == protocol.CauseTimeout {
			// Out of memory first: the time went to a runtime looking for
			// memory it could not have.
			return protocol.NewPluginFailure(protocol.CauseOutOfMemory, "the plugin %s; then %s", strings.TrimPrefix(oom, "it "), strings.TrimPrefix(f.Message, "the plugin "))
		}
		return protocol.NewPluginFailure(protocol.CauseOutOfMemory, "%s (%s)", f.Message, oom)
	}
	if f.Cause == protocol.CauseTimeout || err == nil {
		return f
	}
	if overflow := stackOverflow(err.Error()); overflow != "" {
		return protocol.NewPluginFailure(f.Cause, "%s; %s", f.Message, overflow)
	}
	return f
}

// overflowFrames is how many frames of the 30 of wazero's stack trace one
// function must fill for an out-of-bounds access to count as a stack
// overflow.
const overflowFrames = 16

// stackOverflow says why a trap, as wazero reports it with its stack
// trace, is most likely a stack overflow; "" when it is not. wazero's own
// stack is bounded ("stack overflow"); a TinyGo, Rust or C plugin keeps
// its frames' memory on a stack at the start of its linear memory, and
// overflowing it wraps below address 0: an out-of-bounds access, from
// deep in a recursion.
func stackOverflow(trap string) string {
	first, trace, _ := strings.Cut(trap, "\n")
	if strings.Contains(first, "stack overflow") {
		return "calls were nested too deep: a stack overflow (a recursion without end?)"
	}
	if !strings.Contains(first, "out of bounds memory access") {
		return ""
	}
	counts := map[string]int{}
	top, deepest := "", 0
	for _, line := range strings.Split(trace, "\n") {
		fn, _, isFrame := strings.Cut(strings.TrimSpace(line), "(")
		if !isFrame || fn == "" {
			continue // not a frame: "wasm stack trace:", "... maybe followed by omitted frames"
		}
		counts[fn]++
		if counts[fn] > deepest {
			top, deepest = fn, counts[fn]
		}
	}
	if deepest < overflowFrames {
		return ""
	}
	name := strings.TrimPrefix(top, ".")
	if strings.HasPrefix(name, "$") {
		return fmt.Sprintf("its stack trace is one function calling itself (%s): most likely a stack overflow (a recursion too deep)", name)
	}
	return fmt.Sprintf("its stack trace is %s calling itself: most likely a stack overflow (a recursion too deep)", cutName(name))
}

// cutName keeps a function name from the plugin a readable length.
func cutName(name string) string {
	const max = 120
	if len(name) <= max {
		return name
	}
	cut := max
	for cut > 0 && name[cut]&0xC0 == 0x80 {
		cut--
	}
	return name[:cut] + "…"
}

// noStepHandler is why a plugin whose kit reports no step handler is
// refused. The usual cause is a Go or TinyGo plugin that registers its
// handlers in main, which a reactor (-buildmode=c-shared) never runs.
const noStepHandler = "defines no step handler, which every plugin must: with the Go kit, call agent.HandleStep in an init function, not in main (a plugin's main never runs)"
