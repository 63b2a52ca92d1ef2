package transport

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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

func (c *clientConn) pendingCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// A pipelined request ends without a goroutine of its own: the fake-clock timeout completes
// it ErrTimeout, the real timer likewise, and the connection's end fails every one still
// pending ErrConnectionLost; each returns its in-flight slot.
func TestPipelinedRequestsTerminate(t *testing.T) {
	entered := make(chan struct{}, 1000)
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, blockingHandler(entered))
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{MaxInflightPerPeer: 1000, RequestTimeout: 7 * time.Second})
	fire := make(chan time.Time)
	p.after = func(d time.Duration) (<-chan time.Time, func() bool) { return fire, func() bool { return true } }
	ctx := testCtx(t)
	to := Peer{NodeID: "node-b", Addr: l.Addr().String()}
	key := OrderKey{Shard: "s1", Log: proto.LogStream}
	pd, err := p.Pipeline(ctx, to, key, publish(1))
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	select {
	case <-pd.Done():
		t.Fatal("completed before its timeout")
	default:
	}
	fire <- time.Now()
	if _, err := pd.Wait(ctx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("fake-clock timeout: %v, want ErrTimeout", err)
	}
	ps := p.peers["node-b"]
	if ps.m.inflight.Get() != 0 || ps.m.timeouts.Get() != 1 || p.conn(t, "node-b").pendingCount() != 0 {
		t.Fatalf("after the timeout: %v in flight, %d timeouts, %d pending", ps.m.inflight.Get(), ps.m.timeouts.Get(), p.conn(t, "node-b").pendingCount())
	}
	p.after, p.opts.RequestTimeout = nil, 20*time.Millisecond
	if pd, err = p.Pipeline(ctx, to, key, publish(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.Wait(ctx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("real timer: %v, want ErrTimeout", err)
	}
	p.opts.RequestTimeout = time.Hour
	var all []*Pending
	for i := 0; i < 500; i++ {
		pd, err := p.Pipeline(ctx, to, key, publish(uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, pd)
	}
	waitFor(t, ctx, "500 pending", func() bool { return p.conn(t, "node-b").pendingCount() == 500 })
	l.Close()
	for i, pd := range all {
		if _, err := pd.Wait(ctx); !errors.Is(err, ErrConnectionLost) {
			t.Fatalf("pending %d after the drop: %v, want ErrConnectionLost", i, err)
		}
	}
	if ps.m.inflight.Get() != 0 {
		t.Fatalf("%v in flight after every pending ended", ps.m.inflight.Get())
	}
}
