package core

import (
	"errors"
	"fmt"
	"sort"
)

// CreateStream opens every shard of spec's stream on its core: a durable
// shard recovers its log under Config.DataDir (or creates it), so calling
// CreateStream for the streams of the broker's catalog after a restart brings
// their data back. Creating a stream that exists with the same spec is a
// no-op. The broker's catalog calls it (docs/architecture.md, core).
//
// Errors: ErrInvalid (bad spec), ErrExists (same name, other spec),
// ErrNoDurableStorage, ErrStorageFailed-wrapped open errors, ErrClosed.
func (e *Engine) CreateStream(spec StreamSpec) error {
	if err := spec.validate(); err != nil {
		return err
	}
	if spec.Durable && e.cfg.DataDir == "" {
		return ErrNoDurableStorage
	}
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	if old := e.lookup(spec.Name); old != nil {
		if old.spec == spec {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrExists, spec.Name)
	}
	meta := &streamMeta{spec: spec, shards: make([]*streamShard, spec.Shards)}
	for i := range meta.shards {
		c := e.coreFor(spec.Name, i)
		err := e.runOn(c, func(c *core) error {
			s, err := c.openShard(&meta.spec, i)
			meta.shards[i] = s
			return err
		})
		if err != nil {
			e.closeShards(meta, ErrNotFound, false)
			return err
		}
	}
	e.storeCatalog(func(m map[StreamName]*streamMeta) { m[spec.Name] = meta })
	return nil
}

// DeleteStream removes a stream: its shards close (subscriptions end with
// ErrNotFound, publishes in flight complete or fail) and a durable stream's
// logs are deleted from disk. Errors: ErrNotFound, ErrClosed.
func (e *Engine) DeleteStream(name StreamName) error {
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	meta := e.lookup(name)
	if meta == nil {
		return ErrNotFound
	}
	e.storeCatalog(func(m map[StreamName]*streamMeta) { delete(m, name) })
	return e.closeShards(meta, ErrNotFound, true)
}

// closeShards closes meta's opened shards on their cores, waiting for their
// appends in flight; remove also deletes their logs.
func (e *Engine) closeShards(meta *streamMeta, reason error, remove bool) error {
	var errs []error
	for i, s := range meta.shards {
		if s == nil {
			continue
		}
		closed := make(chan error, 1)
		err := e.runOn(s.c, func(c *core) error {
			s.closeWhenIdle(reason, remove, closed)
			return nil
		})
		if err == nil {
			err = e.await(s.c, closed)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) storeCatalog(change func(map[StreamName]*streamMeta)) {
	old := *e.catalog.Load()
	next := make(map[StreamName]*streamMeta, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	change(next)
	e.catalog.Store(&next)
}

// ListStreams returns the specs of every stream, sorted by name.
func (e *Engine) ListStreams() []StreamSpec {
	cat := *e.catalog.Load()
	out := make([]StreamSpec, 0, len(cat))
	for _, m := range cat {
		out = append(out, m.spec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name.String() < out[j].Name.String() })
	return out
}

// StreamInfo returns a stream's spec and each shard's earliest, next,
// committed and released offsets, read on the shards' cores. Errors:
// ErrNotFound, ErrOverloaded, ErrClosed.
func (e *Engine) StreamInfo(name StreamName) (StreamInfo, error) {
	meta := e.lookup(name)
	if meta == nil {
		return StreamInfo{}, ErrNotFound
	}
	n := len(meta.shards)
	info := StreamInfo{Spec: meta.spec, NextOffsets: make([]uint64, n), EarliestOffsets: make([]uint64, n),
		CommittedOffsets: make([]uint64, n), ReleasedOffsets: make([]uint64, n)}
	for i, s := range meta.shards {
		err := e.runOn(s.c, func(*core) error {
			if s.closed {
				return ErrNotFound
			}
			info.NextOffsets[i], info.EarliestOffsets[i] = s.nextOffset(), s.earliestOffset()
			info.CommittedOffsets[i], info.ReleasedOffsets[i] = s.committedOffset(), s.releasedOffset()
			return nil
		})
		if err != nil {
			return StreamInfo{}, err
		}
	}
	return info, nil
}
