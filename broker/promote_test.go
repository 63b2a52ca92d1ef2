package broker

import (
	"testing"
	"time"

	"felix/core"
)

// promoteDirect stops n2's reconciler, installs a table naming n2 leader at generation 2
// (n1 and n3 following), and moves n2's shard to leader through the reconciler's engine
// (fixed: promotingEngine; else the plain engine, the old code), as a reconcile pass would, with no replication plan to follow it; then publishes to n2 and returns
// where its release mark stood before and after the record became durable.
func promoteDirect(t *testing.T, fixed bool) (before, after, at uint64) {
	c := newReplCluster(t, nil)
	for range 3 {
		c.acked(c.publish("r"), "publish with all three up")
	}
	c.identical(1)
	srv := c.brokers[1].srv
	srv.stopShards()
	ref := core.ShardRef{Kind: core.ShardStream, Name: replOrders}
	srv.owners.Replace(Ownership{ref: {Leader: replNodes[1], ReplicaSet: []string{replNodes[0], replNodes[2]}, Generation: 2}})
	before = c.state(1).Released
	var opener shardOpener = srv.engine
	if fixed {
		opener = promotingEngine{srv.engine, srv}
	}
	if err := opener.SetRole(ref, core.RoleLeader, 2); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	req := &core.PublishRequest{Stream: replOrders, Payloads: [][]byte{[]byte("on n2")}, Ack: core.AckOnCommit}
	if err := srv.engine.Publish(req, func(_ core.PublishResult, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	at = c.state(1).Tail - 1
	waitUntil(t, 20*time.Second, "n2 durable past its record", func() bool { return c.state(1).Durable > at })
	if st := c.state(1); fixed && (len(st.Epochs) == 0 || st.Epochs[len(st.Epochs)-1].Generation != 2) {
		t.Fatalf("generation 2 not recorded at the role change: %+v", st.Epochs)
	}
	return before, c.state(1).Released, at
}

// TestPromotionAttachesBeforeTheRoleChange (the unexplained loss of docs/bench/failover.md):
// a follower that never led with a replica set, moved to leader, is attached to its
// replica set before the role change and its generation recorded right after it, so a
// publish it takes before the replication plan runs is held (not released at its local
// commit: acknowledged alone). With the reconciler's plain engine (the old code) the same
// publish is released, i.e. acknowledged by n2 alone, before any follower holds it.
func TestPromotionAttachesBeforeTheRoleChange(t *testing.T) {
	before, after, at := promoteDirect(t, true)
	if after > at {
		t.Fatalf("released to %d (from %d) past the record at %d with no follower holding it", after, before, at)
	}
}

// TestPromotionWithoutAttachAcksAlone is the teeth: the old code's role change.
func TestPromotionWithoutAttachAcksAlone(t *testing.T) {
	before, after, at := promoteDirect(t, false)
	if after <= at {
		t.Fatalf("released to %d (from %d), not past the record at %d: the window this stands for is closed without the fix", after, before, at)
	}
}
