package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tetratelabs/wazero"
)

// useSnapshot sets the snapshot the plugin's instances start from: the
// one cached for it on disk, or one taken now (and cached); or records
// why there is none. An error is the initialization's failure.
func (p *Plugin) useSnapshot(ctx context.Context) error {
	switch {
	case p.inst == nil:
		return nil // startWhy says why
	case p.cfg.NoSnapshots:
		p.startWhy = "snapshots are off"
		return nil
	case p.inst.noSnapshot != "":
		p.startWhy = p.inst.noSnapshot
		return nil
	}
	path := p.snapshotPath()
	if s := p.readSnapshot(path); s != nil {
		p.setSnapshot(s)
		return nil
	}
	s, why, err := p.takeSnapshot(ctx)
	if err != nil {
		return err
	}
	if s == nil {
		p.startWhy = why
		return nil
	}
	if path != "" {
		// The cache only saves the next start the two initializations:
		// a snapshot that cannot be written is taken again then.
		_ = writeSnapshot(path, s)
	}
	p.setSnapshot(s)
	return nil
}

func (p *Plugin) setSnapshot(s *snapshot) {
	p.snap = s
	p.snapCfg = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithSysWalltime().
		WithNanotime(p.snapshotNanotime(), 1000).
		WithRandSource(rand.Reader) // see modCfg
}

// snapshotDir is where snapshots are cached, beside wazero's compiled code
// in Config.CacheDir.
const snapshotDir = "agentrt-snapshots"

// snapshotFormat is the format of a cached snapshot, and the first bytes
// of its file. A format that changes changes it.
const snapshotFormat = "agentrt snapshot 1\n"

// snapshotPath is the file the plugin's snapshot is cached in, "" without
// a cache. It is named for what makes a snapshot: the module as compiled
// (the plugin's code, and its tables' bounds), agentrt's version, and the
// limits its initialization ran under.
func (p *Plugin) snapshotPath() string {
	if p.cfg.CacheDir == "" {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s%s\x00%d\x00%d\x00", snapshotFormat, p.cfg.Version, p.cfg.MemoryLimitPages, p.cfg.CallTimeout)
	code := sha256.Sum256(p.inst.code)
	h.Write(code[:])
	return filepath.Join(p.cfg.CacheDir, snapshotDir, hex.EncodeToString(h.Sum(nil))+".snap")
}

// writeSnapshot writes s to path, whole or not at all: a temporary file
// renamed into place. The memory is written as its pages that are not all
// zeros.
func writeSnapshot(path string, s *snapshot) error {
	var b bytes.Buffer
	b.WriteString(snapshotFormat)
	put := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	put(s.pages)
	put(s.monoLast)
	put(uint32(len(s.globals)))
	put(s.globals)
	put(uint32(len(s.generators)))
	for _, g := range s.generators {
		put(uint8(g.kind))
		put(g.at)
	}
	put(uint32(len(s.output)))
	for _, o := range s.output {
		put(uint8(o.fd))
		put(uint32(len(o.bytes)))
		b.Write(o.bytes)
	}
	runs := nonzeroRuns(s.image.bytes)
	put(uint32(len(runs)))
	for _, r := range runs {
		put(r.start)
		put(r.end - r.start)
		b.Write(s.image.bytes[r.start:r.end])
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])

	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".snap-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// snapshotPage is the unit of the memory's runs in a cached snapshot.
const snapshotPage = 4 << 10

// nonzeroRuns are the runs of pages of mem that are not all zeros.
func nonzeroRuns(mem []byte) []memoryRange {
	var runs []memoryRange
	for o := 0; o < len(mem); o += snapshotPage {
		page := mem[o:min(o+snapshotPage, len(mem))]
		if allZero(page) {
			continue
		}
		if n := len(runs); n > 0 && runs[n-1].end == uint32(o) {
			runs[n-1].end = uint32(o + len(page))
		} else {
			runs = append(runs, memoryRange{uint32(o), uint32(o + len(page))})
		}
	}
	return runs
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// readSnapshot reads the snapshot cached at path; nil if there is none, or
// if the file is not one this plugin's instances can start from (its sum,
// its sizes, its globals and generators are checked against the plugin
// and its limits).
func (p *Plugin) readSnapshot(path string) *snapshot {
	if path == "" {
		return nil
	}
	limit := uint64(p.cfg.MemoryLimitPages) * 65536
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	// The file holds at most the memory, what the initialization printed,
	// and a few bytes per global and generator.
	if err != nil || uint64(fi.Size()) > limit+maxConstructionOutput*2+1<<20 {
		return nil
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil
	}
	s, err := decodeSnapshot(data, limit, len(p.inst.globals))
	if err != nil {
		return nil
	}
	s.cached = true
	return s
}

var errBadSnapshot = errors.New("not a snapshot this plugin can start from")

// decodeSnapshot decodes a cached snapshot, checking every size it gives
// against what is left and against limit, the memory limit.
func decodeSnapshot(data []byte, limit uint64, globals int) (*snapshot, error) {
	if len(data) < len(snapshotFormat)+sha256.Size || string(data[:len(snapshotFormat)]) != snapshotFormat {
		return nil, errBadSnapshot
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if want := sha256.Sum256(body); !bytes.Equal(sum, want[:]) {
		return nil, errBadSnapshot
	}
	r := snapshotReader{b: body[len(snapshotFormat):]}
	s := &snapshot{pages: r.u32(), monoLast: int64(r.u64())}
	size := uint64(s.pages) * 65536
	if size > limit {
		return nil, errBadSnapshot
	}
	if n := r.u32(); int(n) != globals {
		return nil, errBadSnapshot
	}
	for range globals {
		s.globals = append(s.globals, r.u64())
	}
	for n := r.count(5); n > 0; n-- {
		g := generator{kind: generatorKind(r.u8()), at: r.u32()}
		if g.kind.size() == 0 || uint64(g.at)+uint64(g.kind.size()) > size || g.kind == libcArc4random && g.at < 8 {
			return nil, errBadSnapshot
		}
		s.generators = append(s.generators, g)
	}
	var printedBytes int
	for n := r.count(5); n > 0; n-- {
		fd := int32(r.u8())
		b := r.bytes(int(r.u32()))
		printedBytes += len(b)
		if (fd != fdStdout && fd != fdStderr) || printedBytes > maxConstructionOutput {
			return nil, errBadSnapshot
		}
		s.output = append(s.output, printed{fd, b})
	}
	mem := make([]byte, size)
	for n := r.count(8); n > 0; n-- {
		start, length := uint64(r.u32()), uint64(r.u32())
		if start+length > size {
			return nil, errBadSnapshot
		}
		copy(mem[start:], r.bytes(int(length)))
	}
	if r.err || len(r.b) != 0 {
		return nil, errBadSnapshot
	}
	s.image = newMemoryImage(mem)
	return s, nil
}

// snapshotReader reads a cached snapshot's fields; past its end it reads
// zeros and sets err.
type snapshotReader struct {
	b   []byte
	err bool
}

func (r *snapshotReader) bytes(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.err, r.b = true, nil
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *snapshotReader) u8() uint8 {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *snapshotReader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *snapshotReader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// count reads a count of items of at least each bytes, refusing one the
// bytes left cannot hold.
func (r *snapshotReader) count(each int) int {
	n := int(r.u32())
	if n > len(r.b)/each {
		r.err = true
		return 0
	}
	return n
}
