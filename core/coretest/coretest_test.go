package coretest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"felix/core"
	"felix/core/cache"
	"felix/core/coretest"
)

func TestClockMovesOnlyOnAdvance(t *testing.T) {
	c := coretest.NewClock(coretest.Epoch)
	if c.MonoNanos() != 0 || !c.Now().Equal(coretest.Epoch) {
		t.Fatalf("start: %d, %v", c.MonoNanos(), c.Now())
	}
	c.Advance(time.Second)
	c.Advance(-time.Hour)
	if c.MonoNanos() != int64(time.Second) || c.WallMicros() != coretest.Epoch.Add(time.Second).UnixMicro() {
		t.Fatalf("after advancing 1s: %d, %v", c.MonoNanos(), c.Now())
	}
}

// An in-memory cache entry with a TTL: nothing happens until the test steps,
// and it expires only once the fake clock passes its TTL.
func TestManualEngineStepsAndExpires(t *testing.T) {
	e := coretest.New(t, core.Config{Cores: 2})
	name := core.CacheName{Tenant: "t1", Namespace: "default", Cache: "c"}
	if err := e.CreateCache(core.CacheSpec{Name: name, Shards: 2}); err != nil {
		t.Fatal(err)
	}
	done := 0
	if err := e.CachePut(name, routeKey(e.Engine, name, []byte("k")), []byte("k"), []byte("v"), cache.TTLMillis(1000), func(err error) {
		if err != nil {
			t.Errorf("put: %v", err)
		}
		done++
	}); err != nil {
		t.Fatal(err)
	}
	if done != 0 {
		t.Fatal("the put ran before any step")
	}
	if e.StepUntilIdle() < 2 || done != 1 {
		t.Fatalf("put answered %d times after stepping until idle", done)
	}
	get := func() (found bool) {
		calls := 0
		if err := e.CacheGet(name, routeKey(e.Engine, name, []byte("k")), []byte("k"), func(_ []byte, ok bool, err error) { calls, found = calls+1, ok && err == nil }); err != nil {
			t.Fatal(err)
		}
		e.StepUntil(func() bool { return calls == 1 })
		return found
	}
	if !get() {
		t.Fatal("entry missing before its TTL")
	}
	e.Advance(999 * time.Millisecond)
	if !get() {
		t.Fatal("entry missing 1 ms before its TTL")
	}
	e.Advance(2 * time.Second)
	if get() {
		t.Fatal("entry still there past its TTL")
	}
}

func TestStepRefusesARunningEngine(t *testing.T) {
	e, err := core.NewEngine(core.Config{Cores: 1, NoPinning: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if _, err := e.Step(); !errors.Is(err, core.ErrNotManual) {
		t.Fatalf("Step on a running engine: %v", err)
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
