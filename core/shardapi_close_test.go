package core

// Tests of CloseShard and OpenShard's recovery, generations, validation and
// DeleteStream/DeleteCache of shards not open here (shardapi*.go).

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"felix/core/cache"
	"felix/core/groups"
	"felix/proto"
)

func (h *harness) pollShard(shard int, max int, wait time.Duration) *groupAnswer {
	h.t.Helper()
	a := &groupAnswer{}
	req := GroupPollRequest{Stream: testStream, Shard: shard, Group: "g", Consumer: 1, MaxRecords: max, MaxWait: wait}
	if err := h.e.GroupPoll(req, a.poll); err != nil {
		h.t.Fatalf("GroupPoll: %v", err)
	}
	h.step(3)
	return a
}

func TestCloseShardThenOpenShardRecoversTheStreamShard(t *testing.T) {
	h := newHarness(t, 2, newFakeStore(), nil)
	spec := StreamSpec{Name: testStream, Shards: 2, Durable: true}
	h.create(spec)
	h.publishTo(1, "a")
	h.publishTo(1, "b")
	wantRecords(t, h.pollShard(1, 2, 0), 0, 1)
	ack := &groupAnswer{}
	if err := h.e.GroupAck(GroupAckRequest{Stream: testStream, Shard: 1, Group: "g", Consumer: 1, Refs: []groups.Ref{{Offset: 0}, {Offset: 1}}}, ack.plain); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	parked := h.pollShard(1, 1, time.Minute)
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Shard: 1})
	if err != nil || ack.err != nil || parked.calls != 0 {
		t.Fatalf("subscribe %v, ack %v, poll %+v", err, ack.err, parked)
	}
	if err := h.e.CloseShard(streamShardRef(1)); err != nil {
		t.Fatal(err)
	}
	wantMoved(t, sub)
	if parked.calls != 1 || !errors.Is(parked.err, ErrMoved) {
		t.Fatalf("parked poll after CloseShard: %+v", parked)
	}
	wantNotHere(t, "publish to a closed shard", h.e.Publish(&PublishRequest{Stream: testStream, Shard: 1, Payloads: payloads("x", 1)}, func(PublishResult, error) {}))
	wantNotHere(t, "CloseShard again", h.e.CloseShard(streamShardRef(1)))
	wantNotHere(t, "SetRole of a closed shard", h.e.SetRole(streamShardRef(1), RoleLeader, 1))
	h.publishTo(0, "z") // the other shard serves on
	if got := h.e.Shards(); !reflect.DeepEqual(got, []ShardState{{Ref: streamShardRef(0), Role: RoleLeader}}) {
		t.Fatalf("Shards() after CloseShard = %v", got)
	}

	h.openShard(ShardSpec{Stream: &spec}, 1, RoleLeader, 1)
	sub, err = h.e.Subscribe(SubscribeRequest{Stream: testStream, Shard: 1, Start: StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := collect(t, sub, 0); !reflect.DeepEqual(got, []string{"a-0", "b-0"}) {
		t.Fatalf("records after reopening: %v", got)
	}
	h.publishTo(1, "c")
	wantRecords(t, h.pollShard(1, 5, 0), 2) // 0 and 1 stay acked
	if info, _ := h.e.StreamInfo(testStream); !reflect.DeepEqual(info.NextOffsets, []uint64{1, 3}) {
		t.Fatalf("next offsets after reopening: %v", info.NextOffsets)
	}
}

func TestCloseShardThenOpenShardRecoversTheCacheShard(t *testing.T) {
	h := newHarness(t, 2, newFakeStore(), nil)
	spec := CacheSpec{Name: testCache, Shards: 2, Durable: true}
	if err := h.e.CreateCache(spec); err != nil {
		t.Fatal(err)
	}
	cachePut(t, h, "k", "v", cache.NoTTL)
	h.step(3)
	shard := keyShard(h.e, testCache, []byte("k"))
	w, err := h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Shard: shard, Key: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.e.CloseShard(cacheShardRef(shard)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Next(ctx); !errors.Is(err, ErrMoved) {
		t.Fatalf("watch after CloseShard: %v", err)
	}
	wantNotHere(t, "get on a closed shard", h.e.CacheGet(testCache, shard, []byte("k"), func([]byte, bool, error) {}))
	h.openShard(ShardSpec{Cache: &spec}, shard, RoleLeader, 1)
	if r := cacheGet(t, h, "k"); r.err != nil || !r.found || string(r.value) != "v" {
		t.Fatalf("get after reopening: %+v", r)
	}
}

func TestStaleGenerationIsRefused(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	spec := StreamSpec{Name: testStream, Shards: 1, Durable: true}
	h.openShard(ShardSpec{Stream: &spec}, 0, RoleLeader, 5)
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream})
	if err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"SetRole":      h.e.SetRole(streamShardRef(0), RoleLeader, 4),
		"OpenShard":    h.e.OpenShard(ShardSpec{Stream: &spec}, 0, RoleFollower, 3),
		"CreateStream": h.e.CreateStream(spec),
	} {
		if !errors.Is(err, ErrStaleGeneration) {
			t.Fatalf("%s below the shard's generation: %v", what, err)
		}
	}
	h.openShard(ShardSpec{Stream: &spec}, 0, RoleLeader, 5) // same: no-op
	if _, err := nextNow(t, sub); !errors.Is(err, context.Canceled) {
		t.Fatalf("a refused or no-op call ended the subscription: %v", err)
	}
	if got := h.e.Shards(); !reflect.DeepEqual(got, []ShardState{{Ref: streamShardRef(0), Role: RoleLeader, Generation: 5}}) {
		t.Fatalf("Shards() = %v", got)
	}
	h.openShard(ShardSpec{Stream: &spec}, 0, RoleFollower, 5) // another role: SetRole
	wantMoved(t, sub)
	cspec := CacheSpec{Name: testCache, Shards: 1}
	h.openShard(ShardSpec{Cache: &cspec}, 0, RoleLeader, 2)
	if err := h.e.CreateCache(cspec); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("CreateCache of a cache led at generation 2: %v", err)
	}
}

func TestShardAPIValidation(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	spec := StreamSpec{Name: testStream, Shards: 2, Durable: true}
	cspec := CacheSpec{Name: testCache, Shards: 1}
	other := spec
	other.Shards = 3
	for what, c := range map[string]struct {
		err  error
		want error
	}{
		"no role":           {h.e.OpenShard(ShardSpec{Stream: &spec}, 0, 0, 0), ErrInvalid},
		"no spec":           {h.e.OpenShard(ShardSpec{}, 0, RoleLeader, 0), ErrInvalid},
		"both specs":        {h.e.OpenShard(ShardSpec{Stream: &spec, Cache: &cspec}, 0, RoleLeader, 0), ErrInvalid},
		"shard past":        {h.e.OpenShard(ShardSpec{Stream: &spec}, 2, RoleLeader, 0), ErrInvalid},
		"SetRole unknown":   {h.e.SetRole(streamShardRef(0), RoleLeader, 0), ErrNotFound},
		"SetRole bad kind":  {h.e.SetRole(ShardRef{Name: testStream}, RoleLeader, 0), ErrInvalid},
		"SetRole no role":   {h.e.SetRole(streamShardRef(0), 3, 0), ErrInvalid},
		"CloseShard cache?": {h.e.CloseShard(cacheShardRef(0)), ErrNotFound},
	} {
		if !errors.Is(c.err, c.want) {
			t.Fatalf("%s: %v, want %v", what, c.err, c.want)
		}
	}
	if len(h.e.ListStreams()) != 0 {
		t.Fatal("a refused OpenShard registered the stream")
	}
	h.openShard(ShardSpec{Stream: &spec}, 0, RoleLeader, 0)
	if err := h.e.OpenShard(ShardSpec{Stream: &other}, 1, RoleLeader, 0); !errors.Is(err, ErrExists) {
		t.Fatalf("OpenShard of another spec under the name: %v", err)
	}
	wantNotHere(t, "SetRole of a shard never opened", h.e.SetRole(streamShardRef(1), RoleLeader, 0))
	if RoleLeader.String() != "leader" || RoleFollower.String() != "follower" || Role(0).String() != "Role(0)" {
		t.Fatal("Role.String")
	}
}

func TestDeleteRemovesTheLogsOfShardsNotOpenHere(t *testing.T) {
	h := newHarness(t, 2, newFakeStore(), nil)
	spec := StreamSpec{Name: testStream, Shards: 2, Durable: true}
	h.create(spec)
	h.publishTo(1, "a")
	cspec := CacheSpec{Name: testCache, Shards: 1, Durable: true}
	if err := h.e.CreateCache(cspec); err != nil {
		t.Fatal(err)
	}
	cachePut(t, h, "k", "v", cache.NoTTL)
	h.step(3)
	for _, ref := range []ShardRef{streamShardRef(1), cacheShardRef(0)} {
		if err := h.e.CloseShard(ref); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.e.DeleteStream(testStream); err != nil {
		t.Fatal(err)
	}
	if err := h.e.DeleteCache(testCache); err != nil {
		t.Fatal(err)
	}
	if len(h.e.Shards()) != 0 {
		t.Fatalf("Shards() after delete: %v", h.e.Shards())
	}
	h.create(spec)
	if err := h.e.CreateCache(cspec); err != nil {
		t.Fatal(err)
	}
	if info, _ := h.e.StreamInfo(testStream); !reflect.DeepEqual(info.NextOffsets, []uint64{0, 0}) {
		t.Fatalf("the closed shard's records survived DeleteStream: %v", info.NextOffsets)
	}
	if r := cacheGet(t, h, "k"); r.found {
		t.Fatalf("the closed cache shard's value survived DeleteCache: %+v", r)
	}
}

func TestFollowerGroupStateWaitsForItsLeader(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	created := &groupAnswer{}
	if err := h.e.CreateGroup(testStream, 0, "g", groups.GroupConfig{VisibilityTimeoutMillis: 1000, MaxDeliveries: 1}, created.plain); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	h.publishN("a", 2)
	wantRecords(t, h.groupPoll("g", 1, 1, 0), 0) // leased once: dead-lettered when the lease expires
	dead := h.store.logs[fakeLogKey(proto.LogDeadLetters, testStream, 0)]
	before := dead.NextOffset()
	h.setRole(streamShardRef(0), RoleFollower, 1)
	h.clock.Advance(5 * time.Second)
	h.step(5)
	if got := dead.NextOffset(); got != before {
		t.Fatalf("a follower's group timer dead-lettered: dead-letter log at %d, was %d", got, before)
	}
	h.setRole(streamShardRef(0), RoleLeader, 2)
	h.clock.Advance(time.Millisecond)
	h.step(5)
	if got := dead.NextOffset(); got == before {
		t.Fatal("the leader did not dead-letter the expired lease")
	}
}

func TestFollowerCacheDoesNotExpireValues(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	createCache(t, h, 1, true)
	r := cachePut(t, h, "k", "v", cache.TTLMillis(1000))
	h.step(3)
	if r.calls != 1 || r.err != nil {
		t.Fatalf("put: %+v", r)
	}
	log := h.store.logs[fakeLogKey(proto.LogCache, testCache.asStream(), 0)]
	before := log.NextOffset()
	h.setRole(cacheShardRef(0), RoleFollower, 1)
	for range 5 {
		h.clock.Advance(time.Second)
		h.step(2)
	}
	if got := log.NextOffset(); got != before {
		t.Fatalf("a follower's TTL sweep wrote to the cache log: %d, was %d", got, before)
	}
	h.setRole(cacheShardRef(0), RoleLeader, 2)
	h.clock.Advance(time.Second)
	h.step(3)
	if got := log.NextOffset(); got == before {
		t.Fatal("the leader's TTL sweep did not expire the value")
	}
}
