package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"felix/seglog"
)

// DamageError reports damaged bytes in a stream shard's record log (a
// seglog.CorruptionError found by a read or by the startup check of sealed
// segments; issue 23 item 1): the stream, shard, segment file, byte position
// in it, the corruption kind and Offset, the first offset the damage makes
// unreadable (records below it and past the damaged record still read). Its
// text names no server path, so the broker hands it to clients as is
// (storage_failed). errors.Is matches ErrStorageFailed and, through Unwrap,
// seglog.ErrCorruption; errors.As reaches the *seglog.CorruptionError.
type DamageError struct {
	Kind     ShardKind // ShardStream, or ShardCache (then Stream holds the cache's names)
	Stream   StreamName
	Shard    int
	Segment  string // segment file name, e.g. 00000000000000000000.log
	Position int64  // byte position of the damaged structure in the segment
	Offset   uint64
	Damage   seglog.CorruptionKind
	// Unservable: the log did not open (openDamaged), so the shard answers
	// every request with this error; false: found by a read or the startup
	// check, the shard serves around the damage.
	Unservable bool
	err        error
}

// Error formats "core: storage failed: stream|cache <t/ns/s> shard <n>: log
// damaged: <Damage> in segment <file> at byte <pos> (offset <o> unreadable)".
func (e *DamageError) Error() string {
	return fmt.Sprintf("core: storage failed: %s: log damaged: %s in segment %s at byte %d (offset %d unreadable)",
		e.Where(), e.Damage, e.Segment, e.Position, e.Offset)
}

// Where names the shard: "stream <t/ns/s> shard <n>" or "cache <t/ns/c> shard <n>".
func (e *DamageError) Where() string {
	return fmt.Sprintf("%s %s shard %d", shardKindWord(e.Kind), e.Stream, e.Shard)
}

// shardKindWord is "cache" for ShardCache, else "stream".
func shardKindWord(k ShardKind) string {
	if k == ShardCache {
		return "cache"
	}
	return "stream"
}

// newDamageError builds the *DamageError of ref's log from err (a
// *seglog.CorruptionError in its chain), or nil when err holds none.
func newDamageError(ref ShardRef, err error) *DamageError {
	var ce *seglog.CorruptionError
	if !errors.As(err, &ce) {
		return nil
	}
	return &DamageError{Kind: ref.Kind, Stream: ref.Name, Shard: ref.Shard, Segment: seglog.SegmentFileName(uint64(max(ce.Segment, 0))),
		Position: ce.Position, Offset: ce.Offset, Damage: ce.Kind, err: err}
}

// Is makes errors.Is(err, ErrStorageFailed) true.
func (e *DamageError) Is(target error) bool { return target == ErrStorageFailed }

// Unwrap returns the *seglog.CorruptionError.
func (e *DamageError) Unwrap() error { return e.err }

// Damage returns the first damage found in the shard's record log since it
// opened (nil when none). Goroutine-safe.
func (s *streamShard) Damage() *DamageError { return s.damage.Load() }

// readFailed turns a read error of the shard's record log into the error a
// reader gets: a *DamageError for a *seglog.CorruptionError, the shard then
// marked damaged (markDamaged); else ErrStorageFailed-wrapped with op.
// Any goroutine.
func (s *streamShard) readFailed(op string, err error) error {
	d := newDamageError(s.ref(), err)
	if d == nil {
		return storageError(op, err)
	}
	s.markDamaged(d, op)
	return d
}

// markDamaged records the shard's first damage (felix_stream_damaged turns 1)
// and logs it once at ERROR with the log's directory. Later damage of the
// same shard is returned to its readers but not logged again. Any goroutine.
func (s *streamShard) markDamaged(d *DamageError, found string) {
	if !s.damage.CompareAndSwap(nil, d) {
		return
	}
	logDamage(s.c.engine.cfg.Logger, d, found)
}

// logDamage is the one ERROR line of a shard's first damage (the log's path is in err).
func logDamage(log *slog.Logger, d *DamageError, found string) {
	log.Error("core: shard log damaged: reads through the damage fail with storage_failed",
		shardKindWord(d.Kind), d.Stream.String(), "shard", d.Shard, "segment", d.Segment, "at_byte", d.Position,
		"offset", d.Offset, "kind", d.Damage.String(), "found_by", found, "err", d.err)
}

// ref is the shard's reference.
func (s *streamShard) ref() ShardRef {
	return ShardRef{Kind: ShardStream, Name: s.name, Shard: s.index}
}

// startVerify checks the checksums of every sealed segment of a durable
// shard's record log in the background (seglog.Reader.VerifySealed), one
// shard of the engine at a time, so damage is reported (markDamaged) before a
// reader finds it. The check stops when the shard closes (stopVerify) or the
// engine does; Engine.Close waits for it. Core goroutine (the Reader is made
// there); no-op for a log without files (the test fake).
func (s *streamShard) startVerify() {
	l := s.records.seglog()
	if l == nil {
		return
	}
	e := s.c.engine
	r := l.Reader()
	ctx, cancel := context.WithCancel(e.verifyCtx)
	s.stopVerify = cancel
	e.verifiers.Add(1)
	go func() {
		defer e.verifiers.Done()
		defer cancel()
		defer r.Close()
		select {
		case e.verifyTurn <- struct{}{}:
			defer func() { <-e.verifyTurn }()
		case <-ctx.Done():
			return
		}
		err := r.VerifySealed(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		if !errors.Is(err, seglog.ErrCorruption) { // an I/O error: the next read meets it
			e.cfg.Logger.Warn("core: startup check of sealed segments failed", "stream", s.name.String(), "shard", s.index, "err", err)
			return
		}
		_ = s.readFailed("startup check of sealed segments", err)
	}()
}

// openDamaged is openStreamShard's answer to a record or producer-key log
// that cannot open because its bytes are damaged (a *seglog.CorruptionError:
// a bad record at the tail of the newest segment after a clean stop or under
// fsync on_commit, a broken sealed segment past its last index entry...):
// the shard opens unservable instead of failing the whole start (issue 23
// item 2). Both logs are damagedLog placeholders answering the *DamageError,
// the shard is marked damaged, publishes fail with it (the sticky failure,
// set once the metrics exist) and subscriptions are refused with it; other
// shards are untouched. `felix log repair` (offline) truncates the log to its
// last valid record; the next open serves it. Reports false (nothing done)
// for other errors.
func (s *streamShard) openDamaged(err error) bool {
	d := newDamageError(s.ref(), err)
	if d == nil {
		return false
	}
	d.Unservable = true
	s.records, s.producerLog = damagedLog{d}, damagedLog{d}
	s.unservable = d
	s.markDamaged(d, "open")
	return true
}

// damagedLog stands in for a log that could not open (openDamaged, or a
// failed reopen of the storage retry): empty (offsets 0), every read and
// write answers its error (a *DamageError, a *WriteError), nothing to close.
type damagedLog struct{ err error }

func (l damagedLog) EarliestOffset() uint64  { return 0 }
func (l damagedLog) CommittedOffset() uint64 { return 0 }
func (l damagedLog) NextOffset() uint64      { return 0 }
func (l damagedLog) DurableOffset() uint64   { return 0 }
func (l damagedLog) ReadCommitted(uint64, int, func(uint64, int64, []byte) bool) error {
	return l.err
}
func (l damagedLog) Append([][]byte, int64, func(first, last uint64, err error)) error { return l.err }
func (l damagedLog) Epochs() []seglog.Epoch                                            { return nil }
func (l damagedLog) AddEpoch(uint64, uint64) error                                     { return l.err }
func (l damagedLog) TruncateSuffix(uint64) error                                       { return l.err }
func (l damagedLog) Reset(uint64) error                                                { return l.err }
func (l damagedLog) AppendRecord(seglog.Record, func(first, last uint64, err error)) error {
	return l.err
}
func (l damagedLog) ReadRaw(uint64, int, func(r *seglog.Record) bool) error { return l.err }
func (l damagedLog) AppendAt(uint64, []seglog.Record, func(first, last uint64, err error)) error {
	return l.err
}
func (l damagedLog) Compact([][]byte, int64, func(first, last uint64, err error)) error { return l.err }
func (l damagedLog) writeAfter(shardLog) error                                          { return nil }
func (l damagedLog) seglog() *seglog.Log                                                { return nil }
func (l damagedLog) stateFile(string) (seglog.FS, string, bool)                         { return nil, "", false }
func (l damagedLog) Close() error                                                       { return nil }

var _ shardLog = damagedLog{}

// Damaged lists the first damage found in each open stream shard's logs
// (at open, by the startup check or by a read), sorted by stream and shard:
// what the broker's /ready detail shows. Goroutine-safe.
func (e *Engine) Damaged() []*DamageError {
	var out []*DamageError
	for _, meta := range *e.catalog.Load() {
		for _, s := range meta.shards {
			if s == nil {
				continue
			}
			if d := s.damage.Load(); d != nil {
				out = append(out, d)
			}
		}
	}
	for _, meta := range e.caches.load() {
		for _, cs := range meta.shards {
			if cs != nil && cs.damage != nil {
				out = append(out, cs.damage)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := out[i].Where(), out[j].Where(); a != b {
			return a < b
		}
		return out[i].Shard < out[j].Shard
	})
	return out
}

// openDamaged is openCacheShard's answer to a cache or counter log that
// cannot open for damage (issue 23 item 2): the cache shard opens
// unservable (damagedLog placeholders, every operation answers the
// *DamageError, logged once, listed by Engine.Damaged); other shards and
// caches are untouched. Reports false for other errors.
func (cs *cacheShard) openDamaged(err error) bool {
	d := newDamageError(ShardRef{Kind: ShardCache, Name: cs.name.asStream(), Shard: cs.index}, err)
	if d == nil {
		return false
	}
	d.Unservable = true
	cs.log, cs.counters, cs.damage = damagedLog{d}, damagedLog{d}, d
	logDamage(cs.c.engine.cfg.Logger, d, "open")
	return true
}
