package broker

// The five companion logs replicated end to end (replicate_logs.go; issue 18): three
// in-process brokers as in replicate_test.go, a leader's producer-key, group-cursor,
// dead-letter, cache and counter logs shipped to its followers, and a follower promoted
// through the table serving them: an idempotent retry answered as a duplicate, a group
// resuming at its replicated cursor with its dead letters, a cache's values, TTLs and
// counter sums.

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"felix/core"
	"felix/core/cache"
	"felix/core/groups"
	"felix/proto"
	"felix/seglog"
)

// movedTo leads every stream and cache shard from replNodes[leader] at gen, the two
// other nodes its replica set.
func movedTo(leader int, gen uint64) func(CatalogView) Ownership {
	var set []string
	for i, n := range replNodes {
		if i != leader {
			set = append(set, n)
		}
	}
	a := Assignment{Leader: replNodes[leader], ReplicaSet: set, Generation: gen}
	return func(v CatalogView) Ownership {
		out := SingleNode(replNodes[leader], v) // every stream and cache shard
		for ref := range out {
			out[ref] = a
		}
		return out
	}
}

// moveTo installs movedTo(leader, gen) on the running brokers and waits until each holds
// ref in its role at gen.
func (c *replCluster) moveTo(leader int, gen uint64, ref core.ShardRef, running ...int) {
	c.t.Helper()
	peers := map[string]string{}
	for j, n := range replNodes {
		peers[n] = c.binds[j]
	}
	for _, i := range running {
		c.brokers[i].srv.SetPlacement(movedTo(leader, gen), peers)
	}
	for _, i := range running {
		want := core.RoleFollower
		if i == leader {
			want = core.RoleLeader
		}
		waitUntil(c.t, 20*time.Second, fmt.Sprintf("%s holding %v as %v at generation %d", replNodes[i], ref, want, gen), func() bool {
			for _, st := range c.brokers[i].srv.engine.Shards() {
				if st.Ref == ref && st.Role == want && st.Generation == gen {
					return true
				}
			}
			return false
		})
	}
}

// sameLog waits until broker fol holds, durably, every record broker lead committed in
// addr's log, byte for byte.
func (c *replCluster) sameLog(lead, fol int, addr core.LogAddr) {
	c.t.Helper()
	var diff string
	deadline := time.Now().Add(30 * time.Second)
	for diff = c.addrDiff(lead, fol, addr); diff != "" && time.Now().Before(deadline); diff = c.addrDiff(lead, fol, addr) {
		time.Sleep(time.Millisecond)
	}
	if diff != "" {
		c.t.Fatalf("%s's %v not identical to %s's after 30 s: %s", replNodes[fol], addr, replNodes[lead], diff)
	}
}

// addrDiff describes how fol's log of addr differs from lead's ("" when identical and
// durable as far as lead committed).
func (c *replCluster) addrDiff(lead, fol int, addr core.LogAddr) string {
	st0, err0 := c.brokers[lead].srv.engine.ReplicaState(addr)
	st, err := c.brokers[fol].srv.engine.ReplicaState(addr)
	if err0 != nil || err != nil {
		return fmt.Sprintf("state: %v / %v", err0, err)
	}
	if st.Durable < st0.Committed {
		return fmt.Sprintf("durable at %d, the leader committed %d", st.Durable, st0.Committed)
	}
	want, got := c.addrLog(lead, addr), c.addrLog(fol, addr)
	if len(want) != len(got) {
		return fmt.Sprintf("%d records, the leader %d", len(got), len(want))
	}
	for k := range want {
		if !bytes.Equal(want[k], got[k]) {
			return fmt.Sprintf("record %d differs", k)
		}
	}
	return ""
}

// addrLog is every committed record of broker i's log of addr, replicated encoding.
func (c *replCluster) addrLog(i int, addr core.LogAddr) [][]byte {
	var out [][]byte
	for next := uint64(0); ; {
		n := 0
		err := c.brokers[i].srv.engine.ReadReplica(addr, next, 1<<20, func(r *seglog.Record) bool {
			out = append(out, core.AppendReplicaPayload(nil, r))
			next, n = r.Offset+1, n+1
			return true
		})
		if err != nil || n == 0 {
			return out
		}
	}
}

// engineCall runs one engine call on broker i and waits (bounded) for its answer.
func engineCall[T any](t *testing.T, what string, call func(done func(T, error)) error) T {
	t.Helper()
	type answer struct {
		v   T
		err error
	}
	ch := make(chan answer, 1)
	if err := call(func(v T, err error) { ch <- answer{v, err} }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("%s: %v", what, a.err)
		}
		return a.v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer within 30 s", what)
	}
	var zero T
	return zero
}

// publishKeyed publishes payload to broker i idempotently as (producer, seq).
func (c *replCluster) publishKeyed(i int, producer string, seq uint64, payload string) core.PublishResult {
	c.t.Helper()
	return engineCall(c.t, fmt.Sprintf("publish %s/%d to %s", producer, seq, replNodes[i]), func(done func(core.PublishResult, error)) error {
		return c.brokers[i].srv.engine.Publish(&core.PublishRequest{Stream: replOrders, Payloads: [][]byte{[]byte(payload)},
			Ack: core.AckOnCommit, ProducerID: producer, Sequence: seq}, done)
	})
}

// Step 1: with n3 stopped an idempotent publish is acknowledged only once n2 holds its
// records and its key record (the producer log's quorum mark); n2 promoted at once
// answers the producer's retries as duplicates with the original offsets, and its log
// holds every record exactly once.
func TestReplicationPromotedFollowerDeduplicates(t *testing.T) {
	c := newReplCluster(t, nil)
	if err := c.brokers[2].stop(); err != nil {
		t.Fatal(err)
	}
	var first []core.PublishResult
	for k := range 3 {
		first = append(first, c.publishKeyed(0, "p", uint64(k), fmt.Sprintf("k%d", k)))
	}
	ref := core.ShardRef{Kind: core.ShardStream, Name: replOrders}
	c.moveTo(1, 2, ref, 0, 1)
	for k, want := range first {
		got := c.publishKeyed(1, "p", uint64(k), fmt.Sprintf("k%d", k))
		if !got.Duplicate || got.FirstOffset != want.FirstOffset || got.LastOffset != want.LastOffset {
			t.Fatalf("retry of p/%d on the promoted n2: %+v, want a duplicate of %+v", k, got, want)
		}
	}
	fresh := c.publishKeyed(1, "p", 3, "k3")
	if fresh.Duplicate || fresh.FirstOffset != 3 {
		t.Fatalf("a new key on n2: %+v, want stored at 3", fresh)
	}
	var data []string
	for _, p := range c.addrLog(1, replOrdersAddr()) {
		if r, err := core.DecodeReplicaPayload(p); err == nil && r.Kind == seglog.KindData {
			data = append(data, string(r.Payload))
		}
	}
	if fmt.Sprint(data) != "[k0 k1 k2 k3]" {
		t.Fatalf("n2's records after the retries: %v, want each once", data)
	}
	c.sameLog(1, 0, core.LogAddr{Kind: core.ShardStream, Name: replOrders, Log: proto.LogProducers})
}

// groupOps are one consumer's group calls on broker i's engine.
type groupOps struct {
	c *replCluster
	i int
}

func (g groupOps) poll(n int) []core.GroupRecord {
	return engineCall(g.c.t, "poll on "+replNodes[g.i], func(done func([]core.GroupRecord, error)) error {
		return g.c.brokers[g.i].srv.engine.GroupPoll(core.GroupPollRequest{Stream: replOrders, Group: "g", Consumer: 1, MaxRecords: n}, done)
	})
}

func (g groupOps) ack(nack bool, off uint64) {
	req := core.GroupAckRequest{Stream: replOrders, Group: "g", Consumer: 1, Refs: []groups.Ref{{Offset: off}}}
	engineCall(g.c.t, "ack on "+replNodes[g.i], func(done func(struct{}, error)) error {
		e, fn := g.c.brokers[g.i].srv.engine, func(err error) { done(struct{}{}, err) }
		if nack {
			return e.GroupNack(req, fn)
		}
		return e.GroupAck(req, fn)
	})
}

// Step 2: a group's cursor and dead-letter logs reach the followers; n2 promoted resumes
// the group at the replicated cursor (the acked record is never delivered again, the
// leased ones are, at least once) and lists the dead letter n1 gave up on.
func TestReplicationPromotedFollowerResumesGroups(t *testing.T) {
	c := newReplCluster(t, nil)
	for k := range 4 {
		c.acked(c.publish(fmt.Sprintf("g%d", k)), "publish")
	}
	cfg := groups.GroupConfig{MaxDeliveries: 2, VisibilityTimeoutMillis: 200}
	engineCall(t, "create group", func(done func(struct{}, error)) error {
		return c.brokers[0].srv.engine.CreateGroup(replOrders, 0, "g", cfg, func(err error) { done(struct{}{}, err) })
	})
	lead := groupOps{c, 0}
	if got := lead.poll(3); len(got) != 3 {
		t.Fatalf("n1's poll: %+v", got)
	}
	lead.ack(false, 0)
	lead.ack(true, 1)
	if got := lead.poll(1); len(got) != 1 || got[0].Offset != 1 {
		t.Fatalf("n1's second poll: %+v, want offset 1 again", got)
	}
	lead.ack(true, 1) // its second delivery nacked: dead-lettered
	for _, l := range []proto.ReplicaLog{proto.LogGroupCursors, proto.LogDeadLetters} {
		c.sameLog(0, 1, core.LogAddr{Kind: core.ShardStream, Name: replOrders, Log: l})
	}
	c.moveTo(1, 2, core.ShardRef{Kind: core.ShardStream, Name: replOrders}, 0, 1, 2)
	dead := engineCall(t, "dead letters on n2", func(done func([]groups.DeadLetter, error)) error {
		return c.brokers[1].srv.engine.DeadLetters(core.DeadLettersRequest{Stream: replOrders, Group: "g", Limit: 10},
			func(d []groups.DeadLetter, _ uint64, err error) { done(d, err) })
	})
	if len(dead) != 1 || dead[0].Offset != 1 {
		t.Fatalf("dead letters on the promoted n2: %+v, want offset 1", dead)
	}
	seen := map[uint64]bool{}
	waitUntil(t, 20*time.Second, "offsets 2 and 3 delivered by n2", func() bool {
		for _, r := range (groupOps{c, 1}).poll(2) {
			if r.Offset < 2 {
				t.Fatalf("n2 delivered offset %d again (acked or dead-lettered on n1)", r.Offset)
			}
			seen[r.Offset] = true
		}
		return seen[2] && seen[3]
	})
}

var replKV = core.CacheName{Tenant: "default", Namespace: "default", Cache: "kv"}

func replKVAddr(l proto.ReplicaLog) core.LogAddr {
	return core.LogAddr{Kind: core.ShardCache, Name: core.StreamName{Tenant: "default", Namespace: "default", Stream: "kv"}, Log: l}
}

// Step 3: a durable cache with a replica set ships its cache and counter logs; the
// followers' logs equal the leader's (an overwrite, a delete, a TTL the leader's sweep
// expired, counter adds); n2 promoted serves the same values and sums, and expires a TTL
// still running on its own clock.
func TestReplicationCacheFollowsAndPromotes(t *testing.T) {
	c := newReplCluster(t, nil)
	durable := true
	for i, b := range c.brokers {
		if _, err := b.srv.catalog.CreateCache(Cache{TenantID: "default", Namespace: "default", Cache: "kv", Shards: 1, Durable: &durable},
			b.srv.ApplyCreateCache); err != nil {
			t.Fatalf("%s: create the cache: %v", replNodes[i], err)
		}
	}
	ref := replKVAddr(proto.LogCache).Ref()
	c.moveTo(0, 1, ref, 0, 1, 2)
	e := c.brokers[0].srv.engine
	put := func(key, value string, ttl cache.TTL) {
		engineCall(t, "put "+key, func(done func(struct{}, error)) error {
			return e.CachePut(replKV, 0, []byte(key), []byte(value), ttl, func(err error) { done(struct{}{}, err) })
		})
	}
	put("k1", "v1", cache.NoTTL)
	put("k1", "v1b", cache.NoTTL)
	put("k2", "short", cache.TTLMillis(50))
	put("k3", "soon", cache.TTLMillis(3000))
	put("k4", "gone", cache.NoTTL)
	engineCall(t, "delete k4", func(done func(bool, error)) error {
		return e.CacheDelete(replKV, 0, []byte("k4"), func(_ []byte, found bool, err error) { done(found, err) })
	})
	for _, d := range []int64{5, 7, -2} {
		engineCall(t, "counter add", func(done func(int64, error)) error { return e.CounterAdd(replKV, 0, []byte("c"), d, done) })
	}
	waitUntil(t, 20*time.Second, "n1's sweep expiring k2", func() bool {
		st, err := e.ReplicaState(replKVAddr(proto.LogCache))
		return err == nil && st.Committed >= 7 // 5 puts, a delete, the expire record
	})
	for _, i := range []int{1, 2} {
		c.sameLog(0, i, replKVAddr(proto.LogCache))
		c.sameLog(0, i, replKVAddr(proto.LogCounters))
	}
	c.moveTo(1, 2, ref, 0, 1, 2)
	f := c.brokers[1].srv.engine
	get := func(key string) string {
		return engineCall(t, "get "+key, func(done func(string, error)) error {
			return f.CacheGet(replKV, 0, []byte(key), func(v []byte, found bool, err error) { done(fmt.Sprintf("%q/%v", v, found), err) })
		})
	}
	for k, want := range map[string]string{"k1": `"v1b"/true`, "k2": `""/false`, "k3": `"soon"/true`, "k4": `""/false`} {
		if got := get(k); got != want {
			t.Fatalf("promoted n2: %s = %s, want %s", k, got, want)
		}
	}
	if sum := engineCall(t, "counter get", func(done func(int64, error)) error {
		return f.CounterGet(replKV, 0, []byte("c"), func(n int64, _ bool, err error) { done(n, err) })
	}); sum != 10 {
		t.Fatalf("promoted n2: counter c = %d, want 10", sum)
	}
	waitUntil(t, 20*time.Second, "k3 expired on n2", func() bool { return get("k3") == `""/false` })
	c.sameLog(1, 0, replKVAddr(proto.LogCache)) // n2's expire record shipped to n1
}
