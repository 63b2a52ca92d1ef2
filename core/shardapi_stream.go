package core

// The stream half of the per-shard engine API (shardapi.go): opening,
// moving and closing stream shards, each on its core, with the catalog
// entry republished (streamMeta.withShard) under Engine.catalogMu.

import (
	"errors"
	"fmt"
)

// openStreamShards opens the listed shards of spec's stream at (role,
// generation), registering spec when absent (catalogMu held). Shards already
// open move there (SetRole). The catalog entry is published once, after
// the last shard. A failure closes the shards this call opened; a stream it
// registered stays unregistered. Errors as OpenShard.
func (e *Engine) openStreamShards(spec StreamSpec, shards []int, role Role, generation uint64) error {
	if err := spec.validate(); err != nil {
		return err
	}
	if spec.Durable && e.cfg.DataDir == "" {
		return ErrNoDurableStorage
	}
	meta := e.lookup(spec.Name)
	fresh := meta == nil
	if fresh {
		meta = newStreamMeta(spec)
	} else if meta.spec != spec {
		return fmt.Errorf("%w: %s", ErrExists, spec.Name)
	}
	next, opened, err := meta, []int(nil), error(nil)
	for _, i := range shards {
		if i < 0 || i >= spec.Shards {
			err = fmt.Errorf("%w: %s has no shard %d", ErrInvalid, spec.Name, i)
			break
		}
		if next.shards[i] != nil {
			if next, err = e.moveStreamShard(next, i, role, generation); err != nil {
				break
			}
			continue
		}
		var s *streamShard
		p := placement{ref: ShardRef{Kind: ShardStream, Name: spec.Name, Shard: i}, role: role, generation: generation}
		err = e.runOn(e.coreFor(spec.Name, i), func(c *core) error {
			var err error
			s, err = c.openPlacedStream(&next.spec, i, p)
			return err
		})
		if err != nil {
			break
		}
		next, opened = next.withShard(i, s, shardPlace{role: role, generation: generation}), append(opened, i)
	}
	if err != nil {
		for _, i := range opened {
			_ = e.closeStreamShard(next.shards[i], ErrNotFound, false)
			next = next.withShard(i, nil, shardPlace{})
		}
		if fresh {
			return err
		}
	}
	if next != meta || fresh {
		e.storeCatalog(func(m map[StreamName]*streamMeta) { m[spec.Name] = next })
	}
	return err
}

// moveStreamShard moves open shard i of meta to (role, generation) on its
// core and returns the entry to publish (meta itself when nothing changed).
func (e *Engine) moveStreamShard(meta *streamMeta, i int, role Role, generation uint64) (*streamMeta, error) {
	if p := meta.places[i]; p.role == role && p.generation == generation {
		return meta, nil
	}
	s := meta.shards[i]
	if err := e.runOn(s.c, func(c *core) error { return c.setStreamRole(s, role, generation) }); err != nil {
		return meta, err
	}
	return meta.withShard(i, s, shardPlace{role: role, generation: generation}), nil
}

// streamRef returns the catalog entry and the open shard ref names.
// Errors: ErrNotFound, ErrInvalid (shard out of range), ErrNotHere.
func (e *Engine) streamRef(ref ShardRef) (*streamMeta, *streamShard, error) {
	meta := e.lookup(ref.Name)
	if meta == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrNotFound, ref.Name)
	}
	if ref.Shard < 0 || ref.Shard >= len(meta.shards) {
		return nil, nil, fmt.Errorf("%w: %s has no shard %d", ErrInvalid, ref.Name, ref.Shard)
	}
	if meta.shards[ref.Shard] == nil {
		return nil, nil, notHere(ref, 0)
	}
	return meta, meta.shards[ref.Shard], nil
}

// setStreamRole is SetRole of a stream shard (catalogMu held).
func (e *Engine) setStreamRole(ref ShardRef, role Role, generation uint64) error {
	meta, _, err := e.streamRef(ref)
	if err != nil {
		return err
	}
	next, err := e.moveStreamShard(meta, ref.Shard, role, generation)
	if next != meta {
		e.storeCatalog(func(m map[StreamName]*streamMeta) { m[ref.Name] = next })
	}
	return err
}

// closeStreamRef is CloseShard of a stream shard (catalogMu held): the
// catalog drops the shard first, so new calls get ErrNotHere at once.
func (e *Engine) closeStreamRef(ref ShardRef) error {
	meta, s, err := e.streamRef(ref)
	if err != nil {
		return err
	}
	next := meta.withShard(ref.Shard, nil, shardPlace{})
	e.storeCatalog(func(m map[StreamName]*streamMeta) { m[ref.Name] = next })
	return e.closeStreamShard(s, movedError(ref, 0, 0), false)
}

// closeStreamShard forgets s's placement and closes it on its core with
// reason once its appends in flight completed (deleting its logs when
// remove), and waits for that.
func (e *Engine) closeStreamShard(s *streamShard, reason error, remove bool) error {
	closed := make(chan error, 1)
	err := e.runOn(s.c, func(c *core) error {
		c.roles.forgetStream(s)
		s.closeWhenIdle(reason, remove, closed)
		return nil
	})
	if err == nil {
		err = e.await(s.c, closed)
	}
	return err
}

// removeClosedStreamLogs deletes the logs of the durable shards of meta
// that are not open here (closed by CloseShard, or never opened), on the
// cores that own them: DeleteStream removes a stream's logs everywhere.
func (e *Engine) removeClosedStreamLogs(meta *streamMeta) error {
	if !meta.spec.Durable {
		return nil
	}
	var errs []error
	for i, s := range meta.shards {
		if s != nil {
			continue
		}
		ref := ShardRef{Kind: ShardStream, Name: meta.spec.Name, Shard: i}
		if err := e.runOn(e.coreFor(ref.Name, i), func(c *core) error { return c.disk.RemoveLogs(ref) }); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}
