package core

// Tests of the per-shard engine API (shardapi*.go): a subset of shards open
// here, ErrNotHere on the others and on followers (at the engine and on the
// core), ErrMoved ending subscriptions, watches and parked polls on SetRole
// and CloseShard, recovery after CloseShard + OpenShard, stale generations,
// Shards. All on the manual harness (fake disks, fake clock).

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"felix/core/cache"
	"felix/core/groups"
)

func streamShardRef(i int) ShardRef { return ShardRef{Kind: ShardStream, Name: testStream, Shard: i} }

func cacheShardRef(i int) ShardRef {
	return ShardRef{Kind: ShardCache, Name: testCache.asStream(), Shard: i}
}

func (h *harness) openShard(spec ShardSpec, shard int, role Role, generation uint64) {
	h.t.Helper()
	if err := h.e.OpenShard(spec, shard, role, generation); err != nil {
		h.t.Fatalf("OpenShard(%d, %v, %d): %v", shard, role, generation, err)
	}
}

func (h *harness) setRole(ref ShardRef, role Role, generation uint64) {
	h.t.Helper()
	if err := h.e.SetRole(ref, role, generation); err != nil {
		h.t.Fatalf("SetRole(%v, %v, %d): %v", ref, role, generation, err)
	}
}

func wantNotHere(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrNotHere) || errors.Is(err, ErrNotFound) {
		t.Fatalf("%s: %v, want ErrNotHere", what, err)
	}
}

// keyOn returns a key of the test cache that is on shard (on = true) or on
// another shard (on = false).
func keyOn(t *testing.T, e *Engine, shard int, on bool) []byte {
	t.Helper()
	for i := range 1000 {
		k := []byte(fmt.Sprintf("key-%d", i))
		if (keyShard(e, testCache, k) == shard) == on {
			return k
		}
	}
	t.Fatalf("no key found (shard %d, on %v)", shard, on)
	return nil
}

func TestShardsNotOpenHereAnswerNotHere(t *testing.T) {
	h := newHarness(t, 2, newFakeStore(), nil)
	spec := StreamSpec{Name: testStream, Shards: 4, Durable: true}
	h.openShard(ShardSpec{Stream: &spec}, 0, RoleLeader, 0)
	h.openShard(ShardSpec{Stream: &spec}, 2, RoleLeader, 0)
	h.publishTo(0, "a")
	noop := func(PublishResult, error) {}
	wantNotHere(t, "publish to a shard not open", h.e.Publish(&PublishRequest{Stream: testStream, Shard: 1, Payloads: payloads("x", 1)}, noop))
	if err := h.e.Publish(&PublishRequest{Stream: testStream, Shard: 4, Payloads: payloads("x", 1)}, noop); !errors.Is(err, ErrNotFound) {
		t.Fatalf("publish to shard 4 of 4: %v", err)
	}
	if _, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Shard: 3}); err != nil {
		wantNotHere(t, "subscribe", err)
	} else {
		t.Fatal("subscribed to a shard not open here")
	}
	if _, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Shard: 2}); err != nil {
		t.Fatalf("subscribe to an open shard: %v", err)
	}
	wantNotHere(t, "group poll", h.e.GroupPoll(GroupPollRequest{Stream: testStream, Shard: 1, Group: "g", Consumer: 1, MaxRecords: 1}, func([]GroupRecord, error) {}))
	wantNotHere(t, "create group", h.e.CreateGroup(testStream, 3, "g", groups.GroupConfig{}, func(error) {}))
	poll := &groupAnswer{}
	if err := h.e.GroupPoll(GroupPollRequest{Stream: testStream, Shard: 0, Group: "g", Consumer: 1, MaxRecords: 5}, poll.poll); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	wantRecords(t, poll, 0)
	info, err := h.e.StreamInfo(testStream)
	if err != nil || !reflect.DeepEqual(info.NextOffsets, []uint64{1, 0, 0, 0}) {
		t.Fatalf("StreamInfo with two shards open: %+v, %v", info, err)
	}
	if got := h.e.ListStreams(); len(got) != 1 || got[0] != spec {
		t.Fatalf("ListStreams: %v", got)
	}
	want := []ShardState{{Ref: streamShardRef(0), Role: RoleLeader}, {Ref: streamShardRef(2), Role: RoleLeader}}
	if got := h.e.Shards(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Shards() = %v, want %v", got, want)
	}
}

func (h *harness) publishTo(shard int, prefix string) {
	h.t.Helper()
	a := h.publish(&PublishRequest{Stream: testStream, Shard: shard, Payloads: payloads(prefix, 1)})
	h.step(3)
	if a.calls != 1 || a.err != nil {
		h.t.Fatalf("publish to shard %d: %d calls, %v", shard, a.calls, a.err)
	}
}

func TestCacheShardsNotOpenHereAnswerNotHere(t *testing.T) {
	h := newHarness(t, 2, newFakeStore(), nil)
	spec := CacheSpec{Name: testCache, Shards: 4, Durable: true}
	h.openShard(ShardSpec{Cache: &spec}, 1, RoleLeader, 0)
	key := keyOn(t, h.e, 1, false)
	other := keyShard(h.e, testCache, key)
	wantNotHere(t, "put", h.e.CachePut(testCache, other, key, []byte("v"), cache.NoTTL, func(error) {}))
	wantNotHere(t, "get", h.e.CacheGet(testCache, other, key, func([]byte, bool, error) {}))
	wantNotHere(t, "counter add", h.e.CounterAdd(testCache, other, key, 1, func(int64, error) {}))
	_, err := h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Shard: other, Key: key})
	wantNotHere(t, "watch", err)
	_, err = h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Shard: AllCacheShards, Prefix: true})
	wantNotHere(t, "prefix watch of every shard", err)
	w, err := h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Shard: 1, Prefix: true})
	if err != nil {
		t.Fatalf("prefix watch of the open shard: %v", err)
	}
	_ = w.Close()
	r := &cacheReply{}
	if err := h.e.CachePut(testCache, 1, keyOn(t, h.e, 1, true), []byte("v"), cache.NoTTL, r.put); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	if r.calls != 1 || r.err != nil {
		t.Fatalf("put on the open shard: %+v", r)
	}
	if got := h.e.ListCaches(); len(got) != 1 || got[0] != spec {
		t.Fatalf("ListCaches: %v", got)
	}
	if got := h.e.Shards(); !reflect.DeepEqual(got, []ShardState{{Ref: cacheShardRef(1), Role: RoleLeader}}) {
		t.Fatalf("Shards() = %v", got)
	}
}

func TestFollowerRefusesClientOperations(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	spec := StreamSpec{Name: testStream, Shards: 1, Durable: true}
	cspec := CacheSpec{Name: testCache, Shards: 1, Durable: true}
	h.openShard(ShardSpec{Stream: &spec}, 0, RoleFollower, 1)
	h.openShard(ShardSpec{Cache: &cspec}, 0, RoleFollower, 1)
	wantNotHere(t, "publish", h.e.Publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1)}, func(PublishResult, error) {}))
	_, err := h.e.Subscribe(SubscribeRequest{Stream: testStream})
	wantNotHere(t, "subscribe", err)
	wantNotHere(t, "group ack", h.e.GroupAck(GroupAckRequest{Stream: testStream, Group: "g", Consumer: 1}, func(error) {}))
	wantNotHere(t, "cache get", h.e.CacheGet(testCache, 0, []byte("k"), func([]byte, bool, error) {}))
	_, err = h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Shard: 0, Key: []byte("k")})
	wantNotHere(t, "cache watch", err)

	// The core refuses too: operations that passed the engine's snapshot
	// before the shard became a follower.
	s, cs := h.e.lookup(testStream).shards[0], h.e.lookupCache(testCache).shards[0]
	pub, put, poll := &ack{}, &cacheReply{}, &groupAnswer{}
	posts := []message{
		{kind: msgPublish, shard: s, req: &PublishRequest{Stream: testStream, Payloads: payloads("x", 1)}, done: pub.done},
		{kind: msgOp, op: &cachePutOp{shard: cs, key: []byte("k"), value: []byte("v"), ttl: cache.NoTTL, done: put.put}},
		{kind: msgOp, op: &groupPollOp{shard: s, req: GroupPollRequest{Group: "g", Consumer: 1, MaxRecords: 1}, done: poll.poll}},
	}
	for _, m := range posts {
		if err := h.e.post(s.c, m); err != nil {
			t.Fatal(err)
		}
	}
	h.step(3)
	wantNotHere(t, "publish on the core", pub.err)
	wantNotHere(t, "cache put on the core", put.err)
	wantNotHere(t, "group poll on the core", poll.err)
	if info, _ := h.e.StreamInfo(testStream); info.NextOffsets[0] != 0 {
		t.Fatalf("a follower appended a client publish: next offset %d", info.NextOffsets[0])
	}
	want := []ShardState{{Ref: streamShardRef(0), Role: RoleFollower, Generation: 1}, {Ref: cacheShardRef(0), Role: RoleFollower, Generation: 1}}
	if got := h.e.Shards(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Shards() = %v, want %v", got, want)
	}
	h.setRole(streamShardRef(0), RoleLeader, 2)
	h.setRole(cacheShardRef(0), RoleLeader, 2)
	h.publishTo(0, "a")
	if r := cacheGet(t, h, "k"); r.err != nil {
		t.Fatalf("get after promotion: %v", r.err)
	}
}

// wantMoved reads sub until it ends and checks it ended with ErrMoved after
// delivering the records listed.
func wantMoved(t *testing.T, sub *Subscription, want ...string) {
	t.Helper()
	var got []string
	for {
		d, err := nextNow(t, sub)
		if err != nil {
			if !errors.Is(err, ErrMoved) || !reflect.DeepEqual(got, want) {
				t.Fatalf("subscription: %v after %v, want ErrMoved after %v", err, got, want)
			}
			return
		}
		got = append(got, records(t, d)...)
	}
}

func TestSetRoleEndsSubscriptionsWatchesAndParkedPolls(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	createCache(t, h, 1, true)
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream})
	if err != nil {
		t.Fatal(err)
	}
	w, err := h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Key: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	h.publishN("a", 1)
	wantRecords(t, h.groupPoll("g", 1, 10, 0), 0)
	parked := h.groupPoll("g", 1, 10, time.Minute)
	cachePut(t, h, "k", "v", cache.NoTTL)
	h.step(3)
	if parked.calls != 0 {
		t.Fatalf("the poll did not park: %+v", parked)
	}
	h.setRole(streamShardRef(0), RoleFollower, 1)
	h.setRole(cacheShardRef(0), RoleFollower, 1)
	if parked.calls != 1 || !errors.Is(parked.err, ErrMoved) {
		t.Fatalf("parked poll after SetRole: %d calls, %v", parked.calls, parked.err)
	}
	wantMoved(t, sub, "a-0") // what was queued stays deliverable
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ch, err := w.Next(ctx); err != nil || string(ch.Key) != "k" {
		t.Fatalf("queued change: %+v, %v", ch, err)
	}
	if _, err := w.Next(ctx); !errors.Is(err, ErrMoved) {
		t.Fatalf("watch after SetRole: %v", err)
	}

	// Back to leader at generation 2; a generation change alone moves too;
	// the same role and generation again is a no-op.
	h.setRole(streamShardRef(0), RoleLeader, 2)
	sub, err = h.e.Subscribe(SubscribeRequest{Stream: testStream})
	if err != nil {
		t.Fatal(err)
	}
	h.setRole(streamShardRef(0), RoleLeader, 2)
	if _, err := nextNow(t, sub); !errors.Is(err, context.Canceled) {
		t.Fatalf("SetRole to the same role and generation ended the subscription: %v", err)
	}
	h.setRole(streamShardRef(0), RoleLeader, 3)
	wantMoved(t, sub)
}

func TestDemotionFailsHeldPublishes(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1})
	slow, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, QueueCapacity: 1, Policy: Block})
	if err != nil {
		t.Fatal(err)
	}
	a3 := h.publishThirdHeld()
	h.setRole(streamShardRef(0), RoleFollower, 1)
	h.step(2)
	if a3.calls != 1 {
		t.Fatalf("held publish after demotion: %d calls", a3.calls)
	}
	wantNotHere(t, "held publish after demotion", a3.err)
	wantMoved(t, slow, "a-0")
	if info, _ := h.e.StreamInfo(testStream); info.NextOffsets[0] != 2 {
		t.Fatalf("next offset %d after demotion, want 2 (the held publish not applied)", info.NextOffsets[0])
	}
}
