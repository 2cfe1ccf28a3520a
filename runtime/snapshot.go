package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/tetratelabs/wazero/api"
)

// snapshot is the state a plugin's initialization leaves (its memory and
// globals), taken once at load. Every instance of the plugin then starts
// from it instead of running the initialization: a fresh instance, with
// its own copy-on-write memory, as isolated from every other as before,
// without the cost of the plugin's start-up (Go's runtime: 5 ms and more).
//
// A snapshot is taken only where starting from it is the same as running
// the initialization, by these checks (takeSnapshot):
//
//   - The module's state is all in memory and globals (stateOutsideSnapshot:
//     no code changes a table or drops a segment), and every mutable global
//     is a number.
//   - The initialization calls no agentrt_v1 function (each answers "not
//     allowed" there, but a plugin that tries expects something of them).
//   - Run twice with the same random bytes and the clocks reading the same
//     times, it leaves exactly the same memory, globals and output: it
//     depends on nothing else.
//   - Every read of random bytes it made seeded a generator agentrt knows
//     and re-seeds in every instance (generators.go), found where a third
//     run, given other random bytes, left other state: a snapshot never
//     hands every call the same random numbers.
//
// A plugin that fails a check runs its initialization in every instance,
// as it always has, and Plugin.Start says why. One whose initialization
// traps, exits, or runs past the call timeout is refused, as before.
//
// What the initialization printed is written to each call's stdout and
// stderr, as it would have been. Clock readings it made are those of the
// moment the snapshot was taken, and the monotonic clock of instances from
// it continues from them (Plugin.snapshotNanotime).
type snapshot struct {
	image *memoryImage
	pages uint32 // the memory's size, in 64 KiB pages
	// globals are the values of the instrumented module's mutable
	// globals, in order, as api.Global's Get returns them.
	globals    []uint64
	generators []generator
	// output is what the initialization wrote to fds 1 and 2, in order.
	output []printed
	// monoLast is past the last monotonic clock reading the initialization
	// made, in snapshotNanotime's terms.
	monoLast int64
	// cached is whether it was read from the cache on disk.
	cached bool
}

type printed struct {
	fd    int32
	bytes []byte
}

// Bounds of what a snapshot records of an initialization: one that
// prints or draws more gets none.
const (
	maxConstructionOutput  = 64 << 10
	maxConstructionEntropy = 4 << 10
	maxConstructionCalls   = 16
)

// Start is how a plugin's instances start.
type Start struct {
	// Snapshot is true when every instance starts from a snapshot of the
	// state the plugin's initialization left; false when each runs the
	// initialization.
	Snapshot bool
	// Why says why not, when Snapshot is false.
	Why string
	// MemoryBytes is the size of the snapshot's memory.
	MemoryBytes uint64
	// Reseeded names the random generators re-seeded in every instance.
	Reseeded []string
	// Cached is whether the snapshot came from the cache on disk.
	Cached bool
}

// String is Start in a line, for a log.
func (s Start) String() string {
	if !s.Snapshot {
		return "initialize (" + s.Why + ")"
	}
	out := fmt.Sprintf("snapshot (%s of memory", byteSize(s.MemoryBytes))
	if len(s.Reseeded) > 0 {
		out += "; re-seeds " + strings.Join(s.Reseeded, ", ")
	}
	if s.Cached {
		out += "; from the cache"
	}
	return out + ")"
}

// Start says how the plugin's instances start.
func (p *Plugin) Start() Start {
	if p.snap == nil {
		return Start{Why: p.startWhy}
	}
	return Start{Snapshot: true, MemoryBytes: uint64(p.snap.pages) * 65536,
		Reseeded: describeGenerators(p.snap.generators), Cached: p.snap.cached}
}

// construction is one run of a plugin's initialization while a snapshot is
// taken, and what it read, printed and left.
type construction struct {
	clock virtualClock
	// entropy is what each random_get gave it, in order. With replay, the
	// reads are given replay's bytes instead of fresh ones.
	entropy      [][]byte
	entropyBytes int
	replay       [][]byte
	output       []printed
	outputBytes  int
	// hostCalls are the agentrt_v1 functions it called, in order (the
	// first maxConstructionCalls).
	hostCalls []string
	// beyond says what it did past what a snapshot records, if anything.
	beyond string

	// memory is a view of the instance's memory, valid until close.
	memory  []byte
	globals []uint64
	close   func()
}

type constructionKey struct{}

// constructionOf is the construction ctx runs, or nil.
func constructionOf(ctx context.Context) *construction {
	c, _ := ctx.Value(constructionKey{}).(*construction)
	return c
}

// random fills b from crypto/rand and keeps what it gave, up to
// maxConstructionEntropy bytes in all. The guest chooses len(b): past the
// bound, b is filled as random_get fills it outside a construction, a
// chunk at a time with a look at the call's context between chunks.
func (c *construction) random(ctx context.Context, b []byte) uint32 {
	c.entropyBytes += len(b)
	if c.entropyBytes > maxConstructionEntropy {
		c.beyond = fmt.Sprintf("reads more than %s of random bytes", byteSize(maxConstructionEntropy))
		return fillRandomChunks(ctx, b)
	}
	if i := len(c.entropy); c.replay != nil {
		if i >= len(c.replay) || len(c.replay[i]) != len(b) {
			c.beyond = "reads random bytes differently given the same ones"
			return fillRandomChunks(ctx, b)
		}
		copy(b, c.replay[i])
	} else {
		rand.Read(b)
	}
	c.entropy = append(c.entropy, bytes.Clone(b))
	return errnoSuccess
}

func (c *construction) hostCall(name string) {
	if len(c.hostCalls) < maxConstructionCalls {
		c.hostCalls = append(c.hostCalls, name)
	}
}

// printer records what a construction writes to fd.
type printer struct {
	c  *construction
	fd int32
}

func (w printer) Write(b []byte) (int, error) {
	c := w.c
	c.outputBytes += len(b)
	if c.outputBytes > maxConstructionOutput {
		c.beyond = fmt.Sprintf("prints more than %s", byteSize(maxConstructionOutput))
	} else {
		c.output = append(c.output, printed{w.fd, bytes.Clone(b)})
	}
	return len(b), nil
}

// virtualClock is what a construction's clocks read while a snapshot is
// taken: the real clocks' readings when the snapshot is taken, advanced
// 1 µs by every reading and by what the construction sleeps (at once). Two
// constructions read the same times, so a difference between them is one
// of the random bytes they were given.
type virtualClock struct {
	mono, wall int64 // ns, at the start
	elapsed    int64
}

func (c *virtualClock) nanotime() int64 {
	c.elapsed += 1000
	return c.mono + c.elapsed
}

func (c *virtualClock) walltime() (int64, int32) {
	c.elapsed += 1000
	t := c.wall + c.elapsed
	return t / 1e9, int32(t % 1e9)
}

// monotonicEpoch is where snapshotNanotime's monotonic clock starts.
var monotonicEpoch = time.Now()

// monotonicNow is the monotonic time of this process, in ns.
func monotonicNow() int64 { return int64(time.Since(monotonicEpoch)) }

// snapshotNanotime is the monotonic clock of instances from the snapshot:
// this process's, moved on so that it reads after the last reading of the
// initialization, which may be from an earlier process (the snapshot came
// from the cache) whose clock was further on. Go's runtime measures time
// from readings it made while it started; they must not be in its future.
func (p *Plugin) snapshotNanotime() func() int64 {
	delta := max(0, p.snap.monoLast-monotonicNow())
	return func() int64 { return monotonicNow() + delta }
}

// construct runs the plugin's initialization once in a fresh instance, as
// instantiate does, under a virtual clock that starts at clock, and returns
// what it saw and left; its random reads get fresh bytes, or replay's. A
// failure is the initialization's: a trap, an exit, the call timeout. The
// instance stays until the construction's close: its memory is read in
// place, never copied to the host's heap.
func (p *Plugin) construct(ctx context.Context, clock virtualClock, replay [][]byte) (*construction, error) {
	c := &construction{clock: clock, replay: replay}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, constructionKey{}, c)
	ctx = withStdio(ctx, printer{c, fdStdout}, printer{c, fdStderr})
	for _, m := range p.cfg.HostModules {
		if m.Construction != nil {
			ctx = m.Construction(ctx, c.hostCall)
		}
	}
	mem := &instanceMemory{limit: uint64(p.cfg.MemoryLimitPages) * 65536} // its own, unpooled
	cfg := p.modCfg.WithNanotime(c.clock.nanotime, 1000).WithWalltime(c.clock.walltime, 1000)
	in, err := p.newInstance(ctx, cfg, mem, true)
	if err != nil {
		return nil, nameCause(p.failure(ctx, err), err, mem) // failure.go
	}
	c.close = in.close
	m := in.Memory()
	c.memory, _ = m.Read(0, m.Size())
	for _, g := range p.inst.globals {
		c.globals = append(c.globals, in.ExportedGlobal(g.name).Get())
	}
	return c, nil
}

// whyNot says what in c makes a snapshot of it unlike running it, or "".
func (c *construction) whyNot() string {
	switch {
	case c.beyond != "":
		return "its initialization " + c.beyond
	case len(c.hostCalls) > 0:
		return fmt.Sprintf("its initialization calls %s, which answers \"not allowed\" there", c.hostCalls[0])
	}
	return ""
}

// differs says how c and d, two runs of one initialization given the same
// times and random bytes, differ; "" if they do not.
func (c *construction) differs(d *construction) string {
	switch {
	case len(c.memory) != len(d.memory):
		return fmt.Sprintf("its memory grew to %s one time and to %s another", byteSize(uint64(len(c.memory))), byteSize(uint64(len(d.memory))))
	case len(c.entropy) != len(d.entropy):
		return fmt.Sprintf("it read random bytes %d times one time and %d another", len(c.entropy), len(d.entropy))
	case !samePrinted(c.output, d.output):
		return "it printed different things"
	case c.clock.elapsed != d.clock.elapsed:
		return "it read the clocks a different number of times"
	}
	for i := range c.globals {
		if c.globals[i] != d.globals[i] {
			return fmt.Sprintf("its global %d differs", i)
		}
	}
	if i := firstDifference(c.memory, d.memory); i >= 0 {
		return fmt.Sprintf("its memory differs at byte %d", i)
	}
	return ""
}

// firstDifference is the first index at which a and b, of one length,
// differ; -1 if they do not.
func firstDifference(a, b []byte) int {
	const chunk = 4 << 10
	for o := 0; o < len(a); o += chunk {
		end := min(o+chunk, len(a))
		if !bytes.Equal(a[o:end], b[o:end]) {
			for i := o; i < end; i++ {
				if a[i] != b[i] {
					return i
				}
			}
		}
	}
	return -1
}

func samePrinted(a, b []printed) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].fd != b[i].fd || !bytes.Equal(a[i].bytes, b[i].bytes) {
			return false
		}
	}
	return true
}

// takeSnapshot runs the plugin's initialization twice and makes a snapshot
// of what it left, if the checks snapshot describes pass; otherwise it
// says why not. An error is the initialization's failure (the plugin is
// refused).
func (p *Plugin) takeSnapshot(ctx context.Context) (*snapshot, string, error) {
	if why := stateOutsideSnapshot(p.inst.code, p.inst.funcs); why != "" {
		return nil, why, nil
	}
	clock := virtualClock{mono: monotonicNow(), wall: time.Now().UnixNano()}
	a, err := p.construct(ctx, clock, nil)
	if err != nil {
		return nil, "", err
	}
	defer a.close()
	if why := a.whyNot(); why != "" {
		return nil, why, nil
	}
	// The same run again: a's state must follow from its clocks and
	// random bytes alone.
	again, err := p.construct(ctx, clock, a.entropy)
	if err != nil {
		return nil, "its initialization is not deterministic: run again, it failed: " + protocol.ErrorMessage(err), nil
	}
	why := again.whyNot()
	if why == "" {
		if d := a.differs(again); d != "" {
			why = "its initialization is not deterministic: run again with the same clocks and random bytes, " + d
		}
	}
	again.close()
	if why != "" {
		return nil, why, nil
	}
	// And with other random bytes, to find where they went.
	b, err := p.construct(ctx, clock, nil)
	if err != nil {
		return nil, "its initialization fails with some random bytes: " + protocol.ErrorMessage(err), nil
	}
	defer b.close()
	gens, explained := findGenerators(a, b, p.inst.data)
	for i, ok := range explained {
		if !ok {
			return nil, fmt.Sprintf("its initialization reads random bytes (%d, read %d of %d) into no generator agentrt knows how to re-seed: every call from a snapshot would have the same",
				len(a.entropy[i]), i+1, len(a.entropy)), nil
		}
	}
	return &snapshot{
		image:      newMemoryImage(a.memory),
		pages:      uint32(len(a.memory) / 65536),
		globals:    a.globals,
		generators: gens,
		output:     a.output,
		monoLast:   a.clock.mono + a.clock.elapsed,
	}, "", nil
}

// instantiateSnapshot makes a fresh instance that starts from the
// snapshot: wazero instantiates the module without running anything (its
// data segments are passive), the memory is the snapshot's image
// (copy-on-write), the globals are set to the snapshot's, and the
// generators are re-seeded.
//
// What it costs: wazero's instantiation of the module, two mmap calls,
// a memory.grow and a global set per mutable global (Go's plugins have 8),
// and for each generator a few hundred bytes from crypto/rand and ChaCha8,
// written into the page that holds it (copied then).
func (p *Plugin) instantiateSnapshot(ctx context.Context, mem *instanceMemory) (*instance, error) {
	in, err := p.newInstance(ctx, p.snapCfg, mem, false)
	if err != nil {
		return nil, p.failure(ctx, err)
	}
	if err := p.restore(ctx, in); err != nil {
		in.close()
		return nil, err
	}
	return in, nil
}

func (p *Plugin) restore(ctx context.Context, in *instance) error {
	s := p.snap
	m := in.Memory()
	if have := m.Size() / 65536; have < s.pages {
		if _, ok := m.Grow(s.pages - have); !ok {
			return protocol.Errorf(protocol.EUNAVAILABLE, "no memory for an instance of the plugin (%s)", byteSize(uint64(s.pages)*65536))
		}
	}
	for i, g := range p.inst.globals {
		mg, ok := in.ExportedGlobal(g.name).(api.MutableGlobal)
		if !ok {
			return protocol.NewPluginFailure(protocol.CauseOther, "the plugin's global %d is not mutable", g.index)
		}
		mg.Set(s.globals[i])
	}
	if p.inst.drop {
		if _, err := in.it.call(ctx, ctx, in.ExportedFunction(dropExport)); err != nil {
			return p.failure(ctx, err)
		}
	}
	if len(s.generators) > 0 {
		buf, _ := m.Read(0, m.Size())
		reseed(buf, s.generators)
	}
	return nil
}

// replay writes what the initialization printed to the call's stdout and
// stderr, as it was printed.
func (s *snapshot) replay(ctx context.Context) {
	for _, o := range s.output {
		stdioWriter(ctx, o.fd).Write(o.bytes)
	}
}

func (s *snapshot) close() {
	if s != nil && s.image != nil {
		s.image.close()
	}
}
