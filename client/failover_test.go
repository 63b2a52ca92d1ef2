package client

import (
	"errors"
	"testing"
	"time"

	"felix/proto"
)

// A client dialled with WithFailover whose broker goes away (its listener closed and the
// connection dropped with a Get outstanding) redials the next address: the re-sent Get
// (safe to re-send) is answered by the other broker.
func TestFailoverDialsTheNextBroker(t *testing.T) {
	b := startFake(t, func(x *exchange, m proto.Message) {
		if g, ok := m.(*proto.CacheGet); ok {
			x.reply(&proto.CacheValue{TenantID: g.TenantID, Namespace: g.Namespace, Cache: g.Cache, Key: g.Key, Value: []byte("from-b"), RequestID: g.RequestID})
		}
	})
	var a *fakeBroker
	a = startFake(t, func(x *exchange, m proto.Message) {
		a.ln.Close() // the broker is gone: no new connection is accepted
		x.drop()
	})
	c, err := Dial(testCtx(t), a.ln.Addr().String(), WithInsecureSkipVerify(), WithToken("t"), WithConnPool(1),
		WithFailover(b.ln.Addr().String()), WithDialTimeout(500*time.Millisecond), WithReconnectBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, found, err := c.Get(testCtx(t), "c", "k")
	if err != nil || !found || string(v) != "from-b" {
		t.Fatalf("get after the dialled broker went away: %q %v %v", v, found, err)
	}
	if a.count(proto.TypeCacheGet) != 1 || b.count(proto.TypeCacheGet) != 1 {
		t.Fatalf("gets: %d at the first broker, %d at the failover, want 1 and 1", a.count(proto.TypeCacheGet), b.count(proto.TypeCacheGet))
	}
	if _, err := Dial(testCtx(t), a.ln.Addr().String(), WithFailover("")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty failover address: %v", err)
	}
}
