package controller

import (
	"slices"
	"testing"
	"time"

	"felix/cluster/meta"
)

// TestRefusalPromotesTheReplicaAhead (issue 20, known gap 1): the leader dies, the
// follower furthest ahead by the last report is promoted; its fence round finds the other
// follower ahead and it refuses to open, reporting so (replica_report with a
// FenceRefusal). The next pass decides the shard although its leader is live, and
// promotes the replica ahead at the next generation, with the refusing broker a follower.
// A refusal left from an older generation changes nothing. Without the refusal wired (the
// report's field dropped, or the live-leader skip kept) the refusing broker stays leader
// of a shard it will never open.
func TestRefusalPromotesTheReplicaAhead(t *testing.T) {
	r := newRig(t, true)
	a := r.assignment()
	f := others(a)
	r.beat(time.Second, 250*time.Millisecond, a.Leader, f[0], f[1])
	r.report(a, true, 100, 90, 100)
	r.beat(2*time.Second, 250*time.Millisecond, f[0], f[1])
	ps := r.step()
	if len(ps) != 1 || ps[0].Decision.Leader != f[1] {
		t.Fatalf("promotions %+v, want %s", ps, f[1])
	}
	b := r.assignment()
	reps := []meta.ReplicaState{{NodeID: f[1], StorageID: "storage-" + f[1], DurableOffset: 100},
		{NodeID: a.Leader}, {NodeID: f[0], StorageID: "storage-" + f[0], DurableOffset: 130}}
	r.apply(&meta.ReplicaReport{ShardRef: r.shard, Leader: b.Leader, Generation: b.Generation, Replicas: reps,
		AtMs: time.Now().UnixMilli(), FenceRefusal: &meta.FenceRefusal{Ahead: f[0], AheadDurable: 130, AheadGeneration: a.Generation}})
	var kept *meta.FenceRefusal
	for _, rep := range r.node.FSM.State().Reports() {
		if rep.Key() == r.shard.Key() {
			kept = rep.FenceRefusal
		}
	}
	if kept == nil || kept.Ahead != f[0] {
		t.Fatalf("the report's refusal was not kept: %+v", kept)
	}
	r.beat(250*time.Millisecond, 250*time.Millisecond, f[0], f[1])
	ps = r.step()
	if len(ps) != 1 || ps[0].Decision.Leader != f[0] || ps[0].Decision.Generation != b.Generation+1 {
		t.Fatalf("after the refusal: promotions %+v, want %s at %d", ps, f[0], b.Generation+1)
	}
	c := r.assignment()
	if c.Leader != f[0] || len(c.Followers) != 2 || !slices.Contains(c.Followers, f[1]) {
		t.Fatalf("assignment after the refusal %+v", c)
	}
	r.beat(250*time.Millisecond, 250*time.Millisecond, f[0], f[1])
	if ps := r.step(); len(ps) != 0 {
		t.Fatalf("the refusal at generation %d acted again at %d: %+v", b.Generation, c.Generation, ps)
	}
}
