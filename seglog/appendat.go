package seglog

import (
	"errors"
	"fmt"
)

// ErrNotTail matches every *NotTailError with errors.Is: an AppendAt whose
// records do not continue the log exactly at its tail.
var ErrNotTail = errors.New("seglog: records do not start at the log's tail")

// NotTailError is AppendAt's refusal (replication's apply-at-offset append,
// seeds/internal-protocol.txt "ReplicateRecords": a follower stores a batch
// only at its own tail). Tail is the log's NextOffset; Index is the batch
// position of the offending record and Offset the offset it carries — the
// first record's when it is not Tail, or the first record whose offset is
// not its predecessor's plus one. Nothing of the batch was staged.
type NotTailError struct {
	Tail   uint64
	Index  int
	Offset uint64
}

// Error formats "seglog: record 2 at offset 9, expected 8 (tail 6)".
func (e *NotTailError) Error() string {
	return fmt.Sprintf("seglog: record %d at offset %d, expected %d (tail %d)",
		e.Index, e.Offset, e.Tail+uint64(e.Index), e.Tail)
}

// Is makes errors.Is(err, ErrNotTail) true.
func (e *NotTailError) Is(target error) bool { return target == ErrNotTail }

// AppendAt stages recs verbatim as one batch at the log's tail: every record
// keeps its kind, timestamp (µs), publisher and payload, and recs[i].Offset
// must equal first+i with first == NextOffset (otherwise a *NotTailError
// wrapping ErrNotTail). It is the store half of a raw copy (ReadRaw →
// AppendAt): what a follower applies from its leader. The batch is encoded
// in one staging pass with no per-record allocation and never split across
// segments; when the active segment's version is below the highest
// Record.MinVersion of the batch, the log first rolls onto a segment of that
// version (as AppendRecord). done runs as Append's, with first and the last
// offset. recs is not retained.
//
// Errors (nothing staged, done not called): *NotTailError, ErrEmptyBatch,
// ErrBadOptions (an unknown kind or a publisher over 255 bytes),
// ErrRecordTooLarge, ErrClosed, the log's failure (ErrStorageFailed), or
// ErrStorageFailed from a rollover.
func (l *Log) AppendAt(first uint64, recs []Record, done func(first, last uint64, err error)) error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return l.failed
	}
	v, total, err := l.checkAt(first, recs)
	if err != nil {
		return err
	}
	s, err := l.activeFor(v, total)
	if err != nil {
		return err
	}
	l.stageAt(s, recs, total)
	l.pushCallback(pendingAppend{first: first, last: l.next - 1, done: done})
	l.d.stats.records.Add(uint64(len(recs)))
	l.d.markPending(l)
	return nil
}

// checkAt validates an AppendAt batch and returns the segment version it
// needs (at least WriteVersion) and its encoded length in that version (the
// v3+ record layout is the same in every later version).
func (l *Log) checkAt(first uint64, recs []Record) (uint16, int, error) {
	if len(recs) == 0 {
		return 0, 0, ErrEmptyBatch
	}
	if first != l.next {
		return 0, 0, &NotTailError{Tail: l.next, Index: 0, Offset: first}
	}
	v, total := WriteVersion, 0
	for i := range recs {
		r := &recs[i]
		if r.Offset != first+uint64(i) {
			return 0, 0, &NotTailError{Tail: l.next, Index: i, Offset: r.Offset}
		}
		if r.Kind > KindCommitMarker || len(r.Publisher) > 255 {
			return 0, 0, fmt.Errorf("%w: record %d: kind %d, publisher of %d bytes", ErrBadOptions, r.Offset, r.Kind, len(r.Publisher))
		}
		n := r.EncodedLen(WriteVersion)
		if n-RecordHeaderLenV3 > MaxPayloadBytes {
			return 0, 0, ErrRecordTooLarge
		}
		total += n
		v = max(v, r.MinVersion())
	}
	return v, total, nil
}

// stageAt encodes recs at the end of the active unit of s, keeping the
// segment's sparse index and newest timestamp.
func (l *Log) stageAt(s *segment, recs []Record, total int) {
	u := l.stageUnit(s, total)
	for i := range recs {
		r := &recs[i]
		l.indexNext(s)
		n := r.EncodedLen(s.version)
		AppendRecord(u.buf[u.n:u.n], s.version, r)
		u.n += n
		s.size += int64(n)
		l.next++
		if r.TimestampMicros > s.maxTs {
			s.maxTs = r.TimestampMicros
		}
	}
	s.next, u.next = l.next, l.next
}
