package core

// Replication's core half (issue 18 item 4; docs/replication.md, "Wiring"): what the
// broker's follower handlers and leader shippers call on the engine for one replicated
// log. The pure decisions (what to store, where, what to answer) are cluster/replica's;
// these calls only carry them out on the owning core (apply at an offset, truncate a
// suffix, reset, extend the generation history) and read the log's state and raw records.
//
// Every call takes any of the six logs of a durable shard (replicate_target.go resolves
// the LogAddr to the log and its owner): a stream shard's records, producer keys, group
// cursors and dead letters, a cache shard's cache and counters.

import (
	"errors"
	"fmt"
	"slices"

	"felix/proto"
	"felix/seglog"
)

// ReplicaState is one replicated log as its core sees it (Engine.ReplicaState): the
// shard's role and generation here, and the log's offsets — Earliest the oldest record
// held, Tail the next offset (staged appends included), Committed one past the last
// record whose append completed, Durable one past the last record known fdatasynced
// (durable_offset; Durable <= Committed <= Tail), Released the release mark of the
// shard (records below it are acknowledged and readable) — its generation history,
// oldest first, and Replicated: a Quorum shard's release mark waits for Engine.Release
// (attached by SetReplicated, or reopened attached: replicate_mark.go).
type ReplicaState struct {
	Role       Role
	Generation uint64
	Earliest   uint64
	Tail       uint64
	Committed  uint64
	Durable    uint64
	Released   uint64
	Epochs     []seglog.Epoch
	Replicated bool
}

// onReplicaLog resolves addr and runs fn on its core with the log's placement, the log
// and its owner. Errors: replicaLogOf's, usable's, fn's, ErrOverloaded, ErrClosed.
func (e *Engine) onReplicaLog(addr LogAddr, fn func(r replicaLog, p *placement, l shardLog, o *logOwner) error) error {
	r, err := e.replicaLogOf(addr)
	if err != nil {
		return err
	}
	return e.runOn(r.c, func(*core) error {
		p, l, o, err := r.usable()
		if err != nil {
			return err
		}
		return fn(r, p, l, o)
	})
}

// replicaPlacement checks on s's core that s is open and usable, and returns its
// placement. Errors: ErrNotHere (closed here), the shard's sticky failure.
func (c *core) replicaPlacement(s *streamShard) (*placement, error) {
	p := c.roles.streams[s]
	if p == nil || s.closed || s.pendingClose != nil {
		return nil, notHere(ShardRef{Kind: ShardStream, Name: s.name, Shard: s.index}, 0)
	}
	if s.failed != nil {
		return nil, s.failed
	}
	return p, nil
}

// followerAt checks that the shard of p is open here as a follower at generation.
// Errors: ErrNotHere (not a follower here), ErrStaleGeneration-wrapped (open at another
// generation).
func followerAt(p *placement, generation uint64) error {
	if p.role != RoleFollower {
		return notHere(p.ref, p.role)
	}
	if p.generation != generation {
		return fmt.Errorf("%w: %v is a follower at generation %d, not %d", ErrStaleGeneration, p.ref, p.generation, generation)
	}
	return nil
}

// ReplicaState returns addr's log state and its shard's role and generation here, read
// on the owning core, for any of the six logs (replicate_target.go). Errors:
// replicaLogOf's, the shard's failure, ErrOverloaded, ErrClosed.
func (e *Engine) ReplicaState(addr LogAddr) (ReplicaState, error) {
	var st ReplicaState
	err := e.onReplicaLog(addr, func(r replicaLog, p *placement, l shardLog, _ *logOwner) error {
		st = r.state(p, l)
		return nil
	})
	return st, err
}

// ReadReplica calls fn for every stored record of addr's log at offsets >= from and
// below its committed offset, as the log holds it (offset, kind, timestamp, publisher,
// payload: seglog.Log.ReadRaw), up to about maxBytes of payload (at least one record
// when one exists), until fn returns false. Goroutine-safe: the read itself does not go
// through the core (a stream shard's records and producer-key logs are resolved without
// it, the group and cache logs through one inbox round): the leader's shipper reads
// what it ships with it (committed records, never a client's buffer) and a follower's
// overlap comparison its stored bytes. *r and its slices are valid only during fn.
// Errors: replicaLogOf's; from below the log's earliest offset (wrapping
// seglog.ErrTrimmed); a closed log's or a storage failure.
func (e *Engine) ReadReplica(addr LogAddr, from uint64, maxBytes int, fn func(r *seglog.Record) bool) error {
	r, err := e.replicaLogOf(addr)
	if err != nil {
		return err
	}
	var l shardLog
	switch {
	case r.stream != nil && addr.Log == proto.LogStream:
		l = r.stream.records
	case r.stream != nil && addr.Log == proto.LogProducers:
		l = r.stream.producerLog
	default:
		err = e.runOn(r.c, func(*core) error {
			_, l, _, err = r.usable()
			return err
		})
		if err != nil {
			return err
		}
	}
	return l.ReadRaw(from, maxBytes, fn)
}

// ApplyReplicated stores recs verbatim (kind, timestamp, publisher, payload) at offsets
// first, first+1, ... of addr's log (any of the six) on the owning core — replication's
// apply-at-offset append, seeds/internal-protocol.txt "Replication" — for a shard open
// here as RoleFollower at generation only. Once the append completed, done runs on the
// core with the log's durable_offset as soon as an fdatasync covers the batch, whatever
// the fsync mode (issue 18: "replicated batches are group-committed with fdatasync"): at
// once under on_commit, else through seglog.Log.SyncNow, one fdatasync for every batch
// written before it: a follower acknowledges only what it has fsynced. done must not
// block. The records log's committed and release marks follow it (a follower serves no
// client; a promoted follower serves what it holds, as a reopened shard does), and
// batches it still held from leading fail with ErrMoved; the other logs' state is
// rebuilt from them at promotion (replicate_promote.go). recs is not retained.
//
// Errors (nothing stored, done not called): followerAt's, replicaLogOf's, an error
// wrapping seglog.ErrNotTail (*seglog.NotTailError: first is not the log's tail or the
// offsets are not consecutive), seglog's refusals (ErrEmptyBatch, ErrBadOptions,
// ErrRecordTooLarge), ErrOverloaded, ErrClosed. A failed append (done's err, wrapping
// ErrStorageFailed) fails the shard (the group state, for the group logs).
func (e *Engine) ApplyReplicated(addr LogAddr, generation, first uint64, recs []seglog.Record, done func(durable uint64, err error)) error {
	return e.onReplicaLog(addr, func(r replicaLog, p *placement, l shardLog, o *logOwner) error {
		if err := followerAt(p, generation); err != nil {
			return err
		}
		if err := l.AppendAt(first, recs, func(_, last uint64, err error) { r.replicated(l, o, last, err, done) }); err != nil {
			return err
		}
		o.begin()
		return nil
	})
}

// replicated completes one ApplyReplicated append on the core.
func (r replicaLog) replicated(l shardLog, o *logOwner, last uint64, err error, done func(uint64, error)) {
	defer o.end()
	defer r.settlePromotion(err) // replicate_promote.go: a rebuild waiting for this append
	if err != nil {
		err = storageError("replicate", err)
		o.fail(err)
		done(0, err)
		return
	}
	r.followed()
	if sn, ok := l.(syncNowLog); ok {
		// Whatever the fsync mode: one fdatasync on demand, shared by every batch
		// written before it (seglog.Log.SyncNow).
		if err := sn.SyncNow(func(durable uint64, err error) { done(durable, storageError("replicate fdatasync", err)) }); err != nil {
			done(0, storageError("replicate fdatasync", err))
		}
		return
	}
	r.whenDurable(l, o, true, last+1, func() { done(l.DurableOffset(), nil) })
}

// syncNowLog is a shardLog that fdatasyncs on demand (the seglog disk's logs).
type syncNowLog interface {
	SyncNow(done func(durable uint64, err error)) error
}

// SyncNow asks for an fdatasync covering every staged record (seglog.Log.SyncNow).
func (l *seglogLog) SyncNow(done func(durable uint64, err error)) error { return l.log.SyncNow(done) }

// followLog moves the follower's committed and release marks (and the fanout start) to
// the log's tail: every record of a follower's log came from its leader. Batches still
// waiting for a release from when it led fail with ErrMoved (their publishers learn
// nothing was acknowledged).
func (s *streamShard) followLog() {
	if s.producers.gate.held.len() > 0 {
		s.dropHeldKeys(movedError(ShardRef{Kind: ShardStream, Name: s.name, Shard: s.index}, RoleFollower, 0))
	}
	if s.unreleased.len() > 0 {
		s.dropUnreleased(movedError(ShardRef{Kind: ShardStream, Name: s.name, Shard: s.index}, RoleFollower, 0))
	}
	next := s.records.NextOffset()
	s.committed, s.released, s.fanoutNext = next, next, next
}

// TruncateReplica drops every record of addr's log at or above off, and the generation
// history entries starting there (the divergence rule's repair: a suffix a dead leader
// left behind), on the owning core, for a follower at generation. The log must be idle.
// Errors: followerAt's, replicaLogOf's, seglog.ErrBusy (an append in flight), an error
// below the earliest offset, a storage failure (which fails the shard), ErrOverloaded,
// ErrClosed.
func (e *Engine) TruncateReplica(addr LogAddr, generation, off uint64) error {
	return e.onFollowerLog(addr, generation, "truncate", func(l shardLog) error { return l.TruncateSuffix(off) })
}

// ResetReplica discards the whole of addr's log, generation history included, and
// restarts it empty at base (bootstrap's placement and rebuild's discard,
// seeds/internal-protocol.txt "Bootstrapping a follower", "Rebuilding a follower"), on
// the owning core, for a follower at generation. The log must be idle. Errors as
// TruncateReplica.
func (e *Engine) ResetReplica(addr LogAddr, generation, base uint64) error {
	return e.onFollowerLog(addr, generation, "reset", func(l shardLog) error { return l.Reset(base) })
}

// SetReplicaEpochs makes epochs the generation history of addr's log, for a follower at
// generation: the stored history must be a prefix of epochs (what the follower decider
// hands back: the stored history plus the generations a batch begins), and the new
// entries are appended and persisted (seglog.Log.AddEpoch). Errors: ErrInvalid (the
// stored history is not a prefix), AddEpoch's (wrapping seglog.ErrBadOptions),
// followerAt's, replicaLogOf's, ErrOverloaded, ErrClosed.
func (e *Engine) SetReplicaEpochs(addr LogAddr, generation uint64, epochs []seglog.Epoch) error {
	return e.onFollowerLog(addr, generation, "epochs", func(l shardLog) error {
		have := l.Epochs()
		if len(have) > len(epochs) || !slices.Equal(have, epochs[:len(have)]) {
			return fmt.Errorf("%w: epochs of %v: stored %v is not a prefix of %v", ErrInvalid, addr, have, epochs)
		}
		for _, ep := range epochs[len(have):] {
			if err := l.AddEpoch(ep.Generation, ep.StartOffset); err != nil {
				return err
			}
		}
		return nil
	})
}

// onFollowerLog runs change on the core of addr's follower log at generation, then
// moves what follows the log (replicaLog.followed). A storage failure fails the shard.
func (e *Engine) onFollowerLog(addr LogAddr, generation uint64, what string, change func(shardLog) error) error {
	return e.onReplicaLog(addr, func(r replicaLog, p *placement, l shardLog, o *logOwner) error {
		if err := followerAt(p, generation); err != nil {
			return err
		}
		if !o.idleNow() {
			return fmt.Errorf("%w: %s of %v", seglog.ErrBusy, what, addr)
		}
		err := change(l)
		if errors.Is(err, seglog.ErrStorageFailed) {
			o.fail(storageError(what+" replica", err))
		}
		r.followed()
		return err
	})
}

// LeadEpoch records, on a shard open here as RoleLeader at generation, that generation
// begins at addr's log's tail (AddEpoch(generation, tail)) unless its history already
// ends at generation or a newer one, and returns where the leader's generation began: the
// tail, or the recorded start. The leader's own history then names what it writes, as a
// follower's names what it stored, for the divergence rule after a later change. Each
// of the six logs keeps its own history. Errors: replicaLogOf's, ErrNotHere (not the
// leader here), ErrStaleGeneration-wrapped (open at another generation), AddEpoch's,
// ErrOverloaded, ErrClosed.
func (e *Engine) LeadEpoch(addr LogAddr, generation uint64) (uint64, error) {
	var start uint64
	err := e.onReplicaLog(addr, func(_ replicaLog, p *placement, l shardLog, _ *logOwner) error {
		if p.role != RoleLeader {
			return notHere(p.ref, p.role)
		}
		if p.generation != generation {
			return fmt.Errorf("%w: %v leads at generation %d, not %d", ErrStaleGeneration, p.ref, p.generation, generation)
		}
		eps := l.Epochs()
		if n := len(eps); n > 0 && eps[n-1].Generation >= generation {
			start = eps[n-1].StartOffset
			return nil
		}
		start = l.NextOffset()
		return l.AddEpoch(generation, start)
	})
	return start, err
}

// WhenDurable runs fn on the core of addr's shard once its log's durable_offset reaches
// offset (at once when it has; replicaLog.whenDurable): the leader's shipper waits with
// it for records to ship, a follower for the fdatasync of records it already holds. fn
// must not block; it never runs when the shard closes first. Errors: replicaLogOf's,
// the shard's failure, ErrOverloaded, ErrClosed.
func (e *Engine) WhenDurable(addr LogAddr, offset uint64, fn func()) error {
	return e.onReplicaLog(addr, func(r replicaLog, p *placement, l shardLog, o *logOwner) error {
		r.whenDurable(l, o, p.role == RoleFollower, offset, fn)
		return nil
	})
}

// SetReplicated attaches (on) or detaches a replica set to shard ref of a Quorum stream, or
// of a durable cache (its answers then wait for ReleaseReplica's marks of its two logs:
// cache_release.go; not kept across a reopen) (docs/architecture.md, "Commit and
// release"): attached, its release mark waits for
// Release (the replica set's quorum mark) instead of following the local commit;
// detached, the mark moves to the committed offset at once and follows the commit again.
// Attaching keeps the mark where it is and records it in the release-mark file, which
// detaching removes: a shard reopened with that file starts attached, its mark where
// the file says (replicate_mark.go); without it, detached. Errors:
// ErrNotFound, ErrInvalid (not a stream shard, or not a Quorum stream), ErrNotHere,
// ErrOverloaded, ErrClosed, a failed write of the file (wrapping ErrStorageFailed).
func (e *Engine) SetReplicated(ref ShardRef, on bool) error {
	if ref.Kind == ShardCache {
		return e.setCacheReplicated(ref, on) // cache_release.go
	}
	if ref.Kind != ShardStream {
		return fmt.Errorf("%w: replica set of %v: no release mark", ErrInvalid, ref)
	}
	if on {
		return e.attachReplicaSet(ref.Name, ref.Shard)
	}
	meta := e.lookup(ref.Name)
	if meta == nil || ref.Shard < 0 || ref.Shard >= len(meta.shards) {
		return fmt.Errorf("%w: %v", ErrNotFound, ref)
	}
	if meta.spec.Consistency != ConsistencyQuorum {
		return fmt.Errorf("%w: replica set for %v: a %s stream releases at its commit", ErrInvalid, ref, meta.spec.Consistency)
	}
	s := meta.shards[ref.Shard]
	if s == nil {
		return notHere(ref, 0)
	}
	return e.runOn(s.c, func(*core) error {
		if s.closed {
			return ErrNotFound
		}
		s.hasReplicaSet = false
		s.releaseTo(s.committed)
		s.gateKeys(false)
		return s.keepReleaseMark(false)
	})
}
