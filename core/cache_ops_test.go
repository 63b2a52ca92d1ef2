package core

// Tests of the cache operations (cache_ops.go, cache_catalog.go): answers after
// commit, errors, the catalog calls, metrics; the helpers the other cache tests
// share (testCache, cacheReply, createCache, cachePut, cacheGet); and the
// engine-level cache benchmark.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"felix/core/cache"
)

var testCache = CacheName{Tenant: "t1", Namespace: "default", Cache: "primary"}

// cacheReply records the answer of one cache operation.
type cacheReply struct {
	calls int
	value []byte
	found bool
	sum   int64
	err   error
}

func (r *cacheReply) put(err error) { r.calls++; r.err = err }
func (r *cacheReply) get(v []byte, found bool, err error) {
	r.calls++
	r.value, r.found, r.err = v, found, err
}
func (r *cacheReply) counter(sum int64, err error) { r.calls++; r.sum, r.err = sum, err }
func (r *cacheReply) counterGot(sum int64, found bool, err error) {
	r.calls++
	r.sum, r.found, r.err = sum, found, err
}

func createCache(t *testing.T, h *harness, shards int, durable bool) {
	t.Helper()
	if err := h.e.CreateCache(CacheSpec{Name: testCache, Shards: shards, Durable: durable}); err != nil {
		t.Fatal(err)
	}
}

func cachePut(t *testing.T, h *harness, key, value string, ttl cache.TTL) *cacheReply {
	t.Helper()
	r := &cacheReply{}
	if err := h.e.CachePut(testCache, keyShard(h.e, testCache, []byte(key)), []byte(key), []byte(value), ttl, r.put); err != nil {
		t.Fatal(err)
	}
	return r
}

func cacheGet(t *testing.T, h *harness, key string) *cacheReply {
	t.Helper()
	r := &cacheReply{}
	if err := h.e.CacheGet(testCache, keyShard(h.e, testCache, []byte(key)), []byte(key), r.get); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	if r.calls != 1 || r.err != nil {
		t.Fatalf("get %q: %d calls, %v", key, r.calls, r.err)
	}
	return r
}

func TestCacheOpsAnswerAfterCommit(t *testing.T) {
	h := newHarness(t, 2, newFakeStore(), nil)
	createCache(t, h, 4, true)
	h.hold(true)
	put := cachePut(t, h, "k", "v", cache.NoTTL)
	empty := cachePut(t, h, "e", "", cache.NoTTL)
	h.step(3)
	if put.calls != 0 || empty.calls != 0 {
		t.Fatal("a put was answered before its record was committed")
	}
	h.hold(false)
	h.step(3)
	if put.calls != 1 || put.err != nil || empty.calls != 1 || empty.err != nil {
		t.Fatalf("put answers: %+v %+v", put, empty)
	}
	if r := cacheGet(t, h, "k"); !r.found || string(r.value) != "v" {
		t.Fatalf("get k = %q %v", r.value, r.found)
	}
	if r := cacheGet(t, h, "e"); !r.found || r.value == nil || len(r.value) != 0 {
		t.Fatalf("empty value read as %v %v", r.value, r.found)
	}
	if r := cacheGet(t, h, "missing"); r.found || r.value != nil {
		t.Fatalf("miss read as %v %v", r.value, r.found)
	}
	del := &cacheReply{}
	if err := h.e.CacheDelete(testCache, keyShard(h.e, testCache, []byte("e")), []byte("e"), del.get); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	if !del.found || del.value == nil || len(del.value) != 0 {
		t.Fatalf("delete of the empty value: %v %v %v", del.value, del.found, del.err)
	}
}

// TestCounterGetPresence: a counter never added to is absent (found=false), distinct from a
// counter added back to zero (found, sum 0); issue 25.
func TestCounterGetPresence(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	createCache(t, h, 2, true)
	get := func(key string) *cacheReply {
		r := &cacheReply{}
		if err := h.e.CounterGet(testCache, keyShard(h.e, testCache, []byte(key)), []byte(key), r.counterGot); err != nil {
			t.Fatal(err)
		}
		h.step(3)
		if r.calls != 1 || r.err != nil {
			t.Fatalf("counter get %q: %+v", key, r)
		}
		return r
	}
	if r := get("never"); r.found || r.sum != 0 {
		t.Fatalf("unwritten counter: %+v", r)
	}
	add := &cacheReply{}
	h.e.CounterAdd(testCache, keyShard(h.e, testCache, []byte("z")), []byte("z"), 2, add.counter)
	h.e.CounterAdd(testCache, keyShard(h.e, testCache, []byte("z")), []byte("z"), -2, add.counter)
	h.step(3)
	if add.calls != 2 || add.err != nil || add.sum != 0 {
		t.Fatalf("adds: %+v", add)
	}
	if r := get("z"); !r.found || r.sum != 0 {
		t.Fatalf("counter back at zero: %+v", r)
	}
}

func TestCacheOpsErrors(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	if err := h.e.CachePut(testCache, keyShard(h.e, testCache, []byte("k")), []byte("k"), nil, cache.NoTTL, func(error) {}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown cache: %v", err)
	}
	createCache(t, h, 1, false)
	zero := cachePut(t, h, "k", "v", cache.TTLMillis(0))
	h.step(2)
	if !errors.Is(zero.err, ErrInvalid) || !errors.Is(zero.err, cache.ErrZeroTTL) {
		t.Fatalf("zero ttl: %v", zero.err)
	}
	add := &cacheReply{}
	h.e.CounterAdd(testCache, keyShard(h.e, testCache, []byte("c")), []byte("c"), 1<<62, add.counter)
	h.e.CounterAdd(testCache, keyShard(h.e, testCache, []byte("c")), []byte("c"), 1<<62, add.counter)
	h.step(2)
	if add.calls != 2 || !errors.Is(add.err, cache.ErrCounterOverflow) {
		t.Fatalf("overflow: %+v", add)
	}
	if err := h.e.CreateCache(CacheSpec{Name: testCache, Shards: 2}); !errors.Is(err, ErrExists) {
		t.Fatalf("re-create with another spec: %v", err)
	}
	if got := h.e.ListCaches(); len(got) != 1 || got[0].Name != testCache {
		t.Fatalf("ListCaches = %+v", got)
	}
	if err := h.e.DeleteCache(testCache); err != nil {
		t.Fatal(err)
	}
	if err := h.e.DeleteCache(testCache); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// Evictions and expirations are counted in the cache's metrics.
func TestCacheMetricsCountEvictions(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	if err := h.e.CreateCache(CacheSpec{Name: testCache, Shards: 1, Durable: true, Limits: cache.Config{MaxEntries: 2}}); err != nil {
		t.Fatal(err)
	}
	cachePut(t, h, "a", "1", cache.NoTTL)
	cachePut(t, h, "b", "2", cache.TTLMillis(10))
	cachePut(t, h, "c", "3", cache.NoTTL) // evicts b (soonest expiry)
	cachePut(t, h, "d", "4", cache.NoTTL) // evicts a (least recently written)
	h.step(3)
	var buf bytes.Buffer
	h.e.Metrics().WritePrometheus(&buf)
	out := buf.String()
	for _, want := range []string{
		`felix_cache_evictions_total{tenant="t1",namespace="default",cache="primary"} 2`,
		`felix_cache_entries{tenant="t1",namespace="default",cache="primary"} 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s:\n%s", want, out)
		}
	}
	if err := h.e.DeleteCache(testCache); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	h.e.Metrics().WritePrometheus(&buf)
	if strings.Contains(buf.String(), "felix_cache_") {
		t.Error("a deleted cache's metrics are still registered")
	}
}

// BenchmarkEngineCacheGet measures gets through the engine (inbox hop to the
// owning core, apply, answer callback) on an in-memory cache of 4096 keys,
// with up to 256 gets in flight.
func BenchmarkEngineCacheGet(b *testing.B) {
	e, err := NewEngine(Config{Cores: 1, NoPinning: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.CreateCache(CacheSpec{Name: testCache, Shards: 1}); err != nil {
		b.Fatal(err)
	}
	keys := make([][]byte, 4096)
	value := make([]byte, 256)
	done := make(chan error, 256)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("user:%08d", i))
		e.CachePut(testCache, keyShard(e, testCache, keys[i]), keys[i], value, cache.NoTTL, func(err error) { done <- err })
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	window := make(chan struct{}, 256)
	answered := func([]byte, bool, error) { <-window }
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		window <- struct{}{}
		for e.CacheGet(testCache, keyShard(e, testCache, keys[i&4095]), keys[i&4095], answered) != nil { // inbox full: retry
			runtime.Gosched()
		}
	}
	for range cap(window) {
		window <- struct{}{}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
