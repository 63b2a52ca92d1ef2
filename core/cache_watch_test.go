package core

// Tests of cache watches (cache_watch.go): the TTL sweep seen by a prefix watch,
// resuming from an offset, and a slow watcher's overflow.

import (
	"context"
	"errors"
	"testing"

	"felix/core/cache"
)

func nextChange(t *testing.T, w *CacheWatcher) CacheChange {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ch, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ch
}

func noChange(t *testing.T, w *CacheWatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ch, err := w.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("unexpected change %+v, %v", ch, err)
	}
}

// TestCacheSweepAndWatch is in cache_watch_manual_test.go, on felix/core/coretest.

// A watch resumed from an offset gets the history from the log, then live
// changes, with no gap and no duplicate.
func TestCacheWatchResume(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	createCache(t, h, 1, true)
	cachePut(t, h, "k", "1", cache.NoTTL)
	cachePut(t, h, "x", "-", cache.NoTTL)
	cachePut(t, h, "k", "2", cache.NoTTL)
	h.step(3)
	from := uint64(1)
	w, err := h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Shard: keyShard(h.e, testCache, []byte("k")), Key: []byte("k"), From: &from})
	if err != nil {
		t.Fatal(err)
	}
	del := &cacheReply{}
	h.e.CacheDelete(testCache, keyShard(h.e, testCache, []byte("k")), []byte("k"), del.get)
	h.step(3)
	got := []CacheChange{nextChange(t, w), nextChange(t, w)}
	if got[0].Offset != 2 || string(got[0].Value) != "2" || got[1].Offset != 3 || got[1].Op != cache.ChangeDelete {
		t.Fatalf("changes %+v", got)
	}
	noChange(t, w)
	future := uint64(99)
	_, err = h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Shard: keyShard(h.e, testCache, []byte("k")), Key: []byte("k"), From: &future})
	var ce *CursorError
	if !errors.As(err, &ce) || ce.Reason != CursorInFuture || ce.Available != 4 {
		t.Fatalf("in_future: %v", err)
	}
}

// A slow watcher ends with ErrSlowSubscriber instead of holding the core.
func TestCacheWatchOverflow(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	createCache(t, h, 1, false)
	w, err := h.e.CacheWatch(CacheWatchRequest{Cache: testCache, Shard: keyShard(h.e, testCache, []byte("k")), Key: []byte("k"), QueueCapacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		cachePut(t, h, "k", "v", cache.NoTTL)
	}
	h.step(3)
	nextChange(t, w)
	nextChange(t, w)
	if _, err := w.Next(context.Background()); !errors.Is(err, ErrSlowSubscriber) {
		t.Fatalf("overflow: %v", err)
	}
}
