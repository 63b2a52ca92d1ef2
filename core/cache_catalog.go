package core

// Caches on the cores (docs/cache.md; spec/client-protocol.md §6, §8.1, §8.2,
// §8.4). A cache has Shards shards; a key goes to shard cache.ShardOf(key,
// Shards), and each shard is owned by one core (coreOf). The state machine of
// a shard is core/cache; package core keeps one cacheShard per shard in the
// core's cacheShards slot and drives it: applies each operation, appends the
// records to the shard's cache log and counter log (seglog "caches/" root,
// "counters" companion), answers once those records are committed, feeds
// watchers in log order, sweeps expired values on a core timer, and compacts
// a log once it holds far more records than live entries.
//
// The cache code of package core is in four files:
//
//	cache_catalog.go  names, specs, metrics, the engine's catalog: CreateCache, DeleteCache, ListCaches
//	cache_ops.go      the operations as inbox messages: CachePut, CacheGet, CacheDelete, CounterAdd, CounterGet
//	cache_shard.go    one shard on its core: logs, replay, commit order, failure, close, TTL sweep, compaction
//	cache_watch.go    watches: CacheWatch and CacheWatcher (live changes, history of a resumed watch)
//
// This file holds the tunables, CacheName, CacheSpec, the per-cache metrics
// and the engine's catalog of caches (Engine.caches) with the calls that
// create, delete, list and look up caches.

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"felix/core/cache"

	"github.com/VictoriaMetrics/metrics"
)

// Tunables of the cache shards on a core.
const (
	cacheSweepInterval   = 100 * time.Millisecond // TTL sweep period
	cacheSweepPerTick    = 1024                   // values expired per shard per sweep
	cacheCompactFactor   = 4                      // compact when written > factor × live
	cacheReadBytes       = 1 << 20                // replay / history read size
	cacheWatchQueue      = 1024                   // default live changes buffered per watch
	cacheMaxShards       = 4096
	cacheWatchHistoryMax = 1 << 30
)

// cacheCompactMin is how many cache-log records a shard writes before a
// compaction is considered (a variable so tests can lower it).
var cacheCompactMin uint64 = 1 << 16

// CacheName names a cache: tenant, namespace, cache. A cache and a stream
// may share a name (their logs live under different roots).
type CacheName struct {
	Tenant    string
	Namespace string
	Cache     string
}

// String returns "tenant/namespace/cache".
func (n CacheName) String() string { return n.Tenant + "/" + n.Namespace + "/" + n.Cache }

func (n CacheName) asStream() StreamName {
	return StreamName{Tenant: n.Tenant, Namespace: n.Namespace, Stream: n.Cache}
}

// CacheSpec describes a cache for CreateCache.
type CacheSpec struct {
	Name CacheName
	// Shards is the number of shards, 1..4096.
	Shards int
	// Durable caches keep a cache log and a counter log per shard under
	// Config.DataDir and replay them on CreateCache; others live in memory.
	Durable bool
	// Limits bounds each shard (cache.Config; zero fields take its defaults).
	Limits cache.Config
}

func (s CacheSpec) validate() error {
	for _, part := range [...]string{s.Name.Tenant, s.Name.Namespace, s.Name.Cache} {
		if part == "" || !utf8.ValidString(part) {
			return fmt.Errorf("%w: cache name %q: every part must be non-empty UTF-8", ErrInvalid, s.Name)
		}
	}
	if s.Shards < 1 || s.Shards > cacheMaxShards {
		return fmt.Errorf("%w: cache %s: %d shards", ErrInvalid, s.Name, s.Shards)
	}
	return nil
}

// cacheMeta is a cache's catalog entry. Immutable once published: opening,
// closing or moving a shard publishes a new entry (withShard) sharing the
// metrics. shards[i] is owned by its core, nil when shard i is not open on
// this engine; places[i] is the engine's snapshot of its role there.
type cacheMeta struct {
	spec    CacheSpec
	shards  []*cacheShard
	places  []shardPlace
	metrics *cacheMetrics
}

// withShard returns a copy of m with shard i set to cs at place p (cs nil:
// not open here).
func (m *cacheMeta) withShard(i int, cs *cacheShard, p shardPlace) *cacheMeta {
	next := &cacheMeta{spec: m.spec, shards: append([]*cacheShard(nil), m.shards...),
		places: append([]shardPlace(nil), m.places...), metrics: m.metrics}
	next.shards[i], next.places[i] = cs, p
	return next
}

// cacheMetrics are a cache's metrics (VictoriaMetrics, in Config.Metrics),
// summed over its shards:
//
//	felix_cache_entries{tenant,namespace,cache}           gauge: stored values
//	felix_cache_bytes{tenant,namespace,cache}             gauge: accounted bytes (docs/cache.md)
//	felix_cache_counters{tenant,namespace,cache}          gauge: counters
//	felix_cache_evictions_total{tenant,namespace,cache}   counter: values evicted to stay within capacity
//	felix_cache_expirations_total{tenant,namespace,cache} counter: values expired (lazily or by the sweep)
type cacheMetrics struct {
	set                    *metrics.Set
	names                  []string
	entries, bytes, counts atomic.Int64
	evictions, expirations *metrics.Counter
}

func newCacheMetrics(set *metrics.Set, n CacheName) *cacheMetrics {
	m := &cacheMetrics{set: set}
	label := fmt.Sprintf(`{tenant=%q,namespace=%q,cache=%q}`, n.Tenant, n.Namespace, n.Cache)
	name := func(base string) string {
		m.names = append(m.names, base+label)
		return base + label
	}
	set.GetOrCreateGauge(name("felix_cache_entries"), func() float64 { return float64(m.entries.Load()) })
	set.GetOrCreateGauge(name("felix_cache_bytes"), func() float64 { return float64(m.bytes.Load()) })
	set.GetOrCreateGauge(name("felix_cache_counters"), func() float64 { return float64(m.counts.Load()) })
	m.evictions = set.GetOrCreateCounter(name("felix_cache_evictions_total"))
	m.expirations = set.GetOrCreateCounter(name("felix_cache_expirations_total"))
	return m
}

func (m *cacheMetrics) unregister() {
	for _, n := range m.names {
		m.set.UnregisterMetric(n)
	}
}

// update adds the change between two stats of one shard.
func (m *cacheMetrics) update(old, cur cache.Stats) {
	m.entries.Add(int64(cur.Entries - old.Entries))
	m.bytes.Add(cur.Bytes - old.Bytes)
	m.counts.Add(int64(cur.Counters - old.Counters))
	m.evictions.Add(int(cur.Evictions - old.Evictions))
	m.expirations.Add(int(cur.Expirations - old.Expirations))
}

// cacheCatalog is an engine's set of caches (the Engine.caches field):
// copy-on-write, lock-free reads; writers hold Engine.catalogMu, then mu.
type cacheCatalog struct {
	mu sync.Mutex
	m  atomic.Pointer[map[CacheName]*cacheMeta] // nil = no caches
}

// load returns the current catalog map (nil when empty); do not modify it.
func (cat *cacheCatalog) load() map[CacheName]*cacheMeta {
	if p := cat.m.Load(); p != nil {
		return *p
	}
	return nil
}

// lookupCache returns the cache's catalog entry or nil.
func (e *Engine) lookupCache(name CacheName) *cacheMeta {
	return e.caches.load()[name]
}

// CreateCache registers spec's cache and opens every shard of it on its
// core as leader at generation 0 (OpenShard for each shard); a durable shard
// replays its logs (so calling it after a restart brings the values, TTLs
// and counter sums back). Same name and spec again: opens the shards not
// open here, a no-op when every shard leads at generation 0. Errors:
// ErrInvalid, ErrExists, ErrNoDurableStorage, ErrStorageFailed-wrapped open
// or replay errors, ErrStaleGeneration-wrapped, ErrClosed. A new cache that
// fails to open is not registered.
func (e *Engine) CreateCache(spec CacheSpec) error {
	if err := spec.validate(); err != nil {
		return err
	}
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	return e.openCacheShards(spec, allShards(spec.Shards), RoleLeader, 0)
}

// storeCache publishes a change of the cache catalog (catalogMu held).
func (e *Engine) storeCache(change func(map[CacheName]*cacheMeta)) {
	e.caches.mu.Lock()
	e.caches.store(change)
	e.caches.mu.Unlock()
}

func (cat *cacheCatalog) store(change func(map[CacheName]*cacheMeta)) {
	old := cat.load()
	next := make(map[CacheName]*cacheMeta, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	change(next)
	cat.m.Store(&next)
}

// DeleteCache removes a cache: its open shards close (pending answers and
// watches end with ErrNotFound) and a durable cache's logs are deleted,
// those of the shards not open here too. Errors: ErrNotFound, ErrClosed.
func (e *Engine) DeleteCache(name CacheName) error {
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	meta := e.lookupCache(name)
	if meta == nil {
		return ErrNotFound
	}
	e.storeCache(func(m map[CacheName]*cacheMeta) { delete(m, name) })
	err := errors.Join(e.closeCacheShards(meta, true), e.removeClosedCacheLogs(meta))
	meta.metrics.unregister()
	return err
}

func (e *Engine) closeCacheShards(meta *cacheMeta, remove bool) error {
	var errs []error
	for i, cs := range meta.shards {
		if cs == nil {
			continue
		}
		if err := e.closeCacheShard(cs, ErrNotFound, remove); err != nil {
			errs = append(errs, fmt.Errorf("cache shard %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// ListCaches returns the specs of every cache, sorted by name.
func (e *Engine) ListCaches() []CacheSpec {
	cat := e.caches.load()
	if len(cat) == 0 {
		return nil
	}
	out := make([]CacheSpec, 0, len(cat))
	for _, m := range cat {
		out = append(out, m.spec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name.String() < out[j].Name.String() })
	return out
}

// cacheShardAt returns shard of the cache, checking that key belongs to
// it. Errors: ErrNotFound (no such cache, shard out of range), ErrInvalid,
// ErrNotHere (not open here, or a follower).
func (e *Engine) cacheShardAt(name CacheName, shard int, key []byte) (*cacheShard, error) {
	meta := e.lookupCache(name)
	if meta == nil {
		return nil, fmt.Errorf("%w: cache %s", ErrNotFound, name)
	}
	n := len(meta.shards)
	if shard < 0 || shard >= n {
		return nil, fmt.Errorf("%w: cache %s has no shard %d", ErrNotFound, name, shard)
	}
	if want := int(cache.ShardOf(key, uint32(n))); want != shard {
		return nil, fmt.Errorf("%w: cache %s: the key is on shard %d, not %d", ErrInvalid, name, want, shard)
	}
	return meta.leaderShard(shard)
}

// leaderShard returns shard i when it is open here as leader. Errors:
// ErrNotHere.
func (m *cacheMeta) leaderShard(i int) (*cacheShard, error) {
	if p := m.places[i]; p.role != RoleLeader {
		return nil, notHere(ShardRef{Kind: ShardCache, Name: m.spec.Name.asStream(), Shard: i}, p.role)
	}
	return m.shards[i], nil
}
