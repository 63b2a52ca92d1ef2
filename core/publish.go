package core

import "fmt"

// Route returns the shard, in [0, shards of stream), that a publish to stream
// with routing key key (nil = none) and idempotent key (producerID,
// sequence) (producerID "" = not idempotent) goes to (docs/architecture.md,
// "Placement and routing"). The first rule that applies wins:
//
//  1. key != nil (an empty non-nil key counts): RouteKey(the stream's
//     Routing, key, shards): FNV-1a 64 of the key, then modulo
//     (RoutingModulo) or jump consistent hash (RoutingJumpHash;
//     seeds/upgrades-and-compatibility.txt, "jump_hash_routing").
//  2. producerID != "": idempotentShard(producerID, sequence, shards), a pure
//     function of the dedupe key, so that every re-send of one batch meets the
//     shard whose producer window holds it (spec/client-protocol.md §8.10).
//  3. otherwise round-robin: the stream's counter (shared by every caller,
//     one step per call to Route) modulo shards.
//
// Route reads only the catalog and, for rule 3, advances the counter; it
// does not publish. Callers resolve the shard with Route and hand it to
// Publish in PublishRequest.Shard. Errors: ErrNotFound (no such stream),
// ErrClosed.
func (e *Engine) Route(stream StreamName, key []byte, producerID string, sequence uint64) (shard int, err error) {
	if e.closed.Load() {
		return 0, ErrClosed
	}
	meta := e.lookup(stream)
	if meta == nil {
		return 0, ErrNotFound
	}
	n := len(meta.shards)
	switch {
	case key != nil:
		return RouteKey(meta.spec.Routing, key, n), nil
	case producerID != "":
		return idempotentShard(producerID, sequence, n), nil
	default:
		return int((meta.rr.Add(1) - 1) % uint64(n)), nil
	}
}

// Publish enqueues req on the core of shard req.Shard of req.Stream
// (docs/architecture.md, "Path of a durable publish"). Publish does not
// route: req.Shard is always the target, resolved beforehand with Route (or
// chosen by a caller that forwards or replays a batch to a known shard).
//
// done runs exactly once when Publish returned nil, on the core goroutine
// (or on the goroutine closing the engine, with ErrClosed), and must not
// block. When it runs depends on the ack mode (AckMode) and, for
// AckOnCommit, on the shard's release mark (Engine.Release). Errors given
// to done: ErrNotFound (stream deleted meanwhile), ErrNotHere (the shard
// became a follower or was closed meanwhile, or stopped leading while the
// publish was held behind a Block subscriber), ErrMoved (closed by
// CloseShard before the batch was released), ErrOverloaded (held queue full
// behind a Block subscriber), ErrStorageFailed-wrapped, ErrClosed. Until
// done runs, req and every byte it references belong to the engine.
//
// Publish itself returns ErrInvalid (no payloads, bad ack mode, producer id
// too long), ErrNotFound (no such stream, or req.Shard out of range),
// ErrNotHere (the shard is not open here, or is a follower), ErrOverloaded
// (the core's inbox is full: shed or retry with backoff) or ErrClosed; then
// done is never called.
func (e *Engine) Publish(req *PublishRequest, done func(PublishResult, error)) error {
	if len(req.Payloads) == 0 || req.Ack > AckOnCommit || len(req.ProducerID) > MaxProducerIDBytes {
		return fmt.Errorf("%w: publish with %d payloads, ack %d, producer id of %d bytes",
			ErrInvalid, len(req.Payloads), req.Ack, len(req.ProducerID))
	}
	if e.closed.Load() {
		return ErrClosed
	}
	meta := e.lookup(req.Stream)
	if meta == nil {
		return ErrNotFound
	}
	if req.Shard < 0 || req.Shard >= len(meta.shards) {
		return fmt.Errorf("%w: %s has no shard %d", ErrNotFound, req.Stream, req.Shard)
	}
	s := meta.shards[req.Shard]
	if p := meta.places[req.Shard]; p.role != RoleLeader {
		return notHere(ShardRef{Kind: ShardStream, Name: req.Stream, Shard: req.Shard}, p.role)
	}
	return e.post(s.c, message{kind: msgPublish, shard: s, req: req, done: done})
}

// idempotentShard maps the dedupe key (producer id, sequence) of an unkeyed
// idempotent publish to one of shards shards with FNV-1a 64, allocation-free.
// The mapping depends only on its arguments, so a re-sent batch lands on the
// shard that recorded it the first time; distinct sequences still spread
// over every shard.
func idempotentShard(producerID string, seq uint64, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := uint64(fnvOffset64)
	for i := 0; i < len(producerID); i++ {
		h ^= uint64(producerID[i])
		h *= fnvPrime64
	}
	for i := 0; i < 8; i++ {
		h ^= (seq >> (56 - 8*i)) & 0xff
		h *= fnvPrime64
	}
	return int(h % uint64(shards))
}
