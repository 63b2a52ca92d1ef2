package client

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"felix/proto"
)

// redirector is a fake broker answering every subscribe not_leader with to(): the owner's
// address and generation.
func redirector(t *testing.T, to func() (string, uint64)) *fakeBroker {
	return startFake(t, func(x *exchange, m proto.Message) {
		if s, ok := m.(*proto.Subscribe); ok {
			addr, gen := to()
			x.reply(&proto.NotLeader{Stream: s.Stream, Owner: proto.Owner{NodeID: "n", Address: addr}, Generation: gen})
		}
	})
}

// Two brokers naming each other at one generation: the SDK follows a → b → a, then
// refuses the second redirect to (b, 2) as a loop (issue 19 item 6), without waiting for
// ctx: a *RedirectError{Loop} that matches ErrNotLeader and carries the owner.
func TestSubscribeRedirectLoopRefused(t *testing.T) {
	var a, b *fakeBroker
	a = redirector(t, func() (string, uint64) { return b.ln.Addr().String(), 2 })
	b = redirector(t, func() (string, uint64) { return a.ln.Addr().String(), 2 })
	c, err := Dial(testCtx(t), a.ln.Addr().String(), WithInsecureSkipVerify(), WithToken("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Subscribe(testCtx(t), "s", Latest, SubscribeOptions{})
	var re *RedirectError
	var nl *NotLeaderError
	if !errors.As(err, &re) || !re.Loop || re.Hops != 2 || !errors.Is(err, ErrNotLeader) || !errors.As(err, &nl) ||
		nl.Address != b.ln.Addr().String() || nl.Generation != 2 {
		t.Fatalf("subscribe between two brokers naming each other: %v (%T), want a loop after 2 redirects", err, err)
	}
	if n := a.count(proto.TypeSubscribe) + b.count(proto.TypeSubscribe); n != 3 {
		t.Fatalf("%d subscribes sent, want 3 (a, b, a)", n)
	}
}

// A broker that names itself at a new generation each time is followed maxRedirects
// times, then the chain's budget ends the subscribe with a *RedirectError (not a loop).
func TestSubscribeRedirectBudget(t *testing.T) {
	var a *fakeBroker
	var gen atomic.Uint64
	a = redirector(t, func() (string, uint64) { return a.ln.Addr().String(), gen.Add(1) })
	c, err := Dial(testCtx(t), a.ln.Addr().String(), WithInsecureSkipVerify(), WithToken("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Subscribe(testCtx(t), "s", Latest, SubscribeOptions{})
	var re *RedirectError
	if !errors.As(err, &re) || re.Loop || re.Hops != maxRedirects || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("subscribe redirected forever: %v (%T), want the budget spent after %d", err, err, maxRedirects)
	}
	if n := a.count(proto.TypeSubscribe); n != maxRedirects+1 {
		t.Fatalf("%d subscribes sent, want %d", n, maxRedirects+1)
	}
}

// The chain admits distinct (address, generation) pairs, the same address at a new
// generation included, refuses a repeat and a redirect without an address, and forgets
// everything on reset.
func TestRedirectChain(t *testing.T) {
	var ch redirectChain
	for i, h := range []redirectHop{{"a", 0}, {"b", 0}, {"a", 1}} {
		if err := ch.follow(&NotLeaderError{Address: h.addr, Generation: h.generation}); err != nil {
			t.Fatalf("hop %d %v: %v", i, h, err)
		}
	}
	var re *RedirectError
	if err := ch.follow(&NotLeaderError{Address: "b", Generation: 0}); !errors.As(err, &re) || !re.Loop {
		t.Fatalf("repeat of (b, 0): %v", err)
	}
	if err := ch.follow(&NotLeaderError{}); err == nil || errors.As(err, &re) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("no address: %v", err)
	}
	ch.reset()
	if err := ch.follow(&NotLeaderError{Address: "b", Generation: 0}); err != nil {
		t.Fatalf("after reset: %v", err)
	}
}

// The Client's redirect connections are bounded: beyond maxRedirectTargets a new target
// replaces one without a live connection (a holder of it gets the non-terminal
// errRedirectTargetEvicted, not ErrClosed); Close closes them all.
func TestRedirectTargetsBounded(t *testing.T) {
	fb, other := startFake(t, func(*exchange, proto.Message) {}), startFake(t, func(*exchange, proto.Message) {})
	c, err := Dial(testCtx(t), fb.ln.Addr().String(), WithInsecureSkipVerify(), WithToken("t"))
	if err != nil {
		t.Fatal(err)
	}
	var made []*connSlot
	for i := 1; i <= maxRedirectTargets+5; i++ {
		s := c.slotFor(fmt.Sprintf("127.0.0.1:%d", i))
		if s == nil {
			t.Fatalf("target %d: no slot although none is live", i)
		}
		made = append(made, s)
	}
	c.redirMu.Lock()
	n := len(c.redirs)
	var evicted *connSlot
	for _, s := range made {
		if c.redirs[s.addr] != s {
			evicted = s
		}
	}
	c.redirMu.Unlock()
	if n != maxRedirectTargets || evicted == nil {
		t.Fatalf("%d redirect slots cached, want %d", n, maxRedirectTargets)
	}
	if _, err := evicted.get(testCtx(t)); !errors.Is(err, errRedirectTargetEvicted) || terminal(err) {
		t.Fatalf("an evicted slot: %v", err)
	}
	live := c.slotFor(other.ln.Addr().String())
	if _, err := live.get(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := live.get(testCtx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("a redirect slot after Close: %v", err)
	}
}

// mover is a fake broker that accepts every subscribe and at once ends its event stream
// with not_leader naming to() at generation 5: the shard "moves" before any record.
func mover(t *testing.T, to func() string) *fakeBroker {
	return startFake(t, func(x *exchange, m proto.Message) {
		s, ok := m.(*proto.Subscribe)
		if !ok {
			return
		}
		es, err := x.conn.OpenUniStream()
		if err != nil {
			return
		}
		frames := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: 1})
		_, _ = es.Write(frames)
		x.reply(&proto.Subscribed{SubscriptionID: 1})
		_, _ = es.Write(proto.AppendMessage(nil, &proto.NotLeader{Stream: s.Stream, Owner: proto.Owner{NodeID: "n", Address: to()}, Generation: 5}))
		_ = es.Close()
	})
}

// A live subscription whose shard keeps moving between two brokers at one generation
// without delivering a record follows a → b → a, then refuses the repeat as a loop: Next
// returns the *RedirectError instead of the subscription bouncing forever.
func TestLiveSubscriptionMoveLoopRefused(t *testing.T) {
	var a, b *fakeBroker
	a = mover(t, func() string { return b.ln.Addr().String() })
	b = mover(t, func() string { return a.ln.Addr().String() })
	c, err := Dial(testCtx(t), a.ln.Addr().String(), WithInsecureSkipVerify(), WithToken("t"), WithReconnectBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(testCtx(t), "s", Latest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	_, err = sub.Next(testCtx(t))
	var re *RedirectError
	if !errors.As(err, &re) || !re.Loop || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a subscription moved back and forth: %v (%T), want a redirect loop", err, err)
	}
	if n := a.count(proto.TypeSubscribe) + b.count(proto.TypeSubscribe); n != 3 {
		t.Fatalf("%d subscribes, want 3 (a, b, a)", n)
	}
}
