package seglog

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"felix/ring"
)

// ErrEmptyBatch: Append was given no payloads.
var ErrEmptyBatch = errors.New("seglog: empty batch")

// Unit states.
const (
	unitStaged  = iota // open or closed, not submitted
	unitWriting        // write in flight
	unitWritten        // write complete; under on_commit waiting for an fdatasync
	unitSyncing        // covered by the fdatasync in flight
	unitDone           // complete, waiting to retire in order
)

const (
	minStageBytes = 256 << 10
	maxStageBytes = 8 << 20
)

// Append stages one batch: records get consecutive offsets from NextOffset,
// the batch is encoded once into the log's aligned staging buffer (no per-record
// allocation) and never split across segments (spec §5). done runs on the Poll
// goroutine once the batch's write completed and, under on_commit, the covering
// fdatasync too, with the batch's first and last offsets; or with an
// ErrStorageFailed error (nothing of the batch acknowledged). payloads are
// copied before Append returns. tsMicros is stored as every record's timestamp.
//
// Errors (nothing staged, done not called): ErrEmptyBatch, ErrRecordTooLarge
// (a payload over MaxPayloadBytes), ErrClosed, the log's failure
// (ErrStorageFailed; reopen the log), or ErrStorageFailed from a rollover.
func (l *Log) Append(payloads [][]byte, tsMicros int64, done func(first, last uint64, err error)) error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return l.failed
	}
	if len(payloads) == 0 {
		return ErrEmptyBatch
	}
	total := 0
	for _, p := range payloads {
		if len(p) > MaxPayloadBytes {
			return ErrRecordTooLarge
		}
		total += RecordHeaderLenV3 + len(p)
	}
	// A v2 segment cannot hold v3 records: the first append rolls onto a v3 one.
	s, err := l.activeFor(WriteVersion, total)
	if err != nil {
		return err
	}
	l.stageRecords(s, payloads, tsMicros, total)
	l.pushCallback(pendingAppend{first: l.next - uint64(len(payloads)), last: l.next - 1, done: done})
	l.d.stats.records.Add(uint64(len(payloads)))
	l.d.markPending(l)
	return nil
}

// AppendRecord stages one record of any kind: a generation-start record
// (format v4), a commit marker (v5) or a record with its publisher (v6); plain
// data records too. r.Offset is ignored (the record gets NextOffset). When the
// active segment's version is below r.MinVersion(), the log first rolls onto a
// segment of that version: the one-way step of seeds/upgrades-and-compatibility.txt
// "Storage format" (callers enable it only once the feature is finalized).
// Non-data records take an offset that no reader delivers. done and errors as
// Append; also ErrBadOptions for an invalid kind or a publisher over 255 bytes.
func (l *Log) AppendRecord(r Record, done func(first, last uint64, err error)) error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return l.failed
	}
	if r.Kind > KindCommitMarker || len(r.Publisher) > 255 {
		return fmt.Errorf("%w: record kind %d, publisher of %d bytes", ErrBadOptions, r.Kind, len(r.Publisher))
	}
	v := r.MinVersion()
	total := r.EncodedLen(v)
	if total-RecordHeaderLenV3 > MaxPayloadBytes {
		return ErrRecordTooLarge
	}
	s, err := l.activeFor(v, total)
	if err != nil {
		return err
	}
	u := l.stageUnit(s, total)
	l.indexNext(s)
	r.Offset = l.next
	AppendRecord(u.buf[u.n:u.n], s.version, &r)
	u.n += total
	s.size += int64(total)
	l.next++
	s.next, u.next = l.next, l.next
	if r.TimestampMicros > s.maxTs {
		s.maxTs = r.TimestampMicros
	}
	l.pushCallback(pendingAppend{first: r.Offset, last: r.Offset, done: done})
	l.d.stats.records.Add(1)
	l.d.markPending(l)
	return nil
}

// indexNext adds the sparse index entry of the record about to be staged at
// NextOffset at the end of s when the index spacing asks for one (spec §2.3);
// readers see the index under l.mu.
func (l *Log) indexNext(s *segment) {
	if s.wantsIndex(s.size, l.opts.IndexSpacingBytes) {
		l.mu.Lock()
		s.index = append(s.index, IndexEntry{Offset: l.next, Position: uint64(s.size)})
		l.mu.Unlock()
		s.lastIdx = s.size
	}
}

// stageRecords encodes payloads at the end of the active unit.
func (l *Log) stageRecords(s *segment, payloads [][]byte, ts int64, total int) {
	u := l.stageUnit(s, total)
	for _, p := range payloads {
		l.indexNext(s)
		n := RecordHeaderLenV3 + len(p)
		putRecordV3(u.buf[u.n:u.n+n], l.next, ts, p)
		u.n += n
		s.size += int64(n)
		l.next++
	}
	s.next = l.next
	u.next = l.next
	if ts > s.maxTs {
		s.maxTs = ts
	}
}

func (l *Log) pushCallback(p pendingAppend) {
	u := l.active
	u.cbs = append(u.cbs, p)
	if l.dep != nil {
		u.gate = l.dep.next
	}
}

// stageUnit returns the open unit of segment s with room for need bytes.
func (l *Log) stageUnit(s *segment, need int) *unit {
	if u := l.active; u != nil {
		if u.seg == s && len(u.buf)-u.n >= need+l.block {
			return u
		}
		l.closeUnit(u)
	}
	size := minStageBytes
	if n := len(l.units); n > 0 {
		// Grow only past a unit that filled up (a backlog), not because one is in flight:
		// units closed at their write's start then get buffers of one size, reused.
		last := l.units[n-1]
		if size = max(size, len(last.buf)); size < maxStageBytes && 2*last.n > len(last.buf) {
			size *= 2
		}
	}
	for size < need+2*l.block {
		size *= 2
	}
	u := l.newUnit()
	*u = unit{seg: s, buf: l.getBuf(size), first: l.next, next: l.next, cbs: u.cbs[:0]}
	if s.direct {
		prefix := int(s.size & int64(l.block-1))
		copy(u.buf, l.tail[:prefix])
		u.filePos = s.size - int64(prefix)
		u.dataStart, u.n = prefix, prefix
	} else {
		u.filePos = s.size
	}
	l.units = append(l.units, u)
	l.active = u
	return u
}

// closeUnit ends staging into u; the partial last block is kept for the next unit.
func (l *Log) closeUnit(u *unit) {
	if u.seg.direct {
		bs := u.n &^ (l.block - 1)
		copy(l.tail, u.buf[bs:u.n])
	}
	u.closed = true
	if l.active == u {
		l.active = nil
	}
}

// roll seals the active segment (now, or once its last write completes) and
// creates the next one at NextOffset (spec §5 rollover).
func (l *Log) roll() error { return l.rollTo(max(WriteVersion, l.activeSeg().version)) }

// activeFor returns the active segment with room for total more bytes of
// records that need segment format version v: the log first rolls onto a
// segment of version max(v, the active one's) when the active segment's
// version is below v or, holding records, it would pass SegmentBytes (spec §5
// rollover); then the bytes are reserved (reserve). Errors: ErrStorageFailed
// from the rollover or the reservation, with nothing staged.
func (l *Log) activeFor(v uint16, total int) (*segment, error) {
	s := l.activeSeg()
	if s.version < v || (s.next > s.base && s.size+int64(total) > l.opts.SegmentBytes) {
		if err := l.rollTo(max(v, s.version)); err != nil {
			return nil, err
		}
		s = l.activeSeg()
	}
	if err := l.reserve(s, s.size+int64(total)); err != nil {
		return nil, err
	}
	return s, nil
}

// rollTo is roll with the new segment's format version.
func (l *Log) rollTo(version uint16) error {
	old := l.activeSeg()
	if n := len(l.units); n > 0 && l.units[n-1].seg == old {
		l.units[n-1].sealAfter = true
		if l.active != nil {
			l.closeUnit(l.active)
		}
	} else if old.zeroFlight > 0 {
		l.sealPending = old
	} else if err := l.seal(old); err != nil {
		l.fail(err)
		return err
	}
	if err := l.createSegment(old.id+1, l.next, version); err != nil {
		l.fail(err)
		return err
	}
	return nil
}

// seal makes a complete segment immutable: exact size, data and index fsynced.
func (l *Log) seal(s *segment) error {
	if s.sealed || s.wf == nil {
		return nil
	}
	if err := s.wf.Truncate(s.size); err != nil {
		return storageErr("truncate", s.path, err)
	}
	if err := s.wf.Datasync(); err != nil {
		return storageErr("fdatasync", s.path, err)
	}
	if err := writeFileAtomic(l.fs, l.dir, IndexFileName(s.id), s.indexBytes()); err != nil {
		return err
	}
	s.wf.Close()
	s.wf = nil
	if s.rf != nil {
		s.rf.Close()
		s.rf = nil
	}
	s.sealed = true
	if s.next > l.durable.Load() {
		l.durable.Store(s.next)
	}
	return nil
}

// submit starts the next write and, under on_commit, the fdatasync covering
// every completed write (one per log in flight each).
func (l *Log) submit() error {
	if l.periodicOwed() {
		if err := l.startSync(tagPeriodic); err != nil {
			return err
		}
	}
	if l.opts.FsyncMode == FsyncOnCommit && !l.syncing() {
		for _, u := range l.units {
			if u.state == unitWritten {
				return l.startSync(tagSync)
			}
		}
	}
	if err := l.maybeZero(); err != nil {
		return err
	}
	if l.writing() || l.sealPending != nil {
		return nil
	}
	for i, u := range l.units {
		if u.state != unitStaged {
			continue
		}
		if i > 0 && l.units[i-1].seg != u.seg {
			return nil // the previous segment is sealed first
		}
		if z := u.seg.zeroFlight; z > 0 && u.filePos+int64(u.n+l.block) > u.seg.zeroEnd {
			return nil // would overlap the pre-zeroing write in flight
		}
		if open, err := l.gateOpen(u); !open {
			return err
		}
		return l.startWrite(u)
	}
	return nil
}

// zeroBuf is shared, never-written aligned zero memory for pre-zeroing writes.
var (
	zeroBuf  []byte
	zeroOnce sync.Once
)

const prezeroChunk = 4 << 20

// maybeZero starts a pre-zeroing write when the active segment's written
// region is less than PrezeroBytes ahead of its data (on_commit logs only).
func (l *Log) maybeZero() error {
	s := l.activeSeg()
	if l.opts.PrezeroBytes <= 0 || l.opts.FsyncMode != FsyncOnCommit || s.wf == nil || l.zeroing() || l.failed != nil {
		return nil
	}
	limit := (l.opts.SegmentBytes + int64(l.block) - 1) &^ int64(l.block-1)
	start := s.zeroEnd
	if hw := (s.size + int64(l.block) - 1) &^ int64(l.block-1); hw > start {
		start = hw
	}
	if start >= limit || start-s.size >= l.opts.PrezeroBytes {
		return nil
	}
	n := int64(prezeroChunk)
	if start+n > limit {
		n = limit - start
	}
	zeroOnce.Do(func() { zeroBuf, _ = ring.AlignedBuffer(prezeroChunk) })
	if zeroBuf == nil {
		return nil // best effort: no memory for the zero buffer
	}
	s.zeroEnd, s.zeroFlight = start, start+n
	ud := l.d.userData(l, tagZero)
	if fd := s.wf.Fd(); l.d.r != nil && fd >= 0 {
		if err := l.d.prepare(ring.Op{Code: ring.OpWrite, FD: int32(fd), Buf: zeroBuf[:n], Off: start, UserData: ud}); err != nil {
			s.zeroFlight = 0
			if errors.Is(err, ring.ErrTooManyInFlight) {
				return nil
			}
			return storageErr("prepare", s.path, err)
		}
		return nil
	}
	err := runWrite(s.wf, zeroBuf[:n], start)
	l.d.local = append(l.d.local, localCompletion{userData: ud, res: n, err: err})
	return nil
}

// zeroDone completes a pre-zeroing write.
func (l *Log) zeroDone(res int64, err error) {
	for _, s := range l.segs {
		if s.zeroFlight == 0 {
			continue
		}
		if err == nil && res != s.zeroFlight-s.zeroEnd {
			err = shortErr("write", int(res), int(s.zeroFlight-s.zeroEnd))
		}
		if err != nil {
			l.fail(storageErr("write", s.path, err))
		} else {
			s.zeroEnd = s.zeroFlight
		}
		s.zeroFlight = 0
	}
	if s := l.sealPending; s != nil && l.failed == nil {
		l.sealPending = nil
		if err := l.seal(s); err != nil {
			l.fail(err)
		}
	}
	l.d.markPending(l)
}

// zeroing reports whether a pre-zeroing write is in flight on any segment.
func (l *Log) zeroing() bool {
	for _, s := range l.segs {
		if s.zeroFlight > 0 {
			return true
		}
	}
	return false
}

// hasWork reports whether l has staged writes that nothing in flight will
// trigger (a submission refused by a full ring), or a periodic sync due.
func (l *Log) hasWork() bool {
	if l.periodicOwed() {
		return true
	}
	for _, u := range l.units {
		switch {
		case u.state == unitStaged && l.inflightWrite == nil && l.sealPending == nil && !l.gateShut(u):
			return true // a write the ring refused (ErrTooManyInFlight)
		case u.state == unitWritten && !l.syncInFlight && l.opts.FsyncMode == FsyncOnCommit:
			return true // an fdatasync the ring refused
		}
	}
	return false
}

func (l *Log) writing() bool { return l.inflightWrite != nil }
func (l *Log) syncing() bool { return l.syncInFlight }

func (l *Log) startWrite(u *unit) error {
	if !u.closed {
		l.closeUnit(u)
	}
	var b []byte
	var off int64
	if u.seg.direct {
		end := (u.n + l.block - 1) &^ (l.block - 1)
		clear(u.buf[u.n:end])
		b, off = u.buf[:end], u.filePos
	} else {
		b, off = u.buf[u.dataStart:u.n], u.filePos+int64(u.dataStart)
	}
	u.state = unitWriting
	l.inflightWrite = u
	l.writeStart = l.opts.Clock.MonoNanos()
	l.writeLen = len(b)
	l.d.stats.writes.Add(1)
	l.d.stats.writeBytes.Add(uint64(len(b)))
	ud := l.d.userData(l, tagWrite)
	// Buffered writes go through io_uring too (ext4 runs them on a kernel worker), off
	// the core thread's synchronous path (commit.go, asyncBuffered).
	l.writeParts, l.writeGot, l.writeErr = 1, 0, nil
	if fd := u.seg.wf.Fd(); l.d.r != nil && fd >= 0 && (u.seg.direct || l.asyncBuffered(len(b))) {
		return l.prepareWrite(u, int32(fd), b, off, ud)
	}
	err := runWrite(u.seg.wf, b, off)
	res := int64(len(b))
	if err != nil {
		res = -1
	} else {
		l.landed = u.next // a plain pwrite: in the file once it returned
	}
	l.d.local = append(l.d.local, localCompletion{userData: ud, res: res, err: err})
	return nil
}

// directWriteChunk splits a large O_DIRECT write into parts submitted
// together, so the device sees queue depth > 1 (NOTES.md: QD8 beats QD1).
const directWriteChunk = 1 << 20

// startSync submits one fdatasync covering every write completed so far.
func (l *Log) startSync(tag uint64) error {
	s := l.activeSeg()
	if len(l.units) > 0 {
		s = l.units[0].seg
	}
	if s.wf == nil {
		return nil
	}
	l.syncInFlight = true
	l.syncStart = l.opts.Clock.MonoNanos()
	l.syncTarget = l.written
	for _, u := range l.units {
		if u.state == unitWritten {
			u.state = unitSyncing
		}
	}
	ud := l.d.userData(l, tag)
	if fd := s.wf.Fd(); l.d.r != nil && fd >= 0 {
		if err := l.d.prepare(ring.Op{Code: ring.OpFdatasync, FD: int32(fd), UserData: ud}); err != nil {
			l.syncInFlight = false
			for _, u := range l.units {
				if u.state == unitSyncing {
					u.state = unitWritten
				}
			}
			if errors.Is(err, ring.ErrTooManyInFlight) {
				return nil
			}
			return storageErr("prepare", s.path, err)
		}
		return nil
	}
	err := s.wf.Datasync()
	l.d.local = append(l.d.local, localCompletion{userData: ud, err: err})
	return nil
}

// opDone handles the completion of a write or an on_commit fdatasync.
func (l *Log) opDone(tag uint64, res int64, err error) {
	if tag == tagWrite {
		u := l.inflightWrite
		if u == nil {
			return
		}
		l.writeParts--
		if res > 0 {
			l.writeGot += int(res)
		}
		if err != nil && l.writeErr == nil {
			l.writeErr = err
		}
		if l.writeParts > 0 {
			return
		}
		l.inflightWrite = nil
		l.d.stats.writeNanos.Add(uint64(l.opts.Clock.MonoNanos() - l.writeStart))
		err = l.writeErr
		if err == nil && l.writeGot != l.writeLen {
			err = shortErr("write", l.writeGot, l.writeLen)
		}
		if err != nil {
			l.writeFailed(u)
			l.fail(storageErr("write", u.seg.path, err))
			return
		}
		u.state = unitWritten
		l.written = u.next
		l.landed = max(l.landed, u.next)
		if l.gated != nil {
			l.d.markPending(l.gated)
		}
		if l.opts.FsyncMode != FsyncOnCommit {
			u.state = unitDone
		}
		l.writeCommitted(u) // commit.go
	} else {
		l.syncInFlight = false
		l.d.stats.syncNanos.Add(uint64(l.opts.Clock.MonoNanos() - l.syncStart))
		if err != nil {
			l.fail(storageErr("fdatasync", l.dir, err))
			return
		}
		if l.failed != nil {
			return // a linked fdatasync after its write was reported failed: nothing advances
		}
		n := 0
		for _, u := range l.units {
			if u.state == unitSyncing {
				u.state = unitDone
				n += len(u.cbs)
			}
		}
		l.d.stats.syncs.Add(1)
		l.d.stats.syncedAppend.Add(uint64(n))
		groupCommitFanIn.Update(float64(n))
		l.durable.Store(l.syncTarget)
	}
	if l.failed == nil {
		l.retire()
		l.d.markPending(l)
	}
}

// retire completes finished units in order: committed offset, callbacks,
// seal after a rollover, compaction's head drop.
func (l *Log) retire() {
	for len(l.units) > 0 && l.units[0].state == unitDone {
		u := l.units[0]
		n := copy(l.units, l.units[1:]) // shift, keeping the backing array
		l.units[n] = nil
		l.units = l.units[:n]
		l.committed.Store(u.next)
		l.wakeWaiters()
		for i, cb := range u.cbs {
			l.d.stats.appends.Add(1)
			cb.done(cb.first, cb.last, nil)
			u.cbs[i] = pendingAppend{}
		}
		l.putBuf(u.buf)
		if u.sealAfter && u.seg.zeroFlight > 0 {
			l.sealPending = u.seg // sealed when the pre-zeroing write completes
		} else if u.sealAfter {
			if err := l.seal(u.seg); err != nil {
				l.fail(err)
				return
			}
		}
		if u.dropBefore {
			if err := l.syncBeforeDrop(u); err != nil {
				l.fail(err)
				return
			}
			if err := l.dropBefore(u.seg); err != nil {
				l.fail(err)
				return
			}
		}
		l.freeUnit(u)
	}
}

// syncBeforeDrop makes a compaction's live set durable before the segments it
// replaces are deleted (Compact). Under on_commit the unit completed after its
// fdatasync already; under periodic and none this runs one synchronous
// fdatasync of the unit's segment (compactions are rare; a sealed segment was
// synced by its seal).
func (l *Log) syncBeforeDrop(u *unit) error {
	if l.opts.FsyncMode == FsyncOnCommit || u.seg.wf == nil || l.durable.Load() >= u.next {
		return nil
	}
	if err := u.seg.wf.Datasync(); err != nil {
		return storageErr("fdatasync", u.seg.path, err)
	}
	l.d.stats.syncs.Add(1)
	if l.written > l.durable.Load() && !l.syncInFlight {
		l.durable.Store(l.written)
	}
	return nil
}

// newUnit returns a recycled unit (its cbs slice kept for reuse) or a new one.
func (l *Log) newUnit() *unit {
	if n := len(l.freeUnits); n > 0 {
		u := l.freeUnits[n-1]
		l.freeUnits[n-1] = nil
		l.freeUnits = l.freeUnits[:n-1]
		return u
	}
	return &unit{}
}

// freeUnit keeps a retired unit for reuse (a few at most).
func (l *Log) freeUnit(u *unit) {
	if len(l.freeUnits) < 4 {
		*u = unit{cbs: u.cbs[:0]}
		l.freeUnits = append(l.freeUnits, u)
	}
}

// fail stops the log: every staged or in-flight append fails with err.
// Buffers still used by in-flight ops are released when those complete (Close).
func (l *Log) fail(err error) {
	if l.failed != nil {
		return
	}
	l.failed = err
	for _, u := range l.units {
		for i, cb := range u.cbs {
			cb.done(cb.first, cb.last, err)
			u.cbs[i] = pendingAppend{}
		}
		u.cbs = u.cbs[:0]
	}
	l.active = nil
	if g := l.gated; g != nil && g.failed == nil {
		// What g's writes wait for will never land (WriteAfter).
		g.fail(storageErr("write", g.dir, fmt.Errorf("the log it writes after (%s) failed: %w", l.dir, err)))
	}
}

// periodicOwed reports whether a periodic fdatasync is due, or one a SyncNow
// caller waits for (syncnow.go).
func (l *Log) periodicOwed() bool {
	return !l.syncInFlight && l.failed == nil && !l.closed && l.written > l.durable.Load() &&
		(l.opts.FsyncMode == FsyncPeriodic && l.opts.Clock.MonoNanos() >= l.syncDue || l.syncNowOwed())
}

func (l *Log) periodicDone(err error) {
	l.syncInFlight = false
	l.d.stats.syncNanos.Add(uint64(l.opts.Clock.MonoNanos() - l.syncStart))
	l.syncDue = l.opts.Clock.MonoNanos() + int64(l.opts.FsyncInterval)
	if err != nil {
		l.fail(storageErr("fdatasync", l.dir, err))
		return
	}
	l.d.stats.syncs.Add(1)
	l.durable.Store(l.syncTarget)
}

// Close drains the log's appends, fsyncs and trims the active segment, writes
// its index and closes every file. Later calls return nil. Runs other logs'
// callbacks while draining (it drives Flush/Poll).
func (l *Log) Close() error {
	if l.closed {
		return nil
	}
	err := l.d.drain(l)
	for l.inflightWrite != nil || l.syncInFlight || l.zeroing() {
		if perr := l.d.Poll(time.Second); perr != nil {
			break
		}
	}
	if l.failed == nil {
		s := l.activeSeg()
		err = l.finishActive(s)
	}
	l.closed = true
	l.closeFiles()
	l.core.close()
	for _, u := range l.units {
		if u.buf != nil {
			l.putBuf(u.buf)
		}
	}
	l.units = nil
	l.freeAll()
	delete(l.d.logs, l.id)
	if l.dep != nil {
		l.dep.gated, l.dep = nil, nil
	}
	return err
}

func (l *Log) finishActive(s *segment) error {
	if s.wf == nil {
		return nil
	}
	if err := s.wf.Truncate(s.size); err != nil {
		return storageErr("truncate", s.path, err)
	}
	if err := s.wf.Datasync(); err != nil {
		return storageErr("fdatasync", s.path, err)
	}
	l.durable.Store(l.next)
	return writeFileAtomic(l.fs, l.dir, IndexFileName(s.id), s.indexBytes())
}

var _ = os.O_RDONLY

// reserve makes sure the active segment's blocks up to end are reserved with
// fallocate(KEEP_SIZE) (spec/storage-format.md §5, preallocation), growing the
// reservation one PreallocateStepBytes step at a time up to SegmentBytes (an
// oversized batch reserves exactly what it needs). One fallocate per step, not
// per record; a failure is an ErrStorageFailed error with nothing staged.
func (l *Log) reserve(s *segment, end int64) error {
	if l.opts.NoPreallocate || end <= s.allocEnd {
		return nil
	}
	step := min(l.opts.PreallocateStepBytes, l.opts.SegmentBytes)
	target := min((end+step-1)/step*step, l.opts.SegmentBytes)
	target = max(target, end)
	if err := s.wf.Allocate(s.allocEnd, target-s.allocEnd); err != nil {
		return storageErr("fallocate", s.path, err)
	}
	s.allocEnd = target
	return nil
}
