package runtime

import (
	"fmt"
	"slices"
)

// lazyTable rewrites code, an instrumented module, so that an instance
// fills its function table as its code calls through it, rather than all
// of it when it starts.
//
// Why: wazero puts every entry of every active element segment into the
// table when it instantiates a module, evaluating each entry apart and
// allocating for each, objects the garbage collector then scans. A Go
// plugin has some 2,100, TinyGo's some 250, while a step calls through a
// few dozen. Filled as used, a Go plugin's instance starts from a snapshot
// in 35 to 40 µs, with 59 allocations, where it took 420 µs and 6,814.
//
// The rewrite makes the active segments declarative (they only declare the
// functions that ref.func may name), and adds fill(i), which puts into
// entry i what the segments would have put there (with the functions it
// calls, one for each fillChunk entries), and ensure(i), which calls
// fill(i) when entry i is empty and within the segments' range, and
// returns i. It puts a call of ensure before every call_indirect and
// return_call_indirect, which take the table index from the top of the
// stack: the instruction then finds the entry in place, or, where the
// segments left it empty, empty, as it would have. (A check inline at
// each call_indirect, in a local of the function's, cost 2.5 ns a call
// against the call's 3.3, but wazero's compile time grew with the square
// of the indirect calls in a function: 19 s for one of 64 KiB.)
//
// The table is observed only through those instructions, so an instance
// cannot tell the difference: lazyTable leaves a module as it is when its
// code has any other instruction that reads or changes a table
// (table.get, table.set, table.init, table.copy, table.grow, table.fill,
// elem.drop), when it exports its table or has more than one, when a
// segment is passive, has an offset that is not a constant or does not
// fit in the table, or when an instruction is one lazyTable does not
// know. It returns why it left the module as it is ("" when it rewrote
// it). A module that calls ensure or fill itself finds the same: they
// put only what the segments would have put. What an instance could
// notice is the stack: the first call through an entry goes two calls
// deeper than the call_indirect, and every call_indirect one.
//
// What it costs, once, before the module is compiled: one pass over the
// code section and a copy of it with 2 to 6 bytes more for each
// call_indirect, 20 to 25 ms for a Go plugin of 3.8 MiB. Compiled, fill
// costs wazero about 8 µs an entry. An instance pays about 3.3 ns more for
// each call_indirect (BenchmarkIndirectCall), and the first call through
// an entry fills it.
func lazyTable(code []byte) ([]byte, string) {
	m, err := parseSections(code)
	if err != nil {
		return code, err.Error()
	}
	if m.sections[sectionElement] == nil || m.sections[sectionTable] == nil {
		return code, "it has no element segments"
	}
	for _, id := range []byte{sectionType, sectionFunction, sectionCode} {
		if m.sections[id] == nil {
			return code, fmt.Sprintf("it has no %s section", sectionNames[id])
		}
	}
	tableSize, why := m.onlyFuncTable()
	if why != "" {
		return code, why
	}
	funcImports, err := m.countFuncImports()
	if err != nil {
		return code, err.Error()
	}
	types, err := m.countOf(sectionType)
	if err != nil {
		return code, err.Error()
	}
	funcs, err := m.countOf(sectionFunction)
	if err != nil {
		return code, err.Error()
	}
	entries, declarative, why := m.tableEntries(tableSize, funcImports+funcs)
	if why != "" {
		return code, why
	}
	lo, hi := 0, len(entries)
	for lo < hi && entries[lo] == 0 {
		lo++
	}
	for hi > lo && entries[hi-1] == 0 {
		hi--
	}
	filled := 0
	for _, e := range entries[lo:hi] {
		if e != 0 {
			filled++
		}
	}
	if filled == 0 {
		return code, "its element segments put no function in its table"
	}

	ensure := funcImports + funcs
	fill := ensure + 1

	newCode, why := callEnsureBeforeIndirectCalls(m, ensure)
	if why != "" {
		return code, why
	}
	bodies := append([][]byte{ensureBody(fill, uint32(lo), uint32(hi))}, fillBodies(entries[lo:hi], uint32(lo), fill+1)...)
	var added, addedFuncs []byte
	for i, body := range bodies {
		added = appendULEB(added, uint64(len(body)))
		added = append(added, body...)
		addedFuncs = appendULEB(addedFuncs, uint64(types)+uint64(min(i, 1)))
	}
	codeCount, _ := m.countOf(sectionCode)
	newCode = appendVecAppend(newCode, codeCount, added, len(bodies))

	b := make([]byte, 0, len(code)+len(code)/16+len(entries)*8)
	b = append(b, code[:8]...)
	for _, s := range m.order {
		switch s.id {
		case sectionType:
			// ensure: (i32) -> i32; fill and its chunks: (i32) -> ()
			b = appendSection(b, s.id, appendVecAppend(m.sections[sectionType], types, []byte{0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60, 0x01, 0x7f, 0x00}, 2))
		case sectionFunction:
			b = appendSection(b, s.id, appendVecAppend(m.sections[sectionFunction], funcs, addedFuncs, len(bodies)))
		case sectionElement:
			b = appendSection(b, s.id, declarativeElements(declarative, entries))
		case sectionCode:
			b = appendSection(b, s.id, newCode)
		default:
			b = append(b, code[s.start:s.end]...)
		}
	}
	return b, ""
}

const (
	sectionElement = 9
	opCall         = 0x10
	// maxLazyTableEntries is the largest table lazyTable rewrites the
	// module of: ten times DefaultMaxTableEntries.
	maxLazyTableEntries = 1 << 20
)

// onlyFuncTable returns the size of the module's one table, a funcref
// table neither imported (prepareModule refuses that) nor exported, or why
// the module has no such table.
func (m *parsedModule) onlyFuncTable() (uint32, string) {
	c := m.cursor(sectionTable)
	if n := c.u32(); n != 1 || c.err != nil {
		return 0, fmt.Sprintf("it has %d tables", n)
	}
	if typ := c.u8(); typ != 0x70 {
		return 0, "its table is not of funcref"
	}
	size, _, _ := c.limits("its table", 0)
	if c.err != nil {
		return 0, c.err.Error()
	}
	if m.sections[sectionExport] == nil {
		return size, ""
	}
	e := m.cursor(sectionExport)
	for i, n := uint32(0), e.u32(); i < n && e.err == nil; i++ {
		e.name("an export name")
		if kind := e.u8(); kind == 0x01 {
			return 0, "it exports its table"
		}
		e.u32()
	}
	if e.err != nil {
		return 0, e.err.Error()
	}
	return size, ""
}

// tableEntries returns what the module's active element segments put in
// its table of size entries as an instance starts: for each entry, the
// index of its function plus one, or 0 for an empty one. declarative are
// the module's declarative segments, as they are encoded. A passive
// segment, one whose offset is not a constant or that does not fit in the
// table, or one whose elements are not ref.func or ref.null, is why not.
//
// It reads only what wazero would accept with agentrt's features, since
// the active segments it reads are gone from the module wazero compiles:
// an offset of i32.const, an element kind of funcref, a ref.null of func,
// and functions among the module's funcs.
func (m *parsedModule) tableEntries(size, funcs uint32) (entries []uint32, declarative [][]byte, why string) {
	// prepareModule refuses tables of more than MaxTableEntries (100,000
	// by default); this bounds what lazyTable allocates for any module.
	if size > maxLazyTableEntries {
		return nil, nil, fmt.Sprintf("its table has %d entries, over the %d lazyTable fills", size, maxLazyTableEntries)
	}
	entries = make([]uint32, size)
	c := m.cursor(sectionElement)
	n := c.u32()
	for i := uint32(0); i < n && c.err == nil; i++ {
		start := c.off
		flags := c.u32()
		if flags > 7 {
			return nil, nil, fmt.Sprintf("its element segment %d has flags %d", i, flags)
		}
		if flags&1 == 1 {
			if flags&2 == 0 {
				return nil, nil, fmt.Sprintf("its element segment %d is passive", i)
			}
			c.u8() // element kind or reference type
			skipElements(c, flags)
			declarative = append(declarative, c.b[start:c.off])
			continue
		}
		if flags&2 == 2 {
			if table := c.u32(); table != 0 {
				return nil, nil, fmt.Sprintf("its element segment %d is for table %d", i, table)
			}
		}
		if op := c.u8(); op != 0x41 {
			return nil, nil, fmt.Sprintf("its element segment %d has an offset that is not an i32.const", i)
		}
		at := c.off
		c.skipSigned(32) // refuses what wazero would: more than 32 bits
		offset := uint32(int32(readSLEB(&cursor{b: c.b, off: at, end: c.off})))
		if end := c.u8(); end != 0x0b && c.err == nil {
			return nil, nil, fmt.Sprintf("its element segment %d has an offset that is not an i32.const", i)
		}
		if flags&2 == 2 {
			// An element kind (flags 2), which must be 0x00, funcref; or a
			// reference type (flags 6), which must be funcref.
			if kind := c.u8(); kind != 0x00 && kind != 0x70 && c.err == nil {
				return nil, nil, fmt.Sprintf("its element segment %d is not of funcref", i)
			}
		}
		count := c.count("elements in element segment %d", uint64(i))
		if c.err == nil && uint64(offset)+uint64(count) > uint64(size) {
			return nil, nil, fmt.Sprintf("its element segment %d does not fit in its table", i)
		}
		for j := uint32(0); j < count && c.err == nil; j++ {
			f, ok := elementFunc(c, flags, funcs)
			if !ok {
				return nil, nil, fmt.Sprintf("its element segment %d has an element that is neither ref.func of one of its functions nor ref.null func", i)
			}
			entries[offset+j] = f
		}
	}
	if c.err != nil {
		return nil, nil, c.err.Error()
	}
	return entries, declarative, ""
}

// skipElements reads past the elements of a segment with the given flags.
func skipElements(c *cursor, flags uint32) {
	n := c.count("elements", 0)
	for j := uint32(0); j < n && c.err == nil; j++ {
		if flags&4 == 0 {
			c.u32()
		} else {
			c.constExpr()
		}
	}
}

// elementFunc reads one element of a segment with the given flags: a
// function index below funcs, or an expression ref.func of one or ref.null
// func. It returns the function's index plus one, or 0 for ref.null.
func elementFunc(c *cursor, flags, funcs uint32) (uint32, bool) {
	if flags&4 == 0 {
		f := c.u32()
		return f + 1, f < funcs && c.err == nil
	}
	switch op := c.u8(); op {
	case 0xd2: // ref.func
		f := c.u32()
		return f + 1, f < funcs && c.u8() == 0x0b && c.err == nil
	case 0xd0: // ref.null
		return 0, c.u8() == 0x70 && c.u8() == 0x0b && c.err == nil
	}
	return 0, false
}

// callEnsureBeforeIndirectCalls returns the contents of the module's code
// section with a call of ensure before every call_indirect and
// return_call_indirect, or why it could not: an instruction that reads
// or changes the table another way, or one it does not know.
func callEnsureBeforeIndirectCalls(m *parsedModule, ensure uint32) ([]byte, string) {
	call := appendULEB([]byte{opCall}, uint64(ensure))
	c := m.cursor(sectionCode)
	n := c.u32()
	out := make([]byte, 0, len(m.sections[sectionCode])+len(m.sections[sectionCode])/16)
	out = appendULEB(out, uint64(n))
	var sites []int // where the indirect calls of the body read start
	var body []byte
	for i := uint32(0); i < n && c.err == nil; i++ {
		fc, start, ok := c.functionBody()
		if !ok {
			return nil, "its code could not be read"
		}
		sites = sites[:0]
		why := eachInstruction(&fc, func(in instruction) string {
			switch {
			case in.op == 0x11 || in.op == 0x13:
				sites = append(sites, in.at)
			case in.op == 0x25:
				return "reads its table (table.get)"
			case in.op == 0x26:
				return "changes its table (table.set)"
			case in.op == 0xfc && in.sub >= 12 && in.sub <= 17 && in.sub != 16:
				return fmt.Sprintf("reads or changes its table or segments (0xfc %d)", in.sub)
			}
			return ""
		})
		if why != "" {
			return nil, fmt.Sprintf("its function %d %s", i, why)
		}
		if len(sites) == 0 {
			out = appendULEB(out, uint64(fc.end-start))
			out = append(out, c.b[start:fc.end]...)
			continue
		}
		body = body[:0]
		last := start
		for _, at := range sites {
			body = append(body, c.b[last:at]...)
			body = append(body, call...)
			last = at
		}
		body = append(body, c.b[last:fc.end]...)
		out = appendULEB(out, uint64(len(body)))
		out = append(out, body...)
	}
	if c.err != nil {
		return nil, "its code could not be read"
	}
	return out, ""
}

// ensureBody is the body of ensure(i) -> i: if entry i lies in [lo, hi)
// and is empty, it calls fill(i).
func ensureBody(fill, lo, hi uint32) []byte {
	b := []byte{0x00}               // no locals
	b = append(b, 0x20, 0x00, 0x41) // local.get 0; i32.const lo
	b = appendSLEB(b, int64(int32(lo)))
	b = append(b, 0x6b, 0x41) // i32.sub; i32.const hi-lo
	b = appendSLEB(b, int64(int32(hi-lo)))
	b = append(b,
		0x49, 0x04, 0x40, // i32.lt_u; if
		0x20, 0x00, 0x25, 0x00, 0xd1, // local.get 0; table.get 0; ref.is_null
		0x04, 0x40, 0x20, 0x00, opCall) // if; local.get 0; call fill
	b = appendULEB(b, uint64(fill))
	return append(b, 0x0b, 0x0b, 0x20, 0x00, 0x0b) // end; end; local.get 0; end
}

// fillChunk is how many entries one of the functions fill calls fills.
// wazero compiles a function in time that grows faster than its size: one
// function of a br_table over all of 16,000 entries took 600 ms to compile,
// and over 100,000 took 37 s; in functions of 256 entries (64 and 1,024
// were slower), 16,000 take 130 ms.
const (
	fillChunkBits = 8
	fillChunk     = 1 << fillChunkBits
)

// fillBodies are the bodies of fill(i), which puts into entry i the
// function entries[i-lo] names (its index plus one) and does nothing for an
// empty entry or one outside entries, and of the functions it calls, one
// for each fillChunk entries, whose indexes start at first.
func fillBodies(entries []uint32, lo, first uint32) [][]byte {
	// chunks[c] is the index of chunk c's function plus one, or 0 for a
	// chunk of empty entries only, which gets no function: a table whose
	// few entries lie far apart makes few functions.
	var chunks []uint32
	next := first
	for c := 0; c*fillChunk < len(entries); c++ {
		if slices.ContainsFunc(entries[c*fillChunk:min((c+1)*fillChunk, len(entries))], func(e uint32) bool { return e != 0 }) {
			chunks = append(chunks, next+1)
			next++
		} else {
			chunks = append(chunks, 0)
		}
	}
	// fill: a br_table on (i-lo)/fillChunk that calls the chunk's function.
	bodies := [][]byte{dispatch(chunks, lo, fillChunkBits, func(b []byte, _ int, f uint32) []byte {
		b = append(b, 0x20, 0x00, opCall) // local.get 0; call
		return appendULEB(b, uint64(f-1))
	})}
	for c, f := range chunks {
		if f == 0 {
			continue
		}
		part := entries[c*fillChunk : min((c+1)*fillChunk, len(entries))]
		base := lo + uint32(c*fillChunk)
		bodies = append(bodies, dispatch(part, base, 0, func(b []byte, j int, e uint32) []byte {
			b = append(b, 0x41)
			b = appendSLEB(b, int64(int32(base+uint32(j))))
			b = append(b, 0xd2) // ref.func
			b = appendULEB(b, uint64(e-1))
			return append(b, 0x26, 0x00) // table.set 0
		}))
	}
	return bodies
}

// dispatch is the body of a function of one parameter i that runs
// code(j, cases[j]) for j = (i-lo)>>shift and returns, and does nothing
// for j outside cases or a case of 0:
//
//	block ... block (len(cases)+1 of them)
//	  local.get 0; i32.const lo; i32.sub; i32.const shift; i32.shr_u
//	  br_table 0 1 ... len(cases)-1 (default) len(cases)
//	end  code(0, cases[0]); return
//	end  ...
//	end
func dispatch(cases []uint32, lo uint32, shift byte, code func(b []byte, j int, c uint32) []byte) []byte {
	k := uint32(len(cases))
	b := make([]byte, 0, 16+len(cases)*16)
	b = append(b, 0x00) // no locals
	for range k + 1 {
		b = append(b, 0x02, 0x40)
	}
	b = append(b, 0x20, 0x00, 0x41)
	b = appendSLEB(b, int64(int32(lo)))
	b = append(b, 0x6b, 0x41, shift, 0x76, 0x0e) // i32.sub; i32.const shift; i32.shr_u; br_table
	b = appendULEB(b, uint64(k))
	for j, c := range cases {
		if c == 0 {
			b = appendULEB(b, uint64(k))
		} else {
			b = appendULEB(b, uint64(j))
		}
	}
	b = appendULEB(b, uint64(k))
	for j, c := range cases {
		b = append(b, 0x0b) // the end of the block that label j leaves
		if c != 0 {
			b = code(b, j, c)
		}
		b = append(b, 0x0f) // return
	}
	return append(b, 0x0b, 0x0b) // the default's block; the function
}

// declarativeElements is the contents of an element section of the
// declarative segments a module had, as they were, and one more that
// declares every function entries names.
func declarativeElements(declarative [][]byte, entries []uint32) []byte {
	var funcs []uint32
	for _, e := range entries {
		if e != 0 {
			funcs = append(funcs, e-1)
		}
	}
	slices.Sort(funcs)
	funcs = slices.Compact(funcs)
	b := appendULEB(nil, uint64(len(declarative))+1)
	for _, d := range declarative {
		b = append(b, d...)
	}
	b = append(b, 0x03, 0x00) // declarative, of function indexes
	b = appendULEB(b, uint64(len(funcs)))
	for _, f := range funcs {
		b = appendULEB(b, uint64(f))
	}
	return b
}
