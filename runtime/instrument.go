package runtime

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The exports an instrumented module has besides the plugin's own. A
// plugin whose exports start with the prefix is not instrumented.
const (
	snapshotExportPrefix = "agentrt.snapshot."
	// instantiateExport does what instantiating the plugin's module did:
	// it copies its data segments into memory, then runs its start
	// function.
	instantiateExport = snapshotExportPrefix + "instantiate"
	// dropExport drops the data segments instantiateExport would copy: an
	// instance that starts from a snapshot calls it, so that its segments
	// are in the state they would be in after instantiation.
	dropExport = snapshotExportPrefix + "drop"
	// globalExportPrefix + N is the module's mutable global N.
	globalExportPrefix = snapshotExportPrefix + "global."
)

// instrumented is a plugin's module rewritten so that an instance can
// start either way: by running its initialization, as the module would
// have, or from a snapshot of the state an initialization left.
//
// The rewrite makes every active data segment passive and adds a function,
// instantiateExport, that copies them into memory and then calls the
// start function (the start section is removed). An instance that runs its
// initialization calls it, then _initialize; one that starts from a
// snapshot gets its memory from the snapshot and never copies a segment.
// Every mutable global is exported, so that a snapshot can read and set
// it. Nothing else changes: code, tables, element segments and the
// plugin's exports are the module's (Compile then has lazyTable rewrite
// the table's segments and the code that calls through it).
//
// Segments that lie a few bytes apart at most in memory are merged into
// one (the gap between them zeros, which fresh memory holds anyway) when
// no code can name a segment (the module has no data count section) and
// no two overlap. wazero does work at every instantiation for
// every segment: Go's linker emits some 36,000 small ones, and copying them
// took 9 ms of the 14 a Go plugin's instance took to start.
type instrumented struct {
	code []byte
	// globals are the module's mutable globals, in index order; each is
	// exported as globalExportPrefix + its index.
	globals []instrumentedGlobal
	// drop is whether instances from a snapshot call dropExport: the
	// module's code can name data segments.
	drop bool
	// data are the memory ranges the module's data segments initialize,
	// where their offsets are constant.
	data []memoryRange
	// noSnapshot says why no instance may start from a snapshot of this
	// module; "" if one may.
	noSnapshot string
	// funcs is how many functions the module defines; the instrumented
	// one's come after them.
	funcs uint32
}

type instrumentedGlobal struct {
	index uint32
	typ   byte   // a value type: 0x7f i32, 0x7e i64, 0x7d f32, 0x7c f64
	name  string // its export's
}

// memoryRange is the bytes [start, end) of linear memory.
type memoryRange struct{ start, end uint32 }

// maxSnapshotGlobals is the most mutable globals a module may have and
// get a snapshot: Go's plugins have 8, TinyGo's and Rust's 1.
const maxSnapshotGlobals = 1000

// mergeGap is the most zero bytes between two data segments merged into
// one. Go's plugins have runs of under 32 bytes of zeros between most of
// theirs; 4 KiB makes one or a few segments of them.
const mergeGap = 4 << 10

// errNotInstrumented is instrument's answer for a module it leaves as it
// is: its instances run their initialization, as they always have.
type errNotInstrumented struct{ why string }

func (e *errNotInstrumented) Error() string { return e.why }

// instrument rewrites code, a module prepareModule accepted, as
// instrumented describes. A module it cannot rewrite (it exports a name
// agentrt reserves, or lacks a section a plugin has) is an
// *errNotInstrumented; a module whose data could never be instantiated
// (a constant offset outside the memory's initial size) is an error
// saying so, which is what instantiating it would have said.
//
// What it costs: one pass over the module's sections, and over its data
// segments; a copy of the module. Function bodies are not read.
func instrument(code []byte) (*instrumented, error) {
	m, err := parseSections(code)
	if err != nil {
		return nil, err
	}
	for _, id := range []byte{sectionType, sectionFunction, sectionExport, sectionCode} {
		if m.sections[id] == nil {
			return nil, &errNotInstrumented{fmt.Sprintf("it has no %s section", sectionNames[id])}
		}
	}
	if m.sections[sectionMemory] == nil {
		return nil, &errNotInstrumented{"it defines no memory"}
	}
	out := &instrumented{}

	funcImports, err := m.countFuncImports()
	if err != nil {
		return nil, err
	}
	globals, err := m.globals()
	if err != nil {
		return nil, err
	}
	mutable := 0
	for _, g := range globals {
		if g.mutable {
			mutable++
		}
	}
	for i, g := range globals {
		if !g.mutable {
			continue
		}
		if mutable > maxSnapshotGlobals {
			// Each would be an export, and wazero's work for each export
			// is per function (module.go's maxExports).
			out.noSnapshot = fmt.Sprintf("it has %d mutable globals; a snapshot holds at most %d", mutable, maxSnapshotGlobals)
			break
		}
		switch g.typ {
		case 0x7f, 0x7e, 0x7d, 0x7c:
			out.globals = append(out.globals, instrumentedGlobal{index: uint32(i), typ: g.typ, name: globalExportName(uint32(i))})
		default:
			out.noSnapshot = fmt.Sprintf("its global %d is a mutable %s, which a snapshot cannot hold", i, valueTypeName(g.typ))
		}
	}
	exports, exportCount, err := m.exports()
	if err != nil {
		return nil, err
	}
	for _, name := range exports {
		if strings.HasPrefix(name, snapshotExportPrefix) {
			return nil, &errNotInstrumented{fmt.Sprintf("it exports %q, a name agentrt reserves", name)}
		}
	}
	minPages, err := m.memoryMin()
	if err != nil {
		return nil, err
	}
	segments, err := m.dataSegments(globals)
	if err != nil {
		return nil, err
	}
	for i, s := range segments {
		if s.passive {
			out.noSnapshot = fmt.Sprintf("its data segment %d is passive: whether its initialization dropped it is not in a snapshot", i)
			continue
		}
		if s.constant {
			if end := uint64(s.offset) + uint64(len(s.bytes)); end > uint64(minPages)*65536 {
				return nil, fmt.Errorf("its data segment %d (%d bytes at %d) lies outside its memory's initial %s",
					i, len(s.bytes), s.offset, byteSize(uint64(minPages)*65536))
			}
			out.data = append(out.data, memoryRange{s.offset, s.offset + uint32(len(s.bytes))})
		}
	}
	hasDataCount := m.sections[sectionDataCount] != nil
	out.drop = hasDataCount && len(segments) > 0
	if !hasDataCount {
		segments = mergeSegments(segments)
	}

	start, hasStart, err := m.start()
	if err != nil {
		return nil, err
	}
	types, err := m.countOf(sectionType)
	if err != nil {
		return nil, err
	}
	funcs, err := m.countOf(sectionFunction)
	if err != nil {
		return nil, err
	}
	out.funcs = funcs

	// The new functions: instantiate, and drop where code can name segments.
	newType := types // () -> ()
	instantiateIdx := funcImports + funcs
	bodies := [][]byte{instantiateBody(segments, start, hasStart)}
	if out.drop {
		bodies = append(bodies, dropBody(segments))
	}

	var exportsAdded [][]byte
	exportsAdded = append(exportsAdded, exportEntry(instantiateExport, 0x00, instantiateIdx))
	if out.drop {
		exportsAdded = append(exportsAdded, exportEntry(dropExport, 0x00, instantiateIdx+1))
	}
	for _, g := range out.globals {
		exportsAdded = append(exportsAdded, exportEntry(g.name, 0x03, g.index))
	}

	needDataCount := len(segments) > 0
	b := make([]byte, 0, len(code)+64+len(exportsAdded)*32)
	b = append(b, code[:8]...)
	for _, s := range m.order {
		switch s.id {
		case sectionType:
			b = appendSection(b, s.id, appendVecAppend(m.sections[sectionType], types, []byte{0x60, 0x00, 0x00}))
		case sectionFunction:
			extra := appendULEB(nil, uint64(newType))
			if out.drop {
				extra = appendULEB(extra, uint64(newType))
			}
			b = appendSection(b, s.id, appendVecAppend(m.sections[sectionFunction], funcs, extra, len(bodies)))
		case sectionExport:
			b = appendSection(b, s.id, appendVecAppend(m.sections[sectionExport], exportCount, concatBytes(exportsAdded), len(exportsAdded)))
		case sectionStart:
			// Removed: instantiateExport calls it, once the data is in memory.
		case sectionDataCount:
			b = appendSection(b, s.id, appendULEB(nil, uint64(len(segments))))
		case sectionCode:
			if needDataCount && !hasDataCount {
				b = appendSection(b, sectionDataCount, appendULEB(nil, uint64(len(segments))))
			}
			codeCount, err := m.countOf(sectionCode)
			if err != nil {
				return nil, err
			}
			var added []byte
			for _, body := range bodies {
				added = appendULEB(added, uint64(len(body)))
				added = append(added, body...)
			}
			b = appendSection(b, s.id, appendVecAppend(m.sections[sectionCode], codeCount, added, len(bodies)))
		case sectionData:
			b = appendSection(b, s.id, passiveDataSection(segments))
		default:
			b = append(b, code[s.start:s.end]...)
		}
	}
	out.code = b
	return out, nil
}

func globalExportName(index uint32) string { return fmt.Sprintf("%s%d", globalExportPrefix, index) }

// instantiateBody is the body of instantiateExport: memory.init and
// data.drop of every segment that was active, in order, then a call of
// the start function.
func instantiateBody(segments []dataSegment, start uint32, hasStart bool) []byte {
	body := []byte{0x00} // no locals
	for i, s := range segments {
		if s.passive {
			continue
		}
		body = append(body, s.offsetExpr...) // leaves the offset, an i32
		body = append(body, 0x41, 0x00)      // i32.const 0: from the segment's start
		body = append(body, 0x41)
		body = appendSLEB(body, int64(int32(uint32(len(s.bytes)))))
		body = append(body, 0xfc, 0x08) // memory.init
		body = appendULEB(body, uint64(i))
		body = append(body, 0x00, 0xfc, 0x09) // memory 0; data.drop
		body = appendULEB(body, uint64(i))
	}
	if hasStart {
		body = append(body, 0x10)
		body = appendULEB(body, uint64(start))
	}
	return append(body, 0x0b)
}

// dropBody is the body of dropExport: data.drop of every segment that was
// active.
func dropBody(segments []dataSegment) []byte {
	body := []byte{0x00}
	for i, s := range segments {
		if !s.passive {
			body = append(body, 0xfc, 0x09)
			body = appendULEB(body, uint64(i))
		}
	}
	return append(body, 0x0b)
}

// passiveDataSection is the data section of segments, every one of them
// passive (flag 1).
func passiveDataSection(segments []dataSegment) []byte {
	b := appendULEB(nil, uint64(len(segments)))
	for _, s := range segments {
		b = append(b, 0x01)
		b = appendULEB(b, uint64(len(s.bytes)))
		b = append(b, s.bytes...)
	}
	return b
}

// mergeSegments merges active segments with constant offsets that lie
// no more than mergeGap bytes apart in memory into one each, in memory
// order. It merges nothing unless every segment is active and constant and
// no two overlap: then the order they are copied in makes no difference,
// and a gap filled with zeros holds no other segment's bytes.
func mergeSegments(segments []dataSegment) []dataSegment {
	for _, s := range segments {
		if s.passive || !s.constant {
			return segments
		}
	}
	sorted := slices.Clone(segments)
	slices.SortStableFunc(sorted, func(a, b dataSegment) int { return cmp.Compare(a.offset, b.offset) })
	// The zeros added stay under the bytes the segments hold: segments a
	// gap apart all across a large memory would otherwise make a module of
	// a few bytes a merged segment of the whole memory.
	var zerosLeft uint64
	for _, s := range segments {
		zerosLeft += uint64(len(s.bytes))
	}
	var merged []dataSegment
	for _, s := range sorted {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			lastEnd := uint64(last.offset) + uint64(len(last.bytes))
			if uint64(s.offset) < lastEnd {
				return segments // they overlap
			}
			if gap := uint64(s.offset) - lastEnd; gap <= mergeGap && gap <= zerosLeft {
				zerosLeft -= gap
				last.bytes = append(last.bytes, make([]byte, gap)...)
				last.bytes = append(last.bytes, s.bytes...)
				continue
			}
		}
		s.bytes = append([]byte(nil), s.bytes...) // merged ones are appended to
		merged = append(merged, s)
	}
	for i := range merged {
		merged[i].offsetExpr = appendSLEB([]byte{0x41}, int64(int32(merged[i].offset)))
	}
	return merged
}

// Section ids beyond those module.go names.
const (
	sectionType      = 1
	sectionImport    = 2
	sectionFunction  = 3
	sectionMemory    = 5
	sectionGlobal    = 6
	sectionExport    = 7
	sectionStart     = 8
	sectionCode      = 10
	sectionData      = 11
	sectionDataCount = 12
)

// parsedModule is a module's sections, located: prepareModule has checked
// that they are well formed.
type parsedModule struct {
	code     []byte
	order    []sectionSpan
	sections map[byte][]byte // the contents of each non-custom section
}

type sectionSpan struct {
	id         byte
	start, end int // the whole section, header included
}

func parseSections(code []byte) (*parsedModule, error) {
	if len(code) < 8 {
		return nil, errors.New("is not a WebAssembly module (truncated header)")
	}
	m := &parsedModule{code: code, sections: map[byte][]byte{}}
	for off := 8; off < len(code); {
		id := code[off]
		c := cursor{b: code, off: off + 1, end: len(code), what: "a section header"}
		size := c.u32()
		if c.err != nil || uint64(size) > uint64(c.left()) {
			return nil, fmt.Errorf("has a truncated section at byte %d", off)
		}
		end := c.off + int(size)
		m.order = append(m.order, sectionSpan{id, off, end})
		if id != sectionCustom {
			m.sections[id] = code[c.off:end]
		}
		off = end
	}
	return m, nil
}

func (m *parsedModule) cursor(id byte) *cursor {
	b := m.sections[id]
	return &cursor{b: b, end: len(b), what: sectionLabel(id)}
}

// countOf is the count of the vector section id holds (0 without one).
func (m *parsedModule) countOf(id byte) (uint32, error) {
	if m.sections[id] == nil {
		return 0, nil
	}
	c := m.cursor(id)
	n := c.u32()
	return n, c.err
}

func (m *parsedModule) countFuncImports() (uint32, error) {
	n, err := m.countImports()
	if err == nil && n.funcs != n.all {
		return 0, &errNotInstrumented{"it imports something other than a function"}
	}
	return n.funcs, err
}

type parsedGlobal struct {
	typ     byte
	mutable bool
	init    []byte // its constant expression, end included
}

func (m *parsedModule) globals() ([]parsedGlobal, error) {
	if m.sections[sectionGlobal] == nil {
		return nil, nil
	}
	c := m.cursor(sectionGlobal)
	n := c.u32()
	var gs []parsedGlobal
	for i := uint32(0); i < n && c.err == nil; i++ {
		g := parsedGlobal{typ: c.u8(), mutable: c.u8() == 1}
		start := c.off
		c.constExpr()
		g.init = c.b[start:c.off]
		gs = append(gs, g)
	}
	return gs, c.err
}

// exports returns the names of the module's exports and their count.
func (m *parsedModule) exports() ([]string, uint32, error) {
	c := m.cursor(sectionExport)
	n := c.u32()
	var names []string
	for i := uint32(0); i < n && c.err == nil; i++ {
		names = append(names, string(c.name("an export name")))
		c.u8()
		c.u32()
	}
	return names, n, c.err
}

func (m *parsedModule) memoryMin() (uint32, error) {
	c := m.cursor(sectionMemory)
	if n := c.u32(); n != 1 || c.err != nil {
		return 0, &errNotInstrumented{"it defines no memory"}
	}
	min, _, _ := c.limits("its memory", 0)
	return min, c.err
}

func (m *parsedModule) start() (uint32, bool, error) {
	if m.sections[sectionStart] == nil {
		return 0, false, nil
	}
	c := m.cursor(sectionStart)
	idx := c.u32()
	return idx, true, c.err
}

type dataSegment struct {
	passive    bool
	offsetExpr []byte // the instructions that compute its offset, without end
	constant   bool   // offset is known
	offset     uint32
	bytes      []byte
}

func (m *parsedModule) dataSegments(globals []parsedGlobal) ([]dataSegment, error) {
	if m.sections[sectionData] == nil {
		return nil, nil
	}
	c := m.cursor(sectionData)
	n := c.u32()
	segments := make([]dataSegment, 0, min(n, 1<<16))
	for i := uint32(0); i < n && c.err == nil; i++ {
		var s dataSegment
		switch flags := c.u32(); flags {
		case 1:
			s.passive = true
		case 0, 2:
			if flags == 2 {
				if mem := c.u32(); mem != 0 && c.err == nil {
					return nil, fmt.Errorf("its data segment %d is for memory %d; a module has one memory", i, mem)
				}
			}
			start := c.off
			c.constExpr()
			if c.err != nil {
				break
			}
			s.offsetExpr = c.b[start : c.off-1]
			if v, ok := evalConstI32(s.offsetExpr, globals, 0); ok {
				s.constant, s.offset = true, v
			}
		}
		s.bytes = c.bytes("data segment %d", uint64(i))
		segments = append(segments, s)
	}
	return segments, c.err
}

// evalConstI32 evaluates the constant expression expr (without its end)
// of type i32: i32.const, global.get of an immutable global whose own
// initializer it can evaluate, and i32.add, i32.sub and i32.mul. It
// reports false for anything else.
func evalConstI32(expr []byte, globals []parsedGlobal, depth int) (uint32, bool) {
	if depth > 8 {
		return 0, false
	}
	c := cursor{b: expr, end: len(expr), what: "a constant expression"}
	var stack []uint32
	for c.off < c.end && c.err == nil {
		switch op := c.u8(); op {
		case 0x41:
			v := readSLEB(&c)
			stack = append(stack, uint32(int32(v)))
		case 0x23:
			g := c.u32()
			if int(g) >= len(globals) || globals[g].mutable || globals[g].typ != 0x7f {
				return 0, false
			}
			init := globals[g].init
			v, ok := evalConstI32(init[:len(init)-1], globals, depth+1)
			if !ok {
				return 0, false
			}
			stack = append(stack, v)
		case 0x6a, 0x6b, 0x6c:
			if len(stack) < 2 {
				return 0, false
			}
			a, b := stack[len(stack)-2], stack[len(stack)-1]
			stack = stack[:len(stack)-2]
			switch op {
			case 0x6a:
				stack = append(stack, a+b)
			case 0x6b:
				stack = append(stack, a-b)
			default:
				stack = append(stack, a*b)
			}
		default:
			return 0, false
		}
	}
	if c.err != nil || len(stack) != 1 {
		return 0, false
	}
	return stack[0], true
}

// readSLEB reads a signed LEB128 number of at most 64 bits.
func readSLEB(c *cursor) int64 {
	var v int64
	var shift uint
	for {
		b := c.u8()
		if c.err != nil {
			return 0
		}
		v |= int64(b&0x7f) << shift
		shift += 7
		if b < 0x80 {
			if shift < 64 && b&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
		if shift >= 70 {
			c.failf("%s has a number too large for 64 bits", c.what)
			return 0
		}
	}
}

func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendSection(b []byte, id byte, content []byte) []byte {
	b = append(b, id)
	b = appendULEB(b, uint64(len(content)))
	return append(b, content...)
}

// appendVecAppend is the contents of a vector section of count elements
// with added (k elements, 1 unless given) appended after them.
func appendVecAppend(section []byte, count uint32, added []byte, k ...int) []byte {
	n := 1
	if len(k) > 0 {
		n = k[0]
	}
	c := cursor{b: section, end: len(section)}
	c.u32() // the count, checked by prepareModule
	b := appendULEB(nil, uint64(count)+uint64(n))
	b = append(b, section[c.off:]...)
	return append(b, added...)
}

func exportEntry(name string, kind byte, index uint32) []byte {
	b := appendULEB(nil, uint64(len(name)))
	b = append(b, name...)
	b = append(b, kind)
	return appendULEB(b, uint64(index))
}

func concatBytes(parts [][]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func valueTypeName(t byte) string {
	switch t {
	case 0x7f:
		return "i32"
	case 0x7e:
		return "i64"
	case 0x7d:
		return "f32"
	case 0x7c:
		return "f64"
	case 0x7b:
		return "v128"
	case 0x70:
		return "funcref"
	case 0x6f:
		return "externref"
	}
	return fmt.Sprintf("type 0x%02x", t)
}
