package core

import "fmt"

// Publish routes req to a shard and enqueues it on the shard's core
// (docs/architecture.md, "Path of a durable publish").
//
// Routing: req.Key != nil → RouteKey(stream routing, key); else
// req.Pinned → req.Shard; else an idempotent publish (ProducerID set) goes
// to idempotentShard(ProducerID, Sequence), so that every re-send of one
// batch meets the shard whose producer window holds it
// (spec/client-protocol.md §8.10); else round-robin over the shards.
//
// done runs exactly once when Publish returned nil, on the core goroutine
// (or on the goroutine closing the engine, with ErrClosed), and must not
// block. When it runs depends on the ack mode (AckMode). Errors given to
// done: ErrNotFound (stream deleted meanwhile), ErrOverloaded (held queue
// full behind a Block subscriber), ErrStorageFailed-wrapped, ErrClosed.
// Until done runs, req and every byte it references belong to the engine.
//
// Publish itself returns ErrInvalid (no payloads, bad ack mode, producer id
// too long), ErrNotFound (no such stream or shard), ErrOverloaded (the
// core's inbox is full: shed or retry with backoff) or ErrClosed; then done
// is never called.
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
	n := len(meta.shards)
	var shard int
	switch {
	case req.Key != nil:
		shard = RouteKey(meta.spec.Routing, req.Key, n)
	case req.Pinned:
		if req.Shard < 0 || req.Shard >= n {
			return fmt.Errorf("%w: %s has no shard %d", ErrNotFound, req.Stream, req.Shard)
		}
		shard = req.Shard
	case req.ProducerID != "":
		shard = idempotentShard(req.ProducerID, req.Sequence, n)
	default:
		shard = int((meta.rr.Add(1) - 1) % uint64(n))
	}
	s := meta.shards[shard]
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
