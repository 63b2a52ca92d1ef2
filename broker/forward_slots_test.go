package broker

import (
	"context"
	"errors"
	"testing"

	"felix/cluster/transport"
	"felix/core"
	"felix/proto"
)

// A burst of unbatched publishes pipelined through a non-owner (far more than the internal
// transport's 256 requests in flight per peer) is queued on the forwarder's per-owner slots
// and acked, not shed until the attempt budget is spent and answered overloaded (found by
// docs/bench/forwarding.md's tool: 20 000 one-record batches through a non-owner failed).
func TestForwardBurstQueuedNotShed(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.create(streamsPath, map[string]any{"stream": "burst", "shards": 1})
	ref := core.ShardRef{Kind: core.ShardStream, Name: core.StreamName{Tenant: "default", Namespace: "default", Stream: "burst"}}
	ingress := c.brokers[0]
	if leaderOf(t, ingress.srv, ref) == ingress.srv.cfg.NodeID {
		ingress = c.brokers[1]
	}
	r := dialClient(t, ingress.srv, "")
	const n = 3000
	for id := uint64(1); id <= n; id++ {
		r.send(&proto.JSONPublishBatch{TenantID: "default", Namespace: "default", Stream: "burst",
			Payloads: [][]byte{[]byte("x")}, RequestID: &id, Ack: proto.JSONAckPerBatch})
	}
	seen := map[uint64]bool{}
	for range n {
		switch m := r.next().(type) {
		case *proto.PublishOK:
			seen[m.RequestID] = true
		default:
			t.Fatalf("after %d acks: %#v", len(seen), m)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct acks of %d publishes", len(seen), n)
	}
}

// forwardSlots admits forwardSlotsPerPeer forwards per peer, then waits: a context that
// ends or a drain gives up (nothing sent); a release admits the next; another peer has
// its own slots.
func TestForwardSlotsBoundPerPeer(t *testing.T) {
	var fs forwardSlots
	ctx := context.Background()
	var releases []func()
	for range forwardSlotsPerPeer {
		rel, err := fs.acquire(ctx, nil, "b")
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, rel)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fs.acquire(ended, nil, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("slot %d with the context ended: %v", forwardSlotsPerPeer+1, err)
	}
	draining := make(chan struct{})
	close(draining)
	if _, err := fs.acquire(context.Background(), draining, "b"); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("slot while draining: %v", err)
	}
	if rel, err := fs.acquire(ctx, nil, "c"); err != nil {
		t.Fatalf("another peer's slot: %v", err)
	} else {
		rel()
	}
	releases[0]()
	if _, err := fs.acquire(ctx, nil, "b"); err != nil {
		t.Fatalf("slot after a release: %v", err)
	}
}
