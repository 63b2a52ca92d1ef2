package core

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// A closed engine is garbage once the caller drops it, even after a cache
// call it refused: the cache catalog is an Engine field, not an entry in a
// package-level map keyed by the engine (which CreateCache on a closed
// engine used to leave behind).
func TestClosedEngineWithCacheCallsIsCollected(t *testing.T) {
	collected := make(chan struct{})
	func() {
		e, err := NewEngine(Config{Cores: 1, NoPinning: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		spec := CacheSpec{Name: CacheName{Tenant: "t", Namespace: "n", Cache: "c"}, Shards: 1}
		if err := e.CreateCache(spec); !errors.Is(err, ErrClosed) {
			t.Fatalf("CreateCache on a closed engine: %v, want ErrClosed", err)
		}
		runtime.AddCleanup(e, func(ch chan struct{}) { close(ch) }, collected)
	}()
	for i := 0; i < 20; i++ {
		runtime.GC()
		select {
		case <-collected:
			return
		default:
		}
		runtime.Gosched()
	}
	t.Fatal("a closed engine stayed reachable after CreateCache")
}

// Two engines keep separate cache catalogs.
func TestCacheCatalogsArePerEngine(t *testing.T) {
	a, b := newHarness(t, 1, newFakeStore(), nil), newHarness(t, 1, newFakeStore(), nil)
	name := CacheName{Tenant: "t", Namespace: "n", Cache: "c"}
	for i, h := range []*harness{a, b} {
		spec := CacheSpec{Name: name, Shards: 1 + i}
		if err := h.e.CreateCache(spec); err != nil {
			t.Fatal(err)
		}
	}
	if la, lb := a.e.ListCaches(), b.e.ListCaches(); len(la) != 1 || len(lb) != 1 || la[0].Shards != 1 || lb[0].Shards != 2 {
		t.Fatalf("catalogs %+v and %+v, want one cache each with 1 and 2 shards", la, lb)
	}
}
