package hostapi

import (
	"fmt"
	"math"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/tetratelabs/wazero/api"
)

// arg returns the i-th i32 argument as the unsigned pointer or length it
// stands for. A negative length becomes a huge one, which view refuses.
func arg(stack []uint64, i int) uint32 { return api.DecodeU32(stack[i]) }

// view is the one way host functions read guest memory: the bytes at
// [ptr, ptr+n), bounds-checked against the instance's memory (the sum is
// computed without overflow). The slice aliases guest memory; copy what
// outlives the host call.
func (c *call) view(mod api.Module, ptr, n uint32) ([]byte, int32) {
	mem := mod.Memory()
	if mem == nil {
		return nil, c.fail(abi.ErrFault, "the plugin has no memory")
	}
	if uint64(ptr)+uint64(n) > uint64(mem.Size()) {
		return nil, c.fail(abi.ErrFault, fmt.Sprintf("pointer %d + length %d is outside the plugin's memory of %d bytes", ptr, n, mem.Size()))
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		return nil, c.fail(abi.ErrFault, fmt.Sprintf("pointer %d + length %d is outside the plugin's memory", ptr, n))
	}
	return b, 0
}

// copyOut implements the ABI's sized-read convention: data is written to
// [buf, buf+capacity) only if it fits, and its length is always returned,
// so a plugin can call again with a buffer of the right size. The buffer
// must lie in the plugin's memory either way (ErrFault).
func (c *call) copyOut(mod api.Module, data []byte, buf, capacity uint32) int32 {
	dst, errno := c.view(mod, buf, capacity)
	if errno != 0 {
		return errno
	}
	if len(data) > math.MaxInt32 {
		return c.fail(abi.ErrLimit, "the data is larger than 2 GiB")
	}
	if len(data) <= len(dst) {
		copy(dst, data)
	}
	return int32(len(data))
}
