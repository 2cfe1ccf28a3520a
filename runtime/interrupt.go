package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// Stopping guest code when its call ends, and letting Go stop it.
//
// A call's time limit, and a server shutting down, must stop guest code
// whatever it runs. And the Go runtime must be able to pause it: parts of
// a garbage collection stop every goroutine, which it can do only where
// one runs Go code, so guest code that never leaves for Go makes the
// collection, and with it the whole process, the timer that would end
// the call included, wait for good.
//
// wazero's own way, WithCloseOnContextDone, leaves the guest's code for Go
// at the head of every loop, on every turn (about 34 ns), and starts a
// goroutine for every call into an instance. It checks nothing when a
// function is entered: a function that calls itself twice, 60 deep, has
// no loop, ran past any time limit, and stopped the process at the next
// collection.
//
// interruptible rewrites a module instead. It adds two globals, a budget
// and an interrupt flag (exported as interruptExport, which the host sets
// when the call's context ends: arm), and a function, yield, which leaves
// for Go (memory.grow 0, which wazero runs in Go), traps if the flag is
// set, and fills the budget again. At the start of every function, and at
// the head of every loop, it puts a charge of the code that follows, the
// bytes of the function's body or the loop's:
//
//	global.get $budget; i32.const size; i32.sub; global.set $budget
//	global.get $budget; i32.const 0; i32.lt_s
//	if; call $yield; end
//
// Every instruction an instance runs belongs to a function it entered or
// to a turn of a loop, each charged for all its bytes first, so an
// instance leaves for Go, and sees the flag, at least once in every
// budgetBytes of code it runs (one function's body at most more), 40 to
// 100 µs of the longest-running code here; a trap on the flag is reported
// as the timeout or cancellation it stands for. A charge costs a load, a
// store and a branch, about 1 ns (bench/sandbox: a 10-million-turn loop
// took 18 to 20 ms with it, 11 to 12 ms without, 344 to 357 ms with
// wazero's check).
//
// The globals and the function come after the module's own, where its
// code cannot name them: a module that names a global, function or type
// it does not have, which wazero would refuse, is refused here first,
// since the rewrite would make it one it has. The module's start function,
// if it has one, becomes the export startExport, so that it too runs in an
// armed instance (wazero runs a start section while it instantiates,
// before the host can reach the flag). A module with no memory is given
// an empty one, for memory.grow. A module this cannot read (an instruction
// agentrt does not know) is refused: no guest code runs unchecked.
//
// What it costs, once, before the module is compiled: a pass over the code
// section and a copy of it with about 20 bytes more for each function and
// each loop.
func interruptible(code []byte) ([]byte, error) {
	m, err := parseSections(code)
	if err != nil {
		return nil, err
	}
	imports, err := m.countImports()
	if err != nil {
		return nil, err
	}
	defined, err := m.countOf(sectionGlobal)
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
	have := moduleCounts{globals: imports.globals + defined, funcs: imports.funcs + funcs, types: types}
	budget, flag, yield := have.globals, have.globals+1, have.funcs
	exportCount, err := m.checkExports(have)
	if err != nil {
		return nil, err
	}
	start, hasStart, err := m.start()
	if err != nil {
		return nil, err
	}
	code0 := m.sections[sectionCode]
	var codeCount uint32
	var checked []byte
	if code0 != nil {
		if checked, codeCount, err = chargedCode(m, have, budget, yield); err != nil {
			return nil, err
		}
	}
	if codeCount != funcs {
		return nil, fmt.Errorf("it declares %d functions and has %d bodies", funcs, codeCount)
	}
	checked = appendVecAppend(checked, codeCount, appendBody(nil, yieldBody(budget, flag)))

	exportsAdded, nAdded := exportEntry(interruptExport, 0x03, flag), 1
	if hasStart {
		exportsAdded, nAdded = append(exportsAdded, exportEntry(startExport, 0x00, start)...), 2
	}
	globals := appendSLEB([]byte{0x7f, 0x01, 0x41}, budgetBytes)  // budget: i32, mutable
	globals = append(globals, 0x0b, 0x7f, 0x01, 0x41, 0x00, 0x0b) // flag: i32, mutable, 0
	added := map[byte][]byte{
		sectionType:     appendVecAppend(m.sections[sectionType], types, []byte{0x60, 0x00, 0x00}), // yield: () -> ()
		sectionFunction: appendVecAppend(m.sections[sectionFunction], funcs, appendULEB(nil, uint64(types))),
		sectionGlobal:   appendVecAppend(m.sections[sectionGlobal], defined, globals, 2),
		sectionExport:   appendVecAppend(m.sections[sectionExport], exportCount, exportsAdded, nAdded),
		sectionCode:     checked,
	}
	memories, err := m.countOf(sectionMemory)
	if err != nil {
		return nil, err
	}
	if imports.memories+memories == 0 {
		added[sectionMemory] = []byte{0x01, 0x01, 0x00, 0x00} // one memory of 0 pages, at most 0
	}
	b := make([]byte, 0, len(code)+len(code)/8+128)
	b = append(b, code[:8]...)
	emit := func(id byte) {
		if content, ok := added[id]; ok {
			b = appendSection(b, id, content)
			delete(added, id)
		}
	}
	for _, s := range m.order {
		if s.id != sectionCustom {
			// A section the module lacks goes before the first that
			// follows it in the specification's order.
			for _, id := range addedSections {
				if _, ok := added[id]; ok && sectionRank(id) < sectionRank(s.id) {
					emit(id)
				}
			}
		}
		switch _, ok := added[s.id]; {
		case ok:
			emit(s.id)
		case s.id == sectionStart:
			// Removed: the host calls startExport once it has armed the
			// instance.
		default:
			b = append(b, code[s.start:s.end]...)
		}
	}
	for _, id := range addedSections {
		emit(id)
	}
	return b, nil
}

// addedSections are the sections interruptible may add, in order.
var addedSections = []byte{sectionType, sectionFunction, sectionMemory, sectionGlobal, sectionExport, sectionCode}

const (
	// interruptExport is the flag interruptible adds; yield traps once
	// it is not zero.
	interruptExport = "agentrt.interrupt"
	// startExport is the module's start function, which interruptible
	// turns into an export.
	startExport = "agentrt.start"
	// budgetBytes is how many bytes of code an instance may run between
	// two visits to Go.
	budgetBytes = 1 << 16
	// maxCharge bounds one charge: a function body of more bytes is
	// charged this much, which empties the budget all the same.
	maxCharge = 1 << 24
)

// moduleCounts are how many globals, functions and types a module has,
// imports included.
type moduleCounts struct{ globals, funcs, types uint32 }

// sectionRank is where a section goes in a module, in the
// specification's order (the tag section before the global section,
// the data count section before the code section).
func sectionRank(id byte) int {
	switch id {
	case sectionTag:
		return 55
	case sectionDataCount:
		return 95
	}
	return int(id) * 10
}

// chargedCode returns the contents of the module's code section with a
// charge (see interruptible) at the start of every function and after the
// block type of every loop, and the number of bodies; or why it cannot:
// an instruction it does not know, or one that names a global, function
// or type beyond what the module has.
func chargedCode(m *parsedModule, have moduleCounts, budget, yield uint32) ([]byte, uint32, error) {
	c := m.cursor(sectionCode)
	n := c.u32()
	section := m.sections[sectionCode]
	out := make([]byte, 0, len(section)+len(section)/8)
	out = appendULEB(out, uint64(n))
	type site struct{ at, size int }
	var sites []site // where charges go, and what they charge
	var open []int   // the blocks open: the index of a loop's site, or -1
	var body []byte
	for i := uint32(0); i < n && c.err == nil; i++ {
		fc, start, ok := c.functionBody()
		if !ok {
			return nil, 0, fmt.Errorf("its function %d could not be read", i)
		}
		locals := fc.off
		sites = append(sites[:0], site{locals, fc.end - locals})
		open = append(open[:0], -1)
		why := eachInstruction(&fc, func(in instruction) string {
			imm := cursor{b: fc.b, off: in.at + 1, end: fc.end}
			switch in.op {
			case 0x02, 0x04: // block, if
				open = append(open, -1)
			case 0x03: // loop: fc is past its block type
				open = append(open, len(sites))
				sites = append(sites, site{at: fc.off})
			case 0x0b: // end
				if len(open) == 0 {
					return fmt.Sprintf("ends more blocks than it opens at byte %d", in.at)
				}
				if j := open[len(open)-1]; j >= 0 {
					sites[j].size = in.at - sites[j].at
				}
				open = open[:len(open)-1]
			case 0x23, 0x24: // global.get, global.set
				if idx := imm.u32(); idx >= have.globals {
					return fmt.Sprintf("names global %d, and the module has %d", idx, have.globals)
				}
			case 0x10, 0x12, 0xd2: // call, return_call, ref.func
				if idx := imm.u32(); idx >= have.funcs {
					return fmt.Sprintf("names function %d, and the module has %d", idx, have.funcs)
				}
			case 0x11, 0x13: // call_indirect, return_call_indirect
				if idx := imm.u32(); idx >= have.types {
					return fmt.Sprintf("names type %d, and the module has %d", idx, have.types)
				}
			}
			return ""
		})
		if why != "" {
			return nil, 0, fmt.Errorf("its function %d %s", i, why)
		}
		body = append(body[:0], c.b[start:locals]...)
		last := locals
		for _, s := range sites {
			body = append(body, c.b[last:s.at]...)
			body = appendCharge(body, budget, yield, s.size)
			last = s.at
		}
		body = append(body, c.b[last:fc.end]...)
		out = appendBody(out, body)
	}
	if c.err != nil {
		return nil, 0, fmt.Errorf("its code could not be read: %v", c.err)
	}
	return out, n, nil
}

// appendCharge appends a charge of size bytes of code to global budget,
// which calls function yield once the budget is spent.
func appendCharge(b []byte, budget, yield uint32, size int) []byte {
	b = appendULEB(append(b, 0x23), uint64(budget)) // global.get budget
	b = appendSLEB(append(b, 0x41), int64(min(max(size, 1), maxCharge)))
	b = append(b, 0x6b, 0x24)                       // i32.sub; global.set
	b = appendULEB(b, uint64(budget))               // budget
	b = appendULEB(append(b, 0x23), uint64(budget)) // global.get budget
	b = append(b, 0x41, 0x00, 0x48, 0x04, 0x40)     // i32.const 0; i32.lt_s; if
	b = appendULEB(append(b, 0x10), uint64(yield))  // call yield
	return append(b, 0x0b)                          // end
}

// yieldBody is the body of yield: it leaves for Go (memory.grow 0 is run
// by wazero's Go code, where the Go runtime may pause the goroutine),
// traps if global flag is set, and fills global budget again.
func yieldBody(budget, flag uint32) []byte {
	b := []byte{0x00, 0x41, 0x00, 0x40, 0x00, 0x1a} // no locals; i32.const 0; memory.grow 0; drop
	b = appendULEB(append(b, 0x23), uint64(flag))   // global.get flag
	b = append(b, 0x04, 0x40, 0x00, 0x0b, 0x41)     // if; unreachable; end; i32.const
	b = appendSLEB(b, budgetBytes)                  // budgetBytes
	b = appendULEB(append(b, 0x24), uint64(budget)) // global.set budget
	return append(b, 0x0b)
}

// appendBody appends a function body, its size first.
func appendBody(b, body []byte) []byte {
	return append(appendULEB(b, uint64(len(body))), body...)
}

// checkExports returns the number of the module's exports, or why it
// may not have them: a name interruptible adds, or a global or function
// beyond those it has.
func (m *parsedModule) checkExports(have moduleCounts) (uint32, error) {
	if m.sections[sectionExport] == nil {
		return 0, nil
	}
	c := m.cursor(sectionExport)
	count := c.u32()
	for i := uint32(0); i < count && c.err == nil; i++ {
		name := string(c.name("an export name"))
		kind, idx := c.u8(), c.u32()
		switch {
		case c.err != nil:
		case name == interruptExport || name == startExport:
			return 0, fmt.Errorf("it exports %q, a name agentrt reserves", name)
		case kind == 0x03 && idx >= have.globals:
			return 0, fmt.Errorf("it exports global %d, and the module has %d", idx, have.globals)
		case kind == 0x00 && idx >= have.funcs:
			return 0, fmt.Errorf("it exports function %d, and the module has %d", idx, have.funcs)
		}
	}
	return count, c.err
}

// importCounts are how many functions, globals and memories a module
// imports, and how many imports it has in all.
type importCounts struct{ funcs, globals, memories, all uint32 }

func (m *parsedModule) countImports() (importCounts, error) {
	var n importCounts
	if m.sections[sectionImport] == nil {
		return n, nil
	}
	c := m.cursor(sectionImport)
	for i, count := uint32(0), c.u32(); i < count && c.err == nil; i++ {
		n.all++
		c.name("an import's module name")
		c.name("an import name")
		switch kind := c.u8(); kind {
		case 0x00: // a function: its type
			c.u32()
			n.funcs++
		case 0x01: // a table: its type and limits
			c.u8()
			c.limits("an imported table", uint64(i))
		case 0x02: // a memory
			c.limits("an imported memory", uint64(i))
			n.memories++
		case 0x03: // a global: its type and mutability
			c.valueType()
			c.u8()
			n.globals++
		default:
			if c.err == nil {
				return n, fmt.Errorf("its import %d is of a kind agentrt does not know (0x%02x)", i, kind)
			}
		}
	}
	return n, c.err
}

// An interrupter stops an instance's code when a context ends: it sets
// the instance's interruptExport flag. It is nil for an instance of a
// module that has no such global (Config.AsBefore, NoDeadlineCheck or
// WazeroDeadlineCheck).
type interrupter struct {
	stop  func() bool
	fired chan struct{}
}

// arm makes mod's code stop when ctx ends. The interrupter must be
// disarmed before mod is closed.
func arm(ctx context.Context, mod api.Module) *interrupter {
	g, ok := mod.ExportedGlobal(interruptExport).(api.MutableGlobal)
	if !ok {
		return nil
	}
	it := &interrupter{fired: make(chan struct{})}
	it.stop = context.AfterFunc(ctx, func() {
		g.Set(1)
		close(it.fired)
	})
	return it
}

// disarm stops it from interrupting, or waits until it has: nothing
// writes to the instance after it returns. Disarming it again does
// nothing.
func (it *interrupter) disarm() {
	if it == nil || it.stop == nil {
		return
	}
	if !it.stop() {
		<-it.fired
	}
	it.stop = nil
}

// call calls fn, a function of the instance it was armed for, with
// callCtx, as wazero's own deadline check did: not at all once ctx has
// ended, and as stopped when ctx ended before fn returned, whether or not
// fn's code got as far as a charge that saw it (it may have returned
// instead, told by a host function that its time was up). The error of a
// stop is the exit wazero reported for one.
func (it *interrupter) call(ctx, callCtx context.Context, fn api.Function) ([]uint64, error) {
	if it == nil {
		return fn.Call(callCtx)
	}
	if ctx.Err() != nil {
		return nil, stopped(ctx)
	}
	res, err := fn.Call(callCtx)
	if ctx.Err() != nil {
		return nil, stopped(ctx)
	}
	return res, err
}

func stopped(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return sys.NewExitError(sys.ExitCodeDeadlineExceeded)
	}
	return sys.NewExitError(sys.ExitCodeContextCanceled)
}
