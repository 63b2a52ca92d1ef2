package core_test

import (
	"testing"
	"time"

	"felix/core"
	"felix/core/cache"
	"felix/proto"
)

// A durable cache shard with a replica set answers a put and a counter add only once the
// quorum marks of both its logs pass their records (ReleaseReplica), in order; detached, it
// answers at the commit again. Before cache_release.go a replicated cache answered at the
// leader's commit, and a promotion lost acknowledged writes (e2e/clustercrash, failover on).
func TestReplicatedCacheAnswersAtTheQuorumMark(t *testing.T) {
	e := logsEngine(t)
	spec := core.CacheSpec{Name: replCache, Shards: 1, Durable: true}
	if err := e.OpenShard(core.ShardSpec{Cache: &spec}, 0, core.RoleLeader, 1); err != nil {
		t.Fatal(err)
	}
	ref := core.ShardRef{Kind: core.ShardCache, Name: cacheLog(0).Name}
	if err := e.SetReplicated(ref, true); err != nil {
		t.Fatal(err)
	}
	put := make(chan error, 1)
	if err := e.CachePut(replCache, 0, []byte("k"), []byte("v"), cache.NoTTL, func(err error) { put <- err }); err != nil {
		t.Fatal(err)
	}
	add := make(chan error, 1)
	if err := e.CounterAdd(replCache, 0, []byte("c"), 3, func(_ int64, err error) { add <- err }); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "both records committed", func() bool {
		a, errA := e.ReplicaState(cacheLog(proto.LogCache))
		b, errB := e.ReplicaState(cacheLog(proto.LogCounters))
		return errA == nil && errB == nil && a.Committed >= 1 && b.Committed >= 1
	})
	notYet := func(ch chan error, what string) {
		t.Helper()
		select {
		case err := <-ch:
			t.Fatalf("%s answered (%v) before its quorum mark", what, err)
		case <-time.After(100 * time.Millisecond): // an answer that should not come: bounded look
		}
	}
	notYet(put, "the put")
	if err := e.ReleaseReplica(cacheLog(proto.LogCache), 1); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, put, "the put's answer"); err != nil {
		t.Fatal(err)
	}
	notYet(add, "the counter add") // its counter record is not quorum-marked yet
	if err := e.ReleaseReplica(cacheLog(proto.LogCounters), 1); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, add, "the counter add's answer"); err != nil {
		t.Fatal(err)
	}
	if err := e.SetReplicated(ref, false); err != nil {
		t.Fatal(err)
	}
	groupCall(t, "a put after detaching", func(done func(struct{}, error)) error {
		return e.CachePut(replCache, 0, []byte("k2"), []byte("v"), cache.NoTTL, func(err error) { done(struct{}{}, err) })
	})
	if err := e.ReleaseReplica(cacheLog(proto.LogStream), 1); err == nil {
		t.Fatal("a cache shard released a stream log")
	}
}
