package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"felix/cluster/placement"
	"felix/core"
	"felix/proto"
)

// promoteBehind builds issue 20's gap 1 in one process: n1 leads at generation 1 and
// acknowledges r0..r2 with both followers; it leads again at generation 2 (from offset 3)
// and acknowledges r3 and r4 with n3 alone (n2 gets no batch of generation 2); n1
// stops; the table promotes n2 (which lacks r3 and r4) at generation 3 with n1 and n3 as
// its replica set.
func promoteBehind(t *testing.T) *replCluster {
	c := newReplCluster(t, nil)
	for k := range 3 {
		c.acked(c.publish(fmt.Sprintf("r%d", k)), "publish with all three up")
	}
	c.identical(1)
	c.identical(2)
	c.move(Assignment{Leader: replNodes[0], ReplicaSet: replNodes[1:], Generation: 2}, 1, 2, 0)
	hold := func(follower string, from uint64) bool { return follower == replNodes[1] && from >= 2 }
	c.brokers[0].srv.repl.holdShip.Store(&hold)
	c.acked(c.publish("r3"), "r3 with n3")
	c.acked(c.publish("r4"), "r4 with n3")
	c.identical(2)
	if err := c.brokers[0].stop(); err != nil {
		t.Fatal(err)
	}
	to := Assignment{Leader: replNodes[1], ReplicaSet: []string{replNodes[0], replNodes[2]}, Generation: 3}
	c.move(to, 2)
	if fenceRoundOff {
		c.move(to, 1)
	} else {
		c.moveNoWait(to, 1)
	}
	return c
}

// moveNoWait installs the placement a on broker i.
func (c *replCluster) moveNoWait(a Assignment, i int) {
	peers := map[string]string{}
	for j, n := range replNodes {
		peers[n] = c.binds[j]
	}
	c.brokers[i].srv.SetPlacement(func(v CatalogView) Ownership {
		out := replPlacement(v)
		for ref := range out {
			out[ref] = a
		}
		return out
	}, peers)
}

// move installs the placement a on brokers in (in that order) and waits for each to hold
// the shard in its role at a's generation.
func (c *replCluster) move(a Assignment, in ...int) {
	c.t.Helper()
	for _, i := range in {
		c.moveNoWait(a, i)
		want := core.RoleFollower
		if a.Leader == replNodes[i] {
			want = core.RoleLeader
		}
		waitUntil(c.t, 20*time.Second, fmt.Sprintf("%s at generation %d", replNodes[i], a.Generation), func() bool {
			st := c.state(i)
			return st.Role == want && st.Generation == a.Generation
		})
	}
}

// TestPromotedLeaderBehindRefusesToOpen: n2's fence round at generation 3 finds n3 ahead
// (n3's newest record is of generation 2, n2's of 1) before its role changes, and refuses
// to open: it stays a follower (takes no publish), names n3 in its refusal for the
// control plane, and
// n3 keeps r3 and r4 (acknowledged at generation 2). n3, fenced at 3, refuses the old
// leader's generation with FencedEpoch. With the round off (the old code) n2 opens, ships
// its shorter log, and n3's acknowledged r3 and r4 are truncated: lost.
func TestPromotedLeaderBehindRefusesToOpen(t *testing.T) {
	c := promoteBehind(t)
	r := &c.brokers[1].srv.repl
	waitUntil(t, 20*time.Second, "n2's refusal", func() bool { return len(r.fenceRefusals()) == 1 })
	f := r.fenceRefusals()[0]
	if f.refusal.Ahead != replNodes[2] || f.refusal.Generation != 3 || f.refusal.By != replNodes[1] ||
		f.refusal.AheadAt != (placement.Position{LastGeneration: 2, Durable: 5}) {
		t.Fatalf("refusal %+v, want n3 ahead at 5@2", f.refusal)
	}
	if f.acks.gen != 3 || f.acks.held[0] != 3 || f.acks.held[2] != 5 {
		t.Fatalf("refusal report %+v, want n2 at 3 and n3 at 5", f.acks)
	}
	if !strings.Contains(c.logs[1].String(), "refused to open") {
		t.Fatal("no refusal logged")
	}
	if st := c.state(1); st.Role != core.RoleFollower || st.Generation != 2 || st.Tail != 3 {
		t.Fatalf("n2 after refusing: %+v, want a follower at generation 2 holding its 3 records", st)
	}
	req := &core.PublishRequest{Stream: replOrders, Payloads: [][]byte{[]byte("on n2")}, Ack: core.AckOnCommit}
	if err := c.brokers[1].srv.engine.Publish(req, func(core.PublishResult, error) {}); err == nil {
		t.Fatal("n2 took a publish without opening")
	}
	if st := c.state(2); st.Durable != 5 {
		t.Fatalf("n3 holds %+v, want its 5 records", st)
	}
	old := replBatch(2, 5, "from the old leader")
	wantReplicateError(t, "generation 2 at n3 after the fence at 3", c.replRequest(replNodes[0], 2, old), proto.InternalFencedEpoch)
}

// TestPromotedLeaderOpensWithoutTheRound is the teeth of the test above: the same
// promotion with the fence round off loses acknowledged records.
func TestPromotedLeaderOpensWithoutTheRound(t *testing.T) {
	fenceRoundOff = true
	t.Cleanup(func() { fenceRoundOff = false })
	c := promoteBehind(t)
	r := &c.brokers[1].srv.repl
	waitUntil(t, 20*time.Second, "n2 shipping", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.leaders) > 0
	})
	ch := make(chan error, 1)
	req := &core.PublishRequest{Stream: replOrders, Payloads: [][]byte{[]byte("on n2")}, Ack: core.AckOnCommit}
	if err := c.brokers[1].srv.engine.Publish(req, func(_ core.PublishResult, err error) { ch <- err }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("publish to n2, opened without the round: not acknowledged; n2 %+v halted %+v, n3 %+v", c.state(1),
			c.brokers[1].srv.repl.haltedList(), c.state(2))
	}
	waitUntil(t, 30*time.Second, "n3 durable at n2's commit", func() bool { return c.state(2).Durable >= c.state(1).Committed })
	for _, p := range c.rawLog(2) {
		if strings.Contains(string(p), "r3") || strings.Contains(string(p), "r4") {
			t.Fatal("n3 kept r3/r4: the loss this test stands for did not happen")
		}
	}
}
