package core

// The rebuild at promotion waits for the replicated appends staged at SetRole
// (replicate_promote.go, rebuildGate): on the manual engine with the fake disk holding
// completions, a follower promoted while its producer-key batch is in flight parks the
// producer's retry and answers it, once the batch completed and the window was rebuilt,
// as a duplicate.

import (
	"bytes"
	"testing"

	"felix/proto"
	"felix/seglog"
)

// rawOf copies every committed record of e's log addr.
func rawOf(t *testing.T, e *Engine, addr LogAddr) []seglog.Record {
	t.Helper()
	var out []seglog.Record
	if err := e.ReadReplica(addr, 0, 1<<20, func(r *seglog.Record) bool {
		c := *r
		c.Payload, c.Publisher = bytes.Clone(r.Payload), bytes.Clone(r.Publisher)
		out = append(out, c)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPromotionWaitsForTheReplicatedBatchInFlight(t *testing.T) {
	spec := StreamSpec{Name: testStream, Shards: 1, Durable: true}
	leader := newHarness(t, 1, newFakeStore(), nil)
	leader.create(spec)
	orig := leader.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 1})
	leader.step(3)
	if orig.calls != 1 || orig.err != nil {
		t.Fatalf("leader's publish: %+v", orig)
	}
	records := LogAddr{Kind: ShardStream, Name: testStream, Log: proto.LogStream}
	keys := LogAddr{Kind: ShardStream, Name: testStream, Log: proto.LogProducers}

	f := newHarness(t, 1, newFakeStore(), nil)
	if err := f.e.OpenShard(ShardSpec{Stream: &spec}, 0, RoleFollower, 1); err != nil {
		t.Fatal(err)
	}
	applied := 0
	count := func(uint64, error) { applied++ }
	if err := f.e.ApplyReplicated(records, 1, 0, rawOf(t, leader.e, records), count); err != nil {
		t.Fatal(err)
	}
	f.step(3)
	f.hold(true) // the key batch stays in flight
	if err := f.e.ApplyReplicated(keys, 1, 0, rawOf(t, leader.e, keys), count); err != nil {
		t.Fatal(err)
	}
	if err := f.e.SetRole(ShardRef{Kind: ShardStream, Name: testStream}, RoleLeader, 2); err != nil {
		t.Fatal(err)
	}
	retry := f.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 1})
	f.step(3)
	if retry.calls != 0 || applied != 1 {
		t.Fatalf("retry answered %+v (applied %d) before the key batch completed", retry, applied)
	}
	f.hold(false)
	f.step(5)
	if applied != 2 || retry.calls != 1 || retry.err != nil || !retry.res.Duplicate || retry.res.FirstOffset != 0 {
		t.Fatalf("retry after the key batch completed: %+v (applied %d), want a duplicate of offset 0", retry, applied)
	}
	if st, err := f.e.ReplicaState(records); err != nil || st.Tail != 1 {
		t.Fatalf("promoted follower's records: %+v, %v; want one", st, err)
	}
}
