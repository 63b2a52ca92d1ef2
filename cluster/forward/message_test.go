package forward

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"felix/core"
	"felix/core/cache"
	"felix/internal/testseed"
	"felix/proto"
)

// TestForwardNamesTheRoutedShard is the property of seed "Authorization across a
// forward" ("The shard a forward names must be the shard the route was resolved for"): for
// random keys and shard counts, under modulo and jump-hash routing (core.RouteKey) and for
// cache keys (cache.ShardOf), the forward built from the route names exactly the routed
// shard on the wire, and so does every re-addressed attempt (AsKind to each fallback kind
// and another generation).
func TestForwardNamesTheRoutedShard(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t, 19), 1))
	cred := []byte("token")
	for i := 0; i < 2000; i++ {
		key := make([]byte, rng.IntN(33))
		for j := range key {
			key[j] = byte(rng.IntN(256))
		}
		shards := 1 + rng.IntN(64)
		routing := core.RoutingModulo
		if rng.IntN(2) == 0 {
			routing = core.RoutingJumpHash
		}
		r := Route{Tenant: "t1", Namespace: "ns", Name: "s", Shards: shards, Generation: rng.Uint64N(9),
			Shard: core.RouteKey(routing, key, shards)}
		pub, err := IdempotentPublishMessage(r, [][]byte{key}, cred, []byte("p"), 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []proto.Kind{proto.KindIdempotentForwardPublish, proto.KindAuthorizedForwardPublish,
			proto.KindForwardPublish} {
			checkShardOnWire(t, pub, k, uint32(r.Shard))
		}
		ckey := []byte(fmt.Sprintf("k-%x-é", key)) // cache keys are UTF-8
		r.Shard = int(cache.ShardOf(ckey, uint32(shards)))
		co, err := CacheMessage(r, CacheRequest{Op: proto.CacheOpGet, Key: ckey}, cred)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []proto.Kind{proto.KindAuthorizedForwardCacheOp, proto.KindForwardCacheOp} {
			checkShardOnWire(t, co, k, uint32(r.Shard))
		}
	}
}

// checkShardOnWire re-addresses m as kind at generation 42, encodes and decodes it, and
// checks the decoded shard is want and the generation is 42.
func checkShardOnWire(t *testing.T, m proto.InternalMessage, kind proto.Kind, want uint32) {
	t.Helper()
	sent, err := AsKind(m, kind, 42)
	if err != nil {
		t.Fatalf("AsKind(%v, %v): %v", m.Kind(), kind, err)
	}
	got, err := frameOf(sent, kind)
	if err != nil {
		t.Fatalf("%v does not round-trip: %v", kind, err)
	}
	req, ok := RequestOf(got)
	if !ok || req.Kind != kind || req.Shard.Shard != want || req.Generation != 42 {
		t.Fatalf("%v on the wire names shard %d gen %d (kind %v), routed shard %d", kind, req.Shard.Shard,
			req.Generation, req.Kind, want)
	}
}

func TestAsKindLeavesTheMessageAndRefusesUpgrades(t *testing.T) {
	r := Route{Tenant: "t1", Namespace: "ns", Name: "s", Shard: 2, Shards: 4, Generation: 3}
	pub, err := PublishMessage(r, [][]byte{[]byte("x")}, []byte("tok"))
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := AsKind(pub, proto.KindForwardPublish, 9)
	if err != nil || legacy.Kind() != proto.KindForwardPublish {
		t.Fatalf("AsKind to legacy: %v, %v", legacy, err)
	}
	if pub.Generation != 3 {
		t.Fatalf("AsKind changed the original's generation to %d", pub.Generation)
	}
	for _, bad := range []struct {
		m    proto.InternalMessage
		kind proto.Kind
	}{
		{legacy, proto.KindAuthorizedForwardPublish}, // no credential to add
		{pub, proto.KindIdempotentForwardPublish},    // no producer id to add
		{pub, proto.KindForwardCacheOp},              // across publish and cache
		{pub, proto.KindHello},
		{&proto.Hello{}, proto.KindHello},
	} {
		if _, err := AsKind(bad.m, bad.kind, 1); !errors.Is(err, ErrKind) {
			t.Errorf("AsKind(%v -> %v) = %v, want ErrKind", bad.m.Kind(), bad.kind, err)
		}
	}
}

func TestBuildersRefuseBadRoutes(t *testing.T) {
	for _, r := range []Route{{Shard: 4, Shards: 4}, {Shard: -1, Shards: 4}, {Shard: 0, Shards: 0},
		{Shard: 0, Shards: math.MaxUint32 + 1}} {
		if _, err := PublishMessage(r, nil, []byte("t")); !errors.Is(err, ErrShardOutOfRange) {
			t.Errorf("PublishMessage(%+v) = %v, want ErrShardOutOfRange", r, err)
		}
		if _, err := CacheMessage(r, CacheRequest{Op: proto.CacheOpGet}, []byte("t")); !errors.Is(err, ErrShardOutOfRange) {
			t.Errorf("CacheMessage(%+v) = %v, want ErrShardOutOfRange", r, err)
		}
	}
	ok := Route{Shard: 0, Shards: 1}
	if _, err := PublishMessage(ok, nil, nil); !errors.Is(err, ErrNoCredential) {
		t.Errorf("PublishMessage without credential = %v", err)
	}
	if _, err := IdempotentPublishMessage(ok, nil, nil, []byte("p"), 1); !errors.Is(err, ErrNoCredential) {
		t.Errorf("IdempotentPublishMessage without credential = %v", err)
	}
	if _, err := CacheMessage(ok, CacheRequest{Op: proto.CacheOpGet}, nil); !errors.Is(err, ErrNoCredential) {
		t.Errorf("CacheMessage without credential = %v", err)
	}
	if _, err := CacheMessage(ok, CacheRequest{Op: 0}, []byte("t")); !errors.Is(err, ErrKind) {
		t.Errorf("CacheMessage op 0 = %v, want ErrKind", err)
	}
}
