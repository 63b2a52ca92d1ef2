package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"felix/core/cache"
	"felix/seglog"

	"github.com/VictoriaMetrics/metrics"
)

// Caches on the cores (docs/cache.md; spec/client-protocol.md §6, §8.1, §8.2,
// §8.4). A cache has Shards shards; a key goes to shard cache.ShardOf(key,
// Shards), and each shard is owned by one core (coreOf). The state machine of
// a shard is core/cache; this file keeps one cacheShard per shard in the
// core's cacheShards slot and drives it: applies each operation, appends the
// records to the shard's cache log and counter log (seglog "caches/" root,
// "counters" companion), answers once those records are committed, feeds
// watchers in log order, sweeps expired values on a core timer, and compacts
// a log once it holds far more records than live entries.

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

// cacheMeta is a cache's catalog entry; shards[i] is owned by its core.
type cacheMeta struct {
	spec    CacheSpec
	shards  []*cacheShard
	metrics *cacheMetrics
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
// copy-on-write, lock-free reads; mu serializes writers.
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

// CreateCache opens every shard of spec's cache on its core; a durable shard
// replays its logs (so calling it after a restart brings the values, TTLs
// and counter sums back). Same name and spec again: no-op. Errors:
// ErrInvalid, ErrExists, ErrNoDurableStorage, ErrStorageFailed-wrapped open
// or replay errors, ErrClosed.
func (e *Engine) CreateCache(spec CacheSpec) error {
	if err := spec.validate(); err != nil {
		return err
	}
	if spec.Durable && e.cfg.DataDir == "" {
		return ErrNoDurableStorage
	}
	cat := &e.caches
	cat.mu.Lock()
	defer cat.mu.Unlock()
	if old := e.lookupCache(spec.Name); old != nil {
		if old.spec == spec {
			return nil
		}
		return fmt.Errorf("%w: cache %s", ErrExists, spec.Name)
	}
	meta := &cacheMeta{spec: spec, shards: make([]*cacheShard, spec.Shards), metrics: newCacheMetrics(e.cfg.Metrics, spec.Name)}
	for i := range meta.shards {
		c := e.cores[coreOf(spec.Name.asStream(), i, len(e.cores))]
		err := e.runOn(c, func(c *core) error {
			cs, err := c.openCacheShard(meta, i)
			meta.shards[i] = cs
			return err
		})
		if err != nil {
			e.closeCacheShards(meta, false)
			meta.metrics.unregister()
			return err
		}
	}
	cat.store(func(m map[CacheName]*cacheMeta) { m[spec.Name] = meta })
	return nil
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

// DeleteCache removes a cache: its shards close (pending answers and
// watches end with ErrNotFound) and a durable cache's logs are deleted.
// Errors: ErrNotFound, ErrClosed.
func (e *Engine) DeleteCache(name CacheName) error {
	cat := &e.caches
	cat.mu.Lock()
	defer cat.mu.Unlock()
	meta := e.lookupCache(name)
	if meta == nil {
		return ErrNotFound
	}
	cat.store(func(m map[CacheName]*cacheMeta) { delete(m, name) })
	err := e.closeCacheShards(meta, true)
	meta.metrics.unregister()
	return err
}

func (e *Engine) closeCacheShards(meta *cacheMeta, remove bool) error {
	var errs []error
	for i, cs := range meta.shards {
		if cs == nil {
			continue
		}
		closed := make(chan error, 1)
		err := e.runOn(cs.c, func(c *core) error {
			cs.closeWhenIdle(ErrNotFound, remove, closed)
			return nil
		})
		if err == nil {
			err = e.await(cs.c, closed)
		}
		if err != nil {
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

// cacheShardFor returns the shard owning key. Errors: ErrNotFound.
func (e *Engine) cacheShardFor(name CacheName, key []byte) (*cacheShard, error) {
	meta := e.lookupCache(name)
	if meta == nil {
		return nil, fmt.Errorf("%w: cache %s", ErrNotFound, name)
	}
	return meta.shards[cache.ShardOf(key, uint32(len(meta.shards)))], nil
}

// cacheShardOp is a cache operation as an inbox message: apply runs it on
// the owning core, answer releases its result once its records committed.
type cacheShardOp interface {
	operation
	cacheAnswerer
}

// cacheAnswerer is an operation waiting for its records' commit.
type cacheAnswerer interface{ answer(err error) }

// postCache posts op to the core owning key's shard. Errors: ErrNotFound,
// ErrOverloaded, ErrClosed.
func (e *Engine) postCache(name CacheName, key []byte, bind func(*cacheShard) cacheShardOp) error {
	cs, err := e.cacheShardFor(name, key)
	if err != nil {
		return err
	}
	return e.post(cs.c, message{kind: msgOp, op: bind(cs)})
}

// CachePut stores value under key with ttl (cache.NoTTL = no expiry) in the
// cache (spec/client-protocol.md §6 cache_put). key and value are read on
// the core: the caller keeps them unchanged until done runs. done runs on
// the core after the put record is committed and must not block. A lost
// answer is cache.ErrIndeterminate for the caller, never a silent re-send.
// Errors (here or in done): ErrNotFound, ErrOverloaded, ErrClosed,
// ErrStorageFailed-wrapped, and the cache errors (cache.ErrZeroTTL,
// cache.ErrNegativeTTL, cache.ErrKeyTooLarge, ... wrapped in ErrInvalid).
func (e *Engine) CachePut(name CacheName, key, value []byte, ttl cache.TTL, done func(error)) error {
	return e.postCache(name, key, func(cs *cacheShard) cacheShardOp {
		return &cachePutOp{shard: cs, key: key, value: value, ttl: ttl, done: done}
	})
}

// CacheGet reads key (spec/client-protocol.md §6 cache_get): done gets a
// copy of the value and found (an empty value is found; found = false is the
// wire's null), after every earlier write of the shard is committed. Safe
// to re-send. Errors as CachePut.
func (e *Engine) CacheGet(name CacheName, key []byte, done func(value []byte, found bool, err error)) error {
	return e.postCache(name, key, func(cs *cacheShard) cacheShardOp {
		return &cacheReadOp{shard: cs, key: key, done: done}
	})
}

// CacheDelete removes key and hands done a copy of the value it removed
// (spec/client-protocol.md §8.1; found = false is null). Safe to re-send.
// Errors as CachePut.
func (e *Engine) CacheDelete(name CacheName, key []byte, done func(value []byte, found bool, err error)) error {
	return e.postCache(name, key, func(cs *cacheShard) cacheShardOp {
		return &cacheReadOp{shard: cs, key: key, delete: true, done: done}
	})
}

// CounterAdd adds delta to the counter key and hands done the new sum
// (spec/client-protocol.md §8.2). Not safe to re-send (cache.SafeToResend).
// Errors as CachePut, plus cache.ErrCounterOverflow and cache.ErrCapacity.
func (e *Engine) CounterAdd(name CacheName, key []byte, delta int64, done func(sum int64, err error)) error {
	return e.postCache(name, key, func(cs *cacheShard) cacheShardOp {
		return &counterOp{shard: cs, key: key, delta: delta, add: true, done: done}
	})
}

// CounterGet hands done the counter's sum (0 when it does not exist).
// Errors as CachePut.
func (e *Engine) CounterGet(name CacheName, key []byte, done func(sum int64, err error)) error {
	return e.postCache(name, key, func(cs *cacheShard) cacheShardOp {
		return &counterOp{shard: cs, key: key, done: done}
	})
}

// cachePutOp is a CachePut on its core.
type cachePutOp struct {
	shard *cacheShard
	key   []byte
	value []byte
	ttl   cache.TTL
	done  func(error)
	err   error
}

func (o *cachePutOp) fail(err error) { o.done(err) }

func (o *cachePutOp) apply(c *core) {
	if err := o.shard.usable(); err != nil {
		o.done(err)
		return
	}
	_, o.err = o.shard.sm.Put(o.key, o.value, o.ttl, c.wallMillis())
	o.shard.finish(o)
}

func (o *cachePutOp) answer(err error) { o.done(firstError(err, o.err)) }

// cacheReadOp is a CacheGet or a CacheDelete on its core.
type cacheReadOp struct {
	shard  *cacheShard
	key    []byte
	delete bool
	done   func(value []byte, found bool, err error)
	value  []byte
	found  bool
}

func (o *cacheReadOp) fail(err error) { o.done(nil, false, err) }

func (o *cacheReadOp) apply(c *core) {
	if err := o.shard.usable(); err != nil {
		o.done(nil, false, err)
		return
	}
	var v []byte
	if o.delete {
		v, o.found, _ = o.shard.sm.Delete(o.key, c.wallMillis())
	} else {
		v, o.found = o.shard.sm.Get(o.key, c.wallMillis())
	}
	if o.found {
		o.value = append(make([]byte, 0, len(v)), v...) // the answer leaves the core
	}
	o.shard.finish(o)
}

func (o *cacheReadOp) answer(err error) {
	if err != nil {
		o.done(nil, false, err)
		return
	}
	o.done(o.value, o.found, nil)
}

// counterOp is a CounterAdd (add) or a CounterGet on its core.
type counterOp struct {
	shard *cacheShard
	key   []byte
	delta int64
	add   bool
	done  func(sum int64, err error)
	sum   int64
	err   error
}

func (o *counterOp) fail(err error) { o.done(0, err) }

func (o *counterOp) apply(*core) {
	if err := o.shard.usable(); err != nil {
		o.done(0, err)
		return
	}
	if o.add {
		o.sum, _, o.err = o.shard.sm.CounterAdd(o.key, o.delta)
	} else {
		o.sum, _ = o.shard.sm.CounterGet(o.key)
	}
	o.shard.finish(o)
}

func (o *counterOp) answer(err error) {
	err = firstError(err, o.err)
	if err != nil {
		o.done(0, err)
		return
	}
	o.done(o.sum, nil)
}

// firstError returns the storage error of the commit when there is one,
// else the operation's own error mapped by cacheError.
func firstError(commitErr, opErr error) error {
	if commitErr != nil {
		return commitErr
	}
	return cacheError(opErr)
}

// finish takes the effects of an applied operation and queues its answer
// behind their commit.
func (cs *cacheShard) finish(a cacheAnswerer) {
	cs.flush()
	cs.after(a)
}

// cacheError wraps the cache package's input errors in ErrInvalid (client
// code malformed); cache.ErrCounterOverflow and cache.ErrCapacity stay as
// they are (errors.Is finds both).
func cacheError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cache.ErrCounterOverflow), errors.Is(err, cache.ErrCapacity):
		return err
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}

// cacheTable is a core's cache state (the core's cacheShards slot).
type cacheTable struct {
	c      *core
	shards map[*cacheShard]struct{}
	timer  coreTimer
}

// cacheShard drives the cache state machine of one shard on its core.
type cacheShard struct {
	c        *core
	name     CacheName
	index    int
	durable  bool
	sm       *cache.Shard
	log      shardLog // cache log; nil when in memory
	counters shardLog // counter log; nil when in memory
	// committed offsets of the two logs (in memory: equal to the next ones).
	cacheCommitted, counterCommitted uint64
	waiters                          fifo[cacheWaiter]
	changes                          fifo[cache.Change] // copies, waiting for their commit
	watchers                         map[uint64]*CacheWatcher
	written                          uint64 // cache-log records since the last compaction
	inflight                         int    // appends not completed yet
	pendingClose                     *cachePendingClose
	metrics                          *cacheMetrics
	stats                            cache.Stats // as last reported to metrics
	failed                           error
	closed                           bool
	onCache, onCounter               func(first, last uint64, err error)
}

// cachePendingClose is a close waiting for the shard's appends in flight.
type cachePendingClose struct {
	reason error
	remove bool
	done   chan error
}

// cacheWaiter is an answer released once both logs reach its offsets.
type cacheWaiter struct {
	cacheNeed, counterNeed uint64
	a                      cacheAnswerer
}

func (c *core) cacheTable() *cacheTable {
	if t, ok := c.cacheShards.(*cacheTable); ok {
		return t
	}
	t := &cacheTable{c: c, shards: map[*cacheShard]struct{}{}}
	t.timer = coreTimer{index: -1, fn: t.sweep}
	c.cacheShards = t
	e := c.engine
	c.onStop = append(c.onStop, t.closeAll, func() { e.caches.m.Store(nil) }) // the engine is stopping
	return t
}

// openCacheShard creates shard index of spec on this core, replaying its
// logs when durable.
func (c *core) openCacheShard(meta *cacheMeta, index int) (*cacheShard, error) {
	spec := &meta.spec
	cs := &cacheShard{c: c, name: spec.Name, index: index, durable: spec.Durable, metrics: meta.metrics,
		sm: cache.New(spec.Limits), watchers: map[uint64]*CacheWatcher{}}
	cs.onCache, cs.onCounter = cs.cacheAppended, cs.counterAppended
	if spec.Durable {
		if err := cs.openLogs(); err != nil {
			return nil, err
		}
	}
	cs.reportStats()
	t := c.cacheTable()
	t.shards[cs] = struct{}{}
	if t.timer.index < 0 {
		c.timers.schedule(&t.timer, c.clock.MonoNanos()+int64(cacheSweepInterval))
	}
	return cs, nil
}

func (cs *cacheShard) openLogs() error {
	where := fmt.Sprintf("cache %s shard %d", cs.name, cs.index)
	var err error
	if cs.log, err = cs.c.openCacheLog(logCacheRecords, cs.name, cs.index); err != nil {
		return storageError("open "+where, err)
	}
	if cs.counters, err = cs.c.openCacheLog(logCacheCounters, cs.name, cs.index); err != nil {
		cs.closeLogs()
		return storageError("open counters of "+where, err)
	}
	if err = cs.replay(); err != nil {
		cs.closeLogs()
		return storageError("replay "+where, err)
	}
	return nil
}

// openCacheLog opens a cache shard's log: on the production disk under the
// seglog caches/ root (counters in the "counters" companion directory); on
// other disks through OpenLog by kind.
func (c *core) openCacheLog(kind logKind, name CacheName, shard int) (shardLog, error) {
	d, ok := c.disk.(*seglogDisk)
	if !ok {
		return c.disk.OpenLog(kind, name.asStream(), shard)
	}
	opts := d.opts
	opts.Dir = d.cacheDir(name, shard)
	if kind == logCacheCounters {
		opts.Dir = seglog.CompanionDir(opts.Dir, seglog.CompanionCounters)
	}
	l, err := d.disk.Open(opts)
	if err != nil {
		return nil, err
	}
	return &seglogLog{log: l, reader: l.Reader()}, nil
}

func (d *seglogDisk) cacheDir(name CacheName, shard int) string {
	return seglog.ShardDir(d.root, seglog.ShardKey{Kind: seglog.ShardCache, Tenant: name.Tenant,
		Namespace: name.Namespace, Name: name.Cache, Shard: uint32(shard)})
}

// replay feeds both logs to the state machine.
func (cs *cacheShard) replay() error {
	if err := readWithOffsets(cs.log, cs.sm.ReplayCache); err != nil {
		return err
	}
	if err := readWithOffsets(cs.counters, cs.sm.ReplayCounter); err != nil {
		return err
	}
	cs.cacheCommitted, cs.counterCommitted = cs.log.NextOffset(), cs.counters.NextOffset()
	return cs.sm.FinishReplay(cs.cacheCommitted, cs.counterCommitted)
}

// readWithOffsets feeds every committed record of l to fn with its offset.
func readWithOffsets(l shardLog, fn func(uint64, []byte) error) error {
	next := l.EarliestOffset()
	for next < l.CommittedOffset() {
		var ferr error
		from := next
		err := l.ReadCommitted(from, cacheReadBytes, func(off uint64, _ int64, p []byte) bool {
			next = off + 1
			ferr = fn(off, p)
			return ferr == nil
		})
		if err != nil {
			return err
		}
		if ferr != nil {
			return ferr
		}
		if next == from {
			return fmt.Errorf("core: read of %d returned nothing below committed %d", from, l.CommittedOffset())
		}
	}
	return nil
}

func (cs *cacheShard) usable() error {
	if cs.closed {
		return ErrNotFound
	}
	return cs.failed
}

// flush takes the state machine's effects: appends the records (durable) and
// queues copies of the changes until their records commit.
func (cs *cacheShard) flush() {
	fx := cs.sm.Effects()
	if fx.Empty() {
		return
	}
	for _, ch := range fx.Changes {
		if cs.watchers[ch.WatchID] != nil {
			ch.Key = append([]byte(nil), ch.Key...)
			if ch.Value != nil {
				ch.Value = append([]byte{}, ch.Value...)
			}
			cs.changes.push(ch)
		}
	}
	ts := cs.c.clock.WallMicros()
	var err error
	if cs.durable && len(fx.CacheRecords) > 0 {
		err = cs.log.Append(fx.CacheRecords, ts, cs.onCache)
		cs.countAppend(err)
	}
	if err == nil && cs.durable && len(fx.CounterRecords) > 0 {
		err = cs.counters.Append(fx.CounterRecords, ts, cs.onCounter)
		cs.countAppend(err)
	}
	cs.written += uint64(len(fx.CacheRecords))
	cs.sm.Advance()
	cs.reportStats()
	if err != nil {
		cs.fail(storageError("append cache logs", err))
		return
	}
	if !cs.durable {
		cs.cacheCommitted, cs.counterCommitted = cs.sm.NextOffsets()
		cs.settle()
	}
	cs.maybeCompact()
}

func (cs *cacheShard) countAppend(err error) {
	if err == nil {
		cs.inflight++
	}
}

// reportStats hands the state machine's count changes to the metrics.
func (cs *cacheShard) reportStats() {
	cur := cs.sm.Stats()
	cs.metrics.update(cs.stats, cur)
	cs.stats = cur
}

func (cs *cacheShard) cacheAppended(_, last uint64, err error) {
	cs.appendDone()
	if err != nil {
		cs.fail(storageError("commit cache log", err))
		return
	}
	cs.cacheCommitted = max(cs.cacheCommitted, last+1)
	cs.settle()
}

func (cs *cacheShard) counterAppended(_, last uint64, err error) {
	cs.appendDone()
	if err != nil {
		cs.fail(storageError("commit counter log", err))
		return
	}
	cs.counterCommitted = max(cs.counterCommitted, last+1)
	cs.settle()
}

// after answers a once every record written so far is committed.
func (cs *cacheShard) after(a cacheAnswerer) {
	if cs.failed != nil {
		a.answer(cs.failed)
		return
	}
	cacheNext, counterNext := cs.sm.NextOffsets()
	cs.waiters.push(cacheWaiter{cacheNeed: cacheNext, counterNeed: counterNext, a: a})
	cs.settle()
}

// settle delivers committed changes to their watchers and releases the
// answers whose records are committed, in order.
func (cs *cacheShard) settle() {
	for cs.changes.len() > 0 && cs.changes.at(0).Offset < cs.cacheCommitted {
		ch := cs.changes.pop()
		if w := cs.watchers[ch.WatchID]; w != nil && !w.deliver(ch, cs.index) {
			cs.dropWatch(w, ErrSlowSubscriber)
		}
	}
	for cs.waiters.len() > 0 {
		w := cs.waiters.at(0)
		if w.cacheNeed > cs.cacheCommitted || w.counterNeed > cs.counterCommitted {
			break
		}
		cs.waiters.pop().a.answer(nil)
	}
}

// fail makes the shard refuse every operation with err (memory may be ahead
// of the logs: DeleteCache and CreateCache, or a restart, rebuild it).
func (cs *cacheShard) fail(err error) {
	if cs.failed != nil {
		return
	}
	cs.failed = err
	for cs.waiters.len() > 0 {
		cs.waiters.pop().a.answer(err)
	}
	for _, w := range cs.watchers {
		cs.dropWatch(w, err)
	}
}

// appendDone counts a completed append and finishes a close waiting for it.
func (cs *cacheShard) appendDone() {
	cs.inflight--
	if pc := cs.pendingClose; pc != nil && cs.inflight == 0 {
		cs.pendingClose = nil
		pc.done <- cs.close(pc.reason, pc.remove)
	}
}

// closeWhenIdle refuses new operations with reason at once and closes the
// shard (deleting its logs when remove) once no append is in flight; done
// receives the outcome.
func (cs *cacheShard) closeWhenIdle(reason error, remove bool, done chan error) {
	cs.fail(reason)
	if cs.inflight > 0 && !cs.closed {
		cs.pendingClose = &cachePendingClose{reason: reason, remove: remove, done: done}
		return
	}
	done <- cs.close(reason, remove)
}

func (cs *cacheShard) close(reason error, remove bool) error {
	if cs.closed {
		return nil
	}
	cs.fail(reason)
	cs.closed = true
	cs.metrics.update(cs.stats, cache.Stats{Evictions: cs.stats.Evictions, Expirations: cs.stats.Expirations})
	cs.closeLogs()
	delete(cs.c.cacheTable().shards, cs)
	if remove && cs.durable {
		if d, ok := cs.c.disk.(*seglogDisk); ok {
			return d.fs.RemoveAll(d.cacheDir(cs.name, cs.index))
		}
	}
	return nil
}

func (cs *cacheShard) closeLogs() {
	for _, l := range []*shardLog{&cs.log, &cs.counters} {
		if *l != nil {
			_ = (*l).Close()
			*l = nil
		}
	}
}

func (t *cacheTable) closeAll() {
	for cs := range t.shards {
		_ = cs.close(ErrClosed, false)
	}
	t.c.timers.stop(&t.timer)
}

// sweep is the core timer of the cache shards: it expires up to
// cacheSweepPerTick values per shard (bounded work per tick) and flushes.
func (t *cacheTable) sweep(now int64) {
	wall := t.c.wallMillis()
	for cs := range t.shards {
		if cs.usable() != nil {
			continue
		}
		if cs.sm.Sweep(wall, cacheSweepPerTick) > 0 {
			cs.flush()
		}
	}
	if len(t.shards) > 0 {
		t.c.timers.schedule(&t.timer, now+int64(cacheSweepInterval))
	}
}

// maybeCompact compacts the cache log (and the counter log with it) once it
// has been written cacheCompactFactor times more records than the shard
// holds values, and at least cacheCompactMin. Only on logs that support it.
func (cs *cacheShard) maybeCompact() {
	if !cs.durable || cs.written < cacheCompactMin {
		return
	}
	st := cs.sm.Stats()
	if cs.written < cacheCompactFactor*uint64(st.Entries+st.Counters) {
		return
	}
	cl, ok1 := cs.log.(logCompactor)
	nl, ok2 := cs.counters.(logCompactor)
	if !ok1 || !ok2 {
		return
	}
	cs.written = 0
	ts := cs.c.clock.WallMicros()
	recs, _, err := cs.sm.CompactCache()
	if err == nil {
		err = cl.Compact(recs, ts, cs.onCache)
		cs.countAppend(err)
	}
	if err == nil {
		recs, _, err = cs.sm.CompactCounters()
	}
	if err == nil {
		err = nl.Compact(recs, ts, cs.onCounter)
		cs.countAppend(err)
	}
	if err != nil {
		cs.fail(storageError("compact cache logs", err))
	}
}

// CacheWatchRequest asks for the changes of one key, or of every key with a
// prefix, of a cache (spec/client-protocol.md §8.4).
type CacheWatchRequest struct {
	Cache  CacheName
	Key    []byte
	Prefix bool // follow every key starting with Key (on every shard)
	// From, when set, is the first offset not yet seen (resume = last
	// handled + 1) on the key's shard; nil = changes from now on. Resuming
	// needs an exact key or a cache of one shard (offsets are per shard).
	From *uint64
	// QueueCapacity bounds the changes buffered for a slow reader (default
	// 1024); past it the watch ends with ErrSlowSubscriber, and the client
	// resumes from its last offset + 1.
	QueueCapacity int
}

// CacheChange is one change a watch receives: the shard it happened on, the
// op (cache.ChangeOp.WireName gives put/delete/expire), the key, the value of
// a put (non-nil, possibly empty) and the record's offset in the shard's
// cache log. The slices are the receiver's.
type CacheChange struct {
	Shard  int
	Op     cache.ChangeOp
	Key    []byte
	Value  []byte
	Offset uint64
}

// CacheWatcher receives a watch's changes, in log order per shard, only once
// their records are committed. Next and Close may be called from any one
// goroutine.
type CacheWatcher struct {
	// ID is the watch id (the wire's watch_id; unique with subscription ids).
	ID     uint64
	e      *Engine
	shards []*cacheShard
	watch  cache.Watch

	mu     sync.Mutex
	queue  fifo[CacheChange]
	limit  int
	err    error
	signal chan struct{}

	// History of a resumed watch, [histNext, histEnd) of one shard's log,
	// read by Next's goroutine once histReady is closed.
	hist      []CacheChange
	histShard int
	histNext  uint64
	histEnd   uint64
	histLog   shardLog
	histReady chan struct{}
	closed    atomic.Bool
}

// CacheWatch registers a watch on the shards the request covers and returns
// its watcher. Errors: ErrNotFound, ErrInvalid (a bad key, From on a
// multi-shard prefix watch), *CursorError (From below the log's earliest
// offset, or of an in-memory cache below its tail: too_old; past the tail:
// in_future), ErrOverloaded, ErrClosed.
func (e *Engine) CacheWatch(req CacheWatchRequest) (*CacheWatcher, error) {
	meta := e.lookupCache(req.Cache)
	if meta == nil {
		return nil, fmt.Errorf("%w: cache %s", ErrNotFound, req.Cache)
	}
	shards := meta.shards
	if !req.Prefix {
		shards = []*cacheShard{meta.shards[cache.ShardOf(req.Key, uint32(len(meta.shards)))]}
	}
	if req.From != nil && len(shards) != 1 {
		return nil, fmt.Errorf("%w: resuming a prefix watch needs a cache of one shard", ErrInvalid)
	}
	w := &CacheWatcher{ID: e.nextSubscription.Add(1), e: e, watch: cache.Watch{Key: append([]byte(nil), req.Key...), Prefix: req.Prefix},
		limit: req.QueueCapacity, signal: make(chan struct{}, 1), histReady: make(chan struct{})}
	if w.limit <= 0 {
		w.limit = cacheWatchQueue
	}
	if req.From == nil {
		close(w.histReady) // no history; a resumed watch has exactly one shard, which closes it
	}
	for _, cs := range shards {
		err := e.runOn(cs.c, func(c *core) error { return cs.addWatch(w, req.From) })
		if err != nil {
			_ = w.Close()
			return nil, err
		}
		w.shards = append(w.shards, cs)
	}
	return w, nil
}

// addWatch registers w on the shard (on its core) and sets up its history.
func (cs *cacheShard) addWatch(w *CacheWatcher, from *uint64) error {
	if err := cs.usable(); err != nil {
		return err
	}
	liveStart, _ := cs.sm.NextOffsets()
	if from != nil {
		earliest := liveStart
		if cs.durable {
			earliest = cs.log.EarliestOffset()
		}
		switch {
		case *from > liveStart:
			return &CursorError{Reason: CursorInFuture, Requested: *from, Available: liveStart}
		case *from < earliest:
			return &CursorError{Reason: CursorTooOld, Requested: *from, Available: earliest}
		}
	}
	if err := cs.sm.Watch(w.ID, w.watch.Key, w.watch.Prefix); err != nil {
		return cacheError(err)
	}
	cs.watchers[w.ID] = w
	if from == nil {
		return nil
	}
	if *from == liveStart {
		close(w.histReady)
		return nil
	}
	w.histShard, w.histNext, w.histEnd, w.histLog = cs.index, *from, liveStart, cs.log
	cs.after(historyReady{w}) // history below liveStart is committed once it answers
	return nil
}

// historyReady opens a resumed watch's history once it is committed.
type historyReady struct{ w *CacheWatcher }

func (h historyReady) answer(err error) {
	if err != nil {
		h.w.end(err)
	}
	close(h.w.histReady)
}

// deliver queues one committed change (on the core). It reports false when
// the queue is full.
func (w *CacheWatcher) deliver(ch cache.Change, shard int) bool {
	w.mu.Lock()
	if w.queue.len() >= w.limit {
		w.mu.Unlock()
		return false
	}
	w.queue.push(CacheChange{Op: ch.Op, Key: ch.Key, Value: ch.Value, Offset: ch.Offset, Shard: shard})
	w.mu.Unlock()
	w.wake()
	return true
}

func (w *CacheWatcher) wake() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// end records the reason the watch ended (the first one wins).
func (w *CacheWatcher) end(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	w.wake()
}

// dropWatch unregisters w from this shard and ends it with err.
func (cs *cacheShard) dropWatch(w *CacheWatcher, err error) {
	cs.sm.Unwatch(w.ID)
	delete(cs.watchers, w.ID)
	w.end(err)
}

// Next returns the watch's next change: first the history of a resumed
// watch, then live changes. It waits until one is available or ctx ends.
// Errors: ctx's error; ErrSlowSubscriber (the queue overflowed), ErrNotFound
// (the cache was deleted), ErrClosed, ErrStorageFailed-wrapped; a
// *CursorError too_old when compaction dropped the history meanwhile.
func (w *CacheWatcher) Next(ctx context.Context) (CacheChange, error) {
	for {
		if w.histNext < w.histEnd || len(w.hist) > 0 {
			if ch, ok, err := w.nextHistory(ctx); ok || err != nil {
				return ch, err
			}
			continue
		}
		w.mu.Lock()
		if w.queue.len() > 0 {
			ch := w.queue.pop()
			w.mu.Unlock()
			return ch, nil
		}
		err := w.err
		w.mu.Unlock()
		if err != nil {
			return CacheChange{}, err
		}
		if err := waitOn(ctx, w.signal); err != nil {
			return CacheChange{}, err
		}
	}
}

// waitOn waits for ch or ctx, preferring ch when both are ready.
func waitOn(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	default:
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// nextHistory returns the next history change, reading a page of the log
// when the buffer is empty. ok = false with no error: history is finished.
func (w *CacheWatcher) nextHistory(ctx context.Context) (CacheChange, bool, error) {
	if len(w.hist) == 0 {
		if err := waitOn(ctx, w.histReady); err != nil {
			return CacheChange{}, false, err
		}
		if err := w.readHistory(); err != nil {
			return CacheChange{}, false, err
		}
	}
	if len(w.hist) == 0 {
		return CacheChange{}, false, nil
	}
	ch := w.hist[0]
	w.hist = w.hist[1:]
	return ch, true, nil
}

// readHistory reads one page of [histNext, histEnd) and keeps the changes
// the watch follows.
func (w *CacheWatcher) readHistory() error {
	from := w.histNext
	var derr error
	err := w.histLog.ReadCommitted(from, cacheReadBytes, func(off uint64, _ int64, p []byte) bool {
		if off >= w.histEnd {
			return false
		}
		w.histNext = off + 1
		ch, ok, err := cache.ChangeFromRecord(w.watch, w.ID, off, p)
		if err != nil {
			derr = err
			return false
		}
		if ok {
			w.hist = append(w.hist, CacheChange{Shard: w.histShard, Op: ch.Op, Offset: off,
				Key: append([]byte(nil), ch.Key...), Value: cloneValue(ch.Value)})
		}
		return true
	})
	var trimmed *trimmedError
	switch {
	case errors.As(err, &trimmed):
		return &CursorError{Reason: CursorTooOld, Requested: trimmed.requested, Available: trimmed.oldest}
	case err != nil:
		return storageError("read cache watch history", err)
	case derr != nil:
		return storageError("read cache watch history", derr)
	case w.histNext == from && from < w.histEnd:
		return storageError("read cache watch history", fmt.Errorf("no record at %d below %d", from, w.histEnd))
	}
	return nil
}

func cloneValue(v []byte) []byte {
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

// Close ends the watch and unregisters it from its shards. Next then
// returns ErrClosed. Errors: none but ErrOverloaded/ErrClosed from the cores.
func (w *CacheWatcher) Close() error {
	if !w.closed.CompareAndSwap(false, true) {
		return nil
	}
	w.end(ErrClosed)
	var errs []error
	for _, cs := range w.shards {
		err := w.e.runOn(cs.c, func(c *core) error {
			if cs.watchers[w.ID] == w {
				cs.dropWatch(w, ErrClosed)
			}
			return nil
		})
		if err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
