package core

// Cache watches (the overview of caches is at the top of cache_catalog.go):
// CacheWatch registers a CacheWatcher on the shards a key or prefix covers;
// the shards hand it committed changes in log order, and Next reads the
// history of a resumed watch from the cache log before the live changes.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"felix/core/cache"
)

// CacheWatchRequest asks for the changes of one key, or of every key with a
// prefix, of a cache (spec/client-protocol.md §8.4).
type CacheWatchRequest struct {
	Cache CacheName
	// Shard is the resolved shard the watch follows: for a key watch,
	// RouteCache(Cache, Key) (the engine does not route; another shard is
	// ErrInvalid); for a prefix watch, one shard, or AllCacheShards for
	// every shard of the cache.
	Shard  int
	Key    []byte
	Prefix bool // follow every key starting with Key (on Shard, or on every shard)
	// From, when set, is the first offset not yet seen (resume = last
	// handled + 1) on the key's shard; nil = changes from now on. Resuming
	// needs an exact key or a cache of one shard (offsets are per shard).
	From *uint64
	// QueueCapacity bounds the changes buffered for a slow reader (default
	// 1024); past it the watch ends with ErrSlowSubscriber, and the client
	// resumes from its last offset + 1.
	QueueCapacity int
}

// AllCacheShards as CacheWatchRequest.Shard makes a prefix watch follow
// every shard of the cache.
const AllCacheShards = -1

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

// CacheWatch registers a watch on the shards the request covers (req.Shard)
// and returns its watcher. Errors: ErrNotFound (no such cache, req.Shard
// out of range), ErrInvalid (a bad key, a key watch on another shard than
// the key's, From on a multi-shard prefix watch), ErrNotHere (a shard the
// watch covers is not open here, or is a follower), *CursorError (From
// below the log's earliest offset, or of an in-memory cache below its tail:
// too_old; past the tail: in_future), ErrOverloaded, ErrClosed. A watch
// ends with ErrMoved when a shard it follows changes role or closes
// (SetRole, CloseShard).
func (e *Engine) CacheWatch(req CacheWatchRequest) (*CacheWatcher, error) {
	shards, err := e.watchShards(req)
	if err != nil {
		return nil, err
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

// watchShards returns the shards req covers. Errors as CacheWatch.
func (e *Engine) watchShards(req CacheWatchRequest) ([]*cacheShard, error) {
	if !req.Prefix {
		cs, err := e.cacheShardAt(req.Cache, req.Shard, req.Key)
		if err != nil {
			return nil, err
		}
		return []*cacheShard{cs}, nil
	}
	meta := e.lookupCache(req.Cache)
	switch {
	case meta == nil:
		return nil, fmt.Errorf("%w: cache %s", ErrNotFound, req.Cache)
	case req.Shard == AllCacheShards:
		out := make([]*cacheShard, len(meta.shards))
		for i := range out {
			cs, err := meta.leaderShard(i)
			if err != nil {
				return nil, err
			}
			out[i] = cs
		}
		return out, nil
	case req.Shard < 0 || req.Shard >= len(meta.shards):
		return nil, fmt.Errorf("%w: cache %s has no shard %d", ErrNotFound, req.Cache, req.Shard)
	}
	cs, err := meta.leaderShard(req.Shard)
	if err != nil {
		return nil, err
	}
	return []*cacheShard{cs}, nil
}

// addWatch registers w on the shard (on its core) and sets up its history.
func (cs *cacheShard) addWatch(w *CacheWatcher, from *uint64) error {
	if err := cs.serving(); err != nil {
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
// (the cache was deleted), ErrMoved-wrapped (a shard changed role or closed:
// watch again where it is led), ErrClosed, ErrStorageFailed-wrapped; a
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
