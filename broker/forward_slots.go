package broker

// The forwarder's bound of requests in flight to each owner (docs/forwarding.md,
// "Wiring"). The internal transport sheds a request beyond its per-peer bound
// (transport.Options.MaxInflightPerPeer, 256) and the Machine retries a shed within its
// attempt budget, so a burst of unbatched publishes through a non-owner (thousands of
// one-record requests, each forwarded at once) ended overloaded. A forward now waits for
// one of forwardSlotsPerPeer slots toward its owner before each send: the burst is queued
// here (its clients see latency, not refusals) and the transport keeps room for the
// replication and control traffic that shares its pool.

import (
	"context"
	"fmt"
	"sync"

	"felix/cluster/transport"
)

// forwardSlotsPerPeer is how many forwards one broker sends to one owner at a time: three
// quarters of the transport's default per-peer bound (256).
const forwardSlotsPerPeer = 192

// forwardSlots are the per-owner slots (one semaphore per peer node id, made on first use;
// peers are the cluster's brokers, so the map is bounded). Safe for concurrent use.
type forwardSlots struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// acquire waits for a slot toward peer and returns its release. It gives up when ctx ends
// (the forward's bound) or done closes (the broker drains): nothing was sent, the error
// wraps transport.ErrClosed for a drain and the context's error otherwise.
func (fs *forwardSlots) acquire(ctx context.Context, done <-chan struct{}, peer string) (func(), error) {
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = map[string]chan struct{}{}
	}
	ch := fs.m[peer]
	if ch == nil {
		ch = make(chan struct{}, forwardSlotsPerPeer)
		fs.m[peer] = ch
	}
	fs.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a forward slot toward %s: %w", peer, ctx.Err())
	case <-done:
		return nil, fmt.Errorf("%w: broker draining", transport.ErrClosed)
	}
}
