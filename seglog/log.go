package seglog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
)

// Log is one segment log (a shard's records, or a companion log). It is driven
// by one goroutine, the one that owns its Disk (the core): Append, Flush, Poll,
// Read, TruncateSuffix, Compact, EnforceRetention and Close are called there
// only. Readers (Log.Reader) may run on any goroutine.
//
// Offsets: [EarliestOffset, NextOffset) exist; [EarliestOffset,
// CommittedOffset) are readable by Readers. Under on_commit, committed =
// fsynced; under periodic and none, committed = written to the file (not
// necessarily on the disk): DurableOffset tells what the last completed
// fdatasync covered.
type Log struct {
	d    *Disk
	id   uint64
	opts Options
	fs   FS
	dir  string

	mu   sync.RWMutex // guards segs and every segment's index for Readers
	segs []*segment

	next      uint64
	committed atomic.Uint64
	durable   atomic.Uint64
	earliest  atomic.Uint64

	direct bool
	block  int    // O_DIRECT block size (4096)
	tail   []byte // copy of the active segment's partial last block (direct mode)
	units  []*unit
	// freeUnits are retired units kept for reuse (no allocation per batch).
	freeUnits []*unit
	active    *unit
	freeBufs  [][]byte
	queued    bool // on d.pending

	inflightWrite *unit // the unit whose write is in flight
	writeLen      int   // bytes of that write
	writeParts    int   // its ops still in flight (large O_DIRECT writes are split)
	writeGot      int   // bytes its completed ops wrote
	writeErr      error // first error among its ops
	writeStart    int64 // Clock.MonoNanos at the write's submit (Stats)
	syncStart     int64 // Clock.MonoNanos at the fdatasync's submit (Stats)
	syncInFlight  bool  // an fdatasync (on_commit or periodic) is in flight
	syncTarget    uint64
	syncDue       int64 // Clock.MonoNanos when the next periodic fdatasync is due
	written       uint64
	// landed is the offset below which every staged record has reached the
	// file (written, not necessarily fsynced): set when a write completes,
	// synchronously for a plain pwrite. WriteAfter's gate reads it.
	landed uint64
	// dep is the log this one writes after (WriteAfter); gated is the log
	// that writes after this one.
	dep, gated *Log

	failed      error
	closed      bool
	sealPending *segment // rolled segment waiting for its pre-zeroing write before sealing

	notifyMu sync.Mutex
	notify   chan struct{} // closed when committed advances; nil when nobody waits

	core     *readCursor // the core's read state
	epochs   []Epoch
	recovery RecoveryInfo

	syncWaiters []syncNowWaiter // SyncNow's callers waiting for an fdatasync (syncnow.go)
}

// RecoveryInfo describes what Open found and repaired.
type RecoveryInfo struct {
	Segments         int    // segments opened
	AbandonedRemoved int    // abandoned preparations deleted (spec §5)
	IndexesRebuilt   int    // index files rebuilt (missing, short, wrong)
	TornTailBytes    int64  // bytes truncated from the newest segment's tail (0 = none)
	TornTailAt       int64  // byte position of that truncation
	TornTailSegment  uint64 // the segment id (file name number) truncated
	// TornTailRecords counts the records the truncated bytes held: headers
	// passing their checksum, walked from the truncation point (and from
	// DataAfterGapAt) by their body lengths. A write torn mid-record counts
	// the record it cut short; bytes with no parsable header count 0.
	TornTailRecords int64
	// DataAfterGapAt, when > 0, is the byte position of the first non-zero
	// byte found past the zero gap that ended the records (CorruptDataAfterEnd
	// repaired after an unclean stop): the truncated bytes held data.
	DataAfterGapAt int64
}

// unit is one write: a contiguous range of one segment staged in one buffer.
type unit struct {
	seg        *segment
	buf        []byte // aligned staging memory (ring.AlignedBuffer)
	filePos    int64  // file position of buf[0]
	dataStart  int    // first byte not yet on disk (buffered writes start here)
	n          int    // end of staged bytes
	first      uint64 // first offset staged in this unit
	gate       uint64 // WriteAfter: the dependency's NextOffset at this unit's last append
	next       uint64
	cbs        []pendingAppend
	state      int
	closed     bool
	commit     int  // how the write reaches stable storage: commitAfter, commitLinked, commitDSync (commit.go)
	sealAfter  bool // the segment rolled: seal it when this unit completes
	dropBefore bool // compaction: drop segments older than seg when this unit completes
}

type pendingAppend struct {
	first, last uint64
	done        func(first, last uint64, err error)
}

// NextOffset is the offset the next appended record will get.
func (l *Log) NextOffset() uint64 { return l.next }

// EarliestOffset is the oldest offset still held (moves with retention).
// Goroutine-safe.
func (l *Log) EarliestOffset() uint64 { return l.earliest.Load() }

// CommittedOffset is one past the last record readers may see (appended and,
// under on_commit, fsynced). Goroutine-safe.
func (l *Log) CommittedOffset() uint64 { return l.committed.Load() }

// DurableOffset is one past the last record covered by a completed fdatasync
// (replication's durable_offset; never counts buffered bytes). Goroutine-safe.
func (l *Log) DurableOffset() uint64 { return l.durable.Load() }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// Recovery returns what Open found and repaired.
func (l *Log) Recovery() RecoveryInfo { return l.recovery }

// Err returns the failure that stopped the log (an ErrStorageFailed error), or nil.
func (l *Log) Err() error { return l.failed }

func (l *Log) activeSeg() *segment { return l.segs[len(l.segs)-1] }

func (l *Log) segPath(id uint64) string { return filepath.Join(l.dir, SegmentFileName(id)) }

// openLog runs recovery (spec/storage-format.md §8) and readies the log for appends.
func (l *Log) openLog() error {
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return storageErr("mkdir", l.dir, err)
	}
	if err := l.fs.SyncDir(filepath.Dir(l.dir)); err != nil {
		return storageErr("fsync-dir", filepath.Dir(l.dir), err)
	}
	ids, err := listSegments(l.fs, l.dir)
	if err != nil {
		return err
	}
	for i, id := range ids {
		if err := l.openSegment(id, i == len(ids)-1); err != nil {
			l.closeFiles()
			return err
		}
	}
	if len(l.segs) == 0 {
		if err := l.createSegment(0, l.opts.BaseOffset, WriteVersion); err != nil {
			return err
		}
	} else if err := l.openActive(); err != nil {
		l.closeFiles()
		return err
	}
	a := l.activeSeg()
	l.next, l.written, l.landed = a.next, a.next, a.next
	l.committed.Store(a.next)
	l.durable.Store(a.next)
	l.earliest.Store(l.segs[0].base)
	l.recovery.Segments = len(l.segs)
	return nil
}

// listSegments returns the segment ids in dir, numerically sorted.
func listSegments(fsys FS, dir string) ([]uint64, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, storageErr("readdir", dir, err)
	}
	var ids []uint64
	for _, n := range names {
		if id, ok := parseSegmentName(n); ok {
			ids = append(ids, id)
		}
	}
	sortU64(ids)
	return ids, nil
}

func sortU64(v []uint64) { sort.Slice(v, func(i, j int) bool { return v[i] < v[j] }) }

// openSegment validates one segment found at open. Every segment but the
// newest must be whole; the newest may have a torn tail, and is dropped when
// it is an abandoned preparation.
func (l *Log) openSegment(id uint64, newest bool) error {
	path := l.segPath(id)
	f, err := l.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return storageErr("open", path, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return storageErr("stat", path, err)
	}
	var prevEnd uint64
	if len(l.segs) > 0 {
		prevEnd = l.segs[len(l.segs)-1].next
	}
	hb := make([]byte, SegmentHeaderLen)
	n, _ := readFull(f, hb, 0)
	// Shorter than a header: a creation cut short (a kill between the create
	// and the header's write), holding no record: an abandoned preparation
	// (spec §5), also when it is the only segment.
	if newest && n < SegmentHeaderLen {
		f.Close()
		return l.removeAbandoned(id)
	}
	h, err := DecodeSegmentHeader(hb[:n])
	if err != nil {
		f.Close()
		return locate(err, l.dir, int64(id), 0)
	}
	s := &segment{id: id, base: h.BaseOffset, version: h.Version, path: path, created: h.CreatedAtMicros, rf: f, lastIdx: -1}
	if len(l.segs) > 0 && s.base != prevEnd {
		if newest && l.emptySegment(s, size) {
			f.Close()
			return l.removeAbandoned(id)
		}
		f.Close()
		return &CorruptionError{Kind: CorruptSegmentSequence, Dir: l.dir, Segment: int64(id),
			Detail: fmt.Sprintf("base_offset %d, previous segment ends at %d", s.base, prevEnd)}
	}
	if newest {
		err = l.scanNewest(s, size)
	} else {
		err = l.scanSealed(s, size)
	}
	if err != nil {
		f.Close()
		return err
	}
	if !newest { // sealed: readers use descriptors of their own
		f.Close()
		s.rf = nil
		s.sealed = true
	}
	l.segs = append(l.segs, s)
	return nil
}

// emptySegment reports whether s holds no record (only zeros after its header).
func (l *Log) emptySegment(s *segment, size int64) bool {
	sc := newScanner(s.rf, size, s.version, nil)
	r := sc.scanRecords(SegmentHeaderLen, s.base, func(int64, *recordHeader, []byte) bool { return false })
	hb, _ := sc.at(SegmentHeaderLen, sc.hl)
	return r.err == nil && (len(hb) == 0 || r.zeroEnd)
}

func (l *Log) removeAbandoned(id uint64) error {
	for _, p := range []string{l.segPath(id), filepath.Join(l.dir, IndexFileName(id))} {
		if err := l.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return storageErr("remove", p, err)
		}
	}
	l.recovery.AbandonedRemoved++
	return storageErr("fsync-dir", l.dir, l.fs.SyncDir(l.dir))
}

// scanSealed checks a sealed segment: index loaded (or rebuilt), records after
// the last index entry (all with VerifyAllOnOpen) verified. Any damage is an error.
func (l *Log) scanSealed(s *segment, size int64) error {
	idx, ierr := l.loadIndex(s)
	if ierr == nil && !l.opts.VerifyAllOnOpen && len(idx) > 0 {
		last := idx[len(idx)-1]
		sc := newScanner(s.rf, size, s.version, nil)
		r := sc.scanRecords(int64(last.Position), last.Offset, func(int64, *recordHeader, []byte) bool { return true })
		if r.err == nil && r.count > 0 {
			s.index, s.lastIdx = idx, int64(last.Position)
			s.size, s.next, s.maxTs = r.end, r.next, r.maxTs
			return nil
		}
	}
	r := l.fullScan(s, size)
	if r.err != nil {
		return locate(r.err, l.dir, int64(s.id), 0)
	}
	if ierr != nil || !sameIndex(idx, s.index) {
		l.recovery.IndexesRebuilt++
		return writeFileAtomic(l.fs, l.dir, IndexFileName(s.id), s.indexBytes())
	}
	return nil
}

func sameIndex(a, b []IndexEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fullScan scans every record of s, rebuilding its in-memory index.
func (l *Log) fullScan(s *segment, size int64) scanResult {
	s.index, s.lastIdx = s.index[:0], -1
	sc := newScanner(s.rf, size, s.version, nil)
	r := sc.scanRecords(SegmentHeaderLen, s.base, func(pos int64, h *recordHeader, _ []byte) bool {
		if s.wantsIndex(pos, l.opts.IndexSpacingBytes) {
			s.index = append(s.index, IndexEntry{Offset: h.offset, Position: uint64(pos)})
			s.lastIdx = pos
		}
		return true
	})
	s.size, s.next, s.maxTs = r.end, r.next, r.maxTs
	return r
}

func (l *Log) loadIndex(s *segment) ([]IndexEntry, error) {
	p := s.indexPath()
	f, err := l.fs.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > int64(MaxPayloadBytes) {
		return nil, &CorruptionError{Kind: CorruptIndexInvalid, Detail: "index file too large"}
	}
	b := make([]byte, size)
	if _, err := readFull(f, b, 0); err != nil {
		return nil, err
	}
	return DecodeIndex(b, s.version, s.base)
}

// scanNewest fully scans the newest segment and repairs only its tail
// (spec §8 "Tail repair"; torn writes per docs/storage-format.md "Torn tails"
// and "Recovery"). A scan that stops at a zero gap followed by non-zero data
// is CorruptDataAfterEnd: after a clean stop (Options.PreviousRunClean) it
// refuses the open (unless RepairChecksumTail), after a crash it is truncated
// like a torn write, with RecoveryInfo set.
func (l *Log) scanNewest(s *segment, size int64) error {
	r := l.fullScan(s, size)
	var ce *CorruptionError
	if r.err != nil && !errors.As(r.err, &ce) {
		return storageErr("read", s.path, r.err)
	}
	var after *CorruptionError
	if r.gap > 0 && r.gap < size { // a scanner (one buffer) only when zeros may hide data
		var err error
		if after, err = newScanner(s.rf, size, s.version, nil).dataAfterGap(&r); err != nil {
			return storageErr("read", s.path, err)
		}
	}
	if r.err == nil && after == nil {
		return nil
	}
	bad := r.err
	if after != nil {
		bad = after
	}
	// After a clean stop a gap followed by data is damage, not a torn write.
	repairable := (r.torn || r.err == nil) && !(after != nil && l.opts.PreviousRunClean)
	if !repairable && !l.opts.RepairChecksumTail {
		return locateOffset(bad, l.dir, s.id, r.next)
	}
	if after != nil {
		l.recovery.DataAfterGapAt = after.NonZeroAt
	}
	l.recovery.TornTailAt, l.recovery.TornTailSegment = r.end, s.id
	l.recovery.TornTailBytes = size - r.end
	sc := newScanner(s.rf, size, s.version, nil)
	l.recovery.TornTailRecords = sc.headersFrom(r.end)
	if after != nil {
		l.recovery.TornTailRecords += sc.headersFrom(after.NonZeroAt)
	}
	return nil
}

// openActive opens the newest segment for appends: trims everything past the
// last record (torn tail, zero padding), reserves space, rewrites its index.
func (l *Log) openActive() error {
	s := l.activeSeg()
	wf, direct, err := openWrite(l.fs, s.path, os.O_RDWR, l.direct)
	if err != nil {
		return storageErr("open", s.path, err)
	}
	s.wf, s.direct = wf, direct
	size, err := wf.Size()
	if err != nil {
		return storageErr("stat", s.path, err)
	}
	if size != s.size {
		if err := wf.Truncate(s.size); err != nil {
			return storageErr("truncate", s.path, err)
		}
		if err := wf.Datasync(); err != nil {
			return storageErr("fdatasync", s.path, err)
		}
	}
	if err := l.reserve(s, s.size); err != nil {
		return err
	}
	if err := l.loadTail(s); err != nil {
		return err
	}
	return writeFileAtomic(l.fs, l.dir, IndexFileName(s.id), s.indexBytes())
}

// loadTail copies the active segment's partial last block into l.tail.
func (l *Log) loadTail(s *segment) error {
	if !s.direct {
		return nil
	}
	start := s.size &^ int64(l.block-1)
	n := int(s.size - start)
	if n == 0 {
		return nil
	}
	f, err := l.core.file(s.id, s.path)
	if err != nil {
		return err
	}
	if _, err := readFull(f, l.tail[:n], start); err != nil {
		return storageErr("read", s.path, err)
	}
	return nil
}

// createSegment creates, writes and fsyncs a new segment file (header only),
// reserves its blocks and makes it the active segment.
func (l *Log) createSegment(id, base uint64, version uint16) error {
	path := l.segPath(id)
	wf, direct, err := openWrite(l.fs, path, os.O_RDWR|os.O_CREATE|os.O_EXCL, l.direct)
	if err != nil {
		return storageErr("create", path, err)
	}
	s := &segment{id: id, base: base, next: base, version: version, path: path, wf: wf, direct: direct,
		created: l.opts.Clock.WallMicros(), size: SegmentHeaderLen, lastIdx: -1}
	fail := func(op string, err error) error {
		wf.Close()
		l.fs.Remove(path)
		return storageErr(op, path, err)
	}
	if err := l.reserve(s, SegmentHeaderLen); err != nil {
		wf.Close()
		l.fs.Remove(path)
		return err
	}
	hdr := AppendSegmentHeader(l.tail[:0], SegmentHeader{Version: s.version, BaseOffset: base, CreatedAtMicros: s.created})
	buf := hdr
	if direct {
		buf = l.headerBlock(hdr)
	}
	if _, err := wf.WriteAt(buf, 0); err != nil {
		return fail("write", err)
	}
	if err := wf.Datasync(); err != nil {
		return fail("fdatasync", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fail("fsync-dir", err)
	}
	rf, err := l.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fail("open", err)
	}
	s.rf = rf
	if !direct {
		l.tail = l.tail[:cap(l.tail)]
	}
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.mu.Unlock()
	return nil
}

// headerBlock returns an aligned block holding hdr followed by zeros.
func (l *Log) headerBlock(hdr []byte) []byte {
	b := l.getBuf(l.block)[:l.block]
	clear(b)
	copy(b, hdr)
	l.putBuf(b)
	return b
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		if s.wf != nil {
			s.wf.Close()
			s.wf = nil
		}
		if s.rf != nil {
			s.rf.Close()
			s.rf = nil
		}
	}
}
