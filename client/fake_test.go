package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/netq"
	"felix/proto"
)

// fakeBroker is a scripted FLX1 server on 127.0.0.1 for the SDK's retry and error rules:
// it answers auth like a negotiating (or legacy) broker and hands every later message to
// the test's handler, which can answer, stay silent, or drop the connection.
type fakeBroker struct {
	t        *testing.T
	ln       *quic.Listener
	fp       string
	legacy   bool     // answer auth with plain ok
	features []string // auth_ok features (nil = every SDK feature)
	flags    uint16

	mu     sync.Mutex
	seen   []proto.Message
	handle func(x *exchange, m proto.Message)
}

// exchange is one received message with the means to answer it.
type exchange struct {
	fb   *fakeBroker
	conn *quic.Conn
	st   *quic.Stream
	wmu  *sync.Mutex
}

func (x *exchange) reply(m proto.Message) {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	_, _ = x.st.Write(proto.AppendMessage(nil, m))
}

func (x *exchange) raw(b []byte) {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	_, _ = x.st.Write(b)
}

// drop closes the whole connection (the answer is lost).
func (x *exchange) drop() { _ = x.conn.CloseWithError(0, "fake broker drops the connection") }

// count returns how many messages of type typ the broker received.
func (fb *fakeBroker) count(typ proto.MessageType) int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	n := 0
	for _, m := range fb.seen {
		if m.Type() == typ {
			n++
		}
	}
	return n
}

func (fb *fakeBroker) messages(typ proto.MessageType) []proto.Message {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	var out []proto.Message
	for _, m := range fb.seen {
		if m.Type() == typ {
			out = append(out, m)
		}
	}
	return out
}

// startFake starts a fake broker; configure (if any) runs before it serves.
func startFake(t *testing.T, handle func(x *exchange, m proto.Message), configure ...func(*fakeBroker)) *fakeBroker {
	t.Helper()
	cert, err := netq.SelfSigned([]string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", netq.ClientRoleTLS(cert), &quic.Config{MaxIncomingStreams: 100})
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBroker{t: t, ln: ln, fp: netq.Fingerprint(cert.Certificate[0]), handle: handle, flags: proto.KnownFlags}
	for _, f := range configure {
		f(fb)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go fb.serveConn(c)
		}
	}()
	return fb
}

func (fb *fakeBroker) serveConn(c *quic.Conn) {
	for {
		st, err := c.AcceptStream(context.Background())
		if err != nil {
			return
		}
		go fb.serveStream(c, st)
	}
}

func (fb *fakeBroker) serveStream(c *quic.Conn, st *quic.Stream) {
	x := &exchange{fb: fb, conn: c, st: st, wmu: &sync.Mutex{}}
	var buf []byte
	for {
		h, body, err := proto.ReadFrame(st, buf, proto.DefaultMaxFrameBytes)
		if err != nil {
			return
		}
		var m proto.Message
		if h.Flags == 0 {
			if m, err = proto.DecodeMessage(body); err != nil {
				fb.t.Errorf("fake broker: undecodable message: %v", err)
				return
			}
		} else {
			// Binary publishes are recorded as the JSON batch they stand for.
			var pb proto.PublishBatch
			if err := proto.DecodePublish(h.Flags, body, &pb); err != nil {
				fb.t.Errorf("fake broker: undecodable binary frame %#x: %v", h.Flags, err)
				return
			}
			id := pb.RequestID
			payloads := make([][]byte, len(pb.Payloads))
			for i, p := range pb.Payloads {
				payloads[i] = append([]byte(nil), p...)
			}
			// Ack "binary" marks the frame's origin for handlers (answer with a 0x0010 ack).
			m = &proto.JSONPublishBatch{TenantID: string(pb.TenantID), Namespace: string(pb.Namespace), Stream: string(pb.Stream),
				Key: append([]byte(nil), pb.Key...), Payloads: payloads, RequestID: &id, ProducerID: string(pb.ProducerID), Ack: "binary", Idempotent: h.Flags&proto.FlagPublishIdempotent != 0}
		}
		if a, ok := m.(*proto.Auth); ok {
			if fb.legacy || a.ClientFlags == nil {
				x.reply(&proto.OK{})
				continue
			}
			features := fb.features
			if features == nil {
				features = Features
			}
			x.reply(&proto.AuthOK{ServerFlags: fb.flags, Features: features})
			continue
		}
		fb.mu.Lock()
		fb.seen = append(fb.seen, m)
		fb.mu.Unlock()
		fb.handle(x, m)
	}
}

func (fb *fakeBroker) dial(opts ...Option) *Client {
	fb.t.Helper()
	all := append([]Option{WithFingerprint(fb.fp), WithToken("t"), WithReconnectBackoff(time.Millisecond, 10*time.Millisecond)}, opts...)
	c, err := Dial(testCtx(fb.t), fb.ln.Addr().String(), all...)
	if err != nil {
		fb.t.Fatal(err)
	}
	fb.t.Cleanup(func() { c.Close() })
	return c
}

// dropFirst returns a handler that drops the connection on the first message of each
// type in types and answers later ones with answer.
func dropFirst(answer func(x *exchange, m proto.Message)) func(x *exchange, m proto.Message) {
	var mu sync.Mutex
	dropped := map[proto.MessageType]bool{}
	return func(x *exchange, m proto.Message) {
		mu.Lock()
		first := !dropped[m.Type()]
		dropped[m.Type()] = true
		mu.Unlock()
		if first {
			x.drop()
			return
		}
		answer(x, m)
	}
}

func cacheAnswer(x *exchange, m proto.Message) {
	switch m := m.(type) {
	case *proto.CachePut:
		x.reply(&proto.CacheOK{RequestID: *m.RequestID})
	case *proto.CacheGet:
		x.reply(&proto.CacheValue{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, Value: []byte("v"), RequestID: m.RequestID})
	case *proto.CacheDelete:
		x.reply(&proto.CacheDeleted{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, Value: []byte("old"), RequestID: m.RequestID})
	case *proto.CounterAdd:
		x.reply(&proto.CounterValue{Key: m.Key, Value: m.Delta, RequestID: m.RequestID})
	case *proto.CounterGet:
		x.reply(&proto.CounterValue{Key: m.Key, Value: 9, RequestID: m.RequestID})
	}
}

// seeds/internal-protocol.txt, "Forwarded cache operation": a lost answer to a write is
// reported, never re-sent; Get and Delete are re-sent.
func TestCacheRetryRules(t *testing.T) {
	fb := startFake(t, dropFirst(cacheAnswer))
	c := fb.dial()
	ctx := testCtx(t)

	err := c.Put(ctx, "c", "k", []byte("v"), time.Second)
	mustErrIs(t, err, ErrIndeterminate)
	if n := fb.count(proto.TypeCachePut); n != 1 {
		t.Fatalf("Put sent %d times, want 1 (never re-sent)", n)
	}
	if _, err := c.CounterAdd(ctx, "c", "n", 1); !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("CounterAdd with a lost answer: %v", err)
	}
	if n := fb.count(proto.TypeCounterAdd); n != 1 {
		t.Fatalf("CounterAdd sent %d times, want 1", n)
	}
	v, found, err := c.Get(ctx, "c", "k")
	if err != nil || !found || string(v) != "v" {
		t.Fatalf("Get after a lost answer: %q %v %v", v, found, err)
	}
	if n := fb.count(proto.TypeCacheGet); n != 2 {
		t.Fatalf("Get sent %d times, want 2 (re-sent once)", n)
	}
	if old, found, err := c.Delete(ctx, "c", "k"); err != nil || !found || string(old) != "old" {
		t.Fatalf("Delete after a lost answer: %q %v %v", old, found, err)
	}
	if sum, err := c.CounterGet(ctx, "c", "n"); err != nil || sum != 9 {
		t.Fatalf("CounterGet after a lost answer: %d %v", sum, err)
	}
	// The re-sends use fresh request ids.
	gets := fb.messages(proto.TypeCacheGet)
	if *gets[0].(*proto.CacheGet).RequestID == *gets[1].(*proto.CacheGet).RequestID {
		t.Fatal("re-sent Get reused its request id")
	}
	// Put succeeds once the connection behaves.
	if err := c.Put(ctx, "c", "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	put := fb.messages(proto.TypeCachePut)[1].(*proto.CachePut)
	if put.TTLMs != nil {
		t.Fatalf("ttl 0 must travel as null, got %d", *put.TTLMs)
	}
}

// Every attempt lost: a safe request gives up after WithMaxAttempts.
func TestSafeRetryBounded(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) { x.drop() })
	c := fb.dial(WithMaxAttempts(3))
	_, _, err := c.Get(testCtx(t), "c", "k")
	mustErrIs(t, err, ErrIndeterminate)
	if n := fb.count(proto.TypeCacheGet); n != 3 {
		t.Fatalf("Get sent %d times, want 3", n)
	}
}

func TestPublishLostAnswer(t *testing.T) {
	answer := func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		first, last := uint64(10), uint64(10+len(b.Payloads)-1)
		x.reply(&proto.PublishOK{RequestID: *b.RequestID, FirstOffset: &first, LastOffset: &last, Duplicate: true})
	}
	ctx := testCtx(t)

	// Not idempotent: reported, never re-sent.
	fb := startFake(t, dropFirst(answer))
	c := fb.dial()
	p, _ := c.NewPublisher("s", PublisherOptions{Offsets: true})
	_, err := p.PublishSync(ctx, []byte("a"))
	mustErrIs(t, err, ErrIndeterminate)
	if n := fb.count(proto.TypePublishBatch); n != 1 {
		t.Fatalf("plain publish sent %d times, want 1", n)
	}
	p.Close(ctx)

	// Idempotent: re-sent with the same request id and producer id.
	fb2 := startFake(t, dropFirst(answer))
	c2 := fb2.dial()
	ip, _ := c2.NewPublisher("s", PublisherOptions{Offsets: true, Idempotent: true})
	res, err := ip.PublishSync(ctx, []byte("a"))
	if err != nil || !res.Duplicate || res.FirstOffset != 10 {
		t.Fatalf("idempotent re-send: %+v %v", res, err)
	}
	sent := fb2.messages(proto.TypePublishBatch)
	if len(sent) != 2 {
		t.Fatalf("idempotent publish sent %d times, want 2", len(sent))
	}
	a, b := sent[0].(*proto.JSONPublishBatch), sent[1].(*proto.JSONPublishBatch)
	if *a.RequestID != *b.RequestID || a.ProducerID != ip.ProducerID() || b.ProducerID != ip.ProducerID() || !a.Idempotent || !b.Idempotent {
		t.Fatalf("re-send changed its dedupe key: %+v / %+v", a, b)
	}
	ip.Close(ctx)
}

func TestIdempotentNeedsFeature(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {}, func(fb *fakeBroker) { fb.features = []string{proto.FeatureErrorCodes} })
	c := fb.dial()
	p, _ := c.NewPublisher("s", PublisherOptions{Idempotent: true})
	_, err := p.PublishSync(testCtx(t), []byte("a"))
	mustErrIs(t, err, ErrUnsupported)
	p.Close(testCtx(t))
}

// A legacy broker answers auth with plain ok: the SDK assumes ORIGINAL_V1_FLAGS, publishes
// acked batches as JSON and refuses Earliest/Offset starts (spec §4).
func TestLegacyBroker(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		if b, ok := m.(*proto.JSONPublishBatch); ok {
			x.reply(&proto.PublishOK{RequestID: *b.RequestID})
		}
	}, func(fb *fakeBroker) { fb.legacy = true })
	c := fb.dial()
	ctx := testCtx(t)
	if caps := c.Capabilities(); caps.Flags != proto.OriginalV1Flags || len(caps.Features) != 0 {
		t.Fatalf("legacy capabilities %+v", caps)
	}
	p, _ := c.NewPublisher("s", PublisherOptions{})
	if _, err := p.PublishSync(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	if fb.count(proto.TypePublishBatch) != 1 {
		t.Fatal("acked publish to a legacy broker did not travel as JSON publish_batch")
	}
	_, err := c.Subscribe(ctx, "s", Earliest, SubscribeOptions{})
	mustErrIs(t, err, ErrUnsupported)
	_, _, err = c.Delete(ctx, "c", "k")
	mustErrIs(t, err, ErrUnsupported)
}

func TestErrorCodesMapped(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		switch m := m.(type) {
		case *proto.CacheGet:
			x.reply(&proto.Error{Message: "shed", Code: proto.CodeOverloaded, RequestID: m.RequestID})
		case *proto.CachePut:
			x.reply(&proto.Error{Message: "moved", Code: proto.CodeShardUnavailable, RequestID: m.RequestID})
		case *proto.Subscribe:
			x.reply(&proto.NotLeader{TenantID: m.TenantID, Namespace: m.Namespace, Stream: m.Stream, Shard: 2,
				Owner: proto.Owner{NodeID: "b2"}, Generation: 7})
		}
	})
	c := fb.dial()
	ctx := testCtx(t)
	_, _, err := c.Get(ctx, "c", "k")
	mustErrIs(t, err, ErrOverloaded, ErrRefused)
	if fb.count(proto.TypeCacheGet) != 1 {
		t.Fatal("a refused Get was re-sent")
	}
	mustErrIs(t, c.Put(ctx, "c", "k", nil, 0), ErrShardUnavailable)
	_, err = c.Subscribe(ctx, "s", Latest, SubscribeOptions{Shards: []uint32{2}})
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Address != "" || nl.Owner != "b2" || nl.Generation != 7 || nl.Shard != 2 {
		t.Fatalf("not_leader: %#v", err)
	}
	mustErrIs(t, err, ErrNotLeader)
	if sub := fb.messages(proto.TypeSubscribe)[0].(*proto.Subscribe); sub.Shard == nil || *sub.Shard != 2 {
		t.Fatalf("subscribe did not carry the shard: %+v", sub)
	}
}

func TestGroupsRoundTrip(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		switch m := m.(type) {
		case *proto.GroupPoll:
			x.reply(&proto.GroupRecords{RequestID: m.RequestID, Group: m.Group, Shard: m.Shard, Records: []proto.GroupRecord{
				{Offset: 41, Payload: []byte("a"), Delivery: 1}, {Offset: 42, Payload: []byte("b"), Delivery: 3, Publisher: "p"}}})
		case *proto.GroupAck:
			x.reply(&proto.GroupOK{RequestID: m.RequestID})
		case *proto.GroupNack:
			x.reply(&proto.GroupOK{RequestID: m.RequestID})
		case *proto.DeadLettersList:
			next := uint64(43)
			x.reply(&proto.DeadLetters{RequestID: m.RequestID, Group: m.Group, Shard: m.Shard,
				Entries: []proto.DeadLetter{{Offset: 42, Deliveries: 5, DeadLetteredAtMs: 1767225600000}}, NextFrom: &next})
		case *proto.DeadLettersRedrive:
			n := uint64(len(m.Offsets))
			x.reply(&proto.GroupOK{RequestID: m.RequestID, Count: &n})
		}
	})
	c := fb.dial()
	ctx := testCtx(t)
	recs, err := c.Poll(ctx, "orders", 1, "billing", 100, 1500*time.Millisecond)
	if err != nil || len(recs) != 2 || recs[1].Offset != 42 || recs[1].Delivery != 3 || recs[1].Publisher != "p" || recs[0].Shard != 1 || string(recs[0].Payload) != "a" {
		t.Fatalf("poll: %+v %v", recs, err)
	}
	poll := fb.messages(proto.TypeGroupPoll)[0].(*proto.GroupPoll)
	if poll.MaxRecords != 100 || poll.MaxWaitMs != 1500 || poll.Group != "billing" || poll.Stream != "orders" || poll.Shard != 1 {
		t.Fatalf("poll request %+v", poll)
	}
	if err := c.Ack(ctx, "orders", 1, "billing", 41); err != nil {
		t.Fatal(err)
	}
	if err := c.Nack(ctx, "orders", 1, "billing", 500*time.Millisecond, 42); err != nil {
		t.Fatal(err)
	}
	if nack := fb.messages(proto.TypeGroupNack)[0].(*proto.GroupNack); nack.RedeliverAfterMs == nil || *nack.RedeliverAfterMs != 500 || nack.Offsets[0] != 42 {
		t.Fatalf("nack request %+v", nack)
	}
	entries, next, more, err := c.DeadLetters(ctx, "orders", 1, "billing", 0, 10)
	if err != nil || len(entries) != 1 || entries[0].Deliveries != 5 || !more || next != 43 || entries[0].DeadLetteredAt.UnixMilli() != 1767225600000 {
		t.Fatalf("dead letters: %+v %d %v %v", entries, next, more, err)
	}
	if n, err := c.Redrive(ctx, "orders", 1, "billing", 42, 44); err != nil || n != 2 {
		t.Fatalf("redrive: %d %v", n, err)
	}
	if _, err := c.Poll(ctx, "orders", 1, "billing", 0, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("poll max 0: %v", err)
	}
}

// Poll is not re-sent after a lost answer; Ack is.
func TestGroupRetryRules(t *testing.T) {
	fb := startFake(t, dropFirst(func(x *exchange, m proto.Message) {
		switch m := m.(type) {
		case *proto.GroupAck:
			x.reply(&proto.GroupOK{RequestID: m.RequestID})
		case *proto.GroupPoll:
			x.reply(&proto.GroupRecords{RequestID: m.RequestID})
		}
	}))
	c := fb.dial()
	ctx := testCtx(t)
	_, err := c.Poll(ctx, "s", 0, "g", 1, 0)
	mustErrIs(t, err, ErrIndeterminate)
	if err := c.Ack(ctx, "s", 0, "g", 1); err != nil {
		t.Fatal(err)
	}
	if fb.count(proto.TypeGroupPoll) != 1 || fb.count(proto.TypeGroupAck) != 2 {
		t.Fatalf("polls %d (want 1), acks %d (want 2)", fb.count(proto.TypeGroupPoll), fb.count(proto.TypeGroupAck))
	}
}

func TestWatch(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		w, ok := m.(*proto.CacheWatch)
		if !ok {
			return
		}
		// The event stream may arrive before cache_watching (spec §1.3): send it first.
		es, err := x.conn.OpenUniStream()
		if err != nil {
			return
		}
		frames := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: 9001})
		frames = proto.AppendMessage(frames, &proto.CacheChange{WatchID: 9001, Key: "cfg/a", Op: proto.CacheChangePut, Value: []byte("1"), Offset: 77})
		frames = proto.AppendMessage(frames, &proto.CacheChange{WatchID: 9001, Key: "cfg/a", Op: proto.CacheChangeDelete, Offset: 78})
		_, _ = es.Write(frames)
		x.reply(&proto.CacheWatching{RequestID: w.RequestID, WatchID: 9001})
	})
	c := fb.dial()
	ctx := testCtx(t)
	w, err := c.Watch(ctx, "primary", "cfg/", WatchOptions{Prefix: true})
	if err != nil {
		t.Fatal(err)
	}
	req := fb.messages(proto.TypeCacheWatch)[0].(*proto.CacheWatch)
	if req.Prefix == nil || *req.Prefix != "cfg/" || req.Key != nil {
		t.Fatalf("watch request %+v", req)
	}
	ch, err := w.Next(ctx)
	if err != nil || ch.Key != "cfg/a" || ch.Op != ChangePut || string(ch.Value) != "1" || ch.Offset != 77 {
		t.Fatalf("change: %+v %v", ch, err)
	}
	ch, err = w.Next(ctx)
	if err != nil || ch.Op != ChangeDelete || ch.Value != nil || ch.Offset != 78 {
		t.Fatalf("change: %+v %v", ch, err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for fb.count(proto.TypeCacheUnwatch) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("cache_unwatch never arrived")
		case <-time.After(time.Millisecond):
		}
	}
}

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

// With 0x2000 negotiated an idempotent Publisher without Offsets sends binary 0x2009
// frames and re-sends a lost one with the same request id and producer id.
func TestIdempotentBinaryResend(t *testing.T) {
	fb := startFake(t, dropFirst(func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		x.raw(proto.AppendPublishAckOK(nil, *b.RequestID))
	}))
	c := fb.dial()
	ctx := testCtx(t)
	p, _ := c.NewPublisher("s", PublisherOptions{Idempotent: true, Linger: -1})
	defer p.Close(ctx)
	if _, err := p.PublishSync(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	sent := fb.messages(proto.TypePublishBatch)
	if len(sent) != 2 {
		t.Fatalf("sent %d frames, want 2", len(sent))
	}
	for _, m := range sent {
		b := m.(*proto.JSONPublishBatch)
		if b.Ack != "binary" || !b.Idempotent || b.ProducerID != p.ProducerID() || *b.RequestID != *sent[0].(*proto.JSONPublishBatch).RequestID {
			t.Fatalf("frame %+v is not the same 0x2009 request", b)
		}
	}
}

// A binary error ack becomes a typed refusal.
func TestBinaryAckRefusal(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		x.raw(proto.AppendPublishAckError(nil, *b.RequestID, proto.ErrorText(proto.CodeOverloaded, "queue full")))
	})
	c := fb.dial()
	ctx := testCtx(t)
	p, _ := c.NewPublisher("s", PublisherOptions{Linger: -1})
	defer p.Close(ctx)
	_, err := p.PublishSync(ctx, []byte("a"))
	mustErrIs(t, err, ErrOverloaded, ErrRefused)
}

// Publish waits while MaxInflightBytes are unacknowledged and resumes when an ack frees
// the budget.
func TestPublisherInflightBound(t *testing.T) {
	release := make(chan struct{})
	fb := startFake(t, func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		go func() {
			<-release
			x.raw(proto.AppendPublishAckOK(nil, *b.RequestID))
		}()
	})
	c := fb.dial()
	ctx := testCtx(t)
	p, _ := c.NewPublisher("s", PublisherOptions{Linger: -1, MaxInflightBytes: 10})
	defer p.Close(ctx)
	first, err := p.Publish(ctx, make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.Publish(short, make([]byte, 8)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish over the in-flight bound: %v", err)
	}
	close(release)
	if _, err := first.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := p.Publish(ctx, make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// Closing the Client ends its Publishers and Subscriptions with ErrClosed.
func TestClientCloseEndsEverything(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		if s, ok := m.(*proto.Subscribe); ok {
			_ = s
			es, err := x.conn.OpenUniStream()
			if err != nil {
				return
			}
			_, _ = es.Write(proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: 5}))
			x.reply(&proto.Subscribed{SubscriptionID: 5})
		}
		// Publishes are never answered.
	})
	c := fb.dial()
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, "s", Latest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.NewPublisher("s", PublisherOptions{Linger: -1})
	pd, err := p.Publish(ctx, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := sub.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Client.Close: %v", err)
	}
	if _, err := pd.Wait(ctx); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("pending publish after Client.Close: %v", err)
	}
	if _, err := p.Publish(ctx, []byte("b")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Client.Close: %v", err)
	}
	if _, _, err := c.Get(ctx, "c", "k"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Client.Close: %v", err)
	}
	p.Close(ctx)
	sub.Close()
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

// fakeTimers replaces the linger timers: they fire only when the test says so.
type fakeTimers struct {
	mu      sync.Mutex
	pending []*fakeTimer
}

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool
}

func (ft *fakeTimer) Stop() bool { ft.stopped = true; return true }

func (ts *fakeTimers) afterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := &fakeTimer{d: d, f: f}
	ts.pending = append(ts.pending, t)
	return t
}

// fire runs every scheduled timer once.
func (ts *fakeTimers) fire() {
	ts.mu.Lock()
	p := ts.pending
	ts.pending = nil
	ts.mu.Unlock()
	for _, t := range p {
		t.f()
	}
}

// A batch waits for its linger (fake clock) unless it fills up first.
func TestLingerAndSealing(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		x.raw(proto.AppendPublishAckOK(nil, *b.RequestID))
	})
	timers := &fakeTimers{}
	c := fb.dial(func(c *config) error { c.afterFunc = timers.afterFunc; return nil })
	ctx := testCtx(t)
	p, _ := c.NewPublisher("s", PublisherOptions{Linger: time.Hour, MaxRecords: 3})
	defer p.Close(ctx)
	a, _ := p.Publish(ctx, []byte("a"))
	bpd, _ := p.Publish(ctx, []byte("b"))
	p.mu.Lock()
	open := p.open[""] != nil && len(p.open[""].ends) == 2
	p.mu.Unlock()
	if !open || len(timers.pending) != 1 || timers.pending[0].d != time.Hour {
		t.Fatalf("two records under MaxRecords must wait for the linger (open=%v timers=%d)", open, len(timers.pending))
	}
	select {
	case <-a.Done():
		t.Fatal("batch answered before its linger expired")
	default:
	}
	timers.fire()
	if _, err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if br, err := bpd.Batch(); err != nil || br.Records != 2 {
		t.Fatalf("lingered batch %+v %v", br, err)
	}
	// Three records fill a batch: sent without the timer, which is stopped.
	var last Pending
	for _, r := range []string{"c", "d", "e"} {
		last, _ = p.Publish(ctx, []byte(r))
	}
	if _, err := last.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	timers.mu.Lock()
	stopped := len(timers.pending) == 1 && timers.pending[0].stopped
	timers.mu.Unlock()
	if !stopped {
		t.Fatal("the full batch's linger timer was not stopped")
	}
	if got := fb.count(proto.TypePublishBatch); got != 2 {
		t.Fatalf("%d batches sent, want 2", got)
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

// A watch lost before its first change and without WatchOptions.From cannot know where to
// resume: Next reports ErrIndeterminate. One that saw a change re-sends cache_watch with
// from_offset = last offset + 1 when its event stream ends; Close ends Next with ErrClosed.
func TestWatchResumeRules(t *testing.T) {
	var mu sync.Mutex
	watches := 0
	fb := startFake(t, func(x *exchange, m proto.Message) {
		w, ok := m.(*proto.CacheWatch)
		if !ok {
			return
		}
		mu.Lock()
		watches++
		n := watches
		mu.Unlock()
		es, err := x.conn.OpenUniStream()
		if err != nil {
			return
		}
		id := uint64(100 + n)
		frames := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: id})
		x.reply(&proto.CacheWatching{RequestID: w.RequestID, WatchID: id})
		switch n {
		case 1: // the "nofrom" watch: lost before any change
			_, _ = es.Write(frames)
			_ = es.Close()
		case 2: // the "k" watch: one change, then its event stream ends
			frames = proto.AppendMessage(frames, &proto.CacheChange{WatchID: id, Key: "k", Op: proto.CacheChangePut, Value: []byte("1"), Offset: 41})
			_, _ = es.Write(frames)
			_ = es.Close()
		case 3: // the resumed "k" watch
			if w.FromOffset == nil || *w.FromOffset != 42 {
				x.fb.t.Errorf("resumed watch from_offset %v, want 42", w.FromOffset)
			}
			frames = proto.AppendMessage(frames, &proto.CacheChange{WatchID: id, Key: "k", Op: proto.CacheChangeDelete, Offset: 42})
			_, _ = es.Write(frames)
		}
	})
	c := fb.dial()
	ctx := testCtx(t)
	w1, err := c.Watch(ctx, "c", "nofrom", WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Next(ctx); !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("watch lost before its first change: %v, want ErrIndeterminate", err)
	}
	w2, err := c.Watch(ctx, "c", "k", WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := w2.Next(ctx); err != nil || ch.Offset != 41 {
		t.Fatalf("first change: %+v %v", ch, err)
	}
	if ch, err := w2.Next(ctx); err != nil || ch.Offset != 42 || ch.Op != ChangeDelete {
		t.Fatalf("change after the resume: %+v %v", ch, err)
	}
	done := make(chan error, 1)
	go func() { _, err := w2.Next(ctx); done <- err }()
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Watch(ctx, "c", "", WatchOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty key: %v", err)
	}
}
