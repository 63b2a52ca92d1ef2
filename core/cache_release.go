package core

import (
	"fmt"

	"felix/proto"
)

// A replicated cache's answers wait for the quorum mark (docs/replication.md, "Cache
// answers"). A durable cache shard with a replica set (Engine.SetReplicated on a cache
// shard) answers a write only once the replica set's quorum mark of each of its two logs
// (cache values and counters) has passed the write's record, as a Quorum stream answers a
// publish; before this, a cache write was answered at the leader's commit and a promotion
// lost the acknowledged writes its followers had not received (e2e/clustercrash with
// failover: 83 acknowledged puts and 91 counters in one run). The marks are handed on by
// the broker's shippers through Engine.ReleaseReplica; detaching (or a shard without a
// replica set) answers at the commit again.

// answerMarks are the offsets up to which the two logs' records may be answered.
func (cs *cacheShard) answerMarks() (cache, counter uint64) {
	if !cs.replicated {
		return cs.cacheCommitted, cs.counterCommitted
	}
	return min(cs.cacheCommitted, cs.cacheReleased), min(cs.counterCommitted, cs.counterReleased)
}

// setReplicated attaches (on) or detaches the replica set on cs's core. Attaching starts
// both release marks at the logs' commits (what is committed was answered already);
// detaching answers what the commits allow.
func (cs *cacheShard) setReplicated(on bool) {
	if on && !cs.replicated {
		cs.cacheReleased, cs.counterReleased = cs.cacheCommitted, cs.counterCommitted
	}
	cs.replicated = on
	cs.settle()
}

// release moves log's release mark to offset (never backwards) and answers what it allows.
// Errors: ErrInvalid (not one of a cache shard's logs).
func (cs *cacheShard) release(log proto.ReplicaLog, offset uint64) error {
	switch log {
	case proto.LogCache:
		cs.cacheReleased = max(cs.cacheReleased, offset)
	case proto.LogCounters:
		cs.counterReleased = max(cs.counterReleased, offset)
	default:
		return fmt.Errorf("%w: %v is not a cache shard's log", ErrInvalid, log)
	}
	cs.settle()
	return nil
}

// setCacheReplicated is Engine.SetReplicated for a cache shard: through the shard's core.
func (e *Engine) setCacheReplicated(ref ShardRef, on bool) error {
	addr := LogAddr{Kind: ShardCache, Name: ref.Name, Shard: ref.Shard, Log: proto.LogCache}
	return e.onReplicaLog(addr, func(r replicaLog, _ *placement, _ shardLog, _ *logOwner) error {
		r.cache.setReplicated(on)
		return nil
	})
}

// releasedMark is log's release mark for ReplicaState: the answered-up-to offset while a
// replica set is attached (the shipper's tracker starts from it), else the commit.
func (cs *cacheShard) releasedMark(log proto.ReplicaLog, committed uint64) uint64 {
	if !cs.replicated {
		return committed
	}
	if log == proto.LogCounters {
		return min(committed, cs.counterReleased)
	}
	return min(committed, cs.cacheReleased)
}
