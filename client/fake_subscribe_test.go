package client

// Subscription rules against the fake broker (fake_test.go): gaps and resume,
// terminal errors, redirects to the shard's owner, and re-subscribing after a
// lost connection.

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/proto"
)

// An event stream ending under a live subscription: the SDK re-subscribes from the next
// offset, an offset jump in the frames is reported as a gap (skipped_before is not), and
// offsets delivered before are never delivered again.
func TestSubscriptionGapsAndResume(t *testing.T) {
	var mu sync.Mutex
	subs := 0
	fb := startFake(t, func(x *exchange, m proto.Message) {
		s, ok := m.(*proto.Subscribe)
		if !ok {
			return
		}
		mu.Lock()
		subs++
		n := subs
		mu.Unlock()
		es, err := x.conn.OpenUniStream()
		if err != nil {
			return
		}
		id := uint64(n)
		frames := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: id})
		x.reply(&proto.Subscribed{SubscriptionID: id})
		if n == 1 {
			// offsets 0,1 then a drop of 2..4, then 5; then 6 after one skipped offset.
			frames = proto.AppendSharedEventBatch(frames, 0, true, [][]byte{[]byte("a"), []byte("b")})
			frames = proto.AppendSharedEventBatch(frames, 5, true, [][]byte{[]byte("f")})
			frames, _ = proto.AppendEventBatch(frames, &proto.EventBatch{Shared: true, WithOffsets: true, BaseOffset: 7, SkippedBefore: 1, Payloads: [][]byte{[]byte("h")}})
			_, _ = es.Write(frames)
			_ = es.Close() // the stream ends (as in a broker drain): the SDK re-subscribes
			return
		}
		if s.Start == nil || s.Start.Kind != proto.StartOffset || s.Start.Offset != 8 {
			x.fb.t.Errorf("re-subscribe start %+v, want offset 8", s.Start)
		}
		// An overlapping frame (offsets 6..8) and a repeat of 8: only offset 8 is new.
		frames = proto.AppendSharedEventBatch(frames, 6, true, [][]byte{[]byte("g"), []byte("h"), []byte("i")})
		frames = proto.AppendSharedEventBatch(frames, 8, true, [][]byte{[]byte("i")})
		frames = proto.AppendSharedEventBatch(frames, 9, true, [][]byte{[]byte("j")})
		_, _ = es.Write(frames)
	})
	c := fb.dial()
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, "s", Earliest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	want := []struct {
		off uint64
		gap uint64
		p   string
	}{{0, 0, "a"}, {1, 0, "b"}, {5, 3, "f"}, {7, 0, "h"}, {8, 0, "i"}, {9, 0, "j"}}
	records := sub.Records(ctx)
	for _, w := range want {
		r, ok := <-records
		if !ok {
			t.Fatal(sub.Err())
		}
		if r.Offset != w.off || r.Gap != w.gap || string(r.Payload) != w.p {
			t.Fatalf("got offset %d gap %d %q, want %+v", r.Offset, r.Gap, r.Payload, w)
		}
	}
	if sub.Err() != nil {
		t.Fatalf("Err while the channel is open: %v", sub.Err())
	}
	sub.Close()
	for range records {
	}
	if !errors.Is(sub.Err(), ErrClosed) {
		t.Fatalf("Err after Close: %v", sub.Err())
	}
}

// A re-subscribe that finds its offset trimmed ends the subscription with *CursorError
// after the records already received; a not_leader on an event stream ends it with
// *NotLeaderError.
func TestSubscriptionTerminalErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(x *exchange, es *quic.SendStream) // ends the first event stream
		want error
	}{
		{"trimmed", func(x *exchange, es *quic.SendStream) { _ = es.Close() }, ErrCursor},
		{"moved", func(x *exchange, es *quic.SendStream) {
			// No address: nowhere to follow, so the subscription ends with the redirect.
			_, _ = es.Write(proto.AppendMessage(nil, &proto.NotLeader{Stream: "s", Owner: proto.Owner{NodeID: "b2"}, Generation: 3}))
			_ = es.Close()
		}, ErrNotLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			fb := startFake(t, func(x *exchange, m proto.Message) {
				if _, ok := m.(*proto.Subscribe); !ok {
					return
				}
				mu.Lock()
				n++
				first := n == 1
				mu.Unlock()
				if !first {
					x.reply(&proto.SubscribeCursorError{Reason: proto.CursorTooOld, Requested: 2, Available: 50})
					return
				}
				es, err := x.conn.OpenUniStream()
				if err != nil {
					return
				}
				frames := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: 1})
				frames = proto.AppendSharedEventBatch(frames, 0, true, [][]byte{[]byte("a"), []byte("b")})
				_, _ = es.Write(frames)
				x.reply(&proto.Subscribed{SubscriptionID: 1})
				tc.end(x, es)
			})
			c := fb.dial()
			ctx := testCtx(t)
			sub, err := c.Subscribe(ctx, "s", Earliest, SubscribeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			for i := range 2 {
				if r, err := sub.Next(ctx); err != nil || r.Offset != uint64(i) {
					t.Fatalf("record %d: %+v %v", i, r, err)
				}
			}
			_, err = sub.Next(ctx)
			mustErrIs(t, err, tc.want)
			var ce *CursorError
			if tc.want == ErrCursor && (!errors.As(err, &ce) || ce.Requested != 2 || ce.Available != 50 || ce.Reason != CursorTooOld) {
				t.Fatalf("cursor error %#v", err)
			}
		})
	}
}

// Redirects (spec §8.9): a subscribe answered not_leader is sent to the owner's address;
// a not_leader ending a live event stream moves the subscription to the new owner, which
// is asked for the next offset. Both fakes have their own certificates, so the client
// runs with WithInsecureSkipVerify.
func TestSubscriptionFollowsRedirects(t *testing.T) {
	var mu sync.Mutex
	var starts []*proto.Start
	var owner *fakeBroker
	serve := func(x *exchange, s *proto.Subscribe, base uint64, payloads ...string) *quic.SendStream {
		es, err := x.conn.OpenUniStream()
		if err != nil {
			return nil
		}
		var ps [][]byte
		for _, p := range payloads {
			ps = append(ps, []byte(p))
		}
		frames := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: 1})
		frames = proto.AppendSharedEventBatch(frames, base, true, ps)
		_, _ = es.Write(frames)
		x.reply(&proto.Subscribed{SubscriptionID: 1})
		return es
	}
	// a: not the owner at first (redirects to b); later the owner again.
	a := startFake(t, func(x *exchange, m proto.Message) {
		s, ok := m.(*proto.Subscribe)
		if !ok {
			return
		}
		mu.Lock()
		starts = append(starts, s.Start)
		n := len(starts)
		mu.Unlock()
		if n == 1 {
			x.reply(&proto.NotLeader{Stream: s.Stream, Owner: proto.Owner{NodeID: "b", Address: owner.ln.Addr().String()}, Generation: 2})
			return
		}
		serve(x, s, 2, "c")
	})
	b := startFake(t, func(x *exchange, m proto.Message) {
		s, ok := m.(*proto.Subscribe)
		if !ok {
			return
		}
		mu.Lock()
		starts = append(starts, s.Start)
		mu.Unlock()
		es := serve(x, s, 0, "a", "b")
		if es == nil {
			return
		}
		// The shard moves back to a: the event stream ends with not_leader.
		_, _ = es.Write(proto.AppendMessage(nil, &proto.NotLeader{Stream: s.Stream, Owner: proto.Owner{NodeID: "a", Address: a.ln.Addr().String()}, Generation: 3}))
		_ = es.Close()
	})
	owner = b
	c, err := Dial(testCtx(t), a.ln.Addr().String(), WithInsecureSkipVerify(), WithToken("t"), WithReconnectBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, "s", Earliest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for i, want := range []string{"a", "b", "c"} {
		r, err := sub.Next(ctx)
		if err != nil || string(r.Payload) != want || r.Offset != uint64(i) || r.Gap != 0 {
			t.Fatalf("record %d: %+v %v", i, r, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 3 || starts[0].Kind != proto.StartEarliest || starts[1].Kind != proto.StartEarliest ||
		starts[2].Kind != proto.StartOffset || starts[2].Offset != 2 {
		t.Fatalf("subscribe starts %+v", starts)
	}
}

// docs/soak.md finding 4: a connection lost under a subscribe (here the broker drops it on
// the first subscribe) is retried by the SDK itself on a new connection, both when the
// Subscription is created and when it re-subscribes after its event stream ended; only a
// definite refusal ends it.
func TestSubscribeRetriesLostConnection(t *testing.T) {
	var mu sync.Mutex
	subs := 0
	fb := startFake(t, func(x *exchange, m proto.Message) {
		s, ok := m.(*proto.Subscribe)
		if !ok {
			return
		}
		mu.Lock()
		subs++
		n := subs
		mu.Unlock()
		if n == 1 || n == 3 { // the first subscribe and the first re-subscribe lose their connection
			x.drop()
			return
		}
		es, err := x.conn.OpenUniStream()
		if err != nil {
			return
		}
		id := uint64(n)
		frames := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: id})
		x.reply(&proto.Subscribed{SubscriptionID: id})
		if n == 2 {
			if s.Start == nil || s.Start.Kind != proto.StartOffset || s.Start.Offset != 3 {
				x.fb.t.Errorf("subscribe start %+v, want offset 3", s.Start)
			}
			frames = proto.AppendSharedEventBatch(frames, 3, true, [][]byte{[]byte("d")})
			_, _ = es.Write(frames)
			_ = es.Close() // the stream ends: the SDK re-subscribes from 4
			return
		}
		if s.Start == nil || s.Start.Kind != proto.StartOffset || s.Start.Offset != 4 {
			x.fb.t.Errorf("re-subscribe start %+v, want offset 4", s.Start)
		}
		if n == 4 {
			frames = proto.AppendSharedEventBatch(frames, 4, true, [][]byte{[]byte("e")})
			_, _ = es.Write(frames)
			return
		}
	})
	c := fb.dial()
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, "s", Offset(3), SubscribeOptions{})
	if err != nil {
		t.Fatalf("Subscribe after a lost connection: %v", err)
	}
	defer sub.Close()
	for _, want := range []uint64{3, 4} {
		r, err := sub.Next(ctx)
		if err != nil || r.Offset != want || r.Gap != 0 {
			t.Fatalf("want offset %d: %+v %v", want, r, err)
		}
	}
	mu.Lock()
	n := subs
	mu.Unlock()
	if n != 4 {
		t.Fatalf("%d subscribes, want 4", n)
	}
}
