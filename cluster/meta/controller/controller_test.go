package controller

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"felix/clock/clocktest"
	"felix/cluster/meta"
	"felix/cluster/meta/metaclient/metaclienttest"
	"felix/cluster/meta/raftnode"
	"felix/cluster/meta/rest"
	"felix/cluster/placement"
)

// rig is a one-member control plane (raft's in-memory transport) with three registered
// brokers and an RF3 Quorum stream of one shard, and a controller on a fake clock whose
// leadership the test sets (lead, term).
type rig struct {
	t     *testing.T
	node  *raftnode.Node
	clk   *clocktest.Fake
	c     *Controller
	lead  atomic.Bool
	term  atomic.Uint64
	shard meta.ShardRef
}

func newRig(t *testing.T, storageIDs bool) *rig {
	t.Helper()
	m := metaclienttest.Start(t, rest.Config{})
	r := &rig{t: t, node: m.Node, clk: clocktest.NewFake(time.Time{})}
	r.lead.Store(true)
	r.term.Store(1)
	now := time.Now().UnixMilli()
	for _, id := range []string{"b1", "b2", "b3"} {
		sid := ""
		if storageIDs {
			sid = "storage-" + id
		}
		r.apply(&meta.RegisterBroker{NodeID: id, StorageID: sid, ClientAddr: id + ":1", InternalAddr: id + ":2", AtMs: now})
	}
	r.apply(&meta.CreateTenant{TenantID: "t"})
	r.apply(&meta.CreateNamespace{TenantID: "t", Namespace: "n"})
	r.apply(&meta.CreateStream{TenantID: "t", Namespace: "n", Stream: "s", Shards: 1, Consistency: "Quorum",
		ReplicationFactor: 3, AtMs: now})
	r.shard = meta.ShardRef{Kind: "stream", TenantID: "t", Namespace: "n", Name: "s", Shard: 0}
	c, err := New(Config{Clock: r.clk, State: m.Node.FSM.State,
		Leading: func() (bool, uint64) { return r.lead.Load(), r.term.Load() },
		Propose: func(cmd meta.Command) (meta.Result, error) { return m.Node.Propose(cmd, 5*time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	return r
}

func (r *rig) apply(cmd meta.Command) meta.Result {
	r.t.Helper()
	res, err := r.node.Propose(cmd, 5*time.Second)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		r.t.Fatalf("%T: %v", cmd, err)
	}
	return res
}

func (r *rig) assignment() meta.Assignment {
	r.t.Helper()
	a, ok := r.node.FSM.State().Assignment(r.shard)
	if !ok {
		r.t.Fatal("no assignment for the shard")
	}
	return a
}

// report applies the leader's replica report: held[i] is the durable offset of the
// replica set's member i (leader first).
func (r *rig) report(a meta.Assignment, sids bool, held ...uint64) {
	r.t.Helper()
	var reps []meta.ReplicaState
	for i, id := range append([]string{a.Leader}, a.Followers...) {
		rs := meta.ReplicaState{NodeID: id, DurableOffset: held[i]}
		if sids {
			rs.StorageID = "storage-" + id
		}
		reps = append(reps, rs)
	}
	r.apply(&meta.ReplicaReport{ShardRef: r.shard, Leader: a.Leader, Generation: a.Generation, Replicas: reps,
		AtMs: time.Now().UnixMilli()})
}

// beat records a heartbeat from each node, then advances the clock by d; it repeats
// until total has passed.
func (r *rig) beat(total, d time.Duration, nodes ...string) {
	r.t.Helper()
	for el := time.Duration(0); el < total; el += d {
		for _, n := range nodes {
			if err := r.c.Heartbeat(n, false); err != nil {
				r.t.Fatal(err)
			}
		}
		r.clk.Advance(d)
	}
}

func (r *rig) step() []Promotion {
	r.t.Helper()
	ps, err := r.c.Step()
	if err != nil {
		r.t.Fatal(err)
	}
	return ps
}

// others returns the replica set's followers in order.
func others(a meta.Assignment) []string { return slices.Clone(a.Followers) }

// TestPromotesTheCaughtUpFollowerAtGenerationPlusOne: the leader stops heartbeating; it
// is waited for while suspect, then the follower furthest ahead of the report's quorum
// mark is promoted at generation + 1 with the old leader as a follower, and the next pass
// keeps it.
func TestPromotesTheCaughtUpFollowerAtGenerationPlusOne(t *testing.T) {
	r := newRig(t, true)
	a := r.assignment()
	f := others(a)
	r.beat(2*time.Second, 250*time.Millisecond, a.Leader, f[0], f[1])
	r.report(a, true, 100, 90, 100) // the second follower is furthest ahead
	if ps := r.step(); len(ps) != 0 {
		t.Fatalf("promoted with every broker live: %+v", ps)
	}
	r.beat(time.Second, 250*time.Millisecond, f[0], f[1]) // the leader is suspect now
	if ps := r.step(); len(ps) != 0 {
		t.Fatalf("promoted away from a suspect leader: %+v", ps)
	}
	if got := r.c.Liveness(a.Leader); got != "suspect" {
		t.Fatalf("leader liveness %s, want suspect", got)
	}
	r.beat(750*time.Millisecond, 250*time.Millisecond, f[0], f[1]) // down: 1.75 s without one
	ps := r.step()
	if len(ps) != 1 || ps[0].Decision.Leader != f[1] || ps[0].Decision.Generation != a.Generation+1 {
		t.Fatalf("promotions %+v, want %s at %d", ps, f[1], a.Generation+1)
	}
	b := r.assignment()
	if b.Leader != f[1] || b.Generation != a.Generation+1 || !slices.Equal(b.Followers, []string{a.Leader, f[0]}) {
		t.Fatalf("assignment after the promotion %+v", b)
	}
	r.beat(250*time.Millisecond, 250*time.Millisecond, f[0], f[1])
	if ps := r.step(); len(ps) != 0 {
		t.Fatalf("promoted again away from a live leader: %+v", ps)
	}
}

// TestGenerationAboveEveryReportedOne: a broker reported a generation above the
// assignment's in a heartbeat entry: the promotion is issued above it.
func TestGenerationAboveEveryReportedOne(t *testing.T) {
	r := newRig(t, true)
	a := r.assignment()
	f := others(a)
	r.apply(&meta.Heartbeat{NodeID: f[0], Generations: map[string]uint64{r.shard.Key(): a.Generation + 6},
		AtMs: time.Now().UnixMilli()})
	r.beat(time.Second, 250*time.Millisecond, a.Leader, f[0], f[1])
	r.report(a, true, 50, 50, 40)
	r.beat(2*time.Second, 250*time.Millisecond, f[0], f[1])
	ps := r.step()
	if len(ps) != 1 || ps[0].Decision.Leader != f[0] || ps[0].Decision.Generation != a.Generation+7 {
		t.Fatalf("promotions %+v, want %s at %d", ps, f[0], a.Generation+7)
	}
}

// TestNewLeaderWaitsAFullDownTimeout: a member that just became the leader (a new term)
// knows no arrival times: every broker is unknown, and nothing is promoted until a full
// down timeout has passed on its clock, even for a leader that was silent all along; once
// it has, the silent leader is replaced (its last report, found at takeover, counts as
// old: believed because the leader is dead and the storage identities match).
func TestNewLeaderWaitsAFullDownTimeout(t *testing.T) {
	r := newRig(t, true)
	a := r.assignment()
	f := others(a)
	r.report(a, true, 70, 70, 70)
	r.lead.Store(false)
	r.beat(5*time.Second, 250*time.Millisecond, f[0], f[1]) // dropped: this member does not lead
	if ps := r.step(); len(ps) != 0 {
		t.Fatalf("a member that does not lead promoted: %+v", ps)
	}
	r.lead.Store(true)
	r.term.Store(2)
	down := placement.DefaultDownAfter
	r.step() // takes over at this instant
	if got := r.c.Liveness(f[0]); got != "unknown" {
		t.Fatalf("liveness right after takeover %s, want unknown", got)
	}
	r.beat(down-250*time.Millisecond, 250*time.Millisecond, f[0], f[1])
	r.clk.Advance(249 * time.Millisecond) // down − 1 ms since the takeover
	if ps := r.step(); len(ps) != 0 {
		t.Fatalf("promoted %v after takeover, before the down timeout: %+v", down-time.Millisecond, ps)
	}
	r.clk.Advance(time.Millisecond)
	ps := r.step()
	if len(ps) != 1 || ps[0].Decision.Leader != f[0] || ps[0].Decision.Generation != a.Generation+1 {
		t.Fatalf("promotions %+v after the down timeout, want %s at %d", ps, f[0], a.Generation+1)
	}
}

// TestTakeoverReportWithoutIdentitiesIsNotBelieved: the same takeover, but no storage
// identities: the report found at takeover is of unknown age, so it counts as old, and a
// follower without a verified identity counts only from a fresh report: unplaceable until
// the leader reports again (it never will: it is dead), nothing proposed.
func TestTakeoverReportWithoutIdentitiesIsNotBelieved(t *testing.T) {
	r := newRig(t, false)
	a := r.assignment()
	f := others(a)
	r.report(a, false, 70, 70, 70)
	r.term.Store(2)
	r.step()
	r.beat(2*time.Second, 250*time.Millisecond, f[0], f[1])
	if ps := r.step(); len(ps) != 0 {
		t.Fatalf("promoted on a report of unknown age without identities: %+v", ps)
	}
	if b := r.assignment(); b.Leader != a.Leader || b.Generation != a.Generation {
		t.Fatalf("assignment changed: %+v", b)
	}
}

// TestBehindFollowerIsNotPromoted: the only live follower holds less than the quorum mark
// the leader's report showed: unplaceable, nothing proposed.
func TestBehindFollowerIsNotPromoted(t *testing.T) {
	r := newRig(t, true)
	a := r.assignment()
	f := others(a)
	r.beat(time.Second, 250*time.Millisecond, a.Leader, f[0], f[1])
	r.report(a, true, 100, 40, 100)
	r.beat(2*time.Second, 250*time.Millisecond, f[0]) // the caught-up follower is down too
	if ps := r.step(); len(ps) != 0 {
		t.Fatalf("promoted a follower below the quorum mark: %+v", ps)
	}
}
