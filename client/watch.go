package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
	// From resumes the watch at this offset of the key's cache shard: the first change
	// delivered is the one at From (pass the last Change.Offset seen + 1; FromOffset(n)
	// builds it). nil = changes from now on. Resuming a prefix watch needs a cache of one
	// shard (offsets are per shard); otherwise the broker refuses it (ErrMalformed). An
	// offset the shard's log no longer holds, or past its end, is refused the same way
	// (docs/client-protocol.md D16). Needs a broker that knows cache_watch.from_offset.
	From *uint64
}

// FromOffset returns a WatchOptions.From of n.
func FromOffset(n uint64) *uint64 { return &n }

// Watch is a live cache watch. Next is for one goroutine; Close may be called from any.
// After a lost connection Next watches again by itself (with the reconnect backoff, until
// its ctx ends) from the last change's offset + 1 (or WatchOptions.From), so changes are
// neither repeated nor lost. A watch that lost its connection before its first change and
// has no From cannot know where to resume: Next then returns an error wrapping
// ErrIndeterminate, and the caller watches again and re-reads the keys it cares about.
type Watch struct {
	c      *Client
	cache  string
	key    string
	prefix bool
	next   *uint64       // where a resumed watch starts: last change's offset + 1, or From
	addr   string        // the owner's client address ("" = the dialled broker; redirect_ops.go)
	hops   redirectChain // not_leader redirects followed since the last registration

	mu     sync.Mutex
	cn     *conn
	id     uint64
	es     *eventStream // nil while the watch is lost
	since  time.Time    // when the current event stream was opened
	closed bool
}

// Watch watches key (or, with WatchOptions.Prefix, every key with that prefix) of cache
// (spec §8.4; broker feature cache_watch, else ErrUnsupported; permission cache.read). It
// returns once the broker registered the watch and its event stream arrived. A failure that
// is not a definite refusal (a lost connection) is retried until ctx ends. Errors:
// ErrInvalidArgument (empty key of a key watch), ErrTooLarge (key over MaxCacheKeyBytes;
// not sent), ErrNotFound, ErrUnauthorized, ErrMalformed (From refused), ctx.Err().
func (c *Client) Watch(ctx context.Context, cache, key string, opts WatchOptions) (*Watch, error) {
	if !opts.Prefix && key == "" {
		return nil, fmt.Errorf("%w: empty cache key", ErrInvalidArgument)
	}
	if len(key) > MaxCacheKeyBytes {
		return nil, fmt.Errorf("%w: cache key of %d bytes (at most %d)", ErrTooLarge, len(key), MaxCacheKeyBytes)
	}
	if err := c.requireFeature(ctx, proto.FeatureCacheWatch); err != nil {
		return nil, err
	}
	w := &Watch{c: c, cache: cache, key: key, prefix: opts.Prefix}
	if opts.From != nil {
		w.next = FromOffset(*opts.From)
	}
	if err := w.open(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// open registers the watch (from w.next when set), retrying what is not a definite
// refusal with the reconnect backoff until ctx ends, and following not_leader to the
// cache shard's owner (bounded hops, redirect_ops.go).
func (w *Watch) open(ctx context.Context) error {
	bo := newBackoff(w.c.cfg.backoffMin, w.c.cfg.backoffMax)
	for {
		cn, id, es, err := w.register(ctx)
		if err == nil {
			w.hops.reset()
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.closed {
				es.st.CancelRead(0)
				return ErrClosed
			}
			w.cn, w.id, w.es, w.since = cn, id, es, time.Now()
			return nil
		}
		var follow bool
		if follow, err = w.redirect(err); follow {
			continue
		}
		if watchTerminal(err) || w.c.ctx.Err() != nil {
			return closedOr(w.c, err)
		}
		if ctx.Err() != nil {
			if errors.Is(err, ctx.Err()) {
				return err
			}
			return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		}
		w.c.cfg.logger.Info("felix: watch failed; retrying", "cache", w.cache, "key", w.key, "err", err)
		t := time.NewTimer(bo.next())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		case <-w.c.ctx.Done():
			t.Stop()
			return ErrClosed
		}
	}
}

// watchTerminal reports the errors watching again cannot fix: definite refusals (any
// *ServerError, a cursor outside the log), an unsupported feature, a closed client or
// watch, an undecodable answer.
func watchTerminal(err error) bool {
	for _, t := range []error{ErrRefused, ErrNotLeader, ErrCursor, ErrUnsupported, ErrProtocol, ErrClosed} {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// register sends cache_watch once per session until one is sent, and waits for
// cache_watching and the event stream.
func (w *Watch) register(ctx context.Context) (*conn, uint64, *eventStream, error) {
	c := w.c
	for {
		s, err := c.sessionOn(ctx, c.slotFor(w.addr))
		if err != nil {
			return nil, 0, nil, closedOr(c, err)
		}
		id := c.nextID()
		k := w.key
		m := &proto.CacheWatch{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Cache: w.cache, RequestID: id}
		if w.prefix {
			m.Prefix = &k
		} else {
			m.Key = &k
		}
		if w.next != nil {
			m.FromOffset = FromOffset(*w.next)
		}
		r, err := s.call(ctx, id, m)
		if err == nil {
			err = replyError(r)
		}
		if err != nil {
			if isNotSent(err) {
				continue
			}
			return nil, 0, nil, err
		}
		ok, isOK := r.msg.(*proto.CacheWatching)
		if !isOK {
			return nil, 0, nil, unexpected(r.msg, "cache_watching")
		}
		es, err := s.cn.claimEvents(ctx, ok.WatchID)
		if err != nil {
			return nil, 0, nil, indeterminate(err)
		}
		return s.cn, ok.WatchID, es, nil
	}
}

// Next returns the next change. After a lost connection it watches again from the last
// change's offset + 1 (see Watch). Errors: ErrClosed after Close, *NotLeaderError when the
// cache shard moved, ErrIndeterminate when the watch was lost with no resume position, a
// definite refusal of the resumed watch (ErrMalformed for an offset the log no longer
// holds, ErrNotFound, ErrUnauthorized), ctx.Err().
func (w *Watch) Next(ctx context.Context) (Change, error) {
	for {
		w.mu.Lock()
		es, closed := w.es, w.closed
		w.mu.Unlock()
		if closed {
			return Change{}, ErrClosed
		}
		if es == nil {
			if err := w.open(ctx); err != nil {
				return Change{}, err
			}
			continue
		}
		ch, err := w.read(ctx, es)
		if err == nil {
			return ch, nil
		}
		if ctx.Err() != nil {
			return Change{}, ctx.Err()
		}
		w.mu.Lock()
		closed = w.closed
		w.es = nil
		w.mu.Unlock()
		es.st.CancelRead(0)
		if closed {
			return Change{}, ErrClosed
		}
		if watchTerminal(err) {
			return Change{}, err
		}
		if w.next == nil {
			return Change{}, indeterminate(fmt.Errorf("felix: watch lost before its first change and without WatchOptions.From: %w", err))
		}
		w.c.cfg.logger.Info("felix: watch stream ended; watching again", "cache", w.cache, "key", w.key, "from", *w.next, "err", err)
	}
}

// read returns the next change of one event stream.
func (w *Watch) read(ctx context.Context, es *eventStream) (Change, error) {
	stop := context.AfterFunc(ctx, func() { es.st.CancelRead(0) })
	defer stop()
	for {
		hdr, body, err := es.fr.next()
		if err != nil {
			return Change{}, fmt.Errorf("felix: watch stream ended: %w", err)
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
			w.next = FromOffset(m.Offset + 1)
			return Change{Key: m.Key, Op: ChangeOp(m.Op), Value: m.Value, Offset: m.Offset}, nil
		case *proto.NotLeader, *proto.Error: // an error ends the stream (e.g. its token expired)
			return Change{}, replyError(reply{msg: m})
		}
		w.c.cfg.logger.Warn("felix: unexpected frame on a watch stream", "type", string(m.Type()))
	}
}

// Live reports whether the watch's event stream is open (false from the moment Next sees
// its connection lost or its stream ended until it watches again) and since, when that
// stream was opened. A SIGKILLed broker is seen within the idle timeout (WithIdleTimeout).
// The CLI's --idle-exit counts only live time.
func (w *Watch) Live() (live bool, since time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.es != nil, w.since
}

// Close ends the watch: it sends cache_unwatch (best effort, bounded by ctx) and cancels
// the event stream. Next then returns ErrClosed.
func (w *Watch) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	cn, id, es := w.cn, w.id, w.es
	w.mu.Unlock()
	if es == nil {
		return nil
	}
	defer es.st.CancelRead(0)
	s, err := cn.session(ctx)
	if err != nil {
		return err
	}
	// The answer is a plain "ok" without request_id (docs/client-protocol.md D9), so it
	// cannot be correlated on a shared stream: send and do not wait.
	m := &proto.CacheUnwatch{WatchID: id}
	return s.send(w.c.nextID(), nil, func(dst []byte) []byte { return proto.AppendMessage(dst, m) })
}

func isNotSent(err error) bool { return errors.Is(err, errNotSent) }
