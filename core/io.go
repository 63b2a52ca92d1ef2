package core

import (
	"fmt"
	"time"
)

// logKind says which of a shard's logs is meant.
type logKind uint8

const (
	// logRecords is a stream shard's record log.
	logRecords logKind = iota
	// logProducers is the companion log that makes the idempotent-producer
	// window durable (docs/architecture.md, core; one entry per idempotent
	// publish, see producer.go).
	logProducers
	// logCacheRecords and logCacheCounters are a cache shard's two logs
	// (cache_shard.go; the production disk keeps them under caches/).
	logCacheRecords  logKind = 13
	logCacheCounters logKind = 20
	// logGroupCursors and logDeadLetters are the consumer-group companion
	// logs of a durable stream shard (group_shard.go; seglog "groups" and
	// "dead-letters" companion directories, spec/storage-format.md §6).
	logGroupCursors logKind = 16
	logDeadLetters  logKind = 18
)

// shardLog is the part of a seglog.Log that a core uses (docs/architecture.md,
// seglog contract). Append, NextOffset, EarliestOffset, CommittedOffset and
// Close run on the owning core only; ReadCommitted is goroutine-safe.
type shardLog interface {
	// Append stages payloads as consecutive records stamped tsMicros. The
	// payload bytes are copied before Append returns. done runs on the core,
	// inside coreDisk.Poll, after the append completed under the log's fsync
	// mode; appends of one log complete in the order they were made.
	Append(payloads [][]byte, tsMicros int64, done func(first, last uint64, err error)) error
	NextOffset() uint64
	EarliestOffset() uint64
	CommittedOffset() uint64
	// ReadCommitted calls fn for records at offsets >= from and below
	// CommittedOffset, in order, up to about maxBytes of payload (at least
	// one record when one exists), until fn returns false. The payload slice
	// is valid only during fn. A from below EarliestOffset is an error
	// wrapping errTrimmed.
	ReadCommitted(from uint64, maxBytes int, fn func(off uint64, tsMicros int64, payload []byte) bool) error
	Close() error
}

// logCompactor is a shardLog that can compact (seglog.Log.Compact): append
// live as new records at the tail and, once that append completed (done),
// drop every older record, moving EarliestOffset to the first live one.
type logCompactor interface {
	Compact(live [][]byte, tsMicros int64, done func(first, last uint64, err error)) error
}

// coreDisk is a core's I/O: its ring and the seglog.Disk on it. Every method
// except Wake runs on the owning core goroutine.
type coreDisk interface {
	// OpenLog opens (recovering) or creates the log of one shard.
	OpenLog(kind logKind, name StreamName, shard int) (shardLog, error)
	// RemoveLogs deletes every log of a shard (its logs are closed).
	RemoveLogs(name StreamName, shard int) error
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

// streamLogOptions are the settings a stream's own spec gives its shard logs
// (StreamSpec.RetentionBytes, RetentionAge, SyncOnCommit; 0 / false = the
// engine's Config).
type streamLogOptions struct {
	retentionBytes int64
	retentionAge   time.Duration
	syncOnCommit   bool
}

// streamOptionsDisk is a coreDisk that opens a stream's shard logs with the
// stream's own options. The core sets them for one stream right before it
// opens a shard of it and clears them (nil) right after, on the core
// goroutine (core.openShard); OpenLog applies them only to that stream's
// record log (retention, sync) and producer-key log (sync).
type streamOptionsDisk interface {
	setStreamOptions(name StreamName, o *streamLogOptions)
}
