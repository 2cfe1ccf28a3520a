package hostapi

import (
	"context"
	"errors"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// The host-call limit stops a call as the plugin's failure, of its own
// cause: the runtime passes it on as it is, and metrics count it apart.
func TestTheHostCallLimitIsAPluginFailureOfItsOwnCause(t *testing.T) {
	g := newGuest(t, newFakeHost(), Config{MaxCalls: 10})
	if _, err := g.mod.ExportedFunction("flood").Call(g.ctx, 10); err != nil {
		t.Fatalf("10 host calls, at the limit: %v", err)
	}
	g.ctx = WithHost(context.Background(), newFakeHost())
	_, err := g.mod.ExportedFunction("flood").Call(g.ctx, 11)
	var f *protocol.PluginFailure
	if !errors.As(err, &f) || f.Cause != protocol.CauseHostLimit || protocol.ErrorCode(err) != protocol.EPLUGIN {
		t.Fatalf("11 host calls over a limit of 10: %v (%T); want a plugin failure of cause %s", err, err, protocol.CauseHostLimit)
	}
}
