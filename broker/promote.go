package broker

// Promotion (issue 20 item 2; docs/failover.md, "Wiring"): the moment a shard opens here
// as leader, or moves here to leader, at a generation whose table names a replica set,
// the engine records that generation's start on every replicated log (LeadEpoch) and a
// Quorum stream's records log is attached to its replica set (SetReplicated), on the
// reconciler's own pass, before the replication plan runs. Until then a promoted follower
// that never led with a replica set released each publish at its local commit
// (acknowledged it alone), and the records it took before LeadEpoch were labelled with
// the previous generation: two copies could then hold different records under the same
// (generation, offset), which the fence round's comparison (fence_round.go) assumes never
// happens.

import (
	"errors"

	"felix/cluster/placement"
	"felix/core"
	"felix/proto"
)

// promotingEngine is the reconciler's engine (shardOpener) with the promotion's claim
// after a successful OpenShard or SetRole as leader.
type promotingEngine struct {
	shardOpener
	srv *Server
}

// OpenShard implements shardOpener.
func (p promotingEngine) OpenShard(spec core.ShardSpec, shard int, role core.Role, generation uint64) error {
	if err := p.shardOpener.OpenShard(spec, shard, role, generation); err != nil {
		return err
	}
	if ref, err := spec.Ref(shard); err == nil && role == core.RoleLeader {
		p.srv.repl.claim(ref, generation)
	}
	return nil
}

// SetRole implements shardOpener: a shard about to lead here is attached and its
// inherited position noted first (preClaim), so that nothing it takes between the role
// change and claim is released at its local commit or counted as inherited.
func (p promotingEngine) SetRole(ref core.ShardRef, role core.Role, generation uint64) error {
	if role == core.RoleLeader {
		p.srv.repl.preClaim(ref, generation)
	}
	if err := p.shardOpener.SetRole(ref, role, generation); err != nil {
		return err
	}
	if role == core.RoleLeader {
		p.srv.repl.claim(ref, generation)
	}
	return nil
}

// inheritedAt is a shard's position on each gating log as it stood just before it moved
// here to leader at gen (preClaim): the fence round's own position (fence_round.go).
type inheritedAt struct {
	gen uint64
	at  map[proto.ReplicaLog]placement.Position
}

// preClaim, for a follower shard about to lead here at generation (claimable), attaches a
// Quorum stream's replica set while it still follows and notes its position on each
// gating log (its tail, the generation of its newest record).
func (r *replication) preClaim(ref core.ShardRef, generation uint64) {
	quorum, ok := r.claimable(ref, generation)
	if !ok {
		return
	}
	s := r.srv
	if quorum {
		if err := s.engine.SetReplicated(ref, true); err != nil {
			s.log.Warn("promotion: replica set not attached before the role change", "shard", ref.String(), "err", err)
		}
	}
	in := inheritedAt{gen: generation, at: map[proto.ReplicaLog]placement.Position{}}
	for _, l := range placement.GatingLogs(wireKind(ref.Kind)) {
		st, err := s.engine.ReplicaState(logAddr(ref, l))
		if err != nil || st.Role != core.RoleFollower {
			return
		}
		in.at[l] = placement.Position{LastGeneration: lastGenerationBelow(st, st.Tail, generation), Durable: st.Tail}
	}
	r.mu.Lock()
	if r.inherited != nil {
		r.inherited[ref] = in
	}
	r.mu.Unlock()
}

// claimable reports whether the table names this node leader of ref at generation with
// a non-empty replica set and the shard is durable (ok), and whether it is a Quorum stream.
func (r *replication) claimable(ref core.ShardRef, generation uint64) (quorum, ok bool) {
	s := r.srv
	if s == nil || r.alone.Load() {
		return false, false
	}
	a, named := s.owners.Lookup(ref)
	if !named || a.Leader != s.nodeID() || a.Generation != generation || len(a.ReplicaSet) == 0 {
		return false, false
	}
	d := shardDurability{srv: s}
	durable, quorum, known := d.of(ref)
	return quorum, known && durable
}

// claim, for a shard just opened here as leader at generation, when the table names this
// node its leader at that generation with a non-empty replica set and the shard is
// durable: attaches a Quorum stream's replica set (nothing releases at the local commit
// from here on) and records the generation's start on each of its logs. Failures are
// logged; the replication plan attaches and records them again before it ships.
func (r *replication) claim(ref core.ShardRef, generation uint64) {
	quorum, ok := r.claimable(ref, generation)
	if !ok {
		return
	}
	s := r.srv
	if quorum {
		if err := s.engine.SetReplicated(ref, true); err != nil {
			s.log.Warn("promotion: replica set not attached at once", "shard", ref.String(), "err", err)
		}
	}
	for _, l := range shardLogs(ref.Kind) {
		if _, err := s.engine.LeadEpoch(logAddr(ref, l), generation); err != nil && !errors.Is(err, core.ErrInvalid) {
			s.log.Warn("promotion: generation start not recorded at once", "log", logAddr(ref, l).String(), "err", err)
		}
	}
}
