package core

// The cache half of the per-shard engine API (shardapi.go): opening,
// moving and closing cache shards, each on its core, with the catalog
// entry republished (cacheMeta.withShard) under Engine.catalogMu.

import (
	"errors"
	"fmt"
)

// openCacheShards opens the listed shards of spec's cache at (role,
// generation), registering spec (and its metrics) when absent (catalogMu
// held). Shards already open move there (SetRole). The catalog entry is
// published once, after the last shard. A failure closes the shards this
// call opened; a cache it registered stays unregistered. Errors as
// OpenShard.
func (e *Engine) openCacheShards(spec CacheSpec, shards []int, role Role, generation uint64) error {
	if err := spec.validate(); err != nil {
		return err
	}
	if spec.Durable && e.cfg.DataDir == "" {
		return ErrNoDurableStorage
	}
	meta := e.lookupCache(spec.Name)
	fresh := meta == nil
	if fresh {
		meta = &cacheMeta{spec: spec, shards: make([]*cacheShard, spec.Shards), places: make([]shardPlace, spec.Shards),
			metrics: newCacheMetrics(e.cfg.Metrics, spec.Name)}
	} else if meta.spec != spec {
		return fmt.Errorf("%w: cache %s", ErrExists, spec.Name)
	}
	next, opened, err := meta, []int(nil), error(nil)
	for _, i := range shards {
		if i < 0 || i >= spec.Shards {
			err = fmt.Errorf("%w: cache %s has no shard %d", ErrInvalid, spec.Name, i)
			break
		}
		if next.shards[i] != nil {
			if next, err = e.moveCacheShard(next, i, role, generation); err != nil {
				break
			}
			continue
		}
		var cs *cacheShard
		p := placement{ref: ShardRef{Kind: ShardCache, Name: spec.Name.asStream(), Shard: i}, role: role, generation: generation}
		err = e.runOn(e.coreFor(spec.Name.asStream(), i), func(c *core) error {
			var err error
			cs, err = c.openPlacedCache(next, i, p)
			return err
		})
		if err != nil {
			break
		}
		next, opened = next.withShard(i, cs, shardPlace{role: role, generation: generation}), append(opened, i)
	}
	if err != nil {
		for _, i := range opened {
			_ = e.closeCacheShard(next.shards[i], ErrNotFound, false)
			next = next.withShard(i, nil, shardPlace{})
		}
		if fresh {
			meta.metrics.unregister()
			return err
		}
	}
	if next != meta || fresh {
		e.storeCache(func(m map[CacheName]*cacheMeta) { m[spec.Name] = next })
	}
	return err
}

// moveCacheShard moves open shard i of meta to (role, generation) on its
// core and returns the entry to publish (meta itself when nothing changed).
func (e *Engine) moveCacheShard(meta *cacheMeta, i int, role Role, generation uint64) (*cacheMeta, error) {
	if p := meta.places[i]; p.role == role && p.generation == generation {
		return meta, nil
	}
	cs := meta.shards[i]
	if err := e.runOn(cs.c, func(c *core) error { return c.setCacheRole(cs, role, generation) }); err != nil {
		return meta, err
	}
	return meta.withShard(i, cs, shardPlace{role: role, generation: generation}), nil
}

// cacheRef returns the catalog entry and the open shard ref names (ref.Name
// carries the cache name in its Stream field). Errors: ErrNotFound,
// ErrInvalid (shard out of range), ErrNotHere.
func (e *Engine) cacheRef(ref ShardRef) (*cacheMeta, *cacheShard, error) {
	name := CacheName{Tenant: ref.Name.Tenant, Namespace: ref.Name.Namespace, Cache: ref.Name.Stream}
	meta := e.lookupCache(name)
	if meta == nil {
		return nil, nil, fmt.Errorf("%w: cache %s", ErrNotFound, name)
	}
	if ref.Shard < 0 || ref.Shard >= len(meta.shards) {
		return nil, nil, fmt.Errorf("%w: cache %s has no shard %d", ErrInvalid, name, ref.Shard)
	}
	if meta.shards[ref.Shard] == nil {
		return nil, nil, notHere(ref, 0)
	}
	return meta, meta.shards[ref.Shard], nil
}

// setCacheRole is SetRole of a cache shard (catalogMu held).
func (e *Engine) setCacheRole(ref ShardRef, role Role, generation uint64) error {
	meta, _, err := e.cacheRef(ref)
	if err != nil {
		return err
	}
	next, err := e.moveCacheShard(meta, ref.Shard, role, generation)
	if next != meta {
		e.storeCache(func(m map[CacheName]*cacheMeta) { m[meta.spec.Name] = next })
	}
	return err
}

// closeCacheRef is CloseShard of a cache shard (catalogMu held): the catalog
// drops the shard first, so new calls get ErrNotHere at once.
func (e *Engine) closeCacheRef(ref ShardRef) error {
	meta, cs, err := e.cacheRef(ref)
	if err != nil {
		return err
	}
	next := meta.withShard(ref.Shard, nil, shardPlace{})
	e.storeCache(func(m map[CacheName]*cacheMeta) { m[meta.spec.Name] = next })
	return e.closeCacheShard(cs, movedError(ref, 0, 0), false)
}

// closeCacheShard forgets cs's placement and closes it on its core with
// reason once its appends in flight completed (deleting its logs when
// remove), and waits for that.
func (e *Engine) closeCacheShard(cs *cacheShard, reason error, remove bool) error {
	closed := make(chan error, 1)
	err := e.runOn(cs.c, func(c *core) error {
		c.roles.forgetCache(cs)
		cs.closeWhenIdle(reason, remove, closed)
		return nil
	})
	if err == nil {
		err = e.await(cs.c, closed)
	}
	return err
}

// removeClosedCacheLogs deletes the logs of the durable shards of meta that
// are not open here, on the cores that own them (DeleteCache).
func (e *Engine) removeClosedCacheLogs(meta *cacheMeta) error {
	if !meta.spec.Durable {
		return nil
	}
	var errs []error
	for i, cs := range meta.shards {
		if cs != nil {
			continue
		}
		ref := ShardRef{Kind: ShardCache, Name: meta.spec.Name.asStream(), Shard: i}
		if err := e.runOn(e.coreFor(ref.Name, i), func(c *core) error { return c.disk.RemoveLogs(ref) }); err != nil {
			errs = append(errs, fmt.Errorf("cache shard %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}
