package forward

import (
	"math"

	"felix/proto"
)

// Route is a resolved route of one client request: the names, the shard the request was
// routed to (core.RouteKey for a keyed publish, cache.ShardOf for a cache key, the engine's
// choice otherwise) and the generation of the ownership entry it was resolved against.
type Route struct {
	Tenant, Namespace, Name string
	Shard                   int    // the routed shard, in [0, Shards)
	Shards                  int    // the stream's or cache's shard count
	Generation              uint64 // the entry's generation (IngressDecision.Generation)
}

// ref returns the ShardRef naming exactly r.Shard, or ErrShardOutOfRange.
func (r Route) ref() (proto.ShardRef, error) {
	if r.Shards < 1 || r.Shards > math.MaxUint32 || r.Shard < 0 || r.Shard >= r.Shards {
		return proto.ShardRef{}, ErrShardOutOfRange
	}
	return proto.ShardRef{Tenant: []byte(r.Tenant), Namespace: []byte(r.Namespace),
		Name: []byte(r.Name), Shard: uint32(r.Shard)}, nil
}

// PublishMessage builds the AuthorizedForwardPublish (22) of a publish routed by r: the
// shard it names is r.Shard, unchanged (seed, "Authorization across a forward": the shard a
// forward names must be the shard the route was resolved for), at r.Generation, carrying
// the client's credential. payloads are not copied. Errors: ErrShardOutOfRange,
// ErrNoCredential. The correlation id is left 0 (the transport's Pool sets it).
func PublishMessage(r Route, payloads [][]byte, credential []byte) (*proto.AuthorizedForwardPublish, error) {
	ref, err := r.ref()
	if err != nil {
		return nil, err
	}
	if len(credential) == 0 {
		return nil, ErrNoCredential
	}
	return &proto.AuthorizedForwardPublish{
		ForwardPublish: proto.ForwardPublish{Shard: ref, Generation: r.Generation, Payloads: payloads},
		Credential:     credential,
	}, nil
}

// IdempotentPublishMessage builds the IdempotentForwardPublish (28) of an idempotent
// publish (client-protocol §8.10): PublishMessage's body plus producer_id (1..255 bytes,
// checked by the encoder) and the client's request_id, so the owner deduplicates. Errors as
// PublishMessage.
func IdempotentPublishMessage(r Route, payloads [][]byte, credential, producerID []byte,
	requestID uint64) (*proto.IdempotentForwardPublish, error) {
	m, err := PublishMessage(r, payloads, credential)
	if err != nil {
		return nil, err
	}
	return &proto.IdempotentForwardPublish{AuthorizedForwardPublish: *m, ProducerID: producerID,
		RequestID: requestID}, nil
}

// CacheRequest is one cache operation as the client sent it. Value is the Put value, or
// for CounterAdd the delta as 8 big-endian bytes (proto.AppendCounterValue); empty for Get,
// Delete and CounterGet.
type CacheRequest struct {
	Op     proto.CacheOp
	Key    []byte
	Value  []byte
	HasTTL bool
	TTLMs  uint64 // 0 when !HasTTL
}

// CacheMessage builds the AuthorizedForwardCacheOp (23) of a cache operation routed by r
// (the shard named is r.Shard, unchanged), carrying the credential. Key and value are not
// copied. Errors: ErrShardOutOfRange, ErrNoCredential, ErrKind (op outside 1..5).
func CacheMessage(r Route, c CacheRequest, credential []byte) (*proto.AuthorizedForwardCacheOp, error) {
	ref, err := r.ref()
	if err != nil {
		return nil, err
	}
	if _, ok := RequiredAction(proto.KindAuthorizedForwardCacheOp, c.Op); !ok {
		return nil, ErrKind
	}
	if len(credential) == 0 {
		return nil, ErrNoCredential
	}
	return &proto.AuthorizedForwardCacheOp{
		ForwardCacheOp: proto.ForwardCacheOp{Shard: ref, Generation: r.Generation, Op: c.Op,
			Key: c.Key, Value: c.Value, HasTTL: c.HasTTL, TTLMs: c.TTLMs},
		Credential: credential,
	}, nil
}

// AsKind returns the forward m re-addressed for one attempt: encoded as kind (the Machine's
// Send.Kind: the same kind, or a fallback 28 → 22 → 2 or 23 → 6) and naming generation
// (Send.Generation). The shard, payloads, key and value are m's, never changed. m is not
// modified; the result shares its slices. A kind m cannot become (upward, or across publish
// and cache) is ErrKind.
func AsKind(m proto.InternalMessage, kind proto.Kind, generation uint64) (proto.InternalMessage, error) {
	switch m := m.(type) {
	case *proto.IdempotentForwardPublish:
		if kind == proto.KindIdempotentForwardPublish {
			c := *m
			c.Generation = generation
			return &c, nil
		}
		return AsKind(&m.AuthorizedForwardPublish, kind, generation)
	case *proto.AuthorizedForwardPublish:
		if kind == proto.KindAuthorizedForwardPublish {
			c := *m
			c.Generation = generation
			return &c, nil
		}
		return AsKind(&m.ForwardPublish, kind, generation)
	case *proto.ForwardPublish:
		if kind == proto.KindForwardPublish {
			c := *m
			c.Generation = generation
			return &c, nil
		}
	case *proto.AuthorizedForwardCacheOp:
		if kind == proto.KindAuthorizedForwardCacheOp {
			c := *m
			c.Generation = generation
			return &c, nil
		}
		return AsKind(&m.ForwardCacheOp, kind, generation)
	case *proto.ForwardCacheOp:
		if kind == proto.KindForwardCacheOp {
			c := *m
			c.Generation = generation
			return &c, nil
		}
	}
	return nil, ErrKind
}
