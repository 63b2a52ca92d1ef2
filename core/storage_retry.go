package core

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"felix/internal/vfs"
	"felix/proto"
	"felix/seglog"
)

// Storage retry bounds (issue 23 item 4): the first retry of a failed shard
// log comes retryFirst after the failure, each later one twice as late, at
// most retryMax apart.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = 5 * time.Second
)

// probeFileName is the file a retry writes (4 KiB, fdatasync'd through
// vfs.WriteFileAtomic) and removes in the log's directory: the disk takes
// writes again.
const probeFileName = "storage-probe"

// WriteError is the answer to a request whose write to a shard's log failed
// (ENOSPC, EIO...; issue 23 item 4): the stream and shard, the operation and
// the errno's text, never the server's path (the log line names it). The
// shard retries by itself (StreamShard storage retry: probe, reopen) and
// serves again once the disk takes writes. errors.Is matches
// ErrStorageFailed and, through Unwrap, the seglog error and its errno.
type WriteError struct {
	Ref ShardRef // Kind ShardStream or ShardCache; a cache's names in Name
	Op  string
	err error
}

// Error formats "core: storage failed: stream|cache <t/ns/name> shard <n>: <op>: <errno text> (the broker retries)".
func (e *WriteError) Error() string {
	return fmt.Sprintf("core: storage failed: %s %s shard %d: %s: %s (the broker retries)",
		shardKindWord(e.Ref.Kind), e.Ref.Name, e.Ref.Shard, e.Op, errnoText(e.err))
}

// Is makes errors.Is(err, ErrStorageFailed) true.
func (e *WriteError) Is(target error) bool { return target == ErrStorageFailed }

// Unwrap returns the log's error.
func (e *WriteError) Unwrap() error { return e.err }

// errnoText is the errno's text in err ("no space left on device"), else
// "I/O failure": a client's error never carries a server path.
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "I/O failure"
}

// logCause is err for the log: the log's own error (naming the path) behind a *WriteError.
func logCause(err error) error {
	var we *WriteError
	if errors.As(err, &we) {
		return we.err
	}
	return err
}

// writeFailed is the error a failed append of the shard's logs answers: a
// *WriteError for an I/O failure of a durable shard; damage and other errors
// as storageError.
func (s *streamShard) writeFailed(op string, err error) error {
	return writeFailed(ShardRef{Kind: ShardStream, Name: s.name, Shard: s.index}, s.durable, op, err)
}

// writeFailed wraps an I/O failure of ref's durable log as a *WriteError;
// damage and other errors as storageError.
func writeFailed(ref ShardRef, durable bool, op string, err error) error {
	if !durable || errors.Is(err, seglog.ErrCorruption) || !errors.Is(err, seglog.ErrStorageFailed) {
		return storageError(op, err)
	}
	var we *WriteError
	if errors.As(err, &we) {
		return err
	}
	return &WriteError{Ref: ref, Op: op, err: err}
}

// probeWrite writes (fdatasync'd) and removes a 4 KiB file beside log: the
// disk takes writes again.
func probeWrite(log shardLog) error {
	fsys, p, ok := log.stateFile(probeFileName)
	if !ok {
		return ErrInvalid
	}
	if err := vfs.WriteFileAtomic(fsys, p, make([]byte, 4096), 0o644); err != nil {
		return err
	}
	return fsys.Remove(p)
}

// nextRetry doubles a retry delay, bounded by retryMax.
func nextRetry(d time.Duration) time.Duration { return min(2*d, retryMax) }

// retryable reports whether the shard's failure err is one a retry can cure:
// an I/O failure of a durable shard's record or producer-key log (a
// seglog.StorageError; not damage, not a close).
func (s *streamShard) retryable(err error) bool {
	return s.durable && !s.closed && s.unservable == nil && errors.Is(err, seglog.ErrStorageFailed) && !errors.Is(err, seglog.ErrCorruption)
}

// startRetry begins a storage episode (the shard's first failure, from
// failHeld): one ERROR line with the log's path and the cause, then retries
// every retryFirst..retryMax until one succeeds (retryStorage).
func (s *streamShard) startRetry(err error) {
	if !s.retryable(err) {
		return
	}
	s.c.engine.cfg.Logger.Error("core: stream shard log write failed: publishes answer storage_failed; retrying until the disk takes writes",
		"stream", s.name.String(), "shard", s.index, "err", logCause(err))
	s.retryDelay = retryFirst
	s.c.timers.schedule(&s.retryTimer, s.c.clock.MonoNanos()+int64(s.retryDelay))
}

// retryStorage is one retry (core timer): once no append is in flight, a
// probe write in the log's directory; when it lands, the shard's logs are
// closed and reopened (recovery keeps what reached the file, cuts a torn
// tail), the failure is cleared and records recovered past the old tail are
// handed to live subscribers. Otherwise it tries again later (doubling, at
// most retryMax). Counted in felix_storage_write_retries_total.
func (s *streamShard) retryStorage(now int64) {
	if s.closed || !s.retryable(s.failed) {
		return
	}
	s.c.engine.cfg.Metrics.GetOrCreateCounter("felix_storage_write_retries_total").Inc()
	if err := s.reopenAfterFailure(); err != nil {
		s.retryDelay = nextRetry(s.retryDelay)
		s.c.timers.schedule(&s.retryTimer, now+int64(s.retryDelay))
		return
	}
	s.c.engine.cfg.Logger.Info("core: stream shard log writes again: storage failure over",
		"stream", s.name.String(), "shard", s.index, "next_offset", s.records.NextOffset())
}

// reopenAfterFailure probes, then reopens the shard's logs; on an error the
// shard stays failed (placeholder logs answering the failure when the old
// ones were closed already).
func (s *streamShard) reopenAfterFailure() error {
	if !s.idleNow() {
		return ErrOverloaded // appends still completing: next time
	}
	if err := probeWrite(s.records); err != nil {
		return err
	}
	_ = s.records.Close()
	_ = s.producerLog.Close()
	s.producers = newProducerWindow(s.c.engine.cfg.ProducerWindow)
	err := s.trimUnacknowledged()
	if err == nil {
		err = s.openLogs(s.logOpts)
	}
	if err != nil {
		s.records, s.producerLog = damagedLog{s.failed}, damagedLog{s.failed}
		return err
	}
	s.durableLog = s.records
	s.failed = nil
	s.metrics.failed.Store(0)
	s.committed = max(s.committed, s.records.NextOffset())
	if s.releasesAtCommit() {
		s.releaseTo(s.committed)
	}
	return nil
}

// trimUnacknowledged cuts from the record log what the failure answered as
// failed: records past the shard's committed offset (written before an
// fdatasync or a later write failed) were answered storage_failed, "not
// applied", so they must not come back with the reopen. It runs before
// openLogs, whose producer-key recovery then fences the keys of the cut
// records (producer.go).
func (s *streamShard) trimUnacknowledged() error {
	l, err := s.c.disk.OpenLog(s.logAddr(proto.LogStream), s.logOpts)
	if err != nil {
		return err
	}
	if l.NextOffset() > s.committed {
		err = l.TruncateSuffix(s.committed)
	}
	return errors.Join(err, l.Close())
}
