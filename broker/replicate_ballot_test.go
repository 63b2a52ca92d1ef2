package broker

import (
	"testing"

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
