package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// moduleLimits bound what a module's own declarations can make the host allocate.
type moduleLimits struct {
	// MaxTableEntries bounds the entries of all the module's tables together (8 bytes of host heap each per instance).
	MaxTableEntries uint32
	// MaxLocals bounds the locals (parameters excluded) one function declares.
	// All the functions of a module together may declare MaxLocals plus one
	// per byte of their code section (8 bytes of host heap each).
	MaxLocals uint32
	// MaxInstanceBytes bounds the host heap every instance of the module
	// holds for its tables, globals, segments and imported functions
	// (instanceCost), table entries aside (MaxTableEntries counts those).
	MaxInstanceBytes uint64
	// MaxMemoryPages bounds the memory the module declares as its minimum,
	// in 64 KiB pages: the memory limit (instanceMemory holds it to that).
	MaxMemoryPages uint32
}

// What wazero v1.12 holds on the host heap for every instance of a module,
// per declared item, measured (a million of each, per instance) and
// rounded up. The counts are bounded by the module's bytes, but a module
// of a few MiB of them made every instance hold a hundred MB.
const (
	costPerTable          = 128 // measured 107
	costPerGlobal         = 96  // measured 84
	costPerElementSegment = 24  // a slice header
	costPerPassiveElement = 48  // measured 40: a reference and its evaluation
	costPerDataSegment    = 24  // a slice header (the bytes stay the module's)
	costPerImportedFunc   = 48  // measured 40 (500,000 of them): the function it resolves to
)

// prepareModule checks a module's binary before wazero decodes it and returns the code to compile.
//
// Why: wazero's decoder (v1.12) sizes its slices and maps from the counts
// a module declares before it reads the elements, so a module of a few
// dozen bytes that declares 2^32-1 imports, locals or name-map entries
// makes the host allocate tens or hundreds of GiB, and the Go runtime dies
// of it (out of memory is fatal, not a panic). prepareModule walks every
// vector of the standard sections and of the "name" section and refuses a
// count larger than the bytes left to hold it (every element takes at least
// one byte), a function whose locals add up to more than lim.MaxLocals
// (wazero allocates 8 bytes per local, and keeps them), and functions whose
// locals add up to more than lim.MaxLocals plus one per byte of code. Having
// walked every element, it also knows that each count it accepted is backed
// by that many elements. It refuses function types of more than 1,000
// parameters or results, which wazero takes quadratic time to name.
//
// Tables are the one thing wazero allocates from a number no byte backs:
// a table's minimum at instantiation, and table.grow up to its maximum (or
// 2^32) at run time, 8 bytes of Go heap per entry, outside the memory
// limit. prepareModule refuses tables whose minimums add up to more than
// lim.MaxTableEntries, and rewrites the table section so that every table
// has a maximum and the maximums add up to at most lim.MaxTableEntries: the
// entries left over by the minimums are shared equally among the tables,
// and a table keeps a smaller maximum it declares. Go's wasip1 plugins
// declare one table of about 6,200 entries and no maximum, so the rewrite
// is what lets them in; TinyGo's and Rust's declare their size as their
// maximum and come out unchanged.
//
// It also refuses imports of anything but functions (agentrt provides only
// functions) and encodings of proposals agentrt's runtime does not enable:
// GC recursive type groups (0x4e), typed references (0x63, 0x64), tables
// with an initializer (0x40), exnref (0x69), shared and 64-bit limits. It
// does not parse those, so it refuses them rather than guess their length.
//
// What it costs: one pass over the module that skips function bodies by
// their size (3 ms for a 3 MiB Go plugin, 30 µs for a 250 KiB TinyGo one),
// allocating nothing in proportion to a number the module declares, and a
// copy of the module when the table section changes. The input is never
// modified; when nothing changes, it is returned as is. Each error is one
// line that reads after "plugin NAME: ".
func prepareModule(code []byte, lim moduleLimits) ([]byte, error) {
	if len(code) < 4 || string(code[:4]) != "\x00asm" {
		return nil, errors.New("is not a WebAssembly module (bad magic)")
	}
	if len(code) < 8 {
		return nil, errors.New("is not a WebAssembly module (truncated header)")
	}
	if v := binary.LittleEndian.Uint32(code[4:8]); v != 1 {
		return nil, fmt.Errorf("is WebAssembly binary format version %d; only version 1 is supported", v)
	}
	w := moduleWalk{lim: lim}
	var seen uint32
	tableStart, tableEnd := -1, -1
	for off := 8; off < len(code); {
		id := code[off]
		if id > sectionTag {
			return nil, fmt.Errorf("has a section of unknown id %d at byte %d", id, off)
		}
		header := cursor{b: code, off: off + 1, end: len(code), what: sectionLabel(id)}
		size := header.u32()
		if header.err != nil {
			return nil, header.err
		}
		if uint64(size) > uint64(header.left()) {
			return nil, fmt.Errorf("%s is truncated: it declares %d bytes, but %d remain", header.what, size, header.left())
		}
		if id != sectionCustom {
			if seen&(1<<id) != 0 {
				return nil, fmt.Errorf("has two %s sections", sectionNames[id])
			}
			seen |= 1 << id
		}
		c := cursor{b: code, off: header.off, end: header.off + int(size), what: header.what}
		w.section(id, &c)
		if c.err == nil && c.off != c.end {
			c.failf("%s has %d bytes left over after its contents", c.what, c.left())
		}
		if c.err != nil {
			return nil, c.err
		}
		if id == sectionTable {
			tableStart, tableEnd = off, c.end
		}
		off = c.end
	}
	if copies := uint64(w.moduleName) * (uint64(w.funcImports) + uint64(w.funcs)); copies > maxModuleNameCopies {
		return nil, fmt.Errorf(`has a module name of %d bytes in its "name" section, which would be copied into the name of each of its %d functions: %d KiB in all; at most %d KiB are allowed`,
			w.moduleName, uint64(w.funcImports)+uint64(w.funcs), copies>>10, maxModuleNameCopies>>10)
	}
	w.instanceCost += uint64(len(w.tables)) * costPerTable
	if lim.MaxInstanceBytes > 0 && w.instanceCost > lim.MaxInstanceBytes {
		return nil, fmt.Errorf("declares so many tables, globals, segments and imported functions that each instance would hold %d KiB of host memory for them; at most %d KiB are allowed",
			w.instanceCost>>10, lim.MaxInstanceBytes>>10)
	}
	return w.boundTables(code, tableStart, tableEnd)
}

// Section ids, https://webassembly.github.io/spec/core/binary/modules.html.
const (
	sectionCustom = 0
	sectionTable  = 4
	sectionTag    = 13
)

var sectionNames = [...]string{"custom", "type", "import", "function", "table", "memory",
	"global", "export", "start", "element", "code", "data", "data count", "tag"}

func sectionLabel(id byte) string {
	return fmt.Sprintf("section %d (%s)", id, sectionNames[id])
}

// moduleWalk is what the walk remembers across sections.
type moduleWalk struct {
	lim         moduleLimits
	funcImports uint32       // to give functions their absolute index
	funcs       uint32       // the functions the module defines
	moduleName  int          // the length of the module name in the "name" section
	tables      []tableLimit // one per table the module defines, appended as read
	// instanceCost is the host heap an instance holds for the module's
	// tables, globals, segments and imported functions (the cost*
	// constants).
	instanceCost uint64
}

type tableLimit struct {
	refType  byte
	min, max uint32
	hasMax   bool
}

func (w *moduleWalk) section(id byte, c *cursor) {
	switch id {
	case sectionCustom:
		name := c.name("a custom section name")
		if c.err == nil && string(name) == "name" {
			c.what = `the "name" section`
			w.names(c)
		}
		c.off = c.end // other custom sections are skipped, as wazero does
	case 1:
		w.types(c)
	case 2:
		w.imports(c)
	case 3:
		n := c.count("functions", 0)
		w.funcs = n
		for i := uint32(0); i < n && c.err == nil; i++ {
			c.u32() // type index
		}
	case sectionTable:
		w.tableSection(c)
	case 5:
		w.memories(c)
	case 6:
		n := c.count("globals", 0)
		w.instanceCost += uint64(n) * costPerGlobal
		for i := uint32(0); i < n && c.err == nil; i++ {
			c.valueType()
			if mut := c.u8(); mut > 1 && c.err == nil {
				c.failf("declares global %d with mutability 0x%02x; only 0x00 and 0x01 exist", i, mut)
			}
			c.constExpr()
		}
	case 7:
		n := c.count("exports", 0)
		if n > maxExports && c.err == nil {
			c.failf("declares %d exports; at most %d are allowed", n, maxExports)
		}
		for i := uint32(0); i < n && c.err == nil; i++ {
			c.name("an export name")
			if kind := c.u8(); kind > 4 && c.err == nil {
				c.failf("declares export %d of kind 0x%02x; only 0x00 to 0x04 exist", i, kind)
			}
			c.u32() // index
		}
	case 8, 12:
		c.u32() // start function index, data count
	case 9:
		w.elements(c)
	case 10:
		w.code(c)
	case 11:
		w.data(c)
	case sectionTag:
		n := c.count("tags", 0)
		for i := uint32(0); i < n && c.err == nil; i++ {
			if attr := c.u8(); attr != 0 && c.err == nil {
				c.failf("declares tag %d with attribute 0x%02x; only 0x00 exists", i, attr)
			}
			c.u32() // type index
		}
	}
}

// maxTypeArity bounds a function type's parameters, and its results. wazero
// names each type by concatenating its value types' names one at a time,
// in time and garbage quadratic in their number: 20,000 parameters cost
// 0.5 s and 630 MiB, a million would cost half an hour. The limit is the
// one the WebAssembly JavaScript API sets
// (https://webassembly.github.io/spec/js-api/#limits); TinyGo's plugins
// have types of 45 parameters, Go's and Rust's of under 10.
const maxTypeArity = 1000

func (w *moduleWalk) types(c *cursor) {
	n := c.count("types", 0)
	for i := uint32(0); i < n && c.err == nil; i++ {
		switch form := c.u8(); {
		case c.err != nil:
		case form == 0x4e:
			c.failf("declares a recursive type group (0x4e) at type %d; agentrt does not enable the GC proposal", i)
		case form != 0x60:
			c.failf("declares type %d of form 0x%02x; only function types (0x60) exist", i, form)
		}
		for _, what := range [2][2]string{{"parameters", "parameters in type %d"}, {"results", "results in type %d"}} {
			k := c.count(what[1], uint64(i))
			if k > maxTypeArity && c.err == nil {
				c.failf("declares type %d with %d %s; at most %d are allowed", i, k, what[0], maxTypeArity)
			}
			for j := uint32(0); j < k && c.err == nil; j++ {
				c.valueType()
			}
		}
	}
}

func (w *moduleWalk) imports(c *cursor) {
	n := c.count("imports", 0)
	for i := uint32(0); i < n && c.err == nil; i++ {
		mod := c.name("an import's module name")
		name := c.name("an import name")
		kind := c.u8()
		if c.err != nil {
			return
		}
		if kind != 0 {
			what := [...]string{1: "table", 2: "memory", 3: "global", 4: "tag"}
			if int(kind) < len(what) {
				c.failf("imports %s %s; a plugin may import only functions", what[kind], quoted(mod, name))
			} else {
				c.failf("imports %s with unknown kind 0x%02x; a plugin may import only functions", quoted(mod, name), kind)
			}
			return
		}
		c.u32() // type index
		w.funcImports++
		w.instanceCost += costPerImportedFunc
	}
}

func (w *moduleWalk) tableSection(c *cursor) {
	n := c.count("tables", 0)
	for i := uint32(0); i < n && c.err == nil; i++ {
		var t tableLimit
		switch t.refType = c.u8(); t.refType {
		case 0x70, 0x6f: // funcref, externref
		case 0x40:
			c.failf("declares table %d with an initializer (0x40); agentrt does not enable the function-references proposal", i)
		case 0x63, 0x64:
			c.failf("declares table %d of a typed reference (0x%02x); agentrt does not enable the function-references proposal", i, t.refType)
		default:
			c.failf("declares table %d of element type 0x%02x; only funcref (0x70) and externref (0x6f) exist", i, t.refType)
		}
		t.min, t.max, t.hasMax = c.limits("table %d", uint64(i))
		if c.err == nil && t.hasMax && t.max < t.min {
			c.failf("declares table %d with a maximum of %d entries, below its minimum of %d", i, t.max, t.min)
		}
		w.tables = append(w.tables, t)
	}
}

func (w *moduleWalk) memories(c *cursor) {
	n := c.count("memories", 0)
	if n > 1 {
		c.failf("declares %d memories; a module may have at most one", n)
	}
	for i := uint32(0); i < n && c.err == nil; i++ {
		min, _, _ := c.limits("its memory", 0)
		if c.err == nil && min > w.lim.MaxMemoryPages {
			c.failf("declares a memory of at least %d pages (%s); the memory limit is %d pages (%s)",
				min, byteSize(uint64(min)*65536), w.lim.MaxMemoryPages, byteSize(uint64(w.lim.MaxMemoryPages)*65536))
		}
	}
}

// limits reads the limits of a table or memory (what and index name it, as
// for count): flag 0x00 then a minimum, or flag 0x01 then a minimum and a
// maximum.
func (c *cursor) limits(what string, index uint64) (min, max uint32, hasMax bool) {
	switch flag := c.u8(); {
	case c.err != nil:
	case flag == 0x00:
		min = c.u32()
	case flag == 0x01:
		min, max, hasMax = c.u32(), c.u32(), true
	case flag == 0x02 || flag == 0x03:
		c.failf("declares %s shared (limits flag 0x%02x); agentrt does not enable the threads proposal", describe(what, index), flag)
	case flag <= 0x07:
		c.failf("declares %s with 64-bit limits (flag 0x%02x); agentrt does not enable the memory64 proposal", describe(what, index), flag)
	default:
		c.failf("declares %s with limits flag 0x%02x; only 0x00 and 0x01 exist", describe(what, index), flag)
	}
	return min, max, hasMax
}

// elements walks the element section's segments, whose flags (0 to 7)
// say which of a table index, an offset, an element kind or type, and
// function indices or expressions follow.
func (w *moduleWalk) elements(c *cursor) {
	n := c.count("element segments", 0)
	w.instanceCost += uint64(n) * costPerElementSegment
	for i := uint32(0); i < n && c.err == nil; i++ {
		flags := c.u32()
		if c.err == nil && flags > 7 {
			c.failf("declares element segment %d with flags %d; only 0 to 7 exist", i, flags)
			return
		}
		if flags&3 == 2 { // active, with a table index
			c.u32()
		}
		if flags&1 == 0 { // active: an offset
			c.constExpr()
		}
		switch {
		case flags == 0 || flags == 4: // funcref implied
		case flags < 4: // an element kind: 0x00, funcref
			if kind := c.u8(); kind != 0 && c.err == nil {
				c.failf("declares element segment %d of element kind 0x%02x; only 0x00 exists", i, kind)
			}
		default: // a reference type
			switch rt := c.u8(); {
			case c.err != nil, rt == 0x70, rt == 0x6f:
			case rt == 0x63, rt == 0x64:
				c.failf("declares element segment %d of a typed reference (0x%02x); agentrt does not enable the function-references proposal", i, rt)
			default:
				c.failf("declares element segment %d of element type 0x%02x; only funcref (0x70) and externref (0x6f) exist", i, rt)
			}
		}
		var k uint32
		if flags < 4 {
			k = c.count("function indices in element segment %d", uint64(i))
			for j := uint32(0); j < k && c.err == nil; j++ {
				c.u32()
			}
		} else {
			k = c.count("expressions in element segment %d", uint64(i))
			for j := uint32(0); j < k && c.err == nil; j++ {
				c.constExpr()
			}
		}
		if flags&1 == 1 { // passive or declarative: every instance keeps its references
			w.instanceCost += uint64(k) * costPerPassiveElement
		}
	}
}

// code walks the function bodies' sizes and local declarations, and skips
// their instructions.
//
// wazero keeps 8 bytes per local of every function for as long as the
// module is compiled (and compiling a function takes time in proportion to
// its locals), so a bound per function is not enough: 10,000 functions of
// 50,000 locals each fit in 80 KiB and would hold 4 GiB. The functions
// together may declare lim.MaxLocals locals, plus one per byte of the code
// section; real plugins declare about one per 200 bytes.
func (w *moduleWalk) code(c *cursor) {
	allowed := uint64(w.lim.MaxLocals) + uint64(c.left())
	var total uint64
	n := c.count("function bodies", 0)
	for i := uint32(0); i < n && c.err == nil; i++ {
		// Messages give the function's index in the module's function
		// index space, imported functions first, as wasm-objdump and the
		// "name" section do.
		fn := uint64(w.funcImports) + uint64(i)
		size := c.u32()
		if c.err != nil {
			return
		}
		if uint64(size) > uint64(c.left()) {
			c.failf("declares the body of function %d of %d bytes, but only %d bytes of %s remain", fn, size, c.left(), c.what)
			return
		}
		body := cursor{b: c.b, off: c.off, end: c.off + int(size), what: c.what}
		decls := body.count("local declarations in function %d", fn)
		var locals uint64
		for j := uint32(0); j < decls && body.err == nil; j++ {
			locals += uint64(body.u32())
			body.valueType()
		}
		if body.err == nil && locals > uint64(w.lim.MaxLocals) {
			body.failf("function %d declares %d locals; at most %d are allowed", fn, locals, w.lim.MaxLocals)
		}
		c.off, c.err = body.end, body.err
		total += locals
	}
	if c.err == nil && total > allowed {
		c.failf("declares %d locals in all its functions; at most %d are allowed (%d, plus one per byte of its code section)",
			total, allowed, w.lim.MaxLocals)
	}
}

func (w *moduleWalk) data(c *cursor) {
	n := c.count("data segments", 0)
	w.instanceCost += uint64(n) * costPerDataSegment
	for i := uint32(0); i < n && c.err == nil; i++ {
		switch flags := c.u32(); {
		case c.err != nil:
		case flags == 0:
			c.constExpr()
		case flags == 1: // passive
		case flags == 2:
			c.u32() // memory index
			c.constExpr()
		default:
			c.failf("declares data segment %d with flags %d; only 0 to 2 exist", i, flags)
		}
		c.bytes("data segment %d", uint64(i))
	}
}

// What wazero (v1.12) builds from a module's exports and "name" section
// for every function, the first time it describes the module's functions
// (at load, when agentrt checks the imports), and at every trap:
//
//   - a name for each function, imported ones included: the module name, a
//     dot, and the function's name (or index). A module name of 1 MiB in a
//     module of 1,000 functions made the host hold 1.84 GB; of 4 MiB in
//     8,000 functions, more than the machine had.
//   - for each function, a scan of every export (for its export names)
//     and of every function's local names (for its parameters' names): the
//     exports, or the functions with local names, times the functions. A
//     module of 80,000 functions, all exported, took from 4.5 s to 39 s
//     to load (6.4 billion steps), as the machine was busy.
//   - at a trap, a stack trace of up to 30 frames, each the name of a
//     function: with a module name of 16 MiB, a trap 40 calls deep made the
//     host allocate 1.9 GB and took 31 s.
//
// So the module name may be at most maxModuleName bytes, and its copies
// (its length times the functions) at most maxModuleNameCopies bytes in
// all; a function name at most maxFunctionName bytes, so that a trap's
// stack trace names at most 30 × 16.3 KiB; and the exports and the
// functions whose locals are named at most maxExports and maxLocalNamed
// each, so that each scan takes at most a thousand steps per function
// (about 1 µs, where compiling a function takes 5 µs). Over any of these,
// the module is refused.
const (
	// maxModuleName: TinyGo names its modules "main"; Go and Rust, none.
	maxModuleName = 256
	// maxModuleNameCopies holds the names wazero builds to about 8 MiB of
	// host heap.
	maxModuleNameCopies = 4 << 20
	// maxFunctionName: TinyGo names a type assertion by its interface's
	// methods (1,441 bytes for reflect.Type); Go's longest names are
	// under 500 bytes.
	maxFunctionName = 16 << 10
	// maxExports: a plugin exports its memory and about ten functions (Go
	// 7 exports, TinyGo 15, Rust 8).
	maxExports = 1000
	// maxLocalNamed: Go, TinyGo and Rust plugins name no locals.
	maxLocalNamed = 1000
)

// names walks the "name" section's subsections: the module name (0),
// function names (1), local names (2), and others skipped by their size.
// Each must hold exactly what its size says: wazero reads subsections 0 to
// 2 without regard to their size, and would read anything left over as the
// next subsection, which this walk would not have checked.
func (w *moduleWalk) names(c *cursor) {
	for c.err == nil && c.left() > 0 {
		id := c.u8()
		size := c.u32()
		if c.err != nil {
			return
		}
		if uint64(size) > uint64(c.left()) {
			c.failf("declares name subsection %d of %d bytes, but only %d bytes of %s remain", id, size, c.left(), c.what)
			return
		}
		s := cursor{b: c.b, off: c.off, end: c.off + int(size), what: fmt.Sprintf("subsection %d of %s", id, c.what)}
		switch id {
		case 0:
			w.moduleName = len(s.name("a module name"))
			if w.moduleName > maxModuleName {
				s.failf(`has a module name of %d bytes in its "name" section; at most %d are allowed`, w.moduleName, maxModuleName)
			}
		case 1:
			n := s.count("function names", 0)
			for i := uint32(0); i < n && s.err == nil; i++ {
				fn := s.u32()
				if name := s.name("a function name"); len(name) > maxFunctionName {
					s.failf(`names function %d with %d bytes in its "name" section; at most %d are allowed`, fn, len(name), maxFunctionName)
				}
			}
		case 2:
			n := s.count("functions' local names", 0)
			if n > maxLocalNamed && s.err == nil {
				s.failf(`names the locals of %d functions in its "name" section; at most %d are allowed`, n, maxLocalNamed)
			}
			for i := uint32(0); i < n && s.err == nil; i++ {
				fn := s.u32()
				k := s.count("local names of function %d", uint64(fn))
				for j := uint32(0); j < k && s.err == nil; j++ {
					s.u32() // local index
					s.name("a local name")
				}
			}
		default:
			s.off = s.end
		}
		if s.err == nil && s.off != s.end {
			s.failf("%s has %d bytes left over after its contents", s.what, s.left())
		}
		c.off, c.err = s.end, s.err
	}
}

// boundTables refuses tables whose minimums add up to more than
// lim.MaxTableEntries and gives every table a maximum, so that the
// maximums add up to no more: each table may grow by an equal share of the
// entries the minimums leave, or to the maximum it declares if that is
// smaller. It returns code with the table section, code[start:end],
// rewritten, or code itself when no maximum changes (so that a second
// pass returns its input).
func (w *moduleWalk) boundTables(code []byte, start, end int) ([]byte, error) {
	if len(w.tables) == 0 {
		return code, nil
	}
	var sum uint64
	for _, t := range w.tables {
		sum += uint64(t.min)
	}
	limit := uint64(w.lim.MaxTableEntries)
	if sum > limit {
		return nil, fmt.Errorf("declares tables of %d entries in all; a plugin's tables may hold at most %d entries", sum, limit)
	}
	share := (limit - sum) / uint64(len(w.tables))
	changed := false
	for i := range w.tables {
		t := &w.tables[i]
		if max := uint64(t.min) + share; !t.hasMax || uint64(t.max) > max {
			t.max, t.hasMax, changed = uint32(max), true, true
		}
	}
	if !changed {
		return code, nil
	}
	content := appendULEB(nil, uint64(len(w.tables)))
	for _, t := range w.tables {
		content = append(content, t.refType, 0x01)
		content = appendULEB(content, uint64(t.min))
		content = appendULEB(content, uint64(t.max))
	}
	out := make([]byte, 0, len(code)-(end-start)+len(content)+6)
	out = append(out, code[:start]...)
	out = append(out, sectionTable)
	out = appendULEB(out, uint64(len(content)))
	out = append(out, content...)
	return append(out, code[end:]...), nil
}

// A cursor reads one section, subsection or function body of a module,
// code[off:end]. After its first error it reads zeros and keeps that error
// (as debug/dwarf's buf does), so a walk checks err once per element.
type cursor struct {
	b    []byte // the whole module, so that messages give offsets in it
	off  int
	end  int
	what string // what is read, for messages: "section 10 (code)"
	err  error
}

func (c *cursor) failf(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
	c.off = c.end
}

func (c *cursor) left() int { return c.end - c.off }

func (c *cursor) u8() byte {
	if c.err != nil {
		return 0
	}
	if c.off >= c.end {
		c.failf("%s is truncated at byte %d", c.what, c.end)
		return 0
	}
	c.off++
	return c.b[c.off-1]
}

// u32 reads an unsigned LEB128 number of 32 bits: at most 5 bytes, the
// last of which carries 4 bits, as wazero's decoder requires.
func (c *cursor) u32() uint32 {
	var v uint32
	for i := 0; ; i++ {
		b := c.u8()
		if c.err != nil {
			return 0
		}
		if i == 4 && b > 0x0f {
			c.failf("%s has a number too large for 32 bits at byte %d", c.what, c.off-1)
			return 0
		}
		v |= uint32(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v
		}
	}
}

// skipSigned skips a signed LEB128 number of 32 or 64 bits: at most 5 or
// 10 bytes, the unused bits of the last a copy of the sign bit. wazero
// accepts a superset of these encodings (it checks fewer unused bits), and
// reads exactly as many bytes of every number in it.
func (c *cursor) skipSigned(bits int) {
	last := (bits + 6) / 7 // the most bytes the number may take
	used := bits - 7*(last-1)
	for i := 1; ; i++ {
		b := c.u8()
		if c.err != nil {
			return
		}
		if i == last {
			// b's bits from the sign bit (used-1) up must be all 0 or all 1.
			if high := b >> (used - 1); high != 0 && high != 0x7f>>(used-1) {
				c.failf("%s has a number too large for %d bits at byte %d", c.what, bits, c.off-1)
			}
			return
		}
		if b < 0x80 {
			return
		}
	}
}

// count reads the length of a vector and refuses one that could not fit in
// what is left of the cursor, every element taking at least a byte. what
// says what the elements are ("imports"); a %d in it stands for index
// ("parameters in type %d"). It is formatted only for a message, so that
// the walk allocates nothing per element.
func (c *cursor) count(what string, index uint64) uint32 {
	n := c.u32()
	if c.err == nil && uint64(n) > uint64(c.left()) {
		c.failf("declares %d %s, but only %d bytes of %s remain", n, describe(what, index), c.left(), c.what)
	}
	return n
}

// bytes reads a length-prefixed byte string (a name or a data segment's
// contents); what and index say what it is, as for count.
func (c *cursor) bytes(what string, index uint64) []byte {
	n := c.u32()
	if c.err != nil {
		return nil
	}
	if uint64(n) > uint64(c.left()) {
		c.failf("declares %s of %d bytes, but only %d bytes of %s remain", describe(what, index), n, c.left(), c.what)
		return nil
	}
	c.off += int(n)
	return c.b[c.off-int(n) : c.off]
}

func (c *cursor) name(what string) []byte { return c.bytes(what, 0) }

func describe(what string, index uint64) string {
	if strings.Contains(what, "%d") {
		return fmt.Sprintf(what, index)
	}
	return what
}

// valueType reads a value type: one byte for the numeric types, v128,
// funcref and externref. The typed references of the function-references
// proposal (0x63, 0x64, then a heap type) and exnref are refused.
func (c *cursor) valueType() {
	at := c.off
	switch b := c.u8(); {
	case c.err != nil:
	case b >= 0x7b && b <= 0x7f, b == 0x70, b == 0x6f: // i32 i64 f32 f64 v128, funcref, externref
	case b == 0x63 || b == 0x64:
		c.failf("uses a typed reference (0x%02x) at byte %d; agentrt does not enable the function-references proposal", b, at)
	case b == 0x69:
		c.failf("uses exnref at byte %d; agentrt does not enable the exception-handling proposal", at)
	default:
		c.failf("has an unknown value type 0x%02x at byte %d", b, at)
	}
}

// constExpr reads a constant expression (a global's initial value, a
// segment's offset or element), up to its end (0x0b). Only the
// instructions allowed there are known; any other opcode refuses the
// module, since the walk could not tell how long its immediates are.
func (c *cursor) constExpr() {
	for c.err == nil {
		at := c.off
		switch op := c.u8(); op {
		case 0x0b: // end
			return
		case 0x41: // i32.const
			c.skipSigned(32)
		case 0x42: // i64.const
			c.skipSigned(64)
		case 0x43: // f32.const
			c.skip(4)
		case 0x44: // f64.const
			c.skip(8)
		case 0x23, 0xd2: // global.get, ref.func
			c.u32()
		case 0xd0: // ref.null
			if ht := c.u8(); ht != 0x70 && ht != 0x6f && c.err == nil {
				c.failf("has ref.null of heap type 0x%02x at byte %d; only func (0x70) and extern (0x6f) are supported", ht, at+1)
			}
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // i32 and i64 add, sub, mul (extended-const)
		case 0xfd: // v128.const
			if sub := c.u8(); sub != 0x0c && c.err == nil {
				c.failf("has vector instruction 0xfd 0x%02x at byte %d in a constant expression; only v128.const (0xfd 0x0c) is allowed there", sub, at)
			}
			c.skip(16)
		default:
			if c.err == nil {
				c.failf("has opcode 0x%02x at byte %d in a constant expression; agentrt accepts only constants, global.get, ref.null, ref.func and i32/i64 add, sub and mul there", op, at)
			}
		}
	}
}

// functionBody reads the next function body of the code section c is in:
// its size, then its local declarations. It returns a cursor on its
// instructions and where the body starts, or false when the size does not
// fit in what is left.
func (c *cursor) functionBody() (body cursor, start int, ok bool) {
	size := c.u32()
	if c.err != nil || uint64(size) > uint64(c.left()) {
		return cursor{}, 0, false
	}
	body = cursor{b: c.b, off: c.off, end: c.off + int(size), what: "a function body"}
	start, c.off = c.off, body.end
	decls := body.u32()
	for j := uint32(0); j < decls && body.err == nil; j++ {
		body.u32()
		body.u8()
	}
	return body, start, true
}

func (c *cursor) skip(n int) {
	if c.err == nil && n > c.left() {
		c.failf("%s is truncated at byte %d", c.what, c.end)
	}
	if c.err == nil {
		c.off += n
	}
}

// quoted renders an import's names for a message, quoted so that no byte
// of them can break the line, and cut to 64 bytes.
func quoted(mod, name []byte) string {
	s := string(mod) + "." + string(name)
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}

func appendULEB(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
