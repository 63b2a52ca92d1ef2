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
	"fmt"
	"time"

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
		if err := p.srv.repl.fenceBeforeLeading(ref, generation); err != nil {
			return err
		}
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

// fenceWait bounds how long a reconcile pass waits for a follower's fence round before it
// leads: past it the role change fails and is tried again fenceRetry later.
const (
	fenceWait  = 3 * time.Second
	fenceRetry = 500 * time.Millisecond
)

// errNotFenced: the shard's fence round at the generation did not open (yet): it stays a
// follower (the reconciler's action fails, naming it).
var errNotFenced = errors.New("broker: the fence round did not open")

// fenceBeforeLeading runs the fence round of a Quorum stream shard that follows here and
// is about to lead at generation (claimable), before the role changes: a shard that never
// opens never takes a client record at a generation it did not open, so its log holds no
// record of it that a later round could mistake for an acknowledged one. Open: nil (the
// plan then ships at once). Refused or lost: errNotFenced, at once on every later pass at
// that generation (the refusal is reported to the control plane, whose new assignment
// moves the shard). Still pending after fenceWait: errNotFenced, and a pass is asked for
// again. A shard that does not follow here (it opens as leader, or leads already) is
// fenced by the plan instead (fence_round.go).
func (r *replication) fenceBeforeLeading(ref core.ShardRef, generation uint64) error {
	quorum, ok := r.claimable(ref, generation)
	if !ok || !quorum || ref.Kind != core.ShardStream || fenceRoundOff {
		return nil
	}
	s := r.srv
	st, err := s.engine.ReplicaState(logAddr(ref, proto.LogStream))
	if err != nil || st.Role != core.RoleFollower {
		return nil
	}
	a, _ := s.owners.Lookup(ref)
	r.mu.Lock()
	p, ctx := r.promotions[ref], r.ctx
	r.mu.Unlock()
	if ctx == nil {
		return nil
	}
	if p == nil || p.gen != generation || !sameSet(p.set, a.ReplicaSet) {
		own, err := r.followerPositions(ref, generation)
		if err != nil {
			return nil // the plan's round runs once it leads
		}
		p = r.startRound(ctx, ref, generation, a.ReplicaSet, own)
	}
	timer := time.NewTimer(fenceWait)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
	case <-ctx.Done():
	}
	r.mu.Lock()
	state := p.outcome.State
	r.mu.Unlock()
	switch state {
	case placement.FenceOpen:
		return nil
	case placement.FencePending:
		time.AfterFunc(fenceRetry, func() {
			if s.reconciler != nil {
				s.reconciler.Changed()
			}
		})
	}
	return fmt.Errorf("%w: %v at generation %d is %v", errNotFenced, ref, generation, state)
}

// followerPositions is a following shard's position on each gating log: its tail, the
// generation of its newest record (below generation).
func (r *replication) followerPositions(ref core.ShardRef, generation uint64) (map[proto.ReplicaLog]placement.Position, error) {
	out := map[proto.ReplicaLog]placement.Position{}
	for _, l := range placement.GatingLogs(wireKind(ref.Kind)) {
		st, err := r.srv.engine.ReplicaState(logAddr(ref, l))
		if err != nil {
			return nil, err
		}
		out[l] = placement.Position{LastGeneration: lastGenerationBelow(st, st.Tail, generation), Durable: st.Tail}
	}
	return out, nil
}
