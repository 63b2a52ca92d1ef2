package core

import "fmt"

// Commit and release (docs/architecture.md, core, "Commit and release").
//
// A durable shard's batch is *committed* when its append completed under the
// stream's fsync mode, and *released* when the shard's release mark passes its
// last record. Only released records are acknowledged to AckOnCommit
// publishers (and answered to duplicates of an idempotent publish), handed to
// live subscribers, readable from history (a subscription's history ends at
// the live start, which never passes the release mark) and leased by consumer
// groups (their window ends at the mark). A batch is released whole: a mark
// inside a batch releases the batches wholly below it and holds that one.
//
// What moves the mark (releasesAtCommit):
//   - ConsistencyLeader: the local commit, at once (as before the split).
//   - ConsistencyQuorum with a replica set: Engine.Release, which the cluster
//     calls with the replica set's quorum mark. Attaching persists the mark
//     (the release-mark file, replicate_mark.go), so a reopened shard keeps
//     waiting for Release above it instead of releasing its recovered tail.
//   - ConsistencyQuorum without a replica set (a single node, and every shard
//     until a cluster exists): the local commit, as Leader: a node alone is its
//     own majority. A shard gets a replica set only through
//     Engine.attachReplicaSet, which the cluster will call and tests call now.
//
// In-memory shards have no commit: a batch is released as it is applied.

// Release moves the release mark of shard shard of stream to offset: every
// batch whose records all lie below offset is released (acknowledged,
// delivered, readable), in offset order, on the shard's core; Release returns
// after that. offset is exclusive, like a next offset: one past the last
// record to release. Releasing at the current mark is a no-op.
//
// Errors: ErrNotFound (no such stream or shard, or the stream is closing),
// ErrNotHere (the shard is not open here), ErrInvalid (the stream is not ConsistencyQuorum: its commit drives its
// release; offset below the current mark: the mark never moves backwards;
// offset past the shard's committed offset: only committed records can be
// released), ErrOverloaded, ErrClosed. On a Quorum shard without a replica
// set the mark already equals the committed offset, so only that offset is
// accepted.
func (e *Engine) Release(stream StreamName, shard int, offset uint64) error {
	meta := e.lookup(stream)
	if meta == nil {
		return ErrNotFound
	}
	if shard < 0 || shard >= len(meta.shards) {
		return fmt.Errorf("%w: %s has no shard %d", ErrNotFound, stream, shard)
	}
	if meta.spec.Consistency != ConsistencyQuorum {
		return fmt.Errorf("%w: release of %s: a %s stream releases at its commit", ErrInvalid, stream, meta.spec.Consistency)
	}
	s := meta.shards[shard]
	if s == nil {
		return notHere(ShardRef{Kind: ShardStream, Name: stream, Shard: shard}, 0)
	}
	return e.runOn(s.c, func(*core) error { return s.release(offset) })
}

// attachReplicaSet marks shard shard of a Quorum stream as replicated: from
// then on its release mark waits for Release instead of following the local
// commit. The mark stays where it is, and is written to the release-mark
// file: a reopened shard starts attached at that mark (replicate_mark.go);
// one never attached starts without a replica set. Errors: ErrNotFound,
// ErrInvalid (not a Quorum stream), ErrOverloaded, ErrClosed, a failed write
// (wrapping ErrStorageFailed).
func (e *Engine) attachReplicaSet(stream StreamName, shard int) error {
	meta := e.lookup(stream)
	if meta == nil || shard < 0 || shard >= len(meta.shards) {
		return fmt.Errorf("%w: %s shard %d", ErrNotFound, stream, shard)
	}
	if meta.spec.Consistency != ConsistencyQuorum {
		return fmt.Errorf("%w: replica set for %s: a %s stream releases at its commit", ErrInvalid, stream, meta.spec.Consistency)
	}
	s := meta.shards[shard]
	if s == nil {
		return notHere(ShardRef{Kind: ShardStream, Name: stream, Shard: shard}, 0)
	}
	return e.runOn(s.c, func(*core) error {
		if s.closed {
			return ErrNotFound
		}
		s.hasReplicaSet = true
		s.gateKeys(true)               // producer_gate.go: key records wait for their quorum mark too
		return s.keepReleaseMark(true) // a reopened shard holds what it has not seen quorum-marked
	})
}

// release moves the mark to offset on the core (Engine.Release).
func (s *streamShard) release(offset uint64) error {
	switch {
	case s.closed || s.pendingClose != nil:
		return ErrNotFound
	case offset < s.released:
		return fmt.Errorf("%w: release of %s shard %d to %d: the mark is at %d and never moves backwards",
			ErrInvalid, s.name, s.index, offset, s.released)
	case offset > s.committed:
		return fmt.Errorf("%w: release of %s shard %d to %d: committed only below %d",
			ErrInvalid, s.name, s.index, offset, s.committed)
	}
	s.releaseTo(offset)
	return nil
}

// releasesAtCommit reports whether the shard's release mark follows its local
// commit: a Leader shard always, a Quorum shard while it has no replica set.
func (s *streamShard) releasesAtCommit() bool {
	return s.consistency == ConsistencyLeader || !s.hasReplicaSet
}

// committedOffset is one past the last committed record.
func (s *streamShard) committedOffset() uint64 {
	if s.durable {
		return s.committed
	}
	return s.next
}

// releasedOffset is the release mark: records below it are released.
func (s *streamShard) releasedOffset() uint64 {
	if s.durable {
		return s.released
	}
	return s.next
}

// releaseTo sets the mark (released <= mark <= committed) and releases the
// batches wholly below it.
func (s *streamShard) releaseTo(mark uint64) {
	s.released = mark
	if s.fanoutNext < mark {
		// Records recovered above a reopened shard's release mark have no batch.
		end := mark
		if s.unreleased.len() > 0 {
			end = min(end, s.unreleased.at(0).first)
		}
		s.fanoutRecovered(end)
	}
	for s.unreleased.len() > 0 && s.unreleased.at(0).last < mark {
		s.releaseBatch(s.unreleased.pop())
	}
}

// releaseBatch releases one committed batch: fanout, group wake-up, the
// AckOnCommit answer and the idempotent key's settlement.
func (s *streamShard) releaseBatch(e inflightPublish) {
	first, last := e.first, e.last
	count := int(last - first + 1)
	if e.frame == nil && len(s.subs) > 0 {
		if e.frame = s.readFrame(first, count); e.frame == nil {
			s.endSubscribers(s.failed) // cannot deliver the batch: no silent gap
		}
	}
	s.fanout(first, count, e.frame)
	if s.onCommit != nil {
		s.onCommit()
	}
	res := PublishResult{Shard: s.index, FirstOffset: first, LastOffset: last, Committed: true}
	if e.producer != nil {
		e.producer.committed = true
		if e.done != nil && !e.producer.logged {
			e.producer.ackDone, e.producer.ackResult = e.done, res
			e.done = nil
		}
		s.producers.settle(s, e.producer)
	}
	if e.done != nil {
		e.done(res, nil)
	}
}

// dropUnreleased fails the committed batches still waiting for the mark
// (the shard closes): their publishers learn err, never a success.
func (s *streamShard) dropUnreleased(err error) {
	s.dropHeldKeys(err)
	s.producers.promoting.finish(false) // parked idempotent publishes see the shard as it is now
	for s.unreleased.len() > 0 {
		e := s.unreleased.pop()
		if e.producer != nil {
			s.producers.abort(s, e.producer, err)
		}
		if e.done != nil {
			e.done(PublishResult{}, err)
		}
	}
}
