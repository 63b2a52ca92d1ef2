package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"felix/proto"

	"github.com/quic-go/quic-go"
)

func TestPoolIsBoundedAndFollowsAddressChanges(t *testing.T) {
	ctx := testCtx(t)
	b1 := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, okHandler)
	b2 := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, okHandler)
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{MaxPeers: 1})
	if _, err := p.Request(ctx, Peer{NodeID: "node-b", Addr: b1.Addr().String()}, publish(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Request(ctx, Peer{NodeID: "node-c", Addr: b1.Addr().String()}, publish(1)); !errors.Is(err, ErrTooManyPeers) {
		t.Fatalf("second node id past MaxPeers=1: %v, want ErrTooManyPeers", err)
	}
	// The catalog moved node-b: the pool entry redials the new address.
	if _, err := p.Request(ctx, Peer{NodeID: "NODE-B", Addr: b2.Addr().String()}, publish(2)); err != nil {
		t.Fatal(err)
	}
	if b2.Active() != 1 || p.Conns() != 1 {
		t.Fatalf("after the move: listener 2 has %d connections, pool %d", b2.Active(), p.Conns())
	}
	p.Forget("node-b")
	if _, err := p.Request(ctx, Peer{NodeID: "node-c", Addr: b1.Addr().String()}, publish(1)); !errors.Is(err, ErrWrongPeer) {
		t.Fatalf("after Forget the bound admits node-c (which is reached at node-b's address): %v", err)
	}
	if _, err := p.Request(ctx, Peer{NodeID: "no_dns", Addr: b1.Addr().String()}, publish(1)); !errors.Is(err, ErrInvalidNodeID) {
		t.Fatalf("invalid node id: %v", err)
	}
}

func TestListenerConnectionBound(t *testing.T) {
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{MaxConnections: 1}, okHandler)
	ctx := testCtx(t)
	p1 := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{})
	to := Peer{NodeID: "node-b", Addr: l.Addr().String()}
	if _, err := p1.Request(ctx, to, publish(1)); err != nil {
		t.Fatal(err)
	}
	c := creds(t, "node-c", TLSFiles{})
	qc, err := quic.DialAddr(ctx, to.Addr, c.ClientTLS("node-b"), &quic.Config{HandshakeIdleTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-qc.Context().Done():
	case <-ctx.Done():
		t.Fatal("a connection past MaxConnections stayed up")
	}
	var ae *quic.ApplicationError
	if err := context.Cause(qc.Context()); !errors.As(err, &ae) || ae.ErrorCode != CodeOverload {
		t.Fatalf("closed with %v, want CodeOverload", err)
	}
	if _, err := p1.Request(ctx, to, publish(2)); err != nil {
		t.Fatalf("the admitted peer after a refusal: %v", err)
	}
}

func TestNilAnswerIsUnavailableInTheRequestsShape(t *testing.T) {
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, func(context.Context, string, proto.InternalMessage) proto.InternalMessage { return nil })
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{})
	ans, err := p.Request(testCtx(t), Peer{NodeID: "node-b", Addr: l.Addr().String()}, publish(1))
	if e, ok := ans.(*proto.ForwardPublishError); err != nil || !ok || e.Code != proto.InternalUnavailable {
		t.Fatalf("nil answer: %#v %v", ans, err)
	}
}
