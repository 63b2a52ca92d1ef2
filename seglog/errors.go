package seglog

import (
	"errors"
	"fmt"
)

// CorruptionKind names one corruption verdict of spec/storage-format.md §8.
type CorruptionKind uint8

// Corruption kinds (spec/storage-format.md §8, plus index and v3 field checks).
const (
	CorruptSegmentMagic          CorruptionKind = iota + 1 // bad FLSG magic
	CorruptSegmentVersion                                  // version outside this build's 2..6
	CorruptSegmentFlags                                    // non-zero segment header flags
	CorruptSegmentHeaderChecksum                           // segment header CRC mismatch
	CorruptTruncated                                       // short read: Needed > Available
	CorruptRecordHeaderChecksum                            // record header CRC mismatch
	CorruptRecordChecksum                                  // record body CRC mismatch
	CorruptRecordTooLarge                                  // payload_len > MaxPayloadBytes
	CorruptRecordInvalid                                   // v3+ kind/flags/reserved/publisher invalid
	CorruptOffsetOutOfOrder                                // offset not exactly previous+1
	CorruptIndexMagic                                      // bad FLSI magic (index is rebuilt)
	CorruptIndexVersion                                    // index version ≠ segment version (rebuilt)
	CorruptIndexInvalid                                    // index base/flags/order wrong (rebuilt)
	CorruptSegmentSequence                                 // segments not contiguous, or an unparsable name
	// CorruptDataAfterEnd: the records stop at a zero gap (an all-zero record
	// header, or a torn verdict's all-zero sector) at Position, yet the file
	// holds a non-zero byte at NonZeroAt past the gap: not a clean end of data
	// (docs/storage-format.md "Recovery"; DataAfterEnd{at, next_nonzero}).
	CorruptDataAfterEnd
)

var corruptionNames = [...]string{"", "SegmentMagic", "SegmentVersion", "SegmentFlags", "SegmentHeaderChecksum",
	"Truncated", "RecordHeaderChecksum", "RecordChecksum", "RecordTooLarge", "RecordInvalid", "OffsetOutOfOrder",
	"IndexMagic", "IndexVersion", "IndexInvalid", "SegmentSequence", "DataAfterEnd"}

// String returns the spec's name of the kind, e.g. "RecordChecksum".
func (k CorruptionKind) String() string {
	if int(k) < len(corruptionNames) && k > 0 {
		return corruptionNames[k]
	}
	return fmt.Sprintf("CorruptionKind(%d)", uint8(k))
}

// ErrCorruption matches every *CorruptionError with errors.Is.
var ErrCorruption = errors.New("seglog: corruption")

// CorruptionError reports damaged or unreadable log bytes (spec/storage-format.md §8).
// Dir is the shard (log) directory, Segment the segment id (its file name
// number, -1 when not tied to one segment) and Position the byte position in
// that segment file where the damaged structure starts.
type CorruptionError struct {
	Kind      CorruptionKind
	Dir       string
	Segment   int64
	Position  int64
	Needed    int64 // CorruptTruncated: bytes the structure needs from Position
	Available int64 // CorruptTruncated: bytes present from Position
	NonZeroAt int64 // CorruptDataAfterEnd: byte position of the first non-zero byte past the gap
	// Offset is the record offset expected at Position (reads and
	// Reader.VerifySealed set it: the first offset the damage makes
	// unreadable); 0 elsewhere.
	Offset uint64
	Detail string
}

// Error formats "seglog: <Kind> in <dir> segment <id> at byte <pos>: <detail>".
func (e *CorruptionError) Error() string {
	s := fmt.Sprintf("seglog: %s in %s segment %020d at byte %d", e.Kind, e.Dir, e.Segment, e.Position)
	if e.Kind == CorruptTruncated {
		s += fmt.Sprintf(" (needed %d bytes, %d available)", e.Needed, e.Available)
	}
	if e.Kind == CorruptDataAfterEnd {
		s += fmt.Sprintf(" (records end there, non-zero data at byte %d)", e.NonZeroAt)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is makes errors.Is(err, ErrCorruption) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }

// locate returns a copy of e (when err is a *CorruptionError) naming dir,
// segment and absolute position pos+e.Position; other errors pass through.
func locate(err error, dir string, seg int64, pos int64) error {
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		return err
	}
	c := *ce
	c.Dir, c.Segment, c.Position = dir, seg, pos+ce.Position
	return &c
}

// ErrStorageFailed wraps every I/O failure of a log (write, fdatasync,
// fallocate, open, rename...). An append that fails with it was not
// acknowledged; the log must be closed and reopened (recovery decides what
// survived). Match with errors.Is; the wrapped errno is errors.Is-able too.
var ErrStorageFailed = errors.New("seglog: storage failed")

// StorageError is the concrete type behind ErrStorageFailed: Op names the
// operation ("write", "fdatasync", "fallocate", "open", ...), Path the file.
type StorageError struct {
	Op   string
	Path string
	Err  error
}

// Error formats "seglog: storage failed: <op> <path>: <err>".
func (e *StorageError) Error() string {
	return fmt.Sprintf("seglog: storage failed: %s %s: %v", e.Op, e.Path, e.Err)
}

// Unwrap returns the underlying error (an errno for I/O failures).
func (e *StorageError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStorageFailed) true.
func (e *StorageError) Is(target error) bool { return target == ErrStorageFailed }

func storageErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var se *StorageError
	if errors.As(err, &se) {
		return err
	}
	return &StorageError{Op: op, Path: path, Err: err}
}

// ErrRecordTooLarge: an appended payload exceeds MaxPayloadBytes. Nothing of
// the batch is staged.
var ErrRecordTooLarge = errors.New("seglog: record larger than MaxPayloadBytes")

// ErrClosed: the log (or disk) was closed, or failed and must be reopened.
var ErrClosed = errors.New("seglog: log closed")

// ErrBadOptions: Options failed validation; the wrapping error says which field.
var ErrBadOptions = errors.New("seglog: bad options")

// ErrTrimmed matches every *TrimmedError with errors.Is.
var ErrTrimmed = errors.New("seglog: offset trimmed")

// TrimmedError: a read asked for an offset below the log's earliest retained
// offset (spec/storage-format.md §5, Trimmed{requested, oldest}; the broker maps
// it to CursorTooOld).
type TrimmedError struct {
	Requested uint64
	Oldest    uint64
}

// Error formats "seglog: offset <requested> trimmed (oldest <oldest>)".
func (e *TrimmedError) Error() string {
	return fmt.Sprintf("seglog: offset %d trimmed (oldest %d)", e.Requested, e.Oldest)
}

// Is makes errors.Is(err, ErrTrimmed) true.
func (e *TrimmedError) Is(target error) bool { return target == ErrTrimmed }

// ErrBusy: the operation needs the log idle (no staged or in-flight appends):
// call Disk.Flush and Disk.Poll until the appends complete, then retry.
var ErrBusy = errors.New("seglog: appends in flight")
