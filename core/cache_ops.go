package core

// Cache operations (the overview of caches is at the top of cache_catalog.go):
// RouteCache, which gives a key's shard, and the Engine methods CachePut,
// CacheGet, CacheDelete, CounterAdd and CounterGet, which take that resolved
// shard, each posted as an inbox message to the core owning the shard,
// applied there to the shard's state machine and answered once its records
// are committed; and the mapping of cache errors onto the engine's.

import (
	"errors"
	"fmt"

	"felix/core/cache"
)

// cacheShardOp is a cache operation as an inbox message: apply runs it on
// the owning core, answer releases its result once its records committed.
type cacheShardOp interface {
	operation
	cacheAnswerer
}

// cacheAnswerer is an operation waiting for its records' commit.
type cacheAnswerer interface{ answer(err error) }

// RouteCache returns the shard, in [0, shards of the cache), that owns key
// in the cache named name: cache.ShardOf(key, shards), FNV-1a 64 of the key
// then jump consistent hash (docs/cache.md; the mapping is part of a durable
// cache's stored meaning and never changes). It reads only the catalog.
// Callers resolve the shard with RouteCache and hand it to CachePut,
// CacheGet, CacheDelete, CounterAdd, CounterGet and CacheWatchRequest.Shard.
// Errors: ErrNotFound (no such cache), ErrClosed.
func (e *Engine) RouteCache(name CacheName, key []byte) (shard int, err error) {
	if e.closed.Load() {
		return 0, ErrClosed
	}
	meta := e.lookupCache(name)
	if meta == nil {
		return 0, fmt.Errorf("%w: cache %s", ErrNotFound, name)
	}
	return int(cache.ShardOf(key, uint32(len(meta.shards)))), nil
}

// postCache posts op to the core owning shard of the cache, once key is
// known to belong to it. Errors: ErrNotFound (no such cache, or shard out
// of range), ErrInvalid (key is not on shard), ErrOverloaded, ErrClosed.
func (e *Engine) postCache(name CacheName, shard int, key []byte, bind func(*cacheShard) cacheShardOp) error {
	cs, err := e.cacheShardAt(name, shard, key)
	if err != nil {
		return err
	}
	return e.post(cs.c, message{kind: msgOp, op: bind(cs)})
}

// CachePut stores value under key with ttl (cache.NoTTL = no expiry) in the
// cache (spec/client-protocol.md §6 cache_put), on shard, which must be
// RouteCache(name, key) (the engine does not route). key and value are read on
// the core: the caller keeps them unchanged until done runs. done runs on
// the core after the put record is committed and must not block. A lost
// answer is cache.ErrIndeterminate for the caller, never a silent re-send.
// Errors (here or in done): ErrNotFound (no such cache, shard out of
// range, or deleted meantime), ErrInvalid (key not on shard), ErrNotHere
// (the shard is not open here, or is a follower), ErrMoved (closed by
// CloseShard before the commit), ErrOverloaded, ErrClosed,
// ErrStorageFailed-wrapped, and the cache errors (cache.ErrZeroTTL,
// cache.ErrNegativeTTL, cache.ErrKeyTooLarge, ... wrapped in ErrInvalid).
func (e *Engine) CachePut(name CacheName, shard int, key, value []byte, ttl cache.TTL, done func(error)) error {
	return e.postCache(name, shard, key, func(cs *cacheShard) cacheShardOp {
		return &cachePutOp{shard: cs, key: key, value: value, ttl: ttl, done: done}
	})
}

// CacheGet reads key (spec/client-protocol.md §6 cache_get): done gets a
// copy of the value and found (an empty value is found; found = false is the
// wire's null), after every earlier write of the shard is committed. Safe
// to re-send. Errors as CachePut.
func (e *Engine) CacheGet(name CacheName, shard int, key []byte, done func(value []byte, found bool, err error)) error {
	return e.postCache(name, shard, key, func(cs *cacheShard) cacheShardOp {
		return &cacheReadOp{shard: cs, key: key, done: done}
	})
}

// CacheDelete removes key and hands done a copy of the value it removed
// (spec/client-protocol.md §8.1; found = false is null). Safe to re-send.
// Errors as CachePut.
func (e *Engine) CacheDelete(name CacheName, shard int, key []byte, done func(value []byte, found bool, err error)) error {
	return e.postCache(name, shard, key, func(cs *cacheShard) cacheShardOp {
		return &cacheReadOp{shard: cs, key: key, delete: true, done: done}
	})
}

// CounterAdd adds delta to the counter key and hands done the new sum
// (spec/client-protocol.md §8.2). Not safe to re-send (cache.SafeToResend).
// Errors as CachePut, plus cache.ErrCounterOverflow and cache.ErrCapacity.
func (e *Engine) CounterAdd(name CacheName, shard int, key []byte, delta int64, done func(sum int64, err error)) error {
	return e.postCache(name, shard, key, func(cs *cacheShard) cacheShardOp {
		return &counterOp{shard: cs, key: key, delta: delta, add: true, done: func(sum int64, _ bool, err error) { done(sum, err) }}
	})
}

// CounterGet hands done the counter's sum and whether it exists: found=false
// (sum 0) for a counter never added to or removed, which is absent, not zero
// (a counter decremented to 0 is found with sum 0; issue 25). Errors as CachePut.
func (e *Engine) CounterGet(name CacheName, shard int, key []byte, done func(sum int64, found bool, err error)) error {
	return e.postCache(name, shard, key, func(cs *cacheShard) cacheShardOp {
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
	if err := o.shard.serving(); err != nil {
		o.done(err)
		return
	}
	if o.shard.promoting.park(func() { o.apply(c) }) { // replicate_promote.go
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
	if err := o.shard.serving(); err != nil {
		if !o.delete && o.shard.readsFromMemory(err) { // writes fail, gets are served from memory (cache_retry.go)
			v, found := o.shard.sm.Get(o.key, c.wallMillis())
			o.done(append([]byte(nil), v...), found, nil)
			return
		}
		o.done(nil, false, err)
		return
	}
	if o.shard.promoting.park(func() { o.apply(c) }) { // replicate_promote.go
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
	done  func(sum int64, found bool, err error)
	sum   int64
	found bool
	err   error
}

func (o *counterOp) fail(err error) { o.done(0, false, err) }

func (o *counterOp) apply(c *core) {
	if err := o.shard.serving(); err != nil {
		if !o.add && o.shard.readsFromMemory(err) { // served from memory while writes fail
			sum, found := o.shard.sm.CounterGet(o.key)
			o.done(sum, found, nil)
			return
		}
		o.done(0, false, err)
		return
	}
	if o.shard.promoting.park(func() { o.apply(c) }) { // replicate_promote.go
		return
	}
	if o.add {
		o.sum, _, o.err = o.shard.sm.CounterAdd(o.key, o.delta)
		o.found = true
	} else {
		o.sum, o.found = o.shard.sm.CounterGet(o.key)
	}
	o.shard.finish(o)
}

func (o *counterOp) answer(err error) {
	err = firstError(err, o.err)
	if err != nil {
		o.done(0, false, err)
		return
	}
	o.done(o.sum, o.found, nil)
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
