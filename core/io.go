package core

import (
	"fmt"
	"time"

	"felix/seglog"
)

// logReader is the read side of a shardLog: what replay (readAll,
// readWithOffsets) and producer-window recovery need.
type logReader interface {
	EarliestOffset() uint64
	CommittedOffset() uint64
	// ReadCommitted calls fn for the data records at offsets >= from and below
	// CommittedOffset, in order, up to about maxBytes of payload (at least
	// one record when one exists), until fn returns false. The payload slice
	// is valid only during fn. A from below EarliestOffset is an error
	// wrapping errTrimmed.
	ReadCommitted(from uint64, maxBytes int, fn func(off uint64, tsMicros int64, payload []byte) bool) error
}

// shardLog is the part of a seglog.Log that a core uses (docs/architecture.md,
// seglog contract): the shard's own appends and reads, and what replication
// needs (durable offset, generation history, suffix truncation, reset, raw
// read and the verbatim apply-at-offset append). Every method runs on the
// owning core only, except ReadCommitted and ReadRaw, which are
// goroutine-safe.
type shardLog interface {
	logReader
	// Append stages payloads as consecutive records stamped tsMicros. The
	// payload bytes are copied before Append returns. done runs on the core,
	// inside coreDisk.Poll, after the append completed under the log's fsync
	// mode; appends of one log complete in the order they were made.
	Append(payloads [][]byte, tsMicros int64, done func(first, last uint64, err error)) error
	NextOffset() uint64
	// DurableOffset is one past the last record known fdatasynced
	// (durable_offset; <= CommittedOffset under fsync periodic and none).
	DurableOffset() uint64
	// Epochs returns a copy of the log's generation history, oldest first;
	// AddEpoch appends (generation, start) to it and persists it
	// (seglog.Log.AddEpoch: generation must grow, start must not go back,
	// else an error wrapping seglog.ErrBadOptions).
	Epochs() []seglog.Epoch
	AddEpoch(generation, start uint64) error
	// TruncateSuffix drops every record at or above off (a no-op at or past
	// NextOffset) and the epochs starting there; Reset discards the whole log
	// and restarts it empty at base. Both need the log idle (no append in
	// flight: seglog.ErrBusy) and refuse an off below EarliestOffset.
	TruncateSuffix(off uint64) error
	Reset(base uint64) error
	// AppendRecord stages one record of any kind (r.Offset ignored: it takes
	// NextOffset), rolling onto the segment version it needs; done as Append.
	AppendRecord(r seglog.Record, done func(first, last uint64, err error)) error
	// ReadRaw calls fn for every stored record at offsets >= from and below
	// CommittedOffset as the log holds it: offset, kind (data, generation
	// start, commit marker), timestamp, publisher and payload. Limits and
	// errors as ReadCommitted; *r and its slices are valid only during fn.
	ReadRaw(from uint64, maxBytes int, fn func(r *seglog.Record) bool) error
	// AppendAt stores recs verbatim (kind, timestamp, publisher, payload) as
	// one batch at offsets first, first+1, ...: replication's apply-at-offset
	// append. first must be NextOffset and recs[i].Offset first+i, else an
	// error wrapping seglog.ErrNotTail (*seglog.NotTailError) with nothing
	// stored and done not called. done as Append.
	AppendAt(first uint64, recs []seglog.Record, done func(first, last uint64, err error)) error
	// Compact appends live as new records at the tail and, once that append
	// completed (done), drops every older record, moving EarliestOffset to
	// the first live one (seglog.Log.Compact): the producers, cache, counter
	// and group logs stay bounded through it (logOwner.compact).
	Compact(live [][]byte, tsMicros int64, done func(first, last uint64, err error)) error
	// writeAfter orders this log's writes after dep's (seglog.Log.WriteAfter):
	// a stream shard's records after its producer keys (producer.go). A log
	// that keeps no files (the test fake) orders nothing and returns nil; dep
	// from another disk is an error.
	writeAfter(dep shardLog) error
	// seglog returns the seglog.Log behind the log, nil for one without.
	seglog() *seglog.Log
	// stateFile returns the file system and path of the state file name
	// beside the log (the release mark, replicate_mark.go); ok=false for a log
	// that keeps no files.
	stateFile(name string) (fsys seglog.FS, path string, ok bool)
	Close() error
}

// coreDisk is a core's I/O: its ring and the seglog.Disk on it. Every method
// except Wake runs on the owning core goroutine. Every log a core uses opens
// through OpenLog: no caller looks behind the interface.
type coreDisk interface {
	// OpenLog opens (recovering) or creates the log addr names, with the
	// options of its stream (the zero logOptions: the engine's Config). An
	// invalid addr (LogAddr.Validate) is an error wrapping ErrInvalid and
	// opens nothing. addr.Incarnation does not name a directory yet.
	OpenLog(addr LogAddr, opts logOptions) (shardLog, error)
	// RemoveLogs deletes every log of a shard, companions included (its logs
	// are closed).
	RemoveLogs(shard ShardRef) error
	// Flush submits every staged append (one write per log, and the fsync
	// the log's mode asks for).
	Flush() error
	// Poll reaps completions and runs append callbacks. It blocks for at
	// most block (0 = do not block) until a completion or a Wake arrives.
	Poll(block time.Duration) error
	// SyncAll asks every log opened on this disk for an fdatasync (the
	// periodic fsync timer); completions arrive through Poll.
	SyncAll() error
	// Wake makes a blocked Poll return early. Goroutine-safe.
	Wake() error
	Close() error
}

// trimmedError is returned (possibly wrapped) by shardLog.ReadCommitted for
// a from below the log's earliest offset (spec/storage-format.md §5,
// Trimmed{requested, oldest}); subscribers turn it into too_old.
type trimmedError struct {
	requested, oldest uint64
}

func (e *trimmedError) Error() string {
	return fmt.Sprintf("core: offset %d trimmed (oldest %d)", e.requested, e.oldest)
}

// logRetainer is a shardLog that enforces retention
// (seglog.Log.EnforceRetention): it drops whole sealed head segments past
// its size or age bound and returns how many it dropped.
type logRetainer interface {
	EnforceRetention(now time.Time) (int, error)
}

// logOptions are the settings a stream's own spec gives its shard logs
// (StreamSpec.RetentionBytes, RetentionAge, SyncOnCommit; 0 / false = the
// engine's Config), passed to coreDisk.OpenLog: retention applies to the
// record log (proto.LogStream), syncOnCommit to it and the producers log.
type logOptions struct {
	retentionBytes int64
	retentionAge   time.Duration
	syncOnCommit   bool
}
