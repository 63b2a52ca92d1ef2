package core

// Tests of RouteCache and of the cache operations' resolved shard
// (cache_ops.go, cache_watch.go): the routing matches the hashing the engine
// did inside CachePut & co before the shard became an argument, and a shard
// that does not hold the key, or does not exist, is refused.

import (
	"errors"
	"fmt"
	"hash/fnv"
	"testing"

	"felix/core/cache"
)

// keyShard is key's shard in cache n (Engine.RouteCache), or -1 when there
// is no such cache (the operation then answers ErrNotFound as before).
func keyShard(e *Engine, n CacheName, key []byte) int {
	shard, err := e.RouteCache(n, key)
	if err != nil {
		return -1
	}
	return shard
}

// refCacheShard is the routing the cache operations did inside the engine
// before RouteCache, from the standard library's FNV-1a and jump consistent
// hashing as published (refJump).
func refCacheShard(key []byte, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write(key)
	return refJump(h.Sum64(), shards)
}

func TestRouteCacheMatchesPreviousRouting(t *testing.T) {
	h := newHarness(t, 3, newFakeStore(), nil)
	keys := [][]byte{nil, {}, []byte("k"), []byte("hits"), []byte("cfg/a"), []byte("\x00\xff"), []byte("a much longer key than the others")}
	for i := range 200 {
		keys = append(keys, []byte(fmt.Sprintf("key-%d", i)))
	}
	for _, shards := range []int{1, 2, 3, 7, 16, 4096} {
		name := CacheName{Tenant: "t", Namespace: "n", Cache: fmt.Sprintf("c%d", shards)}
		if err := h.e.CreateCache(CacheSpec{Name: name, Shards: shards}); err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, key := range keys {
			got, err := h.e.RouteCache(name, key)
			if err != nil {
				t.Fatal(err)
			}
			if want := refCacheShard(key, shards); got != want || got != int(cache.ShardOf(key, uint32(shards))) {
				t.Fatalf("%d shards: RouteCache(%q) = %d, want %d", shards, key, got, want)
			}
			seen[got] = true
		}
		if shards > 1 && shards <= 16 && len(seen) != shards {
			t.Fatalf("%d shards: %d keys reach only %d shards", shards, len(keys), len(seen))
		}
	}
	if _, err := h.e.RouteCache(CacheName{Tenant: "t", Namespace: "n", Cache: "none"}, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("RouteCache of an unknown cache: %v", err)
	}
}

func TestCacheOpsRefuseAnotherShard(t *testing.T) {
	h := newHarness(t, 2, newFakeStore(), nil)
	createCache(t, h, 4, false)
	key := []byte("k")
	right := keyShard(h.e, testCache, key)
	wrong := (right + 1) % 4
	noop := func(error) {}
	if err := h.e.CachePut(testCache, wrong, key, []byte("v"), cache.NoTTL, noop); !errors.Is(err, ErrInvalid) {
		t.Fatalf("CachePut on another shard than the key's: %v", err)
	}
	for _, shard := range []int{-1, 4} {
		if err := h.e.CachePut(testCache, shard, key, []byte("v"), cache.NoTTL, noop); !errors.Is(err, ErrNotFound) {
			t.Fatalf("CachePut on shard %d of 4: %v", shard, err)
		}
	}
	if _, err := h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Shard: wrong, Key: key}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("key watch on another shard: %v", err)
	}
	if _, err := h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Shard: 9, Key: key, Prefix: true}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("prefix watch on shard 9 of 4: %v", err)
	}
	r := cachePut(t, h, "k", "v", cache.NoTTL)
	h.step(3)
	if r.calls != 1 || r.err != nil {
		t.Fatalf("put on the key's shard: %+v", r)
	}
	if g := cacheGet(t, h, "k"); g.calls != 1 || string(g.value) != "v" {
		t.Fatalf("get on the key's shard: %+v", g)
	}
}
