package seglog

import (
	"errors"

	"felix/ring"
)

// The durable commit under on_commit (issue 22, docs/bench/seglog.md "One submission per
// commit"): when no fdatasync is in flight and the unit about to be written is the log's
// oldest, its O_DIRECT write carries the covering flush in the same submission instead of
// waiting for the write's completion and issuing the fdatasync on a later turn. Either a
// write linked to an fdatasync (ring.Op.Link: IOSQE_IO_LINK; a failed or short write
// cancels the fdatasync) or an RWF_DSYNC write (ring.Op.DSync). While that flush is in
// flight, later units are written on their own and covered by the next fdatasync, as
// before (group commit).

// Unit commit kinds (unit.commit): how the unit's write reaches stable storage.
const (
	commitAfter  = iota // an fdatasync submitted after the write completes
	commitLinked        // the write is linked to its fdatasync (one submission)
	commitDSync         // the write is an RWF_DSYNC write
)

// commitStyle is the kind new on_commit writes use (commitLinked or commitDSync; commitAfter
// turns the single submission off). Chosen by measurement on this disk (docs/bench/seglog.md):
// commitAfter for now. Inside seglog the linked chain measured level with it or ahead (the
// fdatasync was already submitted in the Poll that reaped the write), through the broker it
// measured 0.78–0.81× the records/s of durable-1k-on_commit (two runs of eight ABBA pairs at
// load 27–36), and the write's own completion still wakes the core (IOSQE_CQE_SKIP_SUCCESS
// would remove that wake-up: not built). RWF_DSYNC lost everywhere. Tests run every kind.
var commitStyle = commitAfter

// commitWith returns the commit kind of u's write in parts ops.
func (l *Log) commitWith(u *unit, parts int) int {
	if l.opts.FsyncMode != FsyncOnCommit || l.syncInFlight || len(l.units) == 0 || l.units[0] != u {
		return commitAfter
	}
	if commitStyle == commitLinked && parts != 1 {
		return commitAfter // a chain would serialize the parts; they go at queue depth > 1
	}
	return commitStyle
}

// prepareWrite queues b as one write op per directWriteChunk, all in flight at once, with
// the commit kind commitWith chooses.
func (l *Log) prepareWrite(u *unit, fd int32, b []byte, off int64, ud uint64) error {
	parts := (len(b) + directWriteChunk - 1) / directWriteChunk
	kind := l.commitWith(u, parts)
	for i := 0; i < parts; i++ {
		lo, hi := i*directWriteChunk, min((i+1)*directWriteChunk, len(b))
		err := l.d.prepare(ring.Op{Code: ring.OpWrite, FD: fd, Buf: b[lo:hi], Off: off + int64(lo), UserData: ud,
			Link: kind == commitLinked, DSync: kind == commitDSync})
		if err == nil {
			continue
		}
		if i == 0 {
			u.state = unitStaged
			l.inflightWrite = nil
			if errors.Is(err, ring.ErrTooManyInFlight) {
				return nil // retried by the next Flush
			}
			return storageErr("prepare", u.seg.path, err)
		}
		// Parts already queued complete normally; the write then fails.
		l.writeParts, l.writeErr = i, err
		return nil
	}
	l.writeParts = parts
	if kind == commitAfter {
		return nil
	}
	l.beginCommit(u, kind)
	if kind == commitLinked {
		return l.prepareLinkedSync(u, fd)
	}
	return nil
}

// beginCommit records that u's write carries the fdatasync covering it (and every write
// completed before, of which there is none: u is the oldest unit).
func (l *Log) beginCommit(u *unit, kind int) {
	u.commit = kind
	l.syncInFlight = true
	l.syncStart = l.opts.Clock.MonoNanos()
	l.syncTarget = u.next
}

// prepareLinkedSync queues the fdatasync linked to u's write, straight on the ring: a
// Disk.prepare retry would submit the write first and leave the fdatasync free to run
// before it. When the ring refuses, the write's chain ends at the submission made here
// and its fdatasync follows its completion as before.
func (l *Log) prepareLinkedSync(u *unit, fd int32) error {
	d := l.d
	d.op = ring.Op{Code: ring.OpFdatasync, FD: fd, UserData: d.userData(l, tagSync)}
	err := d.r.Prepare(&d.op)
	d.op = ring.Op{}
	if err == nil {
		d.prepared++
		return nil
	}
	u.commit = commitAfter
	l.syncInFlight = false
	if serr := d.submitRing(); serr != nil {
		return serr
	}
	if errors.Is(err, ring.ErrQueueFull) || errors.Is(err, ring.ErrTooManyInFlight) {
		return nil
	}
	return storageErr("prepare", u.seg.path, err)
}

// writeCommitted moves u, whose write just completed, on by its commit kind: a linked
// unit waits for its fdatasync's completion (already running); an RWF_DSYNC unit is
// durable now.
func (l *Log) writeCommitted(u *unit) {
	switch u.commit {
	case commitLinked:
		u.state = unitSyncing
		if !l.syncInFlight {
			u.state = unitDone // its fdatasync's completion was reaped first
		}
	case commitDSync:
		u.state = unitDone
		l.syncInFlight = false
		l.d.stats.syncNanos.Add(uint64(l.opts.Clock.MonoNanos() - l.syncStart))
		l.d.stats.syncs.Add(1)
		l.d.stats.syncedAppend.Add(uint64(len(u.cbs)))
		groupCommitFanIn.Update(float64(len(u.cbs)))
		l.durable.Store(l.syncTarget)
	}
}

// writeFailed clears the flush an RWF_DSYNC write carried (a linked fdatasync completes
// on its own, cancelled).
func (l *Log) writeFailed(u *unit) {
	if u.commit == commitDSync {
		l.syncInFlight = false
	}
}

// bufferedViaRing sends buffered (periodic, none) writes through io_uring instead of a
// pwrite on the caller's thread: the core thread no longer copies every batch into the
// page cache itself (21–31 % of broker CPU on pub/sub, issue 22). ext4 punts each such
// write to an io_uring kernel worker (NOTES.md); measured in docs/bench/seglog.md.
var bufferedViaRing = true

// bufferedRingMinBytes is the smallest buffered write sent through the ring: below it the
// pwrite's copy costs less than the hand-off to a kernel worker (one append in flight: p50
// 4 µs inline against 10 µs through the ring), above it the copy overlaps the core's next
// turn (docs/bench/seglog.md, "Buffered writes through the ring").
var bufferedRingMinBytes = 64 << 10

// asyncBuffered reports whether l's buffered write of n bytes goes through the ring (the
// syscall backend would run it on the caller's thread at Submit anyway: plain pwrite there).
func (l *Log) asyncBuffered(n int) bool {
	return bufferedViaRing && n >= bufferedRingMinBytes && l.d.r.Backend() == ring.BackendUring
}
