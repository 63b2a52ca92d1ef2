package seglog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

func (l *Log) idle() error {
	switch {
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return l.failed
	case len(l.units) > 0 || l.inflightWrite != nil || l.syncInFlight || l.zeroing() || l.sealPending != nil:
		return ErrBusy
	}
	return nil
}

// TruncateSuffix removes every record at or after offset off, and every epoch
// starting at or after it (replication's divergence repair,
// seeds/internal-protocol.txt "LogConflict"; spec §8 "Suffix truncation").
// off ≥ NextOffset is a no-op. The log must be idle (ErrBusy otherwise).
// Errors: *TrimmedError when off < EarliestOffset, ErrStorageFailed,
// *CorruptionError.
func (l *Log) TruncateSuffix(off uint64) error {
	if err := l.idle(); err != nil {
		return err
	}
	if off >= l.next {
		return nil
	}
	if e := l.earliest.Load(); off < e {
		return &TrimmedError{Requested: off, Oldest: e}
	}
	l.committed.Store(off)
	if l.durable.Load() > off {
		l.durable.Store(off)
	}
	i := len(l.segs) - 1
	for l.segs[i].base > off {
		i--
	}
	if err := l.removeSegments(l.segs[i+1:]); err != nil {
		return l.failWith(err)
	}
	l.mu.Lock()
	l.segs = l.segs[:i+1]
	l.mu.Unlock()
	if err := l.cutSegment(l.segs[i], off); err != nil {
		return l.failWith(err)
	}
	l.next, l.written, l.landed = off, off, off
	keep := 0
	for keep < len(l.epochs) && l.epochs[keep].StartOffset < off {
		keep++
	}
	if keep < len(l.epochs) {
		eps := l.epochs[:keep:keep]
		if err := writeFileAtomic(l.fs, l.dir, EpochsFileName, EncodeEpochs(eps)); err != nil {
			return l.failWith(err)
		}
		l.epochs = eps
	}
	return nil
}

func (l *Log) failWith(err error) error {
	l.fail(err)
	return err
}

// cutSegment makes s the active segment ending just before offset off.
func (l *Log) cutSegment(s *segment, off uint64) error {
	pos := s.size
	if off < s.next {
		start, startOff := lookup(s.index, s.base, off)
		f, err := l.core.file(s.id, s.path)
		if err != nil {
			return err
		}
		size, err := f.Size()
		if err != nil {
			return storageErr("stat", s.path, err)
		}
		sc := newScanner(f, size, s.version, nil)
		r := sc.scanRecords(start, startOff, func(p int64, h *recordHeader, _ []byte) bool {
			if h.offset == off {
				pos = p
				return false
			}
			return true
		})
		if r.err != nil {
			return locate(r.err, l.dir, int64(s.id), 0)
		}
	}
	if s.wf == nil {
		wf, direct, err := openWrite(l.fs, s.path, os.O_RDWR, l.direct)
		if err != nil {
			return storageErr("open", s.path, err)
		}
		s.wf, s.direct, s.sealed = wf, direct, false
	}
	if err := s.wf.Truncate(pos); err != nil {
		return storageErr("truncate", s.path, err)
	}
	if err := s.wf.Datasync(); err != nil {
		return storageErr("fdatasync", s.path, err)
	}
	l.mu.Lock()
	k := len(s.index)
	for k > 0 && s.index[k-1].Offset >= off {
		k--
	}
	s.index = s.index[:k:k]
	l.mu.Unlock()
	s.lastIdx = -1
	if k > 0 {
		s.lastIdx = int64(s.index[k-1].Position)
	}
	s.size, s.next, s.zeroEnd = pos, off, 0
	if err := l.loadTail(s); err != nil {
		return err
	}
	return writeFileAtomic(l.fs, l.dir, IndexFileName(s.id), s.indexBytes())
}

// removeSegments deletes the files of segs (newest first) and fsyncs the directory.
func (l *Log) removeSegments(segs []*segment) error {
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		if s.wf != nil {
			s.wf.Close()
			s.wf = nil
		}
		if s.rf != nil {
			s.rf.Close()
			s.rf = nil
		}
		if f, ok := l.core.files[s.id]; ok {
			f.Close()
			delete(l.core.files, s.id)
		}
		for _, p := range []string{s.path, s.indexPath()} {
			if err := l.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return storageErr("remove", p, err)
			}
		}
	}
	if len(segs) == 0 {
		return nil
	}
	return storageErr("fsync-dir", l.dir, l.fs.SyncDir(l.dir))
}

// dropBefore deletes every segment older than s (compaction, retention).
func (l *Log) dropBefore(s *segment) error {
	i := 0
	for i < len(l.segs) && l.segs[i] != s {
		i++
	}
	if i == 0 || i == len(l.segs) {
		return nil
	}
	old := append([]*segment(nil), l.segs[:i]...)
	l.mu.Lock()
	l.segs = append(l.segs[:0:0], l.segs[i:]...)
	l.mu.Unlock()
	l.earliest.Store(s.base)
	return l.removeSegments(old)
}

// Bytes is the size of the log's segments in bytes, the active one up to its
// last staged record (preallocated space not counted): the figure
// RetentionBytes bounds. Owner goroutine only.
func (l *Log) Bytes() int64 {
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	return total
}

// EnforceRetention deletes whole sealed segments from the head while the log
// holds more than RetentionBytes, or while the head segment's newest record is
// older than now − RetentionAge (spec §5 retention). The active segment is
// never deleted; EarliestOffset moves with it. The caller runs it on its own
// timer (FELIX_DURABLE_RETENTION_INTERVAL_SECONDS). Returns the segments removed.
func (l *Log) EnforceRetention(now time.Time) (int, error) {
	if l.closed || l.failed != nil || (l.opts.RetentionBytes == 0 && l.opts.RetentionAge == 0) {
		return 0, nil
	}
	total := l.Bytes()
	cutoff := now.Add(-l.opts.RetentionAge).UnixMicro()
	n := 0
	for n < len(l.segs)-1 && l.segs[n].sealed {
		s := l.segs[n]
		bySize := l.opts.RetentionBytes > 0 && total > l.opts.RetentionBytes
		byAge := l.opts.RetentionAge > 0 && s.maxTs < cutoff
		if !bySize && !byAge {
			break
		}
		total -= s.size
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if err := l.dropBefore(l.segs[n]); err != nil {
		return 0, l.failWith(err)
	}
	return n, nil
}

// Compact supports cache-log compaction (spec §5, seeds): it rolls onto a new
// segment, appends live (the caller's live set, as new records at the tail) and,
// once that append completes, deletes every older segment. Offsets are never
// renumbered: the live records get new offsets and EarliestOffset moves to the
// first of them. done is Append's callback. Errors: as Append, and ErrEmptyBatch.
func (l *Log) Compact(live [][]byte, tsMicros int64, done func(first, last uint64, err error)) error {
	if len(live) == 0 {
		return ErrEmptyBatch
	}
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return l.failed
	}
	if s := l.activeSeg(); s.next > s.base {
		if err := l.roll(); err != nil {
			return err
		}
	}
	if err := l.Append(live, tsMicros, done); err != nil {
		return err
	}
	l.units[len(l.units)-1].dropBefore = true
	return nil
}

// Reset discards the whole log, generation history included, and restarts it
// empty at base (ReplicateRebuild, seeds/internal-protocol.txt "Rebuilding a
// follower"). The log must be idle (ErrBusy). Errors: ErrStorageFailed.
func (l *Log) Reset(base uint64) error {
	if err := l.idle(); err != nil {
		return err
	}
	nextID := l.activeSeg().id + 1
	l.committed.Store(l.earliest.Load())
	if err := l.removeSegments(l.segs); err != nil {
		return l.failWith(err)
	}
	l.mu.Lock()
	l.segs = nil
	l.mu.Unlock()
	if err := l.fs.Remove(filepath.Join(l.dir, EpochsFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return l.failWith(storageErr("remove", EpochsFileName, err))
	}
	l.epochs = nil
	if err := l.createSegment(nextID, base, WriteVersion); err != nil {
		return l.failWith(err)
	}
	l.next, l.written, l.landed = base, base, base
	l.earliest.Store(base)
	l.committed.Store(base)
	l.durable.Store(base)
	return nil
}

var _ = fmt.Sprintf
