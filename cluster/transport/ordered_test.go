package transport

import (
	"context"
	"errors"
	"sync"
	"testing"

	"felix/proto"
)

// Batches pipelined on one key arrive in the order sent, on a stream of their own, while
// another key's batches interleave; every batch gets its own answer.
func TestPipelinedBatchesArriveInOrderPerKey(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]uint64{}
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, func(ctx context.Context, peer string, req proto.InternalMessage) proto.InternalMessage {
		m := req.(*proto.AuthorizedForwardPublish)
		mu.Lock()
		seen[string(m.Shard.Name)] = append(seen[string(m.Shard.Name)], m.Generation)
		mu.Unlock()
		return okHandler(ctx, peer, req)
	})
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{MaxOrderedStreams: 2, MaxInflightPerPeer: 4096})
	ctx := testCtx(t)
	to := Peer{NodeID: "node-b", Addr: l.Addr().String()}
	const n = 500
	var pending []*Pending
	for i := 0; i < n; i++ {
		for _, shard := range []string{"s1", "s2"} {
			req := publish(uint64(i))
			req.Shard.Name = []byte(shard)
			pd, err := p.Pipeline(ctx, to, OrderKey{Shard: shard, Log: proto.LogStream}, req)
			if err != nil {
				t.Fatalf("pipeline %s/%d: %v", shard, i, err)
			}
			pending = append(pending, pd)
		}
	}
	for i, pd := range pending {
		ans, err := pd.Wait(ctx)
		if ok, isOk := ans.(*proto.ForwardPublishOk); err != nil || !isOk || ok.FirstOffset != uint64(i/2) {
			t.Fatalf("batch %d answered %#v %v", i, ans, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, shard := range []string{"s1", "s2"} {
		got := seen[shard]
		if len(got) != n {
			t.Fatalf("%s: %d batches handled, want %d", shard, len(got), n)
		}
		for i, g := range got {
			if g != uint64(i) {
				t.Fatalf("%s: batch %d handled in position %d: out of order", shard, g, i)
			}
		}
	}
	_, err := p.Pipeline(ctx, to, OrderKey{Shard: "s3", Log: proto.LogStream}, publish(1))
	if !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("third key past MaxOrderedStreams=2: %v, want ErrTooManyStreams", err)
	}
	if ps := p.peers["node-b"]; ps.m.inflight.Get() != 0 {
		t.Fatalf("%v requests still in flight after every answer", ps.m.inflight.Get())
	}
}
