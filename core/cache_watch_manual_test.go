package core_test

// TestCacheSweepAndWatch runs on felix/core/coretest's manual engine (it was
// an in-package harness test of cache_watch_test.go): the same steps and
// assertions, over the production disk in a temporary directory.

import (
	"context"
	"errors"
	"testing"
	"time"

	"felix/core"
	"felix/core/cache"
	"felix/core/coretest"
)

var watchCache = core.CacheName{Tenant: "t1", Namespace: "default", Cache: "primary"}

// awaitChange steps e until w has a change and returns it.
func awaitChange(t *testing.T, e *coretest.Engine, w *core.CacheWatcher) core.CacheChange {
	t.Helper()
	var got core.CacheChange
	e.StepUntil(func() bool {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ch, err := w.Next(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Next: %v", err)
		}
		got = ch
		return err == nil
	})
	return got
}

func noWatchChange(t *testing.T, w *core.CacheWatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ch, err := w.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("unexpected change %+v, %v", ch, err)
	}
}

// The TTL sweep runs on the core timer; a watcher sees put then expire.
func TestCacheSweepAndWatch(t *testing.T) {
	e := coretest.New(t, core.Config{Cores: 1, DataDir: t.TempDir(), Fsync: core.FsyncOnCommit})
	if err := e.CreateCache(core.CacheSpec{Name: watchCache, Shards: 2, Durable: true}); err != nil {
		t.Fatal(err)
	}
	w, err := e.CacheWatch(core.CacheWatchRequest{Cache: watchCache, Shard: core.AllCacheShards, Key: []byte("cfg/"), Prefix: true})
	if err != nil {
		t.Fatal(err)
	}
	answered := 0
	put := func(key, value string, ttl cache.TTL) {
		if err := e.CachePut(watchCache, routeKey(e.Engine, watchCache, []byte(key)), []byte(key), []byte(value), ttl, func(err error) {
			answered++
			if err != nil {
				t.Errorf("put %q: %v", key, err)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	put("cfg/a", "1", cache.TTLMillis(50))
	put("other", "x", cache.NoTTL)
	if ch := awaitChange(t, e, w); ch.Op != cache.ChangePut || string(ch.Key) != "cfg/a" || string(ch.Value) != "1" {
		t.Fatalf("first change %+v", ch)
	}
	e.StepUntilIdle()
	noWatchChange(t, w)
	e.Advance(200 * time.Millisecond) // past the expiry and the sweep interval
	ch := awaitChange(t, e, w)
	if ch.Op != cache.ChangeExpire || string(ch.Key) != "cfg/a" || ch.Op.WireName() != "expire" {
		t.Fatalf("expected the sweep's expire, got %+v", ch)
	}
	// The puts are answered once their fdatasync completes, which StepUntilIdle does
	// not wait for: step until both answered, or the engine's close at cleanup would
	// fail them (ErrClosed) after the test's own steps.
	e.StepUntil(func() bool { return answered == 2 })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(context.Background()); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// routeKey is key's shard in cache n (Engine.RouteCache), -1 when there is no such cache.
func routeKey(e *core.Engine, n core.CacheName, key []byte) int {
	shard, err := e.RouteCache(n, key)
	if err != nil {
		return -1
	}
	return shard
}
