package broker

// The owner side of forwarding (issue 19 item 2; seeds/internal-protocol.txt, "Forwarded
// publish", "Authorization across a forward", "Forwarded cache operation", "Chains are
// refused, not relayed"): handlers for kinds 22, 23 and 28, and for the legacy 2 and 6
// (refused Unauthorized by cforward.Decide), on the internal Dispatcher. Each decodes,
// decides with this broker's ownership entry and the client's credential checked on the
// server's verifier exactly as a direct request, then applies through the engine on the
// named shard and answers in the request's shape. Nothing is ever forwarded onward.

import (
	"context"
	"errors"
	"strings"

	cforward "felix/cluster/forward"
	"felix/cluster/transport"
	"felix/core"
	"felix/core/cache"
	"felix/proto"
)

// register installs the owner's handlers on d.
func (f *forwarding) register(d *transport.Dispatcher) {
	for _, k := range []proto.Kind{proto.KindForwardPublish, proto.KindAuthorizedForwardPublish, proto.KindIdempotentForwardPublish} {
		d.Register(k, f.servePublish)
	}
	for _, k := range []proto.Kind{proto.KindForwardCacheOp, proto.KindAuthorizedForwardCacheOp} {
		d.Register(k, f.serveCache)
	}
}

// view is what this broker's table says of ref, as cforward.Decide reads it.
func (f *forwarding) view(ref core.ShardRef) cforward.OwnerView {
	a, ok := f.s.owners.Lookup(ref)
	if !ok {
		return cforward.OwnerView{}
	}
	v := cforward.OwnerView{Assigned: true, Generation: a.Generation, Leads: f.leadsHere(a)}
	if a.Leader != "" {
		v.Leader = f.node(a.Leader)
	}
	return v
}

// decide runs cforward.Decide for a forward naming ref and counts the verdict.
func (f *forwarding) decide(req proto.InternalMessage, kind core.ShardKind) (cforward.OwnerRequest, core.ShardRef, cforward.OwnerDecision) {
	r, ok := cforward.RequestOf(req)
	if !ok {
		d := cforward.OwnerDecision{Verdict: cforward.RefuseMalformed,
			Answer: transport.Refusal(req.Kind(), req.Correlation(), proto.InternalMalformed)}
		f.m.served(d.Verdict)
		return r, core.ShardRef{}, d
	}
	ref := core.ShardRef{Kind: kind, Name: core.StreamName{Tenant: string(r.Shard.Tenant), Namespace: string(r.Shard.Namespace),
		Stream: string(r.Shard.Name)}, Shard: int(r.Shard.Shard)}
	d := cforward.Decide(f.view(ref), r, cforward.AuthCheck(f.s.clientVerifier(), r.Shard))
	f.m.served(d.Verdict)
	return r, ref, d
}

type publishOutcome struct {
	res core.PublishResult
	err error
}

// servePublish answers a forwarded publish (2, 22, 28): Decide, then core.Engine.Publish
// on the named shard with AckOnCommit (the owner's write is durable-then-answer, seed
// "Acknowledging a forwarded publish"), then ForwardPublishOk, ForwardPublishDuplicate (a
// 28 whose producer window already held it) or the engine error's code. It waits for the
// engine's completion: the payloads alias the transport's read buffer until then.
func (f *forwarding) servePublish(_ context.Context, _ string, req proto.InternalMessage) proto.InternalMessage {
	r, ref, d := f.decide(req, core.ShardStream)
	if d.Verdict != cforward.Proceed {
		return d.Answer
	}
	pr := &core.PublishRequest{Stream: ref.Name, Shard: ref.Shard, Ack: core.AckOnCommit}
	switch m := req.(type) {
	case *proto.IdempotentForwardPublish:
		pr.Payloads, pr.ProducerID, pr.Sequence = m.Payloads, string(m.ProducerID), m.RequestID
	case *proto.AuthorizedForwardPublish:
		pr.Payloads = m.Payloads
	}
	done := make(chan publishOutcome, 1)
	err := f.s.engine.Publish(pr, func(res core.PublishResult, err error) { done <- publishOutcome{res, err} })
	if err == nil {
		out := <-done
		err = out.err
		if err == nil && out.res.Duplicate && r.Kind == proto.KindIdempotentForwardPublish {
			return &proto.ForwardPublishDuplicate{CorrelationID: r.CorrelationID, FirstOffset: out.res.FirstOffset, LastOffset: out.res.LastOffset}
		}
		if err == nil {
			return &proto.ForwardPublishOk{CorrelationID: r.CorrelationID, FirstOffset: out.res.FirstOffset, LastOffset: out.res.LastOffset}
		}
	}
	return f.engineRefusal(r, ref, err)
}

// engineRefusal maps an engine error of a forward that passed Decide to the answer in the
// request's shape: ErrNotHere (the shard is not open or not led here now) → NotLeader with
// the table's leader when another broker leads it, else Unavailable (this broker leads it
// but has not opened it yet); ErrNotFound, ErrClosed → Unavailable; ErrOverloaded →
// Overload; ErrStorageFailed and corrupt records → StorageFailed; ErrInvalid and the
// cache's by-definition refusals → Malformed. ErrMoved, cache.ErrIndeterminate and any
// other error (the outcome is unknown) → Error(Unavailable), an answer outside the
// request's shape, which the forwarder's Machine reports indeterminate and never retries.
func (f *forwarding) engineRefusal(r cforward.OwnerRequest, ref core.ShardRef, err error) proto.InternalMessage {
	code := proto.InternalCode(0)
	switch {
	case errors.Is(err, core.ErrNotHere):
		if a, ok := f.s.owners.Lookup(ref); ok && a.Leader != "" && !strings.EqualFold(a.Leader, f.self) {
			n := f.node(a.Leader)
			return &proto.InternalNotLeader{CorrelationID: r.CorrelationID, OwnerNodeID: []byte(n.ID),
				OwnerAddress: []byte(n.Addr), Generation: a.Generation}
		}
		code = proto.InternalUnavailable
	case errors.Is(err, core.ErrNotFound), errors.Is(err, core.ErrClosed):
		code = proto.InternalUnavailable
	case errors.Is(err, core.ErrOverloaded):
		code = proto.InternalOverload
	case errors.Is(err, core.ErrStorageFailed), errors.Is(err, cache.ErrCorruptRecord):
		code = proto.InternalStorageFailed
	case errors.Is(err, core.ErrInvalid):
		code = proto.InternalMalformed
	}
	for _, c := range cacheRefusals {
		if code == 0 && errors.Is(err, c) {
			code = proto.InternalMalformed
		}
	}
	if code == 0 {
		f.s.log.Warn("forward: outcome unknown on the owner", "shard", ref.String(), "err", err)
		return &proto.InternalError{CorrelationID: r.CorrelationID, Code: proto.InternalUnavailable}
	}
	return transport.Refusal(r.Kind, r.CorrelationID, code)
}

type cacheOutcome struct {
	present bool
	value   []byte
	err     error
}

// serveCache answers a forwarded cache operation (6, 23): Decide (cache.read for Get and
// CounterGet, cache.write for the rest), then the engine's operation on the named shard
// (which refuses a key that is not on it: Malformed), then ForwardCacheOk: the value a Get
// found or a Delete removed, the sum of a counter op as eight big-endian bytes, nothing for
// a Put; or the engine error's code (engineRefusal).
func (f *forwarding) serveCache(_ context.Context, _ string, req proto.InternalMessage) proto.InternalMessage {
	r, ref, d := f.decide(req, core.ShardCache)
	if d.Verdict != cforward.Proceed {
		return d.Answer
	}
	m, ok := req.(*proto.AuthorizedForwardCacheOp)
	if !ok { // Decide refuses the legacy kind; nothing else reaches here
		return transport.Refusal(r.Kind, r.CorrelationID, proto.InternalMalformed)
	}
	done := make(chan cacheOutcome, 1)
	err := f.applyCache(&m.ForwardCacheOp, ref, done)
	if err == nil {
		out := <-done
		if err = out.err; err == nil {
			return &proto.ForwardCacheOk{CorrelationID: r.CorrelationID, Present: out.present, Value: out.value}
		}
	}
	return f.engineRefusal(r, ref, err)
}

// applyCache submits op to the engine; its completion goes to done (values copied).
func (f *forwarding) applyCache(op *proto.ForwardCacheOp, ref core.ShardRef, done chan<- cacheOutcome) error {
	e := f.s.engine
	name := core.CacheName{Tenant: ref.Name.Tenant, Namespace: ref.Name.Namespace, Cache: ref.Name.Stream}
	found := func(v []byte, ok bool, err error) {
		done <- cacheOutcome{present: ok && err == nil, value: append([]byte{}, v...), err: err}
	}
	sum := func(n int64, err error) {
		done <- cacheOutcome{present: err == nil, value: proto.AppendCounterValue(nil, n), err: err}
	}
	switch op.Op {
	case proto.CacheOpPut:
		ttl := cache.NoTTL
		if op.HasTTL {
			if op.TTLMs > 1<<62 {
				return cache.ErrTTLTooLarge
			}
			ttl = cache.TTLMillis(int64(op.TTLMs))
		}
		return e.CachePut(name, ref.Shard, op.Key, op.Value, ttl, func(err error) { done <- cacheOutcome{err: err} })
	case proto.CacheOpGet:
		return e.CacheGet(name, ref.Shard, op.Key, found)
	case proto.CacheOpDelete:
		return e.CacheDelete(name, ref.Shard, op.Key, found)
	case proto.CacheOpCounterAdd:
		delta, err := proto.DecodeCounterValue(op.Value)
		if err != nil {
			return core.ErrInvalid
		}
		return e.CounterAdd(name, ref.Shard, op.Key, delta, sum)
	case proto.CacheOpCounterGet: // presence byte: absent for a counter that does not exist
		return e.CounterGet(name, ref.Shard, op.Key, func(n int64, ok bool, err error) {
			if err == nil && !ok {
				done <- cacheOutcome{}
				return
			}
			sum(n, err)
		})
	}
	return core.ErrInvalid
}
