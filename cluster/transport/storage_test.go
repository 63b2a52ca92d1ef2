package transport

import (
	"testing"

	"felix/proto"
)

// serveOlder starts a listener that behaves, for StorageHello, as one built before it:
// answering UnsupportedKind (olderClose false) or only closing with CodeMalformed.
func serveOlder(t *testing.T, c *Credentials, olderClose bool) *Listener {
	t.Helper()
	l, err := Listen("127.0.0.1:0", c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.olderHello, l.olderClose = true, olderClose
	return serveOn(t, l, okHandler)
}

// The storage identity a request's answer is attributed to is the one the listener named in
// StorageHelloOk on the connection that carried it: a later identity (the listener's next
// handshake) shows only on a new connection, and a request written before keeps the old one.
func TestStorageIDLearnedAtHandshake(t *testing.T) {
	ctx := testCtx(t)
	lc := creds(t, "b.test", TLSFiles{})
	first, second := StorageID{1, 15: 1}, StorageID{2, 15: 2}
	lc.SetStorageID(first)
	l := serve(t, lc, Options{}, okHandler)
	dc := creds(t, "a.test", TLSFiles{})
	dc.SetStorageID(StorageID{9})
	p := newPool(t, dc, PoolOptions{})
	to := Peer{NodeID: "b.test", Addr: l.Addr().String()}
	ans, id, err := p.RequestWithStorageID(ctx, to, publish(3))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := ans.(*proto.ForwardPublishOk); ok == nil || id != first {
		t.Fatalf("answer %#v under identity %v, want ForwardPublishOk under %v", ans, id, first)
	}
	pd, err := p.Pipeline(ctx, to, OrderKey{Shard: "s", Log: proto.LogStream}, publish(4))
	if err != nil {
		t.Fatal(err)
	}
	lc.SetStorageID(second) // the listener's next handshake names it; this connection does not
	if _, err := pd.Wait(ctx); err != nil || pd.PeerStorageID() != first {
		t.Fatalf("pipelined answer under %v (%v), want %v", pd.PeerStorageID(), err, first)
	}
	if _, id, _ := p.RequestWithStorageID(ctx, to, publish(5)); id != first {
		t.Fatalf("same connection answered under %v, want %v", id, first)
	}
	p.Forget("b.test") // a new connection learns the new identity
	if _, id, err := p.RequestWithStorageID(ctx, to, publish(6)); err != nil || id != second {
		t.Fatalf("new connection: identity %v (%v), want %v", id, err, second)
	}
	if pd.PeerStorageID() != first {
		t.Fatalf("an answered request changed identity to %v", pd.PeerStorageID())
	}
	if got := first.String(); got != "01000000000000000000000000000001" || (StorageID{}).String() != "" {
		t.Fatalf("String: %q", got)
	}
}

// A listener from before StorageHello, whether it answers UnsupportedKind or closes the
// connection (CodeMalformed, the previous build), is dialled again with Hello on a new
// connection; its identity is unknown and requests are served as before.
func TestStorageHelloFallsBackToHello(t *testing.T) {
	for _, olderClose := range []bool{false, true} {
		ctx := testCtx(t)
		lc := creds(t, "b.test", TLSFiles{})
		lc.SetStorageID(StorageID{7})
		l := serveOlder(t, lc, olderClose)
		p := newPool(t, creds(t, "a.test", TLSFiles{}), PoolOptions{})
		to := Peer{NodeID: "b.test", Addr: l.Addr().String()}
		ans, id, err := p.RequestWithStorageID(ctx, to, publish(3))
		if err != nil {
			t.Fatalf("close=%v: %v", olderClose, err)
		}
		if ok, _ := ans.(*proto.ForwardPublishOk); ok == nil || !id.IsZero() {
			t.Fatalf("close=%v: answer %#v under %v, want ForwardPublishOk under an unknown identity", olderClose, ans, id)
		}
		if d := p.dials.Load(); d != 2 {
			t.Fatalf("close=%v: %d dials, want 2 (StorageHello refused, then Hello)", olderClose, d)
		}
		pd, err := p.Pipeline(ctx, to, OrderKey{Shard: "s", Log: proto.LogStream}, publish(4))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pd.Wait(ctx); err != nil || !pd.PeerStorageID().IsZero() {
			t.Fatalf("close=%v: pipelined under %v (%v)", olderClose, pd.PeerStorageID(), err)
		}
	}
}

// A listener of this build still accepts the old Hello (a dialler from before StorageHello)
// and answers it HelloOk.
func TestListenerAcceptsTheOldHello(t *testing.T) {
	lc := creds(t, "b.test", TLSFiles{})
	lc.SetStorageID(StorageID{7})
	l := serve(t, lc, Options{}, okHandler)
	p := newPool(t, creds(t, "a.test", TLSFiles{}), PoolOptions{})
	c, err := p.dialHello("b.test", l.Addr().String(), newPeerMetrics(p.opts.Metrics, "b.test"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close(CodeNoError, "done")
	if !c.peerStorage.IsZero() {
		t.Fatalf("a Hello connection learned identity %v", c.peerStorage)
	}
	ans, err := c.roundTrip(testCtx(t), mustFrame(t, publish(2)))
	if ok, _ := ans.(*proto.ForwardPublishOk); err != nil || ok == nil {
		t.Fatalf("answer %#v (%v) on a Hello connection", ans, err)
	}
}

func mustFrame(t *testing.T, m proto.InternalMessage) []byte {
	t.Helper()
	f, err := encode(nil, m, DefaultMaxFrameBytes)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
