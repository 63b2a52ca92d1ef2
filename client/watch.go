package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"felix/proto"
)

// ChangeOp is what happened to a watched key (spec/client-protocol.md §8.4).
type ChangeOp string

// Change operations.
const (
	ChangePut    ChangeOp = "put"
	ChangeDelete ChangeOp = "delete"
	ChangeExpire ChangeOp = "expire"
)

// Change is one committed change of a watched key.
type Change struct {
	Key   string
	Op    ChangeOp
	Value []byte // the new value for ChangePut; nil otherwise
	// Offset is the change's position in the cache shard's log.
	Offset uint64
}

// WatchOptions tune Watch.
type WatchOptions struct {
	// Prefix watches every key starting with the key argument instead of that key only.
	Prefix bool
}

// Watch is a live cache watch. Next is for one goroutine; Close may be called from any.
// A watch does not survive a lost connection (the wire has no resume position for
// watches): Next then returns an error wrapping ErrIndeterminate and the caller watches
// again and re-reads the keys it cares about.
type Watch struct {
	c      *Client
	cn     *conn
	id     uint64
	es     *eventStream
	closeO sync.Once
}

// Watch watches key (or, with WatchOptions.Prefix, every key with that prefix) of cache
// (spec §8.4; broker feature cache_watch, else ErrUnsupported; permission cache.read). It
// returns once the broker registered the watch and its event stream arrived.
func (c *Client) Watch(ctx context.Context, cache, key string, opts WatchOptions) (*Watch, error) {
	if err := c.requireFeature(ctx, proto.FeatureCacheWatch); err != nil {
		return nil, err
	}
	for {
		s, err := c.session(ctx)
		if err != nil {
			return nil, closedOr(c, err)
		}
		id := c.nextID()
		k := key
		m := &proto.CacheWatch{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Cache: cache, RequestID: id}
		if opts.Prefix {
			m.Prefix = &k
		} else {
			m.Key = &k
		}
		r, err := s.call(ctx, id, m)
		if err == nil {
			err = replyError(r)
		}
		if err != nil {
			if isNotSent(err) {
				continue
			}
			return nil, err
		}
		w, ok := r.msg.(*proto.CacheWatching)
		if !ok {
			return nil, unexpected(r.msg, "cache_watching")
		}
		es, err := s.cn.claimEvents(ctx, w.WatchID)
		if err != nil {
			return nil, indeterminate(err)
		}
		return &Watch{c: c, cn: s.cn, id: w.WatchID, es: es}, nil
	}
}

// Next returns the next change. Errors: ErrIndeterminate wrapping the transport error when
// the watch's stream ended, *NotLeaderError when the cache shard moved, ctx.Err().
func (w *Watch) Next(ctx context.Context) (Change, error) {
	stop := context.AfterFunc(ctx, func() { w.es.st.CancelRead(0) })
	defer stop()
	for {
		hdr, body, err := w.es.fr.next()
		if err != nil {
			if ctx.Err() != nil {
				return Change{}, ctx.Err()
			}
			return Change{}, indeterminate(fmt.Errorf("felix: watch stream ended: %w", err))
		}
		if hdr.Flags != 0 {
			return Change{}, fmt.Errorf("%w: binary frame %#x on a watch stream", ErrProtocol, hdr.Flags)
		}
		m, err := proto.DecodeMessage(body)
		if err != nil {
			return Change{}, fmt.Errorf("%w: watch stream: %v", ErrProtocol, err)
		}
		switch m := m.(type) {
		case *proto.CacheChange:
			return Change{Key: m.Key, Op: ChangeOp(m.Op), Value: m.Value, Offset: m.Offset}, nil
		case *proto.NotLeader:
			return Change{}, replyError(reply{msg: m})
		}
		w.c.cfg.logger.Warn("felix: unexpected frame on a watch stream", "type", string(m.Type()))
	}
}

// Close ends the watch: it sends cache_unwatch (best effort, bounded by ctx) and cancels
// the event stream.
func (w *Watch) Close(ctx context.Context) error {
	var err error
	w.closeO.Do(func() {
		defer w.es.st.CancelRead(0)
		var s *session
		s, err = w.cn.session(ctx)
		if err != nil {
			return
		}
		// The answer is a plain "ok" without request_id (docs/client-protocol.md D9), so it
		// cannot be correlated on a shared stream: send and do not wait.
		m := &proto.CacheUnwatch{WatchID: w.id}
		err = s.send(w.c.nextID(), nil, func(dst []byte) []byte { return proto.AppendMessage(dst, m) })
	})
	return err
}

func isNotSent(err error) bool { return errors.Is(err, errNotSent) }
