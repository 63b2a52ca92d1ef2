package core

// The producer-key log's quorum mark (issue 18: "the producer window gets its own
// record/bootstrap kinds, so a promoted leader rebuilds deduplication before it serves";
// docs/replication.md, "Wiring"). On a Quorum shard with a replica set an idempotent
// publish is acknowledged only once its records are below the records log's quorum mark
// (Engine.Release) and its key record below the producer-key log's
// (Engine.ReleaseReplica): a follower promoted after the acknowledgement holds the key
// and rebuilds its window from it (replicate_promote.go), so the producer's retry is
// answered as a duplicate instead of being stored twice. Without a replica set (and on
// a Leader stream) a key counts once its local append completed, as before.

import (
	"fmt"

	"felix/proto"
)

// keyGate is a producer window's gating of key records (producerWindow.gate).
type keyGate struct {
	// on: key records at offsets >= released wait for the producer log's quorum mark.
	on bool
	// released is that mark (exclusive): key records below it count.
	released uint64
	// held are the entries whose key record completed locally, oldest first, waiting for
	// the mark to pass their key record's offset.
	held fifo[heldKey]
}

// heldKey is one entry waiting for the producer log's quorum mark.
type heldKey struct {
	entry  *producerEntry
	offset uint64
}

// keysReleased is the producer log's release mark: its quorum mark while gated, else
// committed (every completed key counts).
func (w *producerWindow) keysReleased(committed uint64) uint64 {
	if w.gate.on {
		return w.gate.released
	}
	return committed
}

// keyLogged is the key record of e at offset completing locally: e counts as logged at
// once, or, gated, once the producer log's quorum mark passes offset.
func (s *streamShard) keyLogged(e *producerEntry, offset uint64) {
	g := &s.producers.gate
	if g.on && offset >= g.released {
		g.held.push(heldKey{entry: e, offset: offset})
		return
	}
	e.logged = true
	s.producers.settle(s, e)
}

// gateKeys turns gating on (a replica set attached to a Quorum shard: the mark starts at
// the key records already committed, which count) or off (detached: every held key
// counts at once).
func (s *streamShard) gateKeys(on bool) {
	g := &s.producers.gate
	if on == g.on {
		return
	}
	if !on {
		g.on = false
		s.releaseHeldKeys(^uint64(0))
		return
	}
	if s.consistency != ConsistencyQuorum || s.producerLog == nil {
		return
	}
	g.on, g.released = true, s.producerLog.CommittedOffset()
}

// releaseKeys moves the producer log's quorum mark to mark on the core. Errors:
// ErrInvalid (not gated: the log releases at its commit; mark past the committed key
// records). A mark at or below the current one is a no-op.
func (s *streamShard) releaseKeys(mark uint64) error {
	g := &s.producers.gate
	switch {
	case !g.on:
		return fmt.Errorf("%w: release of the producer keys of %s shard %d: not gated by a replica set", ErrInvalid, s.name, s.index)
	case mark > s.producerLog.CommittedOffset():
		return fmt.Errorf("%w: release of the producer keys of %s shard %d to %d: committed only below %d",
			ErrInvalid, s.name, s.index, mark, s.producerLog.CommittedOffset())
	case mark <= g.released:
		return nil
	}
	g.released = mark
	s.releaseHeldKeys(mark)
	return nil
}

// releaseHeldKeys settles the held entries whose key record lies below mark, in order.
func (s *streamShard) releaseHeldKeys(mark uint64) {
	g := &s.producers.gate
	for g.held.len() > 0 && g.held.at(0).offset < mark {
		h := g.held.pop()
		h.entry.logged = true
		s.producers.settle(s, h.entry)
	}
}

// dropHeldKeys fails the entries still waiting for the producer log's mark (the shard
// closes, or stops leading): never a success.
func (s *streamShard) dropHeldKeys(err error) {
	g := &s.producers.gate
	for g.held.len() > 0 {
		s.producers.abort(s, g.held.pop().entry, err)
	}
}

// ReleaseReplica moves the quorum mark of addr's log to offset (exclusive), the
// replication leader's Tracker mark: the records log's is Engine.Release; the
// producer-key log's settles the idempotent publishes whose key record lies below it
// (producer_gate.go); a replicated cache's cache and counter logs' answer the cache writes
// below both marks (cache_release.go). The group logs gate nothing. Errors: ErrInvalid (another log, a
// log not gated: a Leader stream, or no replica set attached; past the committed
// offset), replicaLogOf's, Release's, ErrOverloaded, ErrClosed.
func (e *Engine) ReleaseReplica(addr LogAddr, offset uint64) error {
	if err := addr.Validate(); err != nil {
		return err
	}
	switch addr.Log {
	case proto.LogStream:
		return e.Release(addr.Name, addr.Shard, offset)
	case proto.LogProducers:
		return e.onReplicaLog(addr, func(r replicaLog, _ *placement, _ shardLog, _ *logOwner) error {
			return r.stream.releaseKeys(offset)
		})
	case proto.LogCache, proto.LogCounters:
		return e.onReplicaLog(addr, func(r replicaLog, _ *placement, _ shardLog, _ *logOwner) error {
			return r.cache.release(addr.Log, offset) // cache_release.go
		})
	}
	return fmt.Errorf("%w: %v gates nothing: it has no quorum mark", ErrInvalid, addr)
}
