package core_test

// The five companion logs through replication's core calls (replicate_target.go,
// replicate_promote.go, producer_gate.go): a leader's producer-key, group-cursor,
// dead-letter, cache and counter logs copied verbatim onto a follower with
// ApplyReplicated, and what the follower serves once SetRole promotes it — the
// deduplication window, the consumer groups and dead letters, the cache values (TTLs
// and expiries in log order) and counter sums.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"felix/core"
	"felix/core/cache"
	"felix/core/groups"
	"felix/internal/testwait"
	"felix/proto"
	"felix/seglog"
)

// logsEngine is a running engine on the production disk (fsync on_commit).
func logsEngine(t *testing.T) *core.Engine {
	t.Helper()
	e, err := core.NewEngine(core.Config{Cores: 1, DataDir: t.TempDir(), Fsync: core.FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// openStream opens shard 0 of replStream (durable, Leader consistency) on e.
func openStream(t *testing.T, e *core.Engine, role core.Role, gen uint64) {
	t.Helper()
	spec := core.StreamSpec{Name: replStream, Shards: 1, Durable: true, SyncOnCommit: true}
	if err := e.OpenShard(core.ShardSpec{Stream: &spec}, 0, role, gen); err != nil {
		t.Fatal(err)
	}
}

// streamLog is the address of shard 0's log of replStream.
func streamLog(log proto.ReplicaLog) core.LogAddr {
	return core.LogAddr{Kind: core.ShardStream, Name: replStream, Log: log}
}

// copyLog applies every committed record of the leader's log from the follower's tail
// on, at generation gen, and waits for the fdatasync answer.
func copyLog(t *testing.T, leader, follower *core.Engine, addr core.LogAddr, gen uint64) {
	t.Helper()
	st, err := follower.ReplicaState(addr)
	if err != nil {
		t.Fatalf("%v: %v", addr, err)
	}
	var recs []seglog.Record
	for next := st.Tail; ; {
		n := 0
		err := leader.ReadReplica(addr, next, 1<<20, func(r *seglog.Record) bool {
			c := *r
			c.Payload, c.Publisher = bytes.Clone(r.Payload), bytes.Clone(r.Publisher)
			recs = append(recs, c)
			next, n = r.Offset+1, n+1
			return true
		})
		if err != nil {
			t.Fatalf("read %v: %v", addr, err)
		}
		if n == 0 {
			break
		}
	}
	if len(recs) == 0 {
		return
	}
	ch := make(chan applied, 1)
	if err := follower.ApplyReplicated(addr, gen, st.Tail, recs, func(d uint64, err error) { ch <- applied{d, err} }); err != nil {
		t.Fatalf("apply %v: %v", addr, err)
	}
	if a := waitFor(t, ch, "apply answer"); a.err != nil || a.durable != st.Tail+uint64(len(recs)) {
		t.Fatalf("apply %v: durable %d, %v", addr, a.durable, a.err)
	}
}

type pubAnswer struct {
	res core.PublishResult
	err error
}

// publishKeyed publishes payload idempotently as (producer, seq) and waits for its answer.
func publishKeyed(t *testing.T, e *core.Engine, producer string, seq uint64, payload string) core.PublishResult {
	t.Helper()
	ch := make(chan pubAnswer, 1)
	req := &core.PublishRequest{Stream: replStream, Payloads: [][]byte{[]byte(payload)}, Ack: core.AckOnCommit,
		ProducerID: producer, Sequence: seq}
	if err := e.Publish(req, func(r core.PublishResult, err error) { ch <- pubAnswer{r, err} }); err != nil {
		t.Fatal(err)
	}
	a := waitFor(t, ch, "publish answer")
	if a.err != nil {
		t.Fatalf("publish %s/%d: %v", producer, seq, a.err)
	}
	return a.res
}

// A follower holding its leader's records and producer-key logs, promoted by SetRole,
// answers a producer's retry of an acknowledged publish as a duplicate with the original
// offsets, and stores nothing twice; a key whose records it lacks is not a duplicate (its
// retry is stored), and a fence in its producer log keeps the reused offsets from ever
// being answered as that key's.
func TestPromotedFollowerRebuildsTheProducerWindow(t *testing.T) {
	leader, f := logsEngine(t), logsEngine(t)
	openStream(t, leader, core.RoleLeader, 1)
	openStream(t, f, core.RoleFollower, 1)
	a := publishKeyed(t, leader, "p1", 1, "a")
	b := publishKeyed(t, leader, "p1", 2, "b")
	copyLog(t, leader, f, streamLog(proto.LogStream), 1)
	copyLog(t, leader, f, streamLog(proto.LogProducers), 1)
	c := publishKeyed(t, leader, "p2", 1, "c") // its key reaches the follower, its record does not
	copyLog(t, leader, f, streamLog(proto.LogProducers), 1)
	if c.FirstOffset != 2 {
		t.Fatalf("third publish at %d", c.FirstOffset)
	}
	ref := core.ShardRef{Kind: core.ShardStream, Name: replStream}
	if err := f.SetRole(ref, core.RoleLeader, 2); err != nil {
		t.Fatal(err)
	}
	for _, want := range []core.PublishResult{a, b} {
		got := publishKeyed(t, f, "p1", want.FirstOffset+1, "retry")
		if !got.Duplicate || got.FirstOffset != want.FirstOffset || got.LastOffset != want.LastOffset {
			t.Fatalf("retry of p1/%d on the promoted follower: %+v, want a duplicate of %+v", want.FirstOffset+1, got, want)
		}
	}
	again := publishKeyed(t, f, "p2", 1, "c")
	if again.Duplicate || again.FirstOffset != 2 {
		t.Fatalf("retry of a key whose record the follower lacks: %+v, want stored at 2", again)
	}
	st, err := f.ReplicaState(streamLog(proto.LogStream))
	if err != nil || st.Tail != 3 {
		t.Fatalf("promoted follower's records log: %+v, %v; want 3 records (no copy twice)", st, err)
	}
	if dup := publishKeyed(t, f, "p2", 1, "c"); !dup.Duplicate || dup.FirstOffset != 2 {
		t.Fatalf("second retry of p2/1: %+v", dup)
	}
}

// The producer log's quorum mark gates an idempotent publish on a replicated Quorum
// shard: the answer waits for both marks; ReleaseReplica refuses the logs that gate
// nothing.
func TestProducerKeysWaitForTheirQuorumMark(t *testing.T) {
	e := replEngine(t, core.RoleLeader, 1, core.ConsistencyQuorum)
	if err := e.SetReplicated(core.ShardRef{Kind: core.ShardStream, Name: replStream}, true); err != nil {
		t.Fatal(err)
	}
	ch := make(chan pubAnswer, 1)
	req := &core.PublishRequest{Stream: replStream, Payloads: [][]byte{[]byte("x")}, Ack: core.AckOnCommit, ProducerID: "p", Sequence: 1}
	if err := e.Publish(req, func(r core.PublishResult, err error) { ch <- pubAnswer{r, err} }); err != nil {
		t.Fatal(err)
	}
	keys := streamLog(proto.LogProducers)
	waitCond(t, "the key record committed", func() bool {
		st, err := e.ReplicaState(keys)
		return err == nil && st.Committed == 1
	})
	if err := e.Release(replStream, 0, 1); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.ReplicaState(keys); st.Released != 0 {
		t.Fatalf("producer log released to %d before its quorum mark", st.Released)
	}
	select {
	case a := <-ch:
		t.Fatalf("answered before the key record's quorum mark: %+v", a)
	default:
	}
	if err := e.ReleaseReplica(keys, 1); err != nil {
		t.Fatal(err)
	}
	if a := waitFor(t, ch, "publish answer"); a.err != nil || a.res.FirstOffset != 0 {
		t.Fatalf("after both marks: %+v", a)
	}
	for _, l := range []proto.ReplicaLog{proto.LogGroupCursors, proto.LogDeadLetters} {
		if err := e.ReleaseReplica(streamLog(l), 1); !errors.Is(err, core.ErrInvalid) {
			t.Fatalf("release of %v: %v", l, err)
		}
	}
}

// waitCond polls cond for up to 10 s.
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 10*time.Second, what, cond)
}

// groupCall runs one group call and waits for its done.
func groupCall[T any](t *testing.T, what string, call func(done func(T, error)) error) T {
	t.Helper()
	type answer struct {
		v   T
		err error
	}
	ch := make(chan answer, 1)
	if err := call(func(v T, err error) { ch <- answer{v, err} }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	a := waitFor(t, ch, what)
	if a.err != nil {
		t.Fatalf("%s: %v", what, a.err)
	}
	return a.v
}

// A promoted follower's consumer group resumes at the replicated cursor (records acked
// on the old leader are not delivered again; the one leased and not acked is, at least
// once), and lists the dead letters the old leader gave up on.
func TestPromotedFollowerResumesGroups(t *testing.T) {
	leader, f := logsEngine(t), logsEngine(t)
	openStream(t, leader, core.RoleLeader, 1)
	openStream(t, f, core.RoleFollower, 1)
	for k := range 4 {
		publishKeyed(t, leader, "p", uint64(k), fmt.Sprintf("r%d", k))
	}
	cfg := groups.GroupConfig{MaxDeliveries: 2, VisibilityTimeoutMillis: 200}
	groupCall(t, "create", func(done func(struct{}, error)) error {
		return leader.CreateGroup(replStream, 0, "g", cfg, func(err error) { done(struct{}{}, err) })
	})
	poll := func(e *core.Engine, n int) []core.GroupRecord {
		return groupCall(t, "poll", func(done func([]core.GroupRecord, error)) error {
			return e.GroupPoll(core.GroupPollRequest{Stream: replStream, Group: "g", Consumer: 1, MaxRecords: n}, done)
		})
	}
	ack := func(e *core.Engine, nack bool, offs ...uint64) {
		var refs []groups.Ref
		for _, o := range offs {
			refs = append(refs, groups.Ref{Offset: o})
		}
		req := core.GroupAckRequest{Stream: replStream, Group: "g", Consumer: 1, Refs: refs}
		groupCall(t, "ack", func(done func(struct{}, error)) error {
			if nack {
				return e.GroupNack(req, func(err error) { done(struct{}{}, err) })
			}
			return e.GroupAck(req, func(err error) { done(struct{}{}, err) })
		})
	}
	if got := poll(leader, 3); len(got) != 3 || got[0].Offset != 0 {
		t.Fatalf("leader's poll: %+v", got)
	}
	ack(leader, false, 0)
	ack(leader, true, 1)
	if got := poll(leader, 1); len(got) != 1 || got[0].Offset != 1 || got[0].Delivery != 2 {
		t.Fatalf("leader's second poll: %+v, want offset 1 again", got)
	}
	ack(leader, true, 1) // its second delivery nacked: dead-lettered
	for _, l := range []proto.ReplicaLog{proto.LogStream, proto.LogGroupCursors, proto.LogDeadLetters} {
		copyLog(t, leader, f, streamLog(l), 1)
	}
	if err := f.SetRole(core.ShardRef{Kind: core.ShardStream, Name: replStream}, core.RoleLeader, 2); err != nil {
		t.Fatal(err)
	}
	dead := groupCall(t, "dead letters", func(done func([]groups.DeadLetter, error)) error {
		return f.DeadLetters(core.DeadLettersRequest{Stream: replStream, Group: "g", Limit: 10},
			func(d []groups.DeadLetter, _ uint64, err error) { done(d, err) })
	})
	if len(dead) != 1 || dead[0].Offset != 1 {
		t.Fatalf("dead letters on the promoted follower: %+v, want offset 1", dead)
	}
	seen := map[uint64]bool{}
	waitCond(t, "offsets 2 and 3 delivered by the promoted follower", func() bool {
		for _, r := range poll(f, 2) {
			if r.Offset < 2 {
				t.Fatalf("the promoted follower delivered offset %d again (acked or dead-lettered)", r.Offset)
			}
			seen[r.Offset] = true
		}
		return seen[2] && seen[3]
	})
}

var replCache = core.CacheName{Tenant: "t1", Namespace: "default", Cache: "repl"}

func cacheLog(log proto.ReplicaLog) core.LogAddr {
	return core.LogAddr{Kind: core.ShardCache, Name: core.StreamName{Tenant: replCache.Tenant,
		Namespace: replCache.Namespace, Stream: replCache.Cache}, Log: log}
}

// cacheValue is CacheGet's answer.
type cacheValue struct {
	value []byte
	found bool
}

func cacheGet(t *testing.T, e *core.Engine, key string) cacheValue {
	t.Helper()
	return groupCall(t, "get "+key, func(done func(cacheValue, error)) error {
		return e.CacheGet(replCache, 0, []byte(key), func(v []byte, found bool, err error) { done(cacheValue{bytes.Clone(v), found}, err) })
	})
}

func counterGet(t *testing.T, e *core.Engine, key string) int64 {
	t.Helper()
	return groupCall(t, "counter "+key, func(done func(int64, error)) error {
		return e.CounterGet(replCache, 0, []byte(key), func(sum int64, _ bool, err error) { done(sum, err) })
	})
}

// A follower holding its leader's cache and counter logs serves, once promoted, the
// leader's values and sums: an overwrite and a delete as the leader applied them, a TTL
// the leader's sweep expired gone (its expire record replicated in log order), a TTL
// still running kept and then expired by the promoted follower itself.
func TestPromotedFollowerServesTheReplicatedCache(t *testing.T) {
	leader, f := logsEngine(t), logsEngine(t)
	spec := core.CacheSpec{Name: replCache, Shards: 1, Durable: true}
	for _, o := range []struct {
		e    *core.Engine
		role core.Role
	}{{leader, core.RoleLeader}, {f, core.RoleFollower}} {
		if err := o.e.OpenShard(core.ShardSpec{Cache: &spec}, 0, o.role, 1); err != nil {
			t.Fatal(err)
		}
	}
	put := func(key, value string, ttl cache.TTL) {
		groupCall(t, "put "+key, func(done func(struct{}, error)) error {
			return leader.CachePut(replCache, 0, []byte(key), []byte(value), ttl, func(err error) { done(struct{}{}, err) })
		})
	}
	put("k1", "v1", cache.NoTTL)
	put("k1", "v1b", cache.NoTTL)
	put("k2", "short", cache.TTLMillis(50))
	put("k3", "long", cache.TTLMillis(3_600_000))
	put("k4", "soon", cache.TTLMillis(2000))
	put("k5", "gone", cache.NoTTL)
	groupCall(t, "delete k5", func(done func(cacheValue, error)) error {
		return leader.CacheDelete(replCache, 0, []byte("k5"), func(v []byte, found bool, err error) { done(cacheValue{v, found}, err) })
	})
	for _, d := range []int64{5, 7, -2} {
		groupCall(t, "counter add", func(done func(int64, error)) error { return leader.CounterAdd(replCache, 0, []byte("c"), d, done) })
	}
	waitCond(t, "the leader's sweep expiring k2", func() bool {
		st, err := leader.ReplicaState(cacheLog(proto.LogCache))
		return err == nil && st.Committed >= 8 // 6 puts, a delete, the expire record
	})
	copyLog(t, leader, f, cacheLog(proto.LogCache), 1)
	copyLog(t, leader, f, cacheLog(proto.LogCounters), 1)
	if err := f.SetRole(core.ShardRef{Kind: core.ShardCache, Name: cacheLog(0).Name}, core.RoleLeader, 2); err != nil {
		t.Fatal(err)
	}
	want := map[string]cacheValue{"k1": {[]byte("v1b"), true}, "k2": {}, "k3": {[]byte("long"), true}, "k4": {[]byte("soon"), true}, "k5": {}}
	for k, w := range want {
		if got := cacheGet(t, f, k); got.found != w.found || !bytes.Equal(got.value, w.value) {
			t.Fatalf("promoted follower: %s = %q (found %v), want %q (found %v)", k, got.value, got.found, w.value, w.found)
		}
	}
	if got := counterGet(t, f, "c"); got != 10 {
		t.Fatalf("promoted follower: counter c = %d, want 10", got)
	}
	waitCond(t, "k4 expired on the promoted follower", func() bool { return !cacheGet(t, f, "k4").found })
}
