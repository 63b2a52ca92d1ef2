package client

import (
	"sync/atomic"
	"testing"
	"time"

	"felix/internal/testwait"
	"felix/proto"
)

// routeAnswer answers a route_lookup of a one-shard modulo stream naming owner at addr.
func routeAnswer(x *exchange, m *proto.RouteLookup, addr string) {
	x.reply(&proto.Route{RequestID: m.RequestID, Routing: RoutingModulo,
		Shards: []proto.ShardRoute{{Shard: 0, Owner: proto.Owner{NodeID: "owner", Address: addr}}}})
}

// publishOK answers a JSON publish at offset 0.
func publishOK(x *exchange, b *proto.JSONPublishBatch) {
	first, last := uint64(0), uint64(len(b.Payloads)-1)
	x.reply(&proto.PublishOK{RequestID: *b.RequestID, FirstOffset: &first, LastOffset: &last})
}

// dialAny dials fb trusting any certificate (the test's fake brokers each have their own).
func dialAny(t *testing.T, fb *fakeBroker) *Client {
	t.Helper()
	c, err := Dial(testCtx(t), fb.ln.Addr().String(), WithInsecureSkipVerify(), WithToken("t"),
		WithReconnectBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A Direct publisher whose route names an owner nobody answers at falls back to the
// dialled broker (which forwards) within the owner dial bound, and the record is acked.
func TestDirectPublishFallsBackWhenTheOwnerIsUnreachable(t *testing.T) {
	dead := freeUDPAddr(t)
	fb := startFake(t, func(x *exchange, m proto.Message) {
		switch m := m.(type) {
		case *proto.RouteLookup:
			routeAnswer(x, m, dead)
		case *proto.JSONPublishBatch:
			publishOK(x, m)
		}
	})
	c := dialAny(t, fb)
	p, err := c.NewPublisher("s", PublisherOptions{Direct: true, Offsets: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(testCtx(t))
	start := time.Now()
	if _, err := p.PublishKeyedSync(testCtx(t), []byte("k"), []byte("x")); err != nil {
		t.Fatalf("publish with the owner unreachable: %v", err)
	}
	if took := time.Since(start); took > ownerDialTimeout+5*time.Second {
		t.Fatalf("fallback took %v", took)
	}
	if n := fb.count(proto.TypePublishBatch); n != 1 {
		t.Fatalf("the dialled broker got %d publishes, want 1 (the fallback)", n)
	}
	if _, err := p.PublishKeyedSync(testCtx(t), []byte("k"), []byte("y")); err != nil || fb.count(proto.TypePublishBatch) != 2 {
		t.Fatalf("second publish while the owner is marked down: %v, %d at the dialled broker", err, fb.count(proto.TypePublishBatch))
	}
}

// A Direct publisher sends a keyed batch to the owner its route names; an owner that
// answers not_leader (nothing written) naming the dialled broker gets the batch re-sent
// there, and the routes are asked for again.
func TestDirectPublishFollowsNotLeader(t *testing.T) {
	var aAddr atomic.Value
	owner := startFake(t, func(x *exchange, m proto.Message) {
		if b, ok := m.(*proto.JSONPublishBatch); ok {
			x.reply(&proto.NotLeader{RequestID: b.RequestID, TenantID: b.TenantID, Namespace: b.Namespace, Stream: b.Stream,
				Owner: proto.Owner{NodeID: "a", Address: aAddr.Load().(string)}, Generation: 1})
		}
	})
	a := startFake(t, func(x *exchange, m proto.Message) {
		switch m := m.(type) {
		case *proto.RouteLookup:
			routeAnswer(x, m, owner.ln.Addr().String())
		case *proto.JSONPublishBatch:
			publishOK(x, m)
		}
	})
	aAddr.Store(a.ln.Addr().String())
	c := dialAny(t, a)
	p, err := c.NewPublisher("s", PublisherOptions{Direct: true, Offsets: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(testCtx(t))
	res, err := p.PublishKeyedSync(testCtx(t), []byte("k"), []byte("x"))
	if err != nil || !res.HasOffsets {
		t.Fatalf("publish redirected by not_leader: %+v %v", res, err)
	}
	if o, d := owner.count(proto.TypePublishBatch), a.count(proto.TypePublishBatch); o != 1 || d != 1 {
		t.Fatalf("publishes: %d at the route's owner, %d at the owner it named; want 1 and 1", o, d)
	}
	testwait.Until(t, 10*time.Second, "second route lookup after not_leader",
		func() bool { return a.count(proto.TypeRouteLookup) >= 2 })
}
