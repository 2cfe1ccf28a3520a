package hostapi

import (
	"fmt"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/tetratelabs/wazero/api"
)

// progress(msg, msg_len, output, output_len) -> 0
//
// Both sizes are checked before a byte is read: either may name all of
// the plugin's memory.
func (f *functions) progress(c *call, mod api.Module, stack []uint64) int32 {
	msg, errno := c.view(mod, arg(stack, 0), arg(stack, 1))
	if errno != 0 {
		return errno
	}
	if len(msg) > abi.MaxProgressMessageBytes {
		return c.fail(abi.ErrLimit, fmt.Sprintf("progress message of %d bytes is over its limit of %d bytes", len(msg), abi.MaxProgressMessageBytes))
	}
	out, errno := c.view(mod, arg(stack, 2), arg(stack, 3))
	if errno != 0 {
		return errno
	}
	if len(out) > abi.MaxProgressOutputBytes {
		return c.fail(abi.ErrLimit, fmt.Sprintf("progress output of %d bytes is over its limit of %d bytes", len(out), abi.MaxProgressOutputBytes))
	}
	if err := c.host.Progress(c.ctx, msg, out); err != nil {
		return c.failErr(err)
	}
	return 0
}
