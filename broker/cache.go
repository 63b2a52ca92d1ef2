package broker

import (
	"errors"

	"felix/auth"
	"felix/core"
	"felix/core/cache"
	"felix/proto"
)

// The cache messages (spec/client-protocol.md §6, §8.1, §8.2) are served on any
// authenticated bi stream, one handler each in the session's handler table (handlers.go).
// Requests are pipelined: answers carry the request_id and may arrive out of order (§1.1).

// handleCachePut stores a value with an optional ttl_ms and answers cache_ok (ok without
// a request_id) (§8.1; permission cache.write).
func (s *session) handleCachePut(m *proto.CachePut) {
	if !s.cacheAllowed(auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.RequestID) {
		return
	}
	ttl := cache.NoTTL
	if m.TTLMs != nil {
		if *m.TTLMs > 1<<62 {
			s.sendError(proto.CodeMalformed, "ttl_ms out of range", m.RequestID)
			return
		}
		ttl = cache.TTLMillis(int64(*m.TTLMs))
	}
	name, id := cacheName(m.TenantID, m.Namespace, m.Cache), m.RequestID
	s.cacheCall(name, []byte(m.Key), id, m, func(shard int, key []byte) error {
		return s.svc.CachePut(name, shard, key, m.Value, ttl, func(err error) {
			defer s.opDone()
			switch {
			case err != nil:
				s.cacheError(err, id)
			case id != nil:
				s.send(&proto.CacheOK{RequestID: *id})
			default:
				s.send(&proto.OK{})
			}
		})
	})
}

// handleCacheGet answers cache_value (§8.1; permission cache.read).
func (s *session) handleCacheGet(m *proto.CacheGet) {
	if !s.cacheAllowed(auth.ActionCacheRead, m.TenantID, m.Namespace, m.Cache, m.RequestID) {
		return
	}
	name, id := cacheName(m.TenantID, m.Namespace, m.Cache), m.RequestID
	s.cacheCall(name, []byte(m.Key), id, m, func(shard int, key []byte) error {
		return s.svc.CacheGet(name, shard, key, func(value []byte, found bool, err error) {
			defer s.opDone()
			if err != nil {
				s.cacheError(err, id)
				return
			}
			s.send(&proto.CacheValue{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, Value: presence(value, found), RequestID: id})
		})
	})
}

// handleCacheDelete answers cache_deleted with the removed value (§8.1; permission cache.write).
func (s *session) handleCacheDelete(m *proto.CacheDelete) {
	if !s.cacheAllowed(auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.RequestID) {
		return
	}
	name, id := cacheName(m.TenantID, m.Namespace, m.Cache), m.RequestID
	s.cacheCall(name, []byte(m.Key), id, m, func(shard int, key []byte) error {
		return s.svc.CacheDelete(name, shard, key, func(value []byte, found bool, err error) {
			defer s.opDone()
			if err != nil {
				s.cacheError(err, id)
				return
			}
			s.send(&proto.CacheDeleted{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, Value: presence(value, found), RequestID: id})
		})
	})
}

// handleCounterAdd adds delta to a counter and answers counter_value with the sum (§8.2; permission cache.write).
func (s *session) handleCounterAdd(m *proto.CounterAdd) {
	if !s.cacheAllowed(auth.ActionCacheWrite, m.TenantID, m.Namespace, m.Cache, m.RequestID) {
		return
	}
	name, id := cacheName(m.TenantID, m.Namespace, m.Cache), m.RequestID
	s.cacheCall(name, []byte(m.Key), id, m, func(shard int, key []byte) error {
		answer := s.counterAnswer(m.TenantID, m.Namespace, m.Cache, m.Key, id)
		return s.svc.CounterAdd(name, shard, key, m.Delta, func(sum int64, err error) { answer(sum, true, err) })
	})
}

// handleCounterGet answers counter_value (§8.2; permission cache.read).
func (s *session) handleCounterGet(m *proto.CounterGet) {
	if !s.cacheAllowed(auth.ActionCacheRead, m.TenantID, m.Namespace, m.Cache, m.RequestID) {
		return
	}
	name, id := cacheName(m.TenantID, m.Namespace, m.Cache), m.RequestID
	s.cacheCall(name, []byte(m.Key), id, m, func(shard int, key []byte) error {
		answer := s.counterAnswer(m.TenantID, m.Namespace, m.Cache, m.Key, id)
		return s.svc.CounterGet(name, shard, key, func(sum int64, found bool, err error) { answer(sum, found, err) })
	})
}

func cacheName(t, ns, c string) core.CacheName {
	return core.CacheName{Tenant: t, Namespace: ns, Cache: c}
}

// presence maps found=false to the wire's null and keeps an empty stored value non-nil.
func presence(value []byte, found bool) []byte {
	if !found {
		return nil
	}
	if value == nil {
		return []byte{}
	}
	return value
}

// cacheAllowed checks permission before existence (spec/auth.md §4) and answers a refusal.
func (s *session) cacheAllowed(action auth.Action, t, ns, c string, id *uint64) bool {
	if err := s.principal.Allow(action, t, ns, c); err != nil {
		s.sendError(proto.CodeUnauthorized, auth.WireText(err), id)
		return false
	}
	return true
}

// cacheCall runs one engine call on key's shard (core.Engine.RouteCache), counting it in
// flight until its callback ran; a refusal at submit (unknown cache, full inbox) is answered
// at once. With FELIX_AUTO_CREATE an unknown cache is created and the call retried once.
// req is the request message: a shard another broker leads forwards it (forward_ingress.go).
func (s *session) cacheCall(name core.CacheName, key []byte, id *uint64, req proto.Message, call func(shard int, key []byte) error) {
	s.inflight.Add(1)
	s.h.s.inflight.Add(1)
	routed := func() error {
		shard, err := s.svc.RouteCache(name, key)
		f := s.h.s.fwd
		if f != nil && errors.Is(err, core.ErrNotFound) { // a cache none of whose shards is open here
			shard, err = f.routeCache(name, key)
		}
		if err != nil {
			return err
		}
		if f != nil && f.forwardCache(s, name, shard, key, id, req) {
			return nil
		}
		return call(shard, key)
	}
	err := routed()
	if errors.Is(err, core.ErrNotFound) && s.h.s.cfg.AutoCreate && s.h.s.autoCreateCache(name) == nil {
		err = routed()
	}
	if err != nil {
		s.opDone()
		s.cacheError(err, id)
	}
}

func (s *session) opDone() {
	s.h.s.inflight.Done()
	s.inflight.Done()
}

// cacheError answers a failed cache operation with a correlatable error (§8.8).
func (s *session) cacheError(err error, id *uint64) {
	code, text := s.h.s.errorCode(err)
	if errors.Is(err, core.ErrNotFound) {
		text = "cache not found"
	}
	s.sendError(code, text, id)
}

// counterAnswer answers one counter op with counter_value; found=false (a counter_get of a
// counter that does not exist) is written as "found":false with value 0, found is written
// as the field's absence (docs/client-protocol.md, counter_value found?; issue 25).
func (s *session) counterAnswer(t, ns, c, key string, id *uint64) func(sum int64, found bool, err error) {
	return func(sum int64, found bool, err error) {
		defer s.opDone()
		if err != nil {
			s.cacheError(err, id)
			return
		}
		s.send(counterValue(t, ns, c, key, id, sum, found))
	}
}

// counterValue is the counter_value answer: found? is written only for an absent counter.
func counterValue(t, ns, c, key string, id *uint64, sum int64, found bool) *proto.CounterValue {
	m := &proto.CounterValue{TenantID: t, Namespace: ns, Cache: c, Key: key, Value: sum, RequestID: id}
	if !found {
		m.Value, m.Found = 0, proto.Ptr(false)
	}
	return m
}

// autoCreateCache creates tenant/namespace/cache on first use (FELIX_AUTO_CREATE=true).
func (srv *Server) autoCreateCache(name core.CacheName) error {
	if err := srv.catalog.EnsureNamespace(Namespace{TenantID: name.Tenant, Namespace: name.Namespace, DisplayName: name.Namespace}); err != nil {
		return err
	}
	_, err := srv.catalog.CreateCache(Cache{TenantID: name.Tenant, Namespace: name.Namespace, Cache: name.Cache}, srv.ApplyCreateCache)
	if errors.Is(err, ErrExists) {
		return nil
	}
	if err == nil {
		srv.log.Info("auto-created cache", "cache", name.String())
	}
	return err
}
