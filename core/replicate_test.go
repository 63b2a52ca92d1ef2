package core_test

// Replication's core calls (replicate.go) on a running engine over the production disk:
// a leader's raw records applied verbatim on a follower, the follower's
// state, its truncate / reset / epochs, and a Quorum leader's release waiting for
// Engine.Release once a replica set is attached.

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"felix/core"
	"felix/proto"
	"felix/seglog"
)

var replStream = core.StreamName{Tenant: "t1", Namespace: "default", Stream: "repl"}

func replAddr() core.LogAddr {
	return core.LogAddr{Kind: core.ShardStream, Name: replStream, Log: proto.LogStream}
}

type replTestEngine struct {
	*core.Engine
	t *testing.T
}

// replEngine is a running engine on the production disk (fsync on_commit) with shard 0
// of replStream open as role at gen: completions arrive on its core goroutine, and the
// tests wait for them with a deadline.
func replEngine(t *testing.T, role core.Role, gen uint64, consistency core.Consistency) *replTestEngine {
	t.Helper()
	e, err := core.NewEngine(core.Config{Cores: 1, DataDir: t.TempDir(), Fsync: core.FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	spec := core.StreamSpec{Name: replStream, Shards: 1, Durable: true, SyncOnCommit: true, Consistency: consistency}
	if err := e.OpenShard(core.ShardSpec{Stream: &spec}, 0, role, gen); err != nil {
		t.Fatal(err)
	}
	return &replTestEngine{Engine: e, t: t}
}

// waitFor waits up to 10 s for ch.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
	}
	var zero T
	return zero
}

// rawRecords reads every committed record of e's log from from, copied.
func rawRecords(t *testing.T, e *replTestEngine, from uint64) []seglog.Record {
	t.Helper()
	return rawLog(t, e, replAddr(), from)
}

// rawLog reads every committed record of e's log addr from from, copied.
func rawLog(t *testing.T, e *replTestEngine, addr core.LogAddr, from uint64) []seglog.Record {
	t.Helper()
	var out []seglog.Record
	err := e.ReadReplica(addr, from, 1<<20, func(r *seglog.Record) bool {
		c := *r
		c.Payload, c.Publisher = bytes.Clone(r.Payload), bytes.Clone(r.Publisher)
		out = append(out, c)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// publish publishes payloads and returns the channel its answer arrives on.
func publish(t *testing.T, e *replTestEngine, payloads ...string) <-chan error {
	t.Helper()
	var ps [][]byte
	for _, p := range payloads {
		ps = append(ps, []byte(p))
	}
	acked := make(chan error, 1)
	if err := e.Publish(&core.PublishRequest{Stream: replStream, Payloads: ps, Ack: core.AckOnCommit},
		func(_ core.PublishResult, err error) { acked <- err }); err != nil {
		t.Fatal(err)
	}
	return acked
}

func publishWait(t *testing.T, e *replTestEngine, payloads ...string) {
	t.Helper()
	if err := waitFor(t, publish(t, e, payloads...), "publish answer"); err != nil {
		t.Fatal(err)
	}
}

type applied struct {
	durable uint64
	err     error
}

func apply(t *testing.T, e *replTestEngine, gen, first uint64, recs []seglog.Record) (uint64, error) {
	t.Helper()
	ch := make(chan applied, 1)
	if err := e.ApplyReplicated(replAddr(), gen, first, recs, func(d uint64, err error) { ch <- applied{d, err} }); err != nil {
		return 0, err
	}
	a := waitFor(t, ch, "apply answer")
	return a.durable, a.err
}

// A leader's committed records, read raw and applied at their offsets on a follower,
// give a record-for-record identical log whose durable_offset is the answer; a batch
// not at the tail, a leader shard, and another generation are refused with nothing stored.
func TestApplyReplicatedCopiesTheLeadersLog(t *testing.T) {
	leader := replEngine(t, core.RoleLeader, 1, core.ConsistencyLeader)
	for _, p := range []string{"a", "bb", "ccc"} {
		publishWait(t, leader, p)
	}
	recs := rawRecords(t, leader, 0)
	if len(recs) != 3 {
		t.Fatalf("leader holds %d records", len(recs))
	}
	f := replEngine(t, core.RoleFollower, 1, core.ConsistencyLeader)
	if d, err := apply(t, f, 1, 0, recs[:2]); err != nil || d != 2 {
		t.Fatalf("apply [0,2): durable %d, %v", d, err)
	}
	if _, err := apply(t, f, 1, 3, recs[2:]); !errors.Is(err, seglog.ErrNotTail) {
		t.Fatalf("apply past the tail: %v, want ErrNotTail", err)
	}
	if _, err := apply(t, f, 2, 2, recs[2:]); !errors.Is(err, core.ErrStaleGeneration) {
		t.Fatalf("apply at another generation: %v", err)
	}
	if _, err := apply(t, leader, 1, 3, recs[2:]); !errors.Is(err, core.ErrNotHere) {
		t.Fatalf("apply on a leader: %v", err)
	}
	if d, err := apply(t, f, 1, 2, recs[2:]); err != nil || d != 3 {
		t.Fatalf("apply [2,3): durable %d, %v", d, err)
	}
	got := rawRecords(t, f, 0)
	for i := range recs {
		a, b := core.AppendReplicaPayload(nil, &recs[i]), core.AppendReplicaPayload(nil, &got[i])
		if !bytes.Equal(a, b) {
			t.Fatalf("record %d differs: %x vs %x", i, a, b)
		}
		if r, err := core.DecodeReplicaPayload(a); err != nil || r.Offset != recs[i].Offset || !bytes.Equal(r.Payload, recs[i].Payload) {
			t.Fatalf("payload %d does not decode back: %+v, %v", i, r, err)
		}
	}
	st, err := f.ReplicaState(replAddr())
	want := core.ReplicaState{Role: core.RoleFollower, Generation: 1, Tail: 3, Committed: 3, Durable: 3, Released: 3}
	if err != nil || st.Role != want.Role || st.Generation != 1 || st.Tail != 3 || st.Committed != 3 || st.Durable != 3 || st.Released != 3 {
		t.Fatalf("follower state %+v, %v; want %+v", st, err, want)
	}
	if _, err := core.DecodeReplicaPayload(append(core.AppendReplicaPayload(nil, &recs[0]), 0)); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("trailing byte: %v", err)
	}
	bad := core.AppendReplicaPayload(nil, &recs[0])
	bad[len(bad)-1] ^= 1
	if _, err := core.DecodeReplicaPayload(bad); err == nil {
		t.Fatal("a flipped payload byte decoded")
	}
}

// Truncate, epochs and reset act on a follower's log and its marks; the stored epochs
// must be a prefix of the new history; a leader is refused.
func TestReplicaRepairCalls(t *testing.T) {
	leader := replEngine(t, core.RoleLeader, 1, core.ConsistencyLeader)
	publishWait(t, leader, "a", "b", "c", "d")
	f := replEngine(t, core.RoleFollower, 2, core.ConsistencyLeader)
	if _, err := apply(t, f, 2, 0, rawRecords(t, leader, 0)); err != nil {
		t.Fatal(err)
	}
	eps := []seglog.Epoch{{Generation: 1, StartOffset: 0}, {Generation: 2, StartOffset: 3}}
	if err := f.SetReplicaEpochs(replAddr(), 2, eps); err != nil {
		t.Fatal(err)
	}
	if err := f.SetReplicaEpochs(replAddr(), 2, eps[1:]); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("a history that drops a stored epoch: %v", err)
	}
	if err := f.TruncateReplica(replAddr(), 2, 3); err != nil {
		t.Fatal(err)
	}
	st, err := f.ReplicaState(replAddr())
	if err != nil || st.Tail != 3 || st.Committed != 3 || st.Released != 3 || len(st.Epochs) != 1 {
		t.Fatalf("after truncate at 3: %+v, %v", st, err)
	}
	if err := f.ResetReplica(replAddr(), 2, 100); err != nil {
		t.Fatal(err)
	}
	st, err = f.ReplicaState(replAddr())
	if err != nil || st.Earliest != 100 || st.Tail != 100 || st.Committed != 100 || len(st.Epochs) != 0 {
		t.Fatalf("after reset at 100: %+v, %v", st, err)
	}
	if err := leader.TruncateReplica(replAddr(), 1, 0); !errors.Is(err, core.ErrNotHere) {
		t.Fatalf("truncate on a leader: %v", err)
	}
	cache := core.LogAddr{Kind: core.ShardStream, Name: replStream, Log: proto.LogCache}
	if _, err := f.ReplicaState(cache); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("a cache log of a stream shard: %v", err)
	}
}

// A Quorum leader with a replica set attached acknowledges only at Release; WhenDurable
// fires once the leader's own log is durable there; detaching releases what is committed.
func TestSetReplicatedGatesTheRelease(t *testing.T) {
	e := replEngine(t, core.RoleLeader, 1, core.ConsistencyQuorum)
	ref := core.ShardRef{Kind: core.ShardStream, Name: replStream}
	if err := e.SetReplicated(ref, true); err != nil {
		t.Fatal(err)
	}
	woke := make(chan struct{})
	if err := e.WhenDurable(replAddr(), 2, func() { close(woke) }); err != nil {
		t.Fatal(err)
	}
	acked := publish(t, e, "a", "b")
	waitFor(t, woke, "durable wake-up at 2")
	if st, err := e.ReplicaState(replAddr()); err != nil || st.Durable != 2 || st.Released != 0 {
		t.Fatalf("leader state %+v, %v: want durable 2, released 0", st, err)
	}
	select {
	case err := <-acked:
		t.Fatalf("answered before Release: %v", err)
	default:
	}
	if err := e.Release(replStream, 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, acked, "ack after Release"); err != nil {
		t.Fatal(err)
	}
	acked = publish(t, e, "c")
	woke = make(chan struct{})
	if err := e.WhenDurable(replAddr(), 3, func() { close(woke) }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, woke, "durable wake-up at 3")
	select {
	case err := <-acked:
		t.Fatalf("answered before Release: %v", err)
	default:
	}
	if err := e.SetReplicated(ref, false); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, acked, "ack after detaching"); err != nil {
		t.Fatal(err)
	}
	lead := replEngine(t, core.RoleLeader, 1, core.ConsistencyLeader)
	if err := lead.SetReplicated(ref, true); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("a Leader stream: %v", err)
	}
}

// A leader records where its generation begins once; a follower is refused.
func TestLeadEpoch(t *testing.T) {
	e := replEngine(t, core.RoleLeader, 3, core.ConsistencyLeader)
	publishWait(t, e, "a", "b")
	if start, err := e.LeadEpoch(replAddr(), 3); err != nil || start != 2 {
		t.Fatalf("LeadEpoch: %d, %v; want 2", start, err)
	}
	publishWait(t, e, "c")
	if start, err := e.LeadEpoch(replAddr(), 3); err != nil || start != 2 {
		t.Fatalf("LeadEpoch again: %d, %v; want 2", start, err)
	}
	st, err := e.ReplicaState(replAddr())
	if err != nil || len(st.Epochs) != 1 || st.Epochs[0] != (seglog.Epoch{Generation: 3, StartOffset: 2}) {
		t.Fatalf("epochs %v, %v", st.Epochs, err)
	}
	if _, err := e.LeadEpoch(replAddr(), 4); !errors.Is(err, core.ErrStaleGeneration) {
		t.Fatalf("another generation: %v", err)
	}
	f := replEngine(t, core.RoleFollower, 3, core.ConsistencyLeader)
	if _, err := f.LeadEpoch(replAddr(), 3); !errors.Is(err, core.ErrNotHere) {
		t.Fatalf("a follower: %v", err)
	}
}
