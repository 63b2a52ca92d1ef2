package broker

// The ingress side of forwarding (issue 19 item 1; docs/forwarding.md, "Wiring"): after
// Route / RouteCache resolved the shard, the ownership table decides. This broker leads
// it: served locally, at the cost of one atomic load, one map lookup and a comparison. Another
// broker leads it: a publish or a cache operation is forwarded (a goroutine drives the
// Machine; the session answers from the owner's answer only); a subscribe is answered
// not_leader. No entry: served locally as before (the engine answers shard_unavailable).

import (
	"strconv"

	cforward "felix/cluster/forward"
	"felix/core"
	"felix/proto"
)

// remote returns the ownership entry of ref when another broker leads it.
func (f *forwarding) remote(ref core.ShardRef) (Assignment, bool) {
	a, ok := f.s.owners.Lookup(ref)
	if !ok || a.Leader == "" || f.leadsHere(a) {
		return Assignment{}, false
	}
	return a, true
}

// forwardPublish takes op over when another broker leads its routed shard (op.req.Shard):
// it reports false for a shard served here. Taken over, op completes through op.done from
// the owner's answer (offsets, duplicate) or with a *ForwardError, whatever ack_on_commit
// says (seed, "Acknowledging a forwarded publish").
func (f *forwarding) forwardPublish(s *session, op *pubOp) bool {
	ref := core.ShardRef{Kind: core.ShardStream, Name: op.req.Stream, Shard: op.req.Shard}
	a, ok := f.remote(ref)
	if !ok {
		return false
	}
	st, err := f.s.catalog.Stream(op.req.Stream.Tenant, op.req.Stream.Namespace, op.req.Stream.Stream)
	if err != nil {
		return false // deleted meanwhile: the engine answers
	}
	r := cforward.Route{Tenant: ref.Name.Tenant, Namespace: ref.Name.Namespace, Name: ref.Name.Stream, Shard: ref.Shard,
		Shards: int(st.Shards), Generation: a.Generation}
	cred := s.credential()
	go func() {
		var msg proto.InternalMessage
		var err error
		if op.req.ProducerID != "" {
			msg, err = cforward.IdempotentPublishMessage(r, op.req.Payloads, cred, []byte(op.req.ProducerID), op.req.Sequence)
		} else {
			msg, err = cforward.PublishMessage(r, op.req.Payloads, cred)
		}
		if err != nil {
			op.done(core.PublishResult{}, &ForwardError{Code: proto.CodeMalformed, Reason: cforward.ReasonNotSent, To: a.Leader})
			return
		}
		act := f.drive("publish", msg, cforward.Request{Kind: msg.Kind()}, a.Leader, a.Generation)
		if act.Step != cforward.Ack {
			op.done(core.PublishResult{}, forwardErr(act, a.Leader))
			return
		}
		op.done(core.PublishResult{Shard: ref.Shard, FirstOffset: act.FirstOffset, LastOffset: act.LastOffset,
			Committed: true, Duplicate: act.Duplicate}, nil)
	}()
	return true
}

// cacheRequestOf is the forward of a cache request message (*proto.CachePut, CacheGet,
// CacheDelete, CounterAdd, CounterGet); ok false for anything else.
func cacheRequestOf(m proto.Message, key []byte) (cforward.CacheRequest, bool) {
	switch m := m.(type) {
	case *proto.CachePut:
		c := cforward.CacheRequest{Op: proto.CacheOpPut, Key: key, Value: m.Value}
		if m.TTLMs != nil {
			c.HasTTL, c.TTLMs = true, *m.TTLMs
		}
		return c, true
	case *proto.CacheGet:
		return cforward.CacheRequest{Op: proto.CacheOpGet, Key: key}, true
	case *proto.CacheDelete:
		return cforward.CacheRequest{Op: proto.CacheOpDelete, Key: key}, true
	case *proto.CounterAdd:
		return cforward.CacheRequest{Op: proto.CacheOpCounterAdd, Key: key, Value: proto.AppendCounterValue(nil, m.Delta)}, true
	case *proto.CounterGet:
		return cforward.CacheRequest{Op: proto.CacheOpCounterGet, Key: key}, true
	}
	return cforward.CacheRequest{}, false
}

// forwardCache takes a cache request over when another broker leads the key's shard;
// false for a shard served here. Taken over, the session answers it from the owner's
// answer in the request's own shape (cache_ok / ok, cache_value, cache_deleted,
// counter_value) or with the *ForwardError, then ends the operation (opDone).
func (f *forwarding) forwardCache(s *session, name core.CacheName, shard int, key []byte, id *uint64, req proto.Message) bool {
	ref := core.ShardRef{Kind: core.ShardCache, Name: core.StreamName{Tenant: name.Tenant, Namespace: name.Namespace, Stream: name.Cache}, Shard: shard}
	a, ok := f.remote(ref)
	if !ok {
		return false
	}
	c, err := f.s.catalog.Cache(name.Tenant, name.Namespace, name.Cache)
	creq, known := cacheRequestOf(req, key)
	if err != nil || !known {
		return false
	}
	r := cforward.Route{Tenant: name.Tenant, Namespace: name.Namespace, Name: name.Cache, Shard: shard,
		Shards: int(c.Shards), Generation: a.Generation}
	cred := s.credential()
	go func() {
		defer s.opDone()
		msg, err := cforward.CacheMessage(r, creq, cred)
		if err != nil {
			s.cacheError(&ForwardError{Code: proto.CodeMalformed, Reason: cforward.ReasonNotSent, To: a.Leader}, id)
			return
		}
		act := f.drive("cache", msg, cforward.Request{Kind: msg.Kind(), Op: creq.Op}, a.Leader, a.Generation)
		if act.Step != cforward.Ack {
			s.cacheError(forwardErr(act, a.Leader), id)
			return
		}
		s.answerForwardedCache(req, id, act.Present, act.Value)
	}()
	return true
}

// answerForwardedCache answers a forwarded cache request from the owner's ForwardCacheOk,
// exactly as the local path answers it (cache.go).
func (s *session) answerForwardedCache(req proto.Message, id *uint64, present bool, value []byte) {
	switch m := req.(type) {
	case *proto.CachePut:
		if id != nil {
			s.send(&proto.CacheOK{RequestID: *id})
		} else {
			s.send(&proto.OK{})
		}
	case *proto.CacheGet:
		s.send(&proto.CacheValue{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, Value: presence(value, present), RequestID: id})
	case *proto.CacheDelete:
		s.send(&proto.CacheDeleted{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, Value: presence(value, present), RequestID: id})
	case *proto.CounterAdd:
		s.answerForwardedCounter(m.TenantID, m.Namespace, m.Cache, m.Key, id, value)
	case *proto.CounterGet:
		if !present { // the owner found no counter: absent, not zero (issue 25)
			s.send(counterValue(m.TenantID, m.Namespace, m.Cache, m.Key, id, 0, false))
			return
		}
		s.answerForwardedCounter(m.TenantID, m.Namespace, m.Cache, m.Key, id, value)
	}
}

func (s *session) answerForwardedCounter(t, ns, c, key string, id *uint64, value []byte) {
	sum, err := proto.DecodeCounterValue(value)
	if err != nil { // the owner answered Ok with a value that is no counter: outcome unknown
		s.cacheError(&ForwardError{Code: proto.CodeIndeterminate, Reason: cforward.ReasonProtocol, Last: cforward.OutCacheOk}, id)
		return
	}
	s.send(&proto.CounterValue{TenantID: t, Namespace: ns, Cache: c, Key: key, Value: sum, RequestID: id})
}

// redirectSubscribe answers a subscribe to a shard another broker leads with not_leader
// (redirectShard, no request_id) and reports true; false when the shard is served here.
func (f *forwarding) redirectSubscribe(s *session, m *proto.Subscribe) bool {
	shard := 0
	if m.Shard != nil {
		shard = int(*m.Shard)
	}
	name := core.StreamName{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
	return f.redirectShard(s, core.ShardRef{Kind: core.ShardStream, Name: name, Shard: shard}, nil)
}

// notLeaderText is the message of the not_leader error: "shard 2 of
// t/ns/s is led by node b.felix at client address 10.0.0.2:7000, generation 0".
func notLeaderText(name core.StreamName, shard int, d cforward.IngressDecision) string {
	return "shard " + strconv.Itoa(shard) + " of " + name.String() + " is led by node " + d.Node.ID +
		" at client address " + d.Node.Addr + ", generation " + strconv.FormatUint(d.Generation, 10)
}
