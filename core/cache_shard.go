package core

// One cache shard on its core (the overview of caches is at the top of
// cache_catalog.go): the core's cacheTable, opening a shard and replaying its
// cache and counter logs, appending the state machine's effects, releasing
// answers and watch changes in commit order, failing and closing a shard, the
// TTL sweep timer and log compaction.

import (
	"fmt"
	"time"

	"felix/core/cache"
	"felix/proto"
)

// cacheTable is a core's cache state (the core's cacheShards slot).
type cacheTable struct {
	c      *core
	shards map[*cacheShard]struct{}
	timer  coreTimer
}

// cacheShard drives the cache state machine of one shard on its core. The
// embedded logOwner carries its appends in flight over both logs, its sticky
// failure, closed and the close waiting for idleness.
type cacheShard struct {
	logOwner
	c        *core
	name     CacheName
	index    int
	durable  bool
	sm       *cache.Shard
	log      shardLog // cache log; nil when in memory
	counters shardLog // counter log; nil when in memory
	// committed offsets of the two logs (in memory: equal to the next ones).
	cacheCommitted, counterCommitted uint64
	// replicated: a replica set is attached, so answers also wait for the two logs'
	// quorum marks, cacheReleased and counterReleased (cache_release.go).
	replicated                     bool
	cacheReleased, counterReleased uint64
	waiters                        fifo[cacheWaiter]
	changes                        fifo[cache.Change] // copies, waiting for their commit
	watchers                       map[uint64]*CacheWatcher
	written                        uint64 // cache-log records since the last compaction
	metrics                        *cacheMetrics
	stats                          cache.Stats // as last reported to metrics
	onCache, onCounter             func(first, last uint64, err error)
	// promoting parks cache operations while a promoted shard rebuilds its state
	// (replicate_promote.go).
	promoting rebuildGate
	// The storage retry (cache_retry.go): limits rebuild the state machine.
	limits     cache.Config
	retryTimer coreTimer
	retryDelay time.Duration
	// damage is set at open when a log could not open for damage
	// (damage.go openDamaged); read by Engine.Damaged once published.
	damage *DamageError
}

// cacheWaiter is an answer released once both logs reach its offsets.
type cacheWaiter struct {
	cacheNeed, counterNeed uint64
	a                      cacheAnswerer
}

func (c *core) cacheTable() *cacheTable {
	if t := c.cacheShards; t != nil {
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
	cs.limits, cs.retryTimer = spec.Limits, coreTimer{index: -1, fn: cs.retryStorage}
	cs.initOwner(c, cs.failWaiters, cs.close)
	if spec.Durable {
		if err := cs.openLogs(); err != nil && !cs.openDamaged(err) { // damage.go
			return nil, err
		}
		cs.durableLog = cs.log
	}
	cs.reportStats()
	if cs.damage != nil {
		cs.fail(cs.damage)
	}
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
	if cs.log, err = cs.c.disk.OpenLog(cs.logAddr(proto.LogCache), logOptions{}); err != nil {
		return storageError("open "+where, err)
	}
	if cs.counters, err = cs.c.disk.OpenLog(cs.logAddr(proto.LogCounters), logOptions{}); err != nil {
		cs.closeLogs()
		return storageError("open counters of "+where, err)
	}
	if err = cs.replay(); err != nil {
		cs.closeLogs()
		return storageError("replay "+where, err)
	}
	return nil
}

// logAddr names the cache shard's log of kind log (incarnation 0): on the
// production disk under the seglog caches/ root, the counters in the
// "counters" companion directory.
func (cs *cacheShard) logAddr(log proto.ReplicaLog) LogAddr {
	return LogAddr{Kind: ShardCache, Name: cs.name.asStream(), Shard: cs.index, Log: log}
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
		cs.fail(cs.writeFailed("append cache logs", err))
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
		cs.begin()
	}
}

// reportStats hands the state machine's count changes to the metrics.
func (cs *cacheShard) reportStats() {
	cur := cs.sm.Stats()
	cs.metrics.update(cs.stats, cur)
	cs.stats = cur
}

func (cs *cacheShard) cacheAppended(_, last uint64, err error) {
	if err != nil {
		cs.fail(cs.writeFailed("commit cache log", err)) // cache_retry.go
	} else {
		cs.cacheCommitted = max(cs.cacheCommitted, last+1)
		cs.settle()
	}
	cs.end()
}

func (cs *cacheShard) counterAppended(_, last uint64, err error) {
	if err != nil {
		cs.fail(cs.writeFailed("commit counter log", err))
	} else {
		cs.counterCommitted = max(cs.counterCommitted, last+1)
		cs.settle()
	}
	cs.end()
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
// answers whose records are committed (and, replicated, quorum-marked), in order.
func (cs *cacheShard) settle() {
	for cs.changes.len() > 0 && cs.changes.at(0).Offset < cs.cacheCommitted {
		ch := cs.changes.pop()
		if w := cs.watchers[ch.WatchID]; w != nil && !w.deliver(ch, cs.index) {
			cs.dropWatch(w, ErrSlowSubscriber)
		}
	}
	cacheMark, counterMark := cs.answerMarks()
	for cs.waiters.len() > 0 {
		w := cs.waiters.at(0)
		if w.cacheNeed > cacheMark || w.counterNeed > counterMark {
			break
		}
		cs.waiters.pop().a.answer(nil)
	}
}

// failWaiters is the shard's logOwner.failHook: on its first failure err
// (from then on fail makes it refuse every operation with err; memory may be
// ahead of the logs: DeleteCache and CreateCache, or a restart, rebuild it)
// the waiting answers and the watches end with err.
func (cs *cacheShard) failWaiters(err error) {
	for cs.waiters.len() > 0 {
		cs.waiters.pop().a.answer(err)
	}
	for _, w := range cs.watchers {
		cs.dropWatch(w, err)
	}
	cs.startRetry(err) // cache_retry.go
}

// close is the shard's logOwner.closeHook (closeWhenIdle, once no append is
// in flight) and the engine stop's: it closes the shard and its logs and,
// when remove, deletes them.
func (cs *cacheShard) close(reason error, remove bool) error {
	if cs.closed {
		return nil
	}
	cs.fail(reason)
	cs.closeOwner()
	cs.promoting.finish(false) // parked operations are answered with reason
	cs.c.timers.stop(&cs.retryTimer)
	cs.metrics.update(cs.stats, cache.Stats{Evictions: cs.stats.Evictions, Expirations: cs.stats.Expirations})
	cs.closeLogs()
	delete(cs.c.cacheTable().shards, cs)
	if remove && cs.durable {
		return cs.c.disk.RemoveLogs(cs.logAddr(proto.LogCache).Ref())
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
		if cs.serving() != nil { // failed, closed, or a follower (its leader expires values)
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
// holds values, and at least cacheCompactMin.
func (cs *cacheShard) maybeCompact() {
	if !cs.durable || cs.written < cacheCompactMin {
		return
	}
	st := cs.sm.Stats()
	if cs.written < cacheCompactFactor*uint64(st.Entries+st.Counters) {
		return
	}
	cs.written = 0
	ts := cs.c.clock.WallMicros()
	recs, _, err := cs.sm.CompactCache()
	if err == nil {
		err = cs.log.Compact(recs, ts, cs.onCache)
		cs.countAppend(err)
	}
	if err == nil {
		recs, _, err = cs.sm.CompactCounters()
	}
	if err == nil {
		err = cs.counters.Compact(recs, ts, cs.onCounter)
		cs.countAppend(err)
	}
	if err != nil {
		cs.fail(storageError("compact cache logs", err))
	}
}
