package client

import (
	"bytes"
)

// maxPooledFrame is the largest event frame body kept for reuse (a larger one is left to
// the garbage collector, so one big batch does not pin its buffer).
const maxPooledFrame = 1 << 20

// newFreeFrames returns the free list of a subscription with SubscribeOptions.ReuseBuffers
// (nil without): room for every frame that can be alive at once, the queue
// (WithSubscriptionQueue), one being read per shard and the one Next reads. A free list of
// the subscription's own, not a sync.Pool, so the garbage collector does not empty it: the
// steady state allocates nothing, at the price of keeping that many buffers while the
// subscription is open.
func newFreeFrames(queue, shards int) chan *eventFrame {
	return make(chan *eventFrame, queue+2*shards+1)
}

// newFrame returns an empty frame for shard: a recycled one with ReuseBuffers, else a
// new one whose body will be a buffer of its own (records valid indefinitely).
func (s *Subscription) newFrame(shard uint32) *eventFrame {
	if s.free == nil {
		return &eventFrame{shard: shard}
	}
	select {
	case f := <-s.free:
		f.shard, f.gap = shard, 0
		return f
	default:
		return &eventFrame{shard: shard, buf: []byte{}} // non-nil: nextInto gives it headroom
	}
}

// release recycles f (nil, or ReuseBuffers off: nothing) once no record of it can be read
// any more: Next has moved past its last record, or the reader dropped it.
func (s *Subscription) release(f *eventFrame) {
	if f == nil || s.free == nil || cap(f.buf) > maxPooledFrame {
		return
	}
	if f.buf == nil {
		f.buf = []byte{} // a failed read: the next one grows it with headroom
	}
	f.buf = f.buf[:0]
	select {
	case s.free <- f:
	default:
	}
}

// ownRecord copies r's Payload and Publisher out of a recycled frame (the Records channel
// with ReuseBuffers: the receiver reads a record after Next was called again).
func ownRecord(r Record) Record {
	r.Payload, r.Publisher = bytes.Clone(r.Payload), bytes.Clone(r.Publisher)
	return r
}
