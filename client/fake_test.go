package client

// The fake broker: a scripted FLX1 server on 127.0.0.1 (fakeBroker, startFake,
// dropFirst) for the SDK's retry and error rules, and the tests of the connection
// as a whole: a legacy broker, error codes, Close. The tests that use it by topic are
// in fake_publish_test.go, fake_subscribe_test.go, fake_cache_test.go and
// fake_groups_test.go; the same topics against a real broker are in broker_test.go.

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
