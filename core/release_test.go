package core

import (
	"errors"
	"testing"
	"time"

	"felix/proto"
)

// quorumHarness is a harness with the Quorum stream testStream whose shard 0
// has a (stand-in) replica set: its release mark waits for Engine.Release.
func quorumHarness(t *testing.T) *harness {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true, Consistency: ConsistencyQuorum})
	if err := h.e.attachReplicaSet(testStream, 0); err != nil {
		t.Fatal(err)
	}
	return h
}

func marks(t *testing.T, h *harness, name StreamName) (committed, released uint64) {
	t.Helper()
	info, err := h.e.StreamInfo(name)
	if err != nil {
		t.Fatal(err)
	}
	return info.CommittedOffsets[0], info.ReleasedOffsets[0]
}

// TestQuorumReleaseGatesAckDeliveryAndReads: a committed record of a Quorum
// shard is neither acknowledged, nor delivered live, nor readable from
// history, nor leased by a group until Release moves past it; the mark never
// moves backwards nor past the commit, and a batch is released whole.
func TestQuorumReleaseGatesAckDeliveryAndReads(t *testing.T) {
	h := quorumHarness(t)
	live, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, WithOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	parked := h.groupPoll("g", 1, 10, time.Second)
	a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("a", 3)})
	h.step(3)
	if c, r := marks(t, h, testStream); c != 3 || r != 0 {
		t.Fatalf("committed %d released %d, want 3 and 0", c, r)
	}
	history, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	if a.calls != 0 || parked.calls != 0 || len(drain(t, live)) != 0 || len(drain(t, history)) != 0 {
		t.Fatalf("unreleased batch seen: ack %+v, group %d calls, or a delivery", a, parked.calls)
	}
	if got := h.groupPoll("g2", 2, 10, 0); got.err != nil || len(got.records) != 0 {
		t.Fatalf("group leased unreleased records: %+v", got)
	}
	for _, bad := range []uint64{4, 100} {
		if err := h.e.Release(testStream, 0, bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("release past the commit to %d: %v", bad, err)
		}
	}
	if err := h.e.Release(testStream, 0, 2); err != nil { // inside the batch: held whole
		t.Fatal(err)
	}
	if _, r := marks(t, h, testStream); r != 2 || a.calls != 0 || len(drain(t, live)) != 0 {
		t.Fatalf("mark %d inside the batch released part of it (ack %+v)", r, a)
	}
	if err := h.e.Release(testStream, 0, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("release backwards: %v", err)
	}
	if err := h.e.Release(testStream, 0, 3); err != nil {
		t.Fatal(err)
	}
	h.step(2)
	if a.calls != 1 || a.err != nil || !a.res.Committed || a.res.LastOffset != 2 {
		t.Fatalf("ack after release: %+v", a)
	}
	if ds := drain(t, live); len(ds) != 1 || ds[0].BaseOffset != 0 || ds[0].Count != 3 {
		t.Fatalf("live after release: %+v", ds)
	}
	if ds := drain(t, history); len(ds) != 1 || ds[0].Count != 3 {
		t.Fatalf("subscriber registered before the release: %+v", ds)
	}
	late, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	if ds := drain(t, late); len(ds) != 1 || !ds[0].History || ds[0].Count != 3 {
		t.Fatalf("history after release: %+v", ds)
	}
	if parked.calls != 1 || len(parked.records) != 3 {
		t.Fatalf("parked group poll after release: %+v", parked)
	}
	if err := h.e.Release(testStream, 0, 3); err != nil {
		t.Fatalf("release at the mark: %v", err)
	}
}

// TestQuorumDuplicateWaitsForRelease: a re-send of an idempotent publish that
// is committed but unreleased is not answered as a duplicate before the
// original is released: its records by Release, its key record by the
// producer log's quorum mark (ReleaseReplica; producer_gate.go).
func TestQuorumDuplicateWaitsForRelease(t *testing.T) {
	h := quorumHarness(t)
	first := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 7})
	h.step(3)
	again := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 7})
	h.step(3)
	if first.calls != 0 || again.calls != 0 {
		t.Fatalf("answered before release: %+v %+v", first, again)
	}
	if err := h.e.Release(testStream, 0, 1); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	if first.calls != 0 || again.calls != 0 {
		t.Fatalf("answered before the key record's release: %+v %+v", first, again)
	}
	keys := LogAddr{Kind: ShardStream, Name: testStream, Log: proto.LogProducers}
	if st, err := h.e.ReplicaState(keys); err != nil || st.Committed != 1 || st.Released != 0 {
		t.Fatalf("producer log before its release: %+v, %v", st, err)
	}
	if err := h.e.ReleaseReplica(keys, 2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("release past the committed key records: %v", err)
	}
	if err := h.e.ReleaseReplica(keys, 1); err != nil {
		t.Fatal(err)
	}
	if first.calls != 1 || first.err != nil || again.calls != 1 || !again.res.Duplicate || again.res.FirstOffset != 0 {
		t.Fatalf("after release: %+v %+v", first, again)
	}
}

// TestUnreleasedFailOnDelete: deleting a Quorum stream fails the publishes
// still waiting for their release: never acknowledged as a success.
func TestUnreleasedFailOnDelete(t *testing.T) {
	h := quorumHarness(t)
	a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 2)})
	h.step(3)
	if err := h.e.DeleteStream(testStream); err != nil {
		t.Fatal(err)
	}
	if a.calls != 1 || !errors.Is(a.err, ErrNotFound) {
		t.Fatalf("unreleased publish on delete: %+v", a)
	}
}

// TestLeaderAndLoneQuorumReleaseAtCommit: a Leader stream acknowledges at the
// commit as before and refuses Release; a Quorum shard with no replica set
// (a single node) releases at its commit too.
func TestLeaderAndLoneQuorumReleaseAtCommit(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	leader := StreamName{Tenant: "t", Namespace: "n", Stream: "leader"}
	h.create(StreamSpec{Name: leader, Shards: 1, Durable: true})
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true, Consistency: ConsistencyQuorum})
	for _, name := range []StreamName{leader, testStream} {
		a := h.publish(&PublishRequest{Stream: name, Payloads: payloads("x", 2)})
		h.step(3)
		if c, r := marks(t, h, name); a.calls != 1 || a.err != nil || !a.res.Committed || c != 2 || r != 2 {
			t.Fatalf("%s: ack %+v, committed %d, released %d", name, a, c, r)
		}
	}
	if err := h.e.Release(leader, 0, 2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Release of a Leader stream: %v", err)
	}
	if err := h.e.attachReplicaSet(leader, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("replica set for a Leader stream: %v", err)
	}
	if err := h.e.Release(testStream, 0, 2); err != nil {
		t.Fatalf("Release at the mark of a lone Quorum shard: %v", err)
	}
}

func TestConsistencyValidation(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	for _, spec := range []StreamSpec{
		{Name: testStream, Shards: 1, Consistency: ConsistencyQuorum},
		{Name: testStream, Shards: 1, Durable: true, Consistency: ConsistencyQuorum + 1},
	} {
		if err := h.e.CreateStream(spec); !errors.Is(err, ErrInvalid) {
			t.Fatalf("CreateStream(%+v): %v", spec, err)
		}
	}
	if err := h.e.Release(testStream, 0, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Release of a missing stream: %v", err)
	}
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true, Consistency: ConsistencyQuorum})
	if err := h.e.Release(testStream, 1, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Release of shard 1 of 1: %v", err)
	}
}
