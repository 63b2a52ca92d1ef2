package core_test

import (
	"context"
	"testing"

	"felix/core"
	"felix/proto"
	"felix/seglog"
)

// reopenAs closes e's engine and opens its data dir again with shard 0 of replStream as
// role at gen (a broker restarted under its node id, placed from the held placement).
func reopenAs(t *testing.T, dir string, role core.Role, gen uint64) *replTestEngine {
	t.Helper()
	e, err := core.NewEngine(core.Config{Cores: 1, DataDir: dir, Fsync: core.FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	spec := core.StreamSpec{Name: replStream, Shards: 1, Durable: true, SyncOnCommit: true, Consistency: core.ConsistencyQuorum}
	if err := e.OpenShard(core.ShardSpec{Stream: &spec}, 0, role, gen); err != nil {
		t.Fatal(err)
	}
	return &replTestEngine{Engine: e, t: t}
}

// A follower restarted while its producers log was ahead of its records log (the
// leader's key records replicated before the records they name: the two logs ship
// independently) writes nothing of its own at reopen: no fence record in the producers
// log and no cut of the records it holds. Before the fix the reopen appended a fence
// (a record the leader never wrote, so the leader's next producers batch was refused as
// "a leader disagreeing with itself" and the log halted as diverged; seen in
// e2e/clustercrash) and cut the records log back to the key's first offset (records the
// follower had fsynced and acknowledged).
func TestFollowerReopenWritesNothingOfItsOwn(t *testing.T) {
	leader := replEngine(t, core.RoleLeader, 1, core.ConsistencyQuorum)
	for i, batch := range [][]string{{"a", "b"}, {"c", "d", "e"}} {
		done := make(chan error, 1)
		var ps [][]byte
		for _, p := range batch {
			ps = append(ps, []byte(p))
		}
		if err := leader.Publish(&core.PublishRequest{Stream: replStream, Payloads: ps, Ack: core.AckOnCommit,
			ProducerID: "p1", Sequence: uint64(i + 1)}, func(_ core.PublishResult, err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		if err := waitFor(t, done, "publish answer"); err != nil {
			t.Fatal(err)
		}
	}
	recs := rawRecords(t, leader, 0)
	keys := readLog(t, leader, proto.LogProducers)
	if len(recs) != 5 || len(keys) < 2 {
		t.Fatalf("leader: %d records, %d key records", len(recs), len(keys))
	}
	dir := t.TempDir()
	f := reopenAs(t, dir, core.RoleFollower, 1)
	applyLog(t, f, proto.LogProducers, 1, 0, keys)  // both keys: offsets 0..1 and 2..4
	applyLog(t, f, proto.LogStream, 1, 0, recs[:3]) // the records only through offset 2
	keysBefore := f.state(t, proto.LogProducers).Tail
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	f = reopenAs(t, dir, core.RoleFollower, 1)
	if got := f.state(t, proto.LogStream).Tail; got != 3 {
		t.Fatalf("the reopened follower's records log ends at %d, want 3 (it held offsets 0..2)", got)
	}
	if got := f.state(t, proto.LogProducers).Tail; got != keysBefore {
		t.Fatalf("the reopened follower's producers log ends at %d, want %d (nothing of its own written)", got, keysBefore)
	}
}

func logAddr(log proto.ReplicaLog) core.LogAddr {
	a := replAddr()
	a.Log = log
	return a
}

// readLog reads every committed record of one of e's logs, copied.
func readLog(t *testing.T, e *replTestEngine, log proto.ReplicaLog) []seglog.Record {
	t.Helper()
	return rawLog(t, e, logAddr(log), 0)
}

// applyLog applies recs at first to one of e's logs and waits for the answer.
func applyLog(t *testing.T, e *replTestEngine, log proto.ReplicaLog, gen, first uint64, recs []seglog.Record) {
	t.Helper()
	ch := make(chan applied, 1)
	if err := e.ApplyReplicated(logAddr(log), gen, first, recs, func(d uint64, err error) { ch <- applied{d, err} }); err != nil {
		t.Fatal(err)
	}
	if a := waitFor(t, ch, "apply answer"); a.err != nil {
		t.Fatal(a.err)
	}
}

// state is one of e's logs' ReplicaState.
func (e *replTestEngine) state(t *testing.T, log proto.ReplicaLog) core.ReplicaState {
	t.Helper()
	st, err := e.ReplicaState(logAddr(log))
	if err != nil {
		t.Fatal(err)
	}
	return st
}
