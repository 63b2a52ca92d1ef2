package broker

import (
	"testing"
	"time"

	"felix/core"
	"felix/proto"
)

// A fence a follower accepted survives its restart (the ballot file): fenced at
// generation 2 by n2, restarted (the table still says generation 1 led by n1), n3 refuses
// n1's batch at generation 1 FencedEpoch and stores nothing; its ballot file names n2.
func TestReplicationFenceSurvivesRestart(t *testing.T) {
	c := newReplCluster(t, nil)
	c.acked(c.publish("g0"), "publish")
	c.identical(2)
	fence := &proto.Fence{Shard: wireRef(core.ShardRef{Kind: core.ShardStream, Name: replOrders}), Log: proto.LogStream, Generation: 2}
	if ans, ok := c.replRequest(replNodes[1], 2, fence).(*proto.FenceOk); !ok || ans.Generation != 2 {
		t.Fatalf("fence at generation 2 answered %#v", ans)
	}
	c.restart(2)
	b, err := c.brokers[2].srv.engine.ReplicaBallot(replOrdersAddr())
	if err != nil || b.Generation != 2 || b.Leader != replNodes[1] {
		t.Fatalf("n3's ballot after the restart: %+v %v", b, err)
	}
	wantReplicateError(t, "the old leader's batch after the restart", c.replRequest(replNodes[0], 2, replBatch(1, 1, "old")),
		proto.InternalFencedEpoch)
	if st := c.state(2); st.Tail != 1 {
		t.Fatalf("n3 stored past the fence: %+v", st)
	}
}

// A restarted Quorum leader does not release its recovered tail: a record committed with
// both followers stopped (never held by a majority) stays unreleased across the
// leader's restart (its release-mark file holds the mark the shard closed at: record 0
// released, record 1 not), and is released once a follower is back and holds it.
func TestReplicationRestartedLeaderHoldsItsTail(t *testing.T) {
	c := newReplCluster(t, nil)
	c.acked(c.publish("t0"), "publish with all three up")
	for _, i := range []int{1, 2} {
		if err := c.brokers[i].stop(); err != nil {
			t.Fatal(err)
		}
	}
	c.notReleased(c.publish("t1"), 1)
	c.restart(0)
	// The shippers have started (fencing followers that are down) and nothing releases.
	waitUntil(t, 20*time.Second, "the restarted leader attached", func() bool { return c.state(0).Replicated })
	if st := c.state(0); st.Committed != 2 || st.Released != 1 {
		t.Fatalf("the restarted leader: %+v, want committed 2, released 1 (record 1 held)", st)
	}
	c.start(1)
	c.place(1)
	waitUntil(t, 30*time.Second, "record 1 released once n2 holds it", func() bool { return c.state(0).Released == 2 })
	c.identical(1)
}

// A leader that restarts as a single node (no internal listener) is its own majority: a
// shard it reopened attached is detached, so the record held for the quorum is released
// and a new publish is acknowledged at its commit.
func TestReplicationLeaderRestartedAloneReleases(t *testing.T) {
	c := newReplCluster(t, nil)
	c.acked(c.publish("a0"), "publish with all three up")
	for _, i := range []int{1, 2} {
		if err := c.brokers[i].stop(); err != nil {
			t.Fatal(err)
		}
	}
	c.notReleased(c.publish("a1"), 1)
	if err := c.brokers[0].stop(); err != nil {
		t.Fatal(err)
	}
	c.env = map[string]string{"FELIX_INTERNAL_BIND": ""}
	c.start(0)
	waitUntil(t, 20*time.Second, "the lone leader detached", func() bool {
		st := c.state(0)
		return !st.Replicated && st.Released == 2
	})
	c.acked(c.publish("a2"), "publish to the lone node")
}

// A follower whose placement does not name the shard (just restarted, its table not
// loaded yet) answers the leader's batch, bootstrap offer and fence StaleRoute, never
// Unauthorized: Unauthorized halts the leader's shipping to it for good, which is how a
// wiped follower restarted under load stayed at durable 0 (the flake of
// TestReplicationBootstrapsBelowTheLeadersEarliest). Once its table names the shard at
// the sender's generation without it, the answer is Unauthorized.
func TestReplicationFollowerWithoutPlacementAnswersStaleRoute(t *testing.T) {
	c := newReplCluster(t, nil)
	c.acked(c.publish("p0"), "publish")
	c.identical(2)
	if err := c.brokers[2].stop(); err != nil {
		t.Fatal(err)
	}
	c.start(2) // its table is empty until SetPlacement
	shard := wireRef(core.ShardRef{Kind: core.ShardStream, Name: core.StreamName{Tenant: "default", Namespace: "default", Stream: "absent"}})
	msgs := map[string]proto.InternalMessage{
		"a batch of a stream it has":       replBatch(1, 1, "x"),
		"a batch of a stream it lacks":     &proto.ReplicateRecords{Log: proto.LogStream, Shard: shard, Epoch: 1, FirstOffset: 0},
		"a bootstrap of a stream it lacks": &proto.ReplicateBootstrap{Log: proto.LogStream, Shard: shard, Epoch: 1, BaseOffset: 4},
	}
	for what, msg := range msgs {
		wantReplicateError(t, what+" before the placement", c.replRequest(replNodes[0], 2, msg), proto.InternalStaleRoute)
	}
	if st := c.state(2); st.Tail != 1 {
		t.Fatalf("n3 stored before its placement: %+v", st)
	}
	peers := map[string]string{}
	for j, n := range replNodes {
		peers[n] = c.binds[j]
	}
	without := func(v CatalogView) Ownership {
		out := replPlacement(v)
		for ref := range out {
			out[ref] = Assignment{Leader: replNodes[0], ReplicaSet: replNodes[1:2], Generation: 1}
		}
		return out
	}
	c.brokers[2].srv.SetPlacement(without, peers)
	waitUntil(t, 20*time.Second, "n3's table without it", func() bool {
		a, ok := c.brokers[2].srv.owners.Lookup(core.ShardRef{Kind: core.ShardStream, Name: replOrders})
		return ok && a.Generation == 1
	})
	wantReplicateError(t, "a batch once its table leaves it out", c.replRequest(replNodes[0], 2, replBatch(1, 1, "x")),
		proto.InternalUnauthorized)
}
