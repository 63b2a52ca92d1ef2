package core

import (
	"errors"
	"fmt"
	"sort"
)

// CreateStream registers spec's stream and opens every shard of it on its
// core as leader at generation 0 (OpenShard for each shard), which is what a
// single node does: a durable shard recovers its logs under Config.DataDir
// (or creates them), so calling CreateStream for the streams of the broker's
// catalog after a restart brings their data back. Creating a stream that
// exists with the same spec opens the shards not open here and leaves the
// others as they are (a no-op when every shard leads at generation 0). The
// broker's catalog calls it (docs/architecture.md, core).
//
// Errors: ErrInvalid (bad spec), ErrExists (same name, other spec),
// ErrNoDurableStorage, ErrStorageFailed-wrapped open errors,
// ErrStaleGeneration-wrapped (a shard open here at a generation above 0),
// ErrClosed. A new stream that fails to open is not registered.
func (e *Engine) CreateStream(spec StreamSpec) error {
	if err := spec.validate(); err != nil {
		return err
	}
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	return e.openStreamShards(spec, allShards(spec.Shards), RoleLeader, 0)
}

// DeleteStream removes a stream: its open shards close (subscriptions end
// with ErrNotFound, publishes in flight complete or fail) and a durable
// stream's logs are deleted from disk, those of the shards not open here
// too. Errors: ErrNotFound, ErrClosed.
func (e *Engine) DeleteStream(name StreamName) error {
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	meta := e.lookup(name)
	if meta == nil {
		return ErrNotFound
	}
	e.storeCatalog(func(m map[StreamName]*streamMeta) { delete(m, name) })
	return errors.Join(e.closeShards(meta, ErrNotFound, true), e.removeClosedStreamLogs(meta))
}

// closeShards closes meta's opened shards on their cores, waiting for their
// appends in flight; remove also deletes their logs.
func (e *Engine) closeShards(meta *streamMeta, reason error, remove bool) error {
	var errs []error
	for i, s := range meta.shards {
		if s == nil {
			continue
		}
		if err := e.closeStreamShard(s, reason, remove); err != nil {
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
// committed and released offsets, read on the shards' cores (0 for a shard
// not open here). Errors: ErrNotFound, ErrOverloaded, ErrClosed.
func (e *Engine) StreamInfo(name StreamName) (StreamInfo, error) {
	meta := e.lookup(name)
	if meta == nil {
		return StreamInfo{}, ErrNotFound
	}
	n := len(meta.shards)
	info := StreamInfo{Spec: meta.spec, NextOffsets: make([]uint64, n), EarliestOffsets: make([]uint64, n),
		CommittedOffsets: make([]uint64, n), ReleasedOffsets: make([]uint64, n)}
	for i, s := range meta.shards {
		if s == nil {
			continue
		}
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
