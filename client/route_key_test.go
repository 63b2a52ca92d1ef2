package client

import (
	"math/rand/v2"
	"testing"

	"felix/core"
	"felix/internal/testseed"
)

// The SDK's routeKey is the broker's core.RouteKey, for both routings, on random keys and
// shard counts (a mismatch would send a Direct publisher's records to the wrong owner).
func TestRouteKeyMatchesCore(t *testing.T) {
	seed := testseed.Seed(t, 19)
	rng := rand.New(rand.NewPCG(seed, seed))
	for range 20000 {
		key := make([]byte, rng.IntN(40))
		for i := range key {
			key[i] = byte(rng.UintN(256))
		}
		shards := 1 + rng.IntN(300)
		for _, r := range []core.Routing{core.RoutingModulo, core.RoutingJumpHash} {
			if got, want := routeKey(r == core.RoutingJumpHash, key, shards), core.RouteKey(r, key, shards); got != want {
				t.Fatalf("seed %d: key %x, %d shards, %v: SDK %d, core %d", seed, key, shards, r, got, want)
			}
		}
	}
	rt := RouteTable{Shards: make([]ShardRoute, 5), Routing: RoutingJumpHash}
	if s, ok := rt.ShardOf([]byte("k")); !ok || int(s) != core.RouteKey(core.RoutingJumpHash, []byte("k"), 5) {
		t.Fatalf("ShardOf: %d %v", s, ok)
	}
	if _, ok := (RouteTable{Shards: rt.Shards}).ShardOf([]byte("k")); ok {
		t.Fatal("a table without routing (an older broker) hashed a key")
	}
}
