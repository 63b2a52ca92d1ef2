package core

// A follower promoted to leader (issue 18; docs/replication.md, "Wiring", "Promotion"):
// a follower stores its leader's producer-key, group-cursor, dead-letter, cache and
// counter records verbatim (ApplyReplicated) and serves nothing from them, so when
// SetRole makes it the leader it rebuilds, before it serves, the state those logs
// describe, exactly as a reopened shard does: the idempotent-producer window from the
// producer-key log (a producer's retry of a record the old leader acknowledged is
// answered as a duplicate), the consumer groups from the dead-letter then cursor logs
// (each group resumes at its replicated cursor, its dead letters listed), and the cache
// values (their TTLs included, in log order) and counter sums from the cache and
// counter logs. The rebuild runs once the shard's logs are idle (no replicated append
// still in flight: WhenIdle), on the core.

import (
	"fmt"

	"felix/core/cache"
)

// promoteStream rebuilds s's producer window and group state from their replicated logs
// (s was a follower and now leads). A durable shard only; a failure fails the shard (or
// its group state) with ErrStorageFailed.
func (c *core) promoteStream(s *streamShard) {
	if !s.durable {
		return
	}
	s.WhenIdle(func() {
		if err := s.rebuildProducers(); err != nil {
			s.fail(storageError(fmt.Sprintf("rebuild the producer window of %s shard %d", s.name, s.index), err))
		}
	})
	if t := c.groupShards; t != nil {
		if gs := t.shards[s]; gs != nil && gs.failed == nil {
			gs.WhenIdle(gs.rebuildFromLogs)
		}
	}
}

// rebuildProducers replaces the producer window with one recovered from the producer
// log, keeping the keys whose records this replica holds (producerWindow.recover); when
// a key names records it lacks (its leader's records log was ahead), a fence is written
// at the record log's end so that those offsets, reused from now on, are never answered
// as that key's. Gated keys (a replicated Quorum shard) count from the key records held
// now, as at a reopen. Entries of the old window still waiting fail with ErrMoved.
func (s *streamShard) rebuildProducers() error {
	if s.closed || s.producerLog == nil {
		return nil
	}
	s.dropHeldKeys(movedError(ShardRef{Kind: ShardStream, Name: s.name, Shard: s.index}, RoleLeader, 0))
	w := newProducerWindow(s.producers.max)
	w.gate.on = s.producers.gate.on
	w.gate.released = s.producerLog.CommittedOffset()
	rec, err := w.recover(s.producerLog, s.records.NextOffset())
	if err != nil {
		return err
	}
	s.producers = w
	if rec.unbacked {
		return s.fenceKeys()
	}
	return nil
}

// rebuildFromLogs replaces the group state machine with one replayed from the group
// logs (a promoted follower's groups resume where its leader's had reached) and writes
// the repair records the replay owes, as openGroupShard does. Answers still waiting from
// an earlier leadership fail with ErrMoved. A replay failure fails the group state.
func (gs *groupShard) rebuildFromLogs() {
	if gs.closed || gs.failed != nil {
		return
	}
	moved := movedError(ShardRef{Kind: ShardStream, Name: gs.stream.name, Shard: gs.stream.index}, RoleLeader, 0)
	for gs.waiters.len() > 0 {
		gs.waiters.pop().fn(moved)
	}
	for gs.batches.len() > 0 {
		gs.batches.pop()
	}
	if err := gs.replay(); err != nil {
		gs.fail(storageError(fmt.Sprintf("rebuild groups of %s shard %d", gs.stream.name, gs.stream.index), err))
		return
	}
	gs.compactNext = 0
	gs.flush()
}

// promoteCache rebuilds cs's values and counters from its replicated cache and counter
// logs once they are idle (cs was a follower and now leads). A durable shard only.
func (c *core) promoteCache(cs *cacheShard) {
	if cs.durable {
		cs.WhenIdle(cs.rebuildFromLogs)
	}
}

// rebuildFromLogs replaces the cache state machine with one replayed from both logs (the
// values with their TTLs, expiries and deletes in log order, and the counter sums), as
// openCacheShard does. Answers and changes still waiting from an earlier leadership fail
// with ErrMoved. A replay failure fails the shard.
func (cs *cacheShard) rebuildFromLogs() {
	if cs.closed || cs.failed != nil || cs.log == nil {
		return
	}
	moved := movedError(ShardRef{Kind: ShardCache, Name: cs.name.asStream(), Shard: cs.index}, RoleLeader, 0)
	for cs.waiters.len() > 0 {
		cs.waiters.pop().a.answer(moved)
	}
	for cs.changes.len() > 0 {
		cs.changes.pop()
	}
	cs.sm = cache.New(cs.sm.Config())
	cs.written = 0
	if err := cs.replay(); err != nil {
		cs.fail(storageError(fmt.Sprintf("rebuild cache %s shard %d", cs.name, cs.index), err))
		return
	}
	cs.reportStats()
}
