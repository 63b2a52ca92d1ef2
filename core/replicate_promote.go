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
// counter logs. The rebuild runs once the replicated appends staged on those logs at
// promotion completed, and the operations on that state arriving before it wait for it
// (rebuildGate), on the core.

import (
	"fmt"

	"felix/core/cache"
	"felix/proto"
)

// promoteStream rebuilds s's producer window and group state from their replicated logs
// (s was a follower and now leads), each once the replicated appends staged on its logs
// completed (rebuildGate); the idempotent publishes and group operations arriving
// meanwhile wait for it. A durable shard only; a failure fails the shard (or its group
// state) with ErrStorageFailed.
func (c *core) promoteStream(s *streamShard) {
	if !s.durable {
		return
	}
	s.producers.promoting.start(func() {
		if !c.leads(s) {
			return // moved on before the rebuild: a follower serves nothing from it
		}
		if err := s.rebuildProducers(); err != nil {
			s.fail(storageError(fmt.Sprintf("rebuild the producer window of %s shard %d", s.name, s.index), err))
		}
	}, s.producerLog)
	if t := c.groupShards; t != nil {
		if gs := t.shards[s]; gs != nil && gs.failed == nil {
			gs.promoting.start(func() {
				if c.leads(s) {
					gs.rebuildFromLogs()
				}
			}, gs.cursor, gs.dead)
		}
	}
}

// leads reports whether s is open here as the leader.
func (c *core) leads(s *streamShard) bool {
	p := c.roles.streams[s]
	return p != nil && p.role == RoleLeader && !s.closed
}

// rebuildGate holds a promoted shard's operations on the state it rebuilds from
// replicated logs (the producer window, the groups, the cache) until the rebuild ran:
// the rebuild waits for the replicated appends staged on those logs at promotion to
// complete (their records are then readable), and every operation that arrives before
// is parked and run, in order, right after it. Core goroutine only.
type rebuildGate struct {
	rebuilding bool
	parked     []func()
	waits      []logWait
	rebuild    func()
}

// logWait is a log whose staged records the rebuild waits for: committed up to off.
type logWait struct {
	l   shardLog
	off uint64
}

// park queues op when a rebuild is pending and reports whether it did.
func (g *rebuildGate) park(op func()) bool {
	if !g.rebuilding {
		return false
	}
	g.parked = append(g.parked, op)
	return true
}

// start arms the gate: rebuild runs once every one of logs has committed what it holds
// staged now (at once when nothing is), then the parked operations.
func (g *rebuildGate) start(rebuild func(), logs ...shardLog) {
	g.waits = g.waits[:0]
	for _, l := range logs {
		if l != nil && l.CommittedOffset() < l.NextOffset() {
			g.waits = append(g.waits, logWait{l: l, off: l.NextOffset()})
		}
	}
	g.rebuild, g.rebuilding = rebuild, true
	g.settle()
}

// settle runs the pending rebuild once its logs committed (after every replicated
// append's completion: replicaLog.replicated).
func (g *rebuildGate) settle() {
	if g.rebuild == nil {
		return
	}
	for _, w := range g.waits {
		if w.l.CommittedOffset() < w.off {
			return
		}
	}
	g.finish(true)
}

// finish runs the rebuild (when asked: not for a shard that failed or closes) and then
// the parked operations, which see the shard as it is by then.
func (g *rebuildGate) finish(rebuild bool) {
	fn := g.rebuild
	g.rebuild, g.waits = nil, nil
	if rebuild && fn != nil {
		fn()
	}
	g.rebuilding = false
	ops := g.parked
	g.parked = nil
	for _, op := range ops {
		op()
	}
}

// promotionGate is the rebuildGate the log's replicated appends can hold up.
func (r replicaLog) promotionGate() *rebuildGate {
	switch {
	case r.cache != nil:
		return &r.cache.promoting
	case r.addr.Log == proto.LogStream || r.addr.Log == proto.LogProducers:
		return &r.stream.producers.promoting
	}
	if t := r.c.groupShards; t != nil {
		if gs := t.shards[r.stream]; gs != nil {
			return &gs.promoting
		}
	}
	return nil
}

// settlePromotion, after a replicated append of the log completed (err: it failed),
// runs a promotion's rebuild waiting for it, or, on a failure, releases the parked
// operations without it (they see the failure).
func (r replicaLog) settlePromotion(err error) {
	g := r.promotionGate()
	switch {
	case g == nil:
	case err != nil:
		g.finish(false)
	default:
		g.settle()
	}
}

// republish runs an idempotent publish parked while the window was rebuilt: refused
// when the shard no longer leads, else published as it would have been.
func (s *streamShard) republish(h heldPublish) {
	if err := s.c.streamRefusal(s); err != nil {
		h.done(PublishResult{}, err)
		return
	}
	s.publish(h.req, h.done, s.c.clock.MonoNanos())
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
// logs once the replicated appends staged on them completed (cs was a follower and now
// leads); cache operations arriving meanwhile wait for it. A durable shard only.
func (c *core) promoteCache(cs *cacheShard) {
	if !cs.durable {
		return
	}
	cs.promoting.start(func() {
		if p := c.roles.caches[cs]; p != nil && p.role == RoleLeader {
			cs.rebuildFromLogs()
		}
	}, cs.log, cs.counters)
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
