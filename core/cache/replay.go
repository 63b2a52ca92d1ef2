package cache

import (
	"errors"
	"fmt"
)

// ErrEffectsPending is returned by CompactCache, CompactCounters, ReplayCache,
// ReplayCounter and FinishReplay while Effects have not been Advanced past:
// their records must reach the log first (log order is offset order).
var ErrEffectsPending = errors.New("cache: effects pending")

// replayState follows replay of both logs: the last offset seen in each, and
// a compaction whose live set is being read but not yet committed.
type replayState struct {
	cacheSeen, counterSeen bool
	cacheLast, counterLast uint64
	values                 staging
	stagedValues           *table
	counters               staging
	stagedCounters         counterStore
}

// staging is one log's compaction being replayed: begun at begin, declaring
// count live records, n of them read so far.
type staging struct {
	active   bool
	begin    uint64
	count, n uint64
}

// commits reports whether a CompactCommit record r completes this staging.
func (st *staging) commits(r *Record) bool {
	return st.active && r.BeginOffset == st.begin && r.Count == st.count && st.n == st.count
}

// ReplayCache applies one cache-log record read back from the log at offset,
// in offset order, with no TTL checks, capacity checks, records or changes:
// the log is the truth (docs/cache.md, "Replay"). A compaction's live set
// replaces the state only once its CompactCommit is read; a compaction cut off
// by a crash, or followed by other records, is ignored, so any prefix of the
// log yields the state before or after each compaction, never a mix. Errors:
// ErrCorruptRecord (a payload that does not decode, or a counter record),
// ErrReplayOrder, ErrEffectsPending.
func (s *Shard) ReplayCache(offset uint64, payload []byte) error {
	if err := s.checkReplayOrder(s.replay.cacheSeen, s.replay.cacheLast, offset); err != nil {
		return err
	}
	r, err := DecodeRecord(payload)
	if err != nil {
		return fmt.Errorf("cache log offset %d: %w", offset, err)
	}
	rs := &s.replay
	switch r.Op {
	case OpCompactBegin:
		rs.values = staging{active: true, begin: offset, count: r.Count}
		rs.stagedValues = newTable()
	case OpSnapshotPut:
		target := s.values
		if rs.values.active {
			target = rs.stagedValues
			rs.values.n++
		}
		target.set(r.Key, r.Value, r.HasExpiry, r.ExpiresAt)
	case OpCompactCommit:
		if rs.values.commits(&r) {
			s.values = rs.stagedValues
		}
		rs.values, rs.stagedValues = staging{}, nil
	case OpPut, OpDelete, OpExpire, OpEvict:
		rs.values, rs.stagedValues = staging{}, nil
		s.applyValueRecord(&r)
	default:
		return fmt.Errorf("cache log offset %d: %w", offset, corrupt("%s record in the cache log", r.Op))
	}
	rs.cacheSeen, rs.cacheLast = true, offset
	return nil
}

// applyValueRecord applies a put or a removal to the live values.
func (s *Shard) applyValueRecord(r *Record) {
	if r.Op == OpPut {
		s.values.set(r.Key, r.Value, r.HasExpiry, r.ExpiresAt)
		return
	}
	if i, ok := s.values.lookup(r.Key); ok {
		s.values.remove(i)
	}
}

// ReplayCounter applies one counter-log record read back at offset, like
// ReplayCache: a CounterAdd record sets the sum it carries (so replay is
// idempotent and does not depend on earlier records surviving), and a
// compaction's snapshot replaces the counters once committed. Errors:
// ErrCorruptRecord, ErrReplayOrder, ErrEffectsPending.
func (s *Shard) ReplayCounter(offset uint64, payload []byte) error {
	if err := s.checkReplayOrder(s.replay.counterSeen, s.replay.counterLast, offset); err != nil {
		return err
	}
	r, err := DecodeRecord(payload)
	if err != nil {
		return fmt.Errorf("counter log offset %d: %w", offset, err)
	}
	rs := &s.replay
	switch r.Op {
	case OpCompactBegin:
		rs.counters = staging{active: true, begin: offset, count: r.Count}
		rs.stagedCounters = newCounterStore()
	case OpCounterSnapshot:
		if rs.counters.active {
			rs.stagedCounters.set(r.Key, r.Sum)
			rs.counters.n++
		} else {
			s.counters.set(r.Key, r.Sum)
		}
	case OpCompactCommit:
		if rs.counters.commits(&r) {
			s.counters = rs.stagedCounters
		}
		rs.counters, rs.stagedCounters = staging{}, counterStore{}
	case OpCounterAdd:
		rs.counters, rs.stagedCounters = staging{}, counterStore{}
		s.counters.set(r.Key, r.Sum)
	default:
		return fmt.Errorf("counter log offset %d: %w", offset, corrupt("%s record in the counter log", r.Op))
	}
	rs.counterSeen, rs.counterLast = true, offset
	return nil
}

func (s *Shard) checkReplayOrder(seen bool, last, offset uint64) error {
	if s.out.pending() {
		return ErrEffectsPending
	}
	if seen && offset <= last {
		return fmt.Errorf("%w: offset %d after %d", ErrReplayOrder, offset, last)
	}
	return nil
}

// FinishReplay ends replay: a compaction still uncommitted is dropped, and the
// next records the shard writes get cacheNext and counterNext (the logs'
// NextOffset). Values whose expiry passed while the broker was down stay
// until the first access or Sweep expires them, with records. Errors:
// ErrReplayOrder when a next offset is not above the last replayed one;
// ErrEffectsPending.
func (s *Shard) FinishReplay(cacheNext, counterNext uint64) error {
	rs := &s.replay
	if s.out.pending() {
		return ErrEffectsPending
	}
	if (rs.cacheSeen && cacheNext <= rs.cacheLast) || (rs.counterSeen && counterNext <= rs.counterLast) {
		return fmt.Errorf("%w: next offsets %d/%d, last replayed %d/%d",
			ErrReplayOrder, cacheNext, counterNext, rs.cacheLast, rs.counterLast)
	}
	*rs = replayState{cacheSeen: rs.cacheSeen, counterSeen: rs.counterSeen,
		cacheLast: rs.cacheLast, counterLast: rs.counterLast}
	s.cacheNext, s.counterNext = cacheNext, counterNext
	return nil
}
