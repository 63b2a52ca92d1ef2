package forward

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"felix/cluster/transport"
	"felix/proto"
)

// TestMixedBuildsOverTheTransport runs the seed's note on credentialed forwards over the
// real internal transport on 127.0.0.1: a forwarder (Machine + transport.Pool) against an
// owner whose transport.Dispatcher has, or (an owner of the old build) has not, the
// authorized kinds registered; the dispatcher answers an unregistered kind UnsupportedKind
// by itself. Upgraded forwarder to old owner: 22, UnsupportedKind, then 2, which goes
// through. Old forwarder (kind 2) to upgraded owner: Unauthorized, not retried.
func TestMixedBuildsOverTheTransport(t *testing.T) {
	fix := newAuthFixture(t)
	for _, c := range []struct {
		name                   string
		oldForwarder, oldOwner bool
		want                   Step
		wantCode               string
		wantKinds              []proto.Kind
	}{
		{"upgraded forwarder to old owner", false, true, Ack, "",
			[]proto.Kind{proto.KindAuthorizedForwardPublish, proto.KindForwardPublish}},
		{"old forwarder to upgraded owner", true, false, Fail, "unauthorized",
			[]proto.Kind{proto.KindForwardPublish}},
		{"both upgraded", false, false, Ack, "", []proto.Kind{proto.KindAuthorizedForwardPublish}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			addr := serveOwner(ctx, t, fix, c.oldOwner)
			end, kinds := forwardOverPool(ctx, t, fix, addr, c.oldForwarder)
			if end.Step != c.want || end.ClientCode() != c.wantCode || !slices.Equal(kinds, c.wantKinds) {
				t.Fatalf("ended %s after sending %v; want %v %q after %v", describeAction(end), kinds,
					c.want, c.wantCode, c.wantKinds)
			}
		})
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// serveOwner starts broker node-b leading t1/ns/orders shard 3 at generation 1 and returns
// its internal address; it stops when the test ends.
func serveOwner(ctx context.Context, t *testing.T, fix *authFixture, old bool) string {
	t.Helper()
	creds, err := transport.LoadCredentials("node-b", transport.TLSFiles{}, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	l, err := transport.Listen("127.0.0.1:0", creds, transport.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	view := OwnerView{Assigned: true, Leads: true, Generation: 1, Leader: Node{ID: "node-b", Addr: "b:5000"}}
	d := transport.NewDispatcher()
	handle := func(_ context.Context, _ string, m proto.InternalMessage) proto.InternalMessage {
		req, _ := RequestOf(m)
		if !old { // this build: the owner's decision; an old build checks nothing
			if dec := Decide(view, req, AuthCheck(fix.v, req.Shard)); dec.Verdict != Proceed {
				return dec.Answer
			}
		}
		return &proto.ForwardPublishOk{CorrelationID: req.CorrelationID, FirstOffset: 5, LastOffset: 5}
	}
	d.Register(proto.KindForwardPublish, handle)
	if !old {
		d.Register(proto.KindAuthorizedForwardPublish, handle)
		d.Register(proto.KindIdempotentForwardPublish, handle)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Serve(sctx, d.Handle) }()
	t.Cleanup(func() { stop(); _ = l.Close(); <-done })
	return l.Addr().String()
}

// forwardOverPool runs one forwarded publish from node-a to the owner at addr through a
// Machine and returns its terminal action and the kinds it sent.
func forwardOverPool(ctx context.Context, t *testing.T, fix *authFixture, addr string, old bool) (Action, []proto.Kind) {
	t.Helper()
	creds, err := transport.LoadCredentials("node-a", transport.TLSFiles{}, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := transport.NewPool(creds, transport.PoolOptions{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	r := Route{Tenant: "t1", Namespace: "ns", Name: "orders", Shard: 3, Shards: 8, Generation: 1}
	msg, err := PublishMessage(r, [][]byte{[]byte("x")}, []byte(fix.tokens["ok"]))
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Kind: proto.KindAuthorizedForwardPublish}
	if old {
		req.Kind = proto.KindForwardPublish
	}
	m, act, err := NewMachine(req, "node-b", 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []proto.Kind
	for act.Step == Send {
		sent, err := AsKind(msg, act.Kind, act.Generation)
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, act.Kind)
		answer, err := pool.Request(ctx, transport.Peer{NodeID: act.To, Addr: addr}, sent)
		if act, err = m.Step(Classify(answer, err)); err != nil {
			t.Fatal(err)
		}
	}
	return act, kinds
}
