package placement

import (
	"testing"

	"felix/cluster/meta"
	"felix/cluster/replica"
	"felix/proto"
)

// A report as the control plane stores it decides as the same report built by hand: the
// stamped incarnation keeps a follower re-registered since (without an identity) out.
func TestReportFromMeta(t *testing.T) {
	r := meta.Report{Leader: "A", Generation: 3, Stamped: true, Replicas: []meta.ReplicaState{
		{NodeID: "A", StorageID: "sA", DurableOffset: 10, Incarnation: 1},
		{NodeID: "B", DurableOffset: 10, Incarnation: 1},
		{NodeID: "C", StorageID: "sC", DurableOffset: 9, Incarnation: 1},
	}}
	sh := Shard{Generation: 3, Leader: "A", Followers: []string{"B", "C"}, HasReport: true,
		Report: ReportFromMeta(r, 100), Replicas: []Replica{
			ReplicaFromMeta(meta.Broker{NodeID: "A", StorageID: "sA", Incarnation: 1}, Down, 3),
			ReplicaFromMeta(meta.Broker{NodeID: "B", Incarnation: 2}, Live, 3),
			ReplicaFromMeta(meta.Broker{NodeID: "C", StorageID: "sC", Incarnation: 1}, Live, 3),
		}}
	sh.Report.ServesByRound = true
	d, err := Decide(&sh, 200, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != Unplaceable || len(d.Rejected) != 2 || d.Rejected[0].NodeID != "B" {
		t.Fatalf("want B rejected (re-registered without an identity) and C below the mark: %+v", d)
	}
}

// The generation placement issues after a restore (above every replica's ballot) is one
// the replicas take; the one it would issue without the floor, cluster/replica's follower
// decider refuses as FencedEpoch: the fence of a replica at G refuses every lower
// generation.
func TestGenerationFloorIsWhatReplicasAccept(t *testing.T) {
	sh := Shard{Generation: 3, Leader: "A", Followers: []string{"B"}, HasReport: true,
		Report: Report{Generation: 3, ServesByRound: true, Entries: []ReportEntry{{NodeID: "A", Durable: 4},
			{NodeID: "B", Durable: 4}}},
		Replicas: []Replica{{NodeID: "A", Liveness: Down, HighestGeneration: 7}, {NodeID: "B", Liveness: Live, HighestGeneration: 7}}}
	follower := &replica.FollowerState{Kind: proto.ShardStream, Log: proto.LogStream, Member: true, HasLog: true,
		Tail: 4, Durable: 4, Ballot: replica.Ballot{Generation: 7, Leader: "A"}}
	for _, c := range []struct {
		without gaps
		want    replica.Action
	}{{gaps{}, replica.ActFenceOk}, {gaps{generationFloor: true}, replica.ActFenced}} {
		d, err := Decide(&sh, 0, Config{without: c.without})
		if err != nil || d.Action != Promote {
			t.Fatalf("%+v %v", d, err)
		}
		fence := &proto.Fence{CorrelationID: 1, Log: proto.LogStream, Generation: d.Generation}
		if got := replica.DecideFollower(follower, d.Leader, proto.KindFence, fence); got.Action != c.want {
			t.Fatalf("generation %d (without=%+v): the replica at 7 answers %v, want %v", d.Generation, c.without, got.Action, c.want)
		}
	}
}
