package runtime

import "fmt"

// stateOutsideSnapshot reads every instruction of the module's functions
// and returns why a snapshot of an instance would miss state the
// instance's initialization may have changed, or "" if it would miss none.
//
// A snapshot holds linear memory and globals. Tables, and whether a data
// or element segment was dropped, are not in it: an instance from the
// snapshot has the module's tables and segments as instantiation leaves
// them. So a module that has an instruction that changes a table
// (table.set, table.grow, table.fill, table.copy, table.init) or drops or
// reads a segment (elem.drop, data.drop, memory.init) anywhere in its code
// gets no snapshot, whether or not its initialization runs it: telling
// which functions initialization reaches would need the whole call graph,
// call_indirect included. Go's, TinyGo's and Rust's plugins have none of
// them. An instruction the scan does not know (a proposal agentrt does not
// enable, which wazero would refuse anyway) gets no snapshot either.
//
// What it costs: one pass over the code section, 15 to 20 ms for a Go
// plugin of 3.8 MiB; it allocates nothing per instruction.
//
// Only the first funcs functions are read: those an instrumented module
// adds after them (instrument) drop segments by design.
func stateOutsideSnapshot(code []byte, funcs uint32) string {
	m, err := parseSections(code)
	if err != nil || m.sections[sectionCode] == nil {
		return "its code could not be read"
	}
	imports, _ := m.countFuncImports()
	c := m.cursor(sectionCode)
	n := min(c.u32(), funcs)
	for i := uint32(0); i < n && c.err == nil; i++ {
		body, _, ok := c.functionBody()
		if !ok {
			break
		}
		if why := scanInstructions(&body); why != "" {
			return fmt.Sprintf("function %d %s", uint64(imports)+uint64(i), why)
		}
	}
	if c.err != nil {
		return "its code could not be read"
	}
	return ""
}

// scanInstructions reads the instructions of one function body and says
// which one puts state outside a snapshot, or that one is unknown.
func scanInstructions(c *cursor) string {
	return eachInstruction(c, func(in instruction) string {
		switch {
		case in.op == 0x26:
			return "changes a table (table.set)"
		case in.op != 0xfc:
			return ""
		}
		switch in.sub {
		case 8:
			return "reads a data segment (memory.init)"
		case 9:
			return "drops a data segment (data.drop)"
		case 12:
			return "changes a table (table.init)"
		case 13:
			return "drops an element segment (elem.drop)"
		case 14:
			return "changes a table (table.copy)"
		case 15:
			return "changes a table (table.grow)"
		case 17:
			return "changes a table (table.fill)"
		}
		return ""
	})
}

// An instruction is one instruction of a function body, as
// eachInstruction reads it.
type instruction struct {
	op  byte   // its opcode
	sub uint32 // after the prefixes 0xfc and 0xfd, the opcode that follows
	at  int    // the offset of its first byte in the module
}

// eachInstruction reads the instructions of one function body from c,
// immediates included, and calls visit with each, until visit returns
// something other than "", which it returns. An instruction it does not
// know stops it, with a message saying which. It allocates nothing.
func eachInstruction(c *cursor, visit func(instruction) string) string {
	for c.off < c.end && c.err == nil {
		in := instruction{at: c.off}
		in.op = c.u8()
		switch op := in.op; {
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1:
			// unreachable nop else end return drop select ref.is_null
		case op >= 0x02 && op <= 0x04: // block loop if
			if !blockType(c) {
				return fmt.Sprintf("has a block type agentrt does not know at byte %d", in.at+1)
			}
		case op == 0x0c, op == 0x0d, op == 0x10, op == 0x12, op == 0xd2,
			op >= 0x20 && op <= 0x26, op == 0x3f, op == 0x40:
			// br br_if call return_call ref.func locals globals table.get
			// table.set memory.size memory.grow
			c.u32()
		case op == 0x0e: // br_table
			n := c.u32()
			for i := uint32(0); i <= n && c.err == nil; i++ {
				c.u32()
			}
		case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
			c.u32()
			c.u32()
		case op == 0x1c: // select t*
			n := c.u32()
			for i := uint32(0); i < n && c.err == nil; i++ {
				if t := c.u8(); !simpleValueType(t) && c.err == nil {
					return fmt.Sprintf("has a typed select of a type agentrt does not know (0x%02x at byte %d)", t, c.off-1)
				}
			}
		case op >= 0x28 && op <= 0x3e: // loads and stores
			c.u32()
			c.u32()
		case op == 0x41:
			c.skipSigned(32)
		case op == 0x42:
			c.skipSigned(64)
		case op == 0x43:
			c.skip(4)
		case op == 0x44:
			c.skip(8)
		case op >= 0x45 && op <= 0xc4: // numeric, sign extension
		case op == 0xd0: // ref.null
			c.u8()
		case op == 0xfc:
			in.sub = c.u32()
			if !fcImmediates(c, in.sub) {
				return fmt.Sprintf("has an instruction agentrt does not know (0xfc %d at byte %d)", in.sub, c.off)
			}
		case op == 0xfd:
			// wazero reads the opcode after the prefix as one byte, not as
			// the LEB128 number the specification has; a compiler's
			// encoding of one of 0x80 or more (0x80 0x01) it reads as that
			// opcode and a nop. Reading it as wazero does is what keeps
			// an instruction from hiding in the second byte.
			in.sub = uint32(c.u8())
			simdImmediates(c, in.sub)
		default:
			return fmt.Sprintf("has an instruction agentrt does not know (opcode 0x%02x at byte %d)", op, c.off-1)
		}
		if c.err != nil {
			break
		}
		if why := visit(in); why != "" {
			return why
		}
	}
	if c.err != nil {
		return "could not be read"
	}
	return ""
}

// blockType reads a block type, or reports that it is one it does not
// know: a typed reference (0x63, 0x64, then a heap type), of the
// function-references proposal agentrt does not enable, which wazero
// nevertheless reads.
func blockType(c *cursor) bool {
	switch b := c.u8(); {
	case c.err != nil:
	case simpleValueType(b), b == 0x40:
	case b == 0x63, b == 0x64:
		return false
	default: // a type index, a signed LEB128 of 33 bits whose first byte was b
		for b >= 0x80 && c.err == nil {
			b = c.u8()
		}
	}
	return true
}

// simpleValueType is whether t is a value type of one byte: i32, i64, f32,
// f64, v128, funcref or externref.
func simpleValueType(t byte) bool { return t >= 0x7b && t <= 0x7f || t == 0x70 || t == 0x6f }

// fcImmediates reads the immediates of the instruction 0xfc sub
// (saturating truncation, bulk memory and tables), or reports that it
// does not know it.
func fcImmediates(c *cursor, sub uint32) bool {
	switch sub {
	case 0, 1, 2, 3, 4, 5, 6, 7: // trunc_sat
	case 8: // memory.init: a segment, a memory
		c.u32()
		c.u8()
	case 10, 12, 14: // memory.copy, table.init, table.copy: two indexes
		c.u32()
		c.u32()
	case 9, 11, 13, 15, 16, 17: // data.drop, memory.fill, elem.drop, table.grow, table.size, table.fill
		c.u32()
	default:
		return false
	}
	return true
}

// simdImmediates reads the immediates of the instruction 0xfd sub
// (fixed-width SIMD).
func simdImmediates(c *cursor, sub uint32) {
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads, stores, load zero: memarg
		c.u32()
		c.u32()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		c.skip(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		c.u8()
	case sub >= 84 && sub <= 91: // load and store lane: memarg, lane
		c.u32()
		c.u32()
		c.u8()
	}
}
