package broker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/quic-go/quic-go"

	"felix/auth"
	"felix/core"
	"felix/netq"
	"felix/proto"
)

// watchSet is a connection's live cache watches, by watch id, so cache_unwatch can end one.
type watchSet struct {
	mu sync.Mutex
	m  map[uint64]*core.CacheWatcher
}

func (w *watchSet) add(id uint64, cw *core.CacheWatcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[uint64]*core.CacheWatcher{}
	}
	w.m[id] = cw
}

func (w *watchSet) remove(id uint64) *core.CacheWatcher {
	w.mu.Lock()
	defer w.mu.Unlock()
	cw := w.m[id]
	delete(w.m, id)
	return cw
}

// handleCacheWatch serves cache_watch (spec/client-protocol.md §8.4;
// permission cache.read). Like a subscription, a watch counts against
// FELIX_MAX_SUBSCRIPTIONS_PER_CONN and has its own uni stream opened with
// event_stream_hello {subscription_id: watch_id}, carrying JSON cache_change frames.
func (s *session) handleCacheWatch(m *proto.CacheWatch) {
	id := m.RequestID
	if err := s.principal.Allow(auth.ActionCacheRead, m.TenantID, m.Namespace, m.Cache); err != nil {
		s.sendError(proto.CodeUnauthorized, auth.WireText(err), &id)
		return
	}
	if s.watchRedirected(m) { // led by another broker: not_leader (route_redirect.go)
		return
	}
	if s.h.subs.Add(1) > int64(s.h.s.cfg.MaxSubscriptionsPerConn) {
		s.h.subs.Add(-1)
		s.sendError(proto.CodeOverloaded, "too many subscriptions and watches on this connection", &id)
		return
	}
	req := core.CacheWatchRequest{Cache: cacheName(m.TenantID, m.Namespace, m.Cache), From: m.FromOffset, QueueCapacity: s.h.s.cfg.SubscriberQueueCapacity}
	if m.Prefix != nil {
		req.Key, req.Prefix = []byte(*m.Prefix), true
	} else if m.Key != nil {
		req.Key = []byte(*m.Key)
	}
	cw, err := s.cacheWatch(req)
	if errors.Is(err, core.ErrNotFound) && s.h.s.cfg.AutoCreate && s.h.s.autoCreateCache(req.Cache) == nil {
		cw, err = s.cacheWatch(req)
	}
	if err != nil {
		s.h.subs.Add(-1)
		var ce *core.CursorError
		if errors.As(err, &ce) { // from_offset outside the shard's log (docs/client-protocol.md D16)
			s.sendError(proto.CodeMalformed, fmt.Sprintf("watch cursor %s: requested %d, available %d", ce.Reason, ce.Requested, ce.Available), &id)
			return
		}
		s.cacheError(err, &id)
		return
	}
	events, err := s.h.conn.OpenUniStream()
	if err == nil {
		_, err = events.Write(proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: cw.ID}))
	}
	if err != nil {
		cw.Close()
		s.h.subs.Add(-1)
		if events != nil {
			events.CancelWrite(netq.CodeProtocol)
		}
		s.sendError(proto.CodeOverloaded, "cannot open an event stream: "+err.Error(), &id)
		return
	}
	s.h.watches.add(cw.ID, cw)
	s.send(&proto.CacheWatching{RequestID: id, WatchID: cw.ID})
	s.h.pumps.Add(1)
	go s.h.watchPump(cw, events, s.principal)
}

// handleCacheUnwatch ends one of the connection's watches (§8.4); an unknown watch_id answers not_found.
func (s *session) handleCacheUnwatch(m *proto.CacheUnwatch) {
	if cw := s.h.watches.remove(m.WatchID); cw != nil {
		cw.Close()
		s.send(&proto.OK{})
		return
	}
	s.sendError(proto.CodeNotFound, "unknown watch_id", m.RequestID)
}

// watchPump writes a watch's changes until it ends (unwatch, connection end, shutdown: FIN;
// slow reader or failed write: reset with netq.CodeSlowConsumer).
func (h *connHandler) watchPump(cw *core.CacheWatcher, events *quic.SendStream, p *auth.Principal) {
	defer h.pumps.Done()
	defer h.subs.Add(-1)
	defer h.watches.remove(cw.ID)
	defer cw.Close()
	var frame []byte
	for {
		ch, err := cw.Next(h.ctx)
		if err != nil {
			if errors.Is(err, core.ErrSlowSubscriber) {
				h.s.m.slowSubscribers.Inc()
				events.CancelWrite(netq.CodeSlowConsumer)
				return
			}
			_ = events.Close()
			return
		}
		if h.tokenLapsed(p, events) {
			return
		}
		change := &proto.CacheChange{WatchID: cw.ID, Key: string(ch.Key), Op: proto.CacheChangeOp(ch.Op.WireName()), Value: ch.Value, Offset: ch.Offset}
		frame = proto.AppendMessage(frame[:0], change)
		if _, err := events.Write(frame); err != nil {
			events.CancelWrite(netq.CodeSlowConsumer)
			return
		}
		h.s.m.eventFrames.Inc()
	}
}

// cacheWatch starts a watch on the shard its key routes to (core.Engine.RouteCache), or on
// every shard for a prefix watch.
func (s *session) cacheWatch(req core.CacheWatchRequest) (*core.CacheWatcher, error) {
	req.Shard = core.AllCacheShards
	if !req.Prefix {
		shard, err := s.svc.RouteCache(req.Cache, req.Key)
		if err != nil {
			return nil, err
		}
		req.Shard = shard
	}
	return s.svc.CacheWatch(req)
}
