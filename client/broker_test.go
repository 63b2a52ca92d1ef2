package client

// SDK tests against a real in-process broker (startBroker, harness_test.go):
// dialing and TLS modes, publish and subscribe, refusals, the idempotent and
// concurrent publishers, tenants, the admin API, reconnect and resume, several
// shards. Caches and watches are in broker_cache_test.go, groups in
// broker_groups_test.go.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"felix/proto"
)

func TestDialNegotiates(t *testing.T) {
	b := startBroker(t, "")
	c := b.dial()
	caps := c.Capabilities()
	if caps.Flags&proto.FlagBinaryPublishAcked == 0 || caps.Flags&proto.FlagEventBatchOffsets == 0 {
		t.Fatalf("negotiated flags %#x lack 0x0008/0x0020", caps.Flags)
	}
	if caps.Flags&^ClientFlags != 0 {
		t.Fatalf("negotiated flags %#x outside what the SDK offered", caps.Flags)
	}
	for _, f := range []string{proto.FeatureErrorCodes, proto.FeatureCacheDelete, proto.FeatureCounters} {
		if !caps.Has(f) {
			t.Errorf("feature %q not negotiated: %v", f, caps.Features)
		}
	}
	if c.Tenant() != "default" || c.Namespace() != "default" {
		t.Fatalf("tenant/namespace %s/%s", c.Tenant(), c.Namespace())
	}
}

func TestDialRefusals(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t)
	_, err := Dial(ctx, b.info.QUICAddr, WithFingerprint(b.info.Fingerprint), WithToken("not-a-token"))
	mustErrIs(t, err, ErrUnauthorized, ErrRefused)

	wrong := "00" + b.info.Fingerprint[2:]
	if wrong == b.info.Fingerprint {
		wrong = "11" + b.info.Fingerprint[2:]
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := Dial(short, b.info.QUICAddr, WithFingerprint(wrong), WithToken(b.token)); err == nil {
		t.Fatal("Dial accepted a broker whose certificate does not match the pin")
	}
	if _, err := Dial(ctx, b.info.QUICAddr, WithFingerprint("xyz")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad fingerprint: %v", err)
	}
}

func TestPublishSubscribe(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("orders", true)
	c := b.dial()
	ctx := testCtx(t)

	live, err := c.Subscribe(ctx, "orders", Latest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()

	// Binary acked batches (no offsets in the acks).
	p, err := c.NewPublisher("orders", PublisherOptions{MaxRecords: 16})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	pending := make([]Pending, n)
	for i := range n {
		if pending[i], err = p.Publish(ctx, fmt.Appendf(nil, "rec-%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i, pd := range pending {
		res, err := pd.Wait(ctx)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if res.HasOffsets {
			t.Fatalf("binary acks carry no offsets, got %+v", res)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(ctx, []byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}

	// JSON batches with offsets.
	po, err := c.NewPublisher("orders", PublisherOptions{Offsets: true, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := po.PublishSync(ctx, []byte("rec-100"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.HasOffsets || res.FirstOffset != n || res.LastOffset != n {
		t.Fatalf("offsets result %+v, want offset %d", res, n)
	}
	po.Close(ctx)

	check := func(sub *Subscription, from int) {
		t.Helper()
		for i := from; i <= n; i++ {
			r, err := sub.Next(ctx)
			if err != nil {
				t.Fatalf("Next at %d: %v", i, err)
			}
			if want := fmt.Sprintf("rec-%03d", i); string(r.Payload) != want || !r.HasOffset || r.Offset != uint64(i) || r.Gap != 0 || r.Shard != 0 {
				t.Fatalf("record %d: got %q offset %d (has %v) gap %d", i, r.Payload, r.Offset, r.HasOffset, r.Gap)
			}
		}
	}
	check(live, 0)

	// History from the earliest record and from an offset.
	early, err := c.Subscribe(ctx, "orders", Earliest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check(early, 0)
	early.Close()
	if _, err := early.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	mid, err := c.Subscribe(ctx, "orders", Offset(40), SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check(mid, 40)
	mid.Close()

	// Next honours its context.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := live.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with nothing to read: %v", err)
	}
}

func TestSubscribeRefusals(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("s", true)
	c := b.dial()
	ctx := testCtx(t)
	_, err := c.Subscribe(ctx, "s", Offset(1000), SubscribeOptions{})
	var ce *CursorError
	if !errors.As(err, &ce) || ce.Reason != CursorInFuture || ce.Requested != 1000 || ce.Available != 0 {
		t.Fatalf("future offset: %v", err)
	}
	mustErrIs(t, err, ErrCursor)
	_, err = c.Subscribe(ctx, "missing", Latest, SubscribeOptions{})
	mustErrIs(t, err, ErrNotFound, ErrRefused)
	if !c.Capabilities().Has(proto.FeaturePublishers) {
		_, err = c.Subscribe(ctx, "s", Latest, SubscribeOptions{WithPublisher: true})
		mustErrIs(t, err, ErrUnsupported)
	}
}

func TestPublishRefusals(t *testing.T) {
	b := startBroker(t, "")
	c := b.dial()
	ctx := testCtx(t)
	for _, opts := range []PublisherOptions{{}, {Offsets: true}} {
		p, err := c.NewPublisher("missing", opts)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.PublishSync(ctx, []byte("x"))
		mustErrIs(t, err, ErrNotFound, ErrRefused)
		p.Close(ctx)
	}
	if _, err := c.NewPublisher("", PublisherOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty stream: %v", err)
	}
}

func TestIdempotentPublisher(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("idem", true)
	c := b.dial()
	ctx := testCtx(t)
	p, err := c.NewPublisher("idem", PublisherOptions{Idempotent: true, Offsets: true, MaxRecords: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if len(p.ProducerID()) != 32 {
		t.Fatalf("producer id %q", p.ProducerID())
	}
	var pend []Pending
	for i := range 6 {
		pd, err := p.Publish(ctx, []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, pd)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, pd := range pend {
		r, err := pd.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !r.HasOffsets || r.Duplicate || seen[r.FirstOffset] {
			t.Fatalf("result %+v", r)
		}
		seen[r.FirstOffset] = true
	}
	for off := range uint64(6) {
		if !seen[off] {
			t.Fatalf("offset %d not assigned: %v", off, seen)
		}
	}
	br, err := pend[0].Batch()
	if err != nil || br.Records != 3 || br.LastOffset-br.FirstOffset != 2 {
		t.Fatalf("batch result %+v %v", br, err)
	}
}

// The admin token belongs to tenant default: authenticating for tenant "other" with it is
// refused (tenant mismatch), at Dial.
func TestTenantMismatchRefused(t *testing.T) {
	b := startBroker(t, "")
	_, err := Dial(testCtx(t), b.info.QUICAddr, WithFingerprint(b.info.Fingerprint), WithToken(b.token), WithTenant("other"))
	mustErrIs(t, err, ErrUnauthorized, ErrRefused)
	var se *ServerError
	if !errors.As(err, &se) || se.Code != proto.CodeUnauthorized {
		t.Fatalf("want a *ServerError with code unauthorized, got %#v", err)
	}
}

func TestAdmin(t *testing.T) {
	b := startBroker(t, "")
	a := b.admin()
	ctx := testCtx(t)
	s, err := a.CreateStream(ctx, StreamInfo{Name: "events", Shards: 2, Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "events" || s.Shards != 2 || !s.Durable || s.Tenant != "default" || s.Routing == "" {
		t.Fatalf("created %+v", s)
	}
	_, err = a.CreateStream(ctx, StreamInfo{Name: "events"})
	mustErrIs(t, err, ErrExists, ErrRefused)
	list, err := a.ListStreams(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "events" {
		t.Fatalf("list %+v %v", list, err)
	}
	if d, err := a.DescribeStream(ctx, "events"); err != nil || d.Shards != 2 {
		t.Fatalf("describe %+v %v", d, err)
	}
	_, err = a.DescribeStream(ctx, "nope")
	mustErrIs(t, err, ErrNotFound)
	var ae *AdminError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "not_found" {
		t.Fatalf("admin error %#v", err)
	}
	if err := a.DeleteStream(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	mustErrIs(t, a.DeleteStream(ctx, "events"), ErrNotFound)

	if _, err := a.CreateCache(ctx, CacheInfo{Name: "c1"}); err != nil {
		t.Fatal(err)
	}
	caches, err := a.ListCaches(ctx)
	if err != nil || len(caches) != 1 || caches[0].Name != "c1" {
		t.Fatalf("caches %+v %v", caches, err)
	}
	if d, err := a.DescribeCache(ctx, "c1"); err != nil || d.Name != "c1" {
		t.Fatalf("describe cache %+v %v", d, err)
	}
	if err := a.DeleteCache(ctx, "c1"); err != nil {
		t.Fatal(err)
	}

	bad, _ := NewAdmin(b.info.HTTPAddr, AdminToken("nope"))
	_, err = bad.ListStreams(ctx)
	mustErrIs(t, err, ErrUnauthorized)
	if _, err := NewAdmin("ftp://x"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad admin address: %v", err)
	}
}

// A broker restart (SIGTERM drain, then a new process on the same port, data and
// certificate): the client reconnects, and a subscription resumes at its next offset with
// no gap and no duplicate.
func TestReconnectAndResume(t *testing.T) {
	addr := freeUDPAddr(t)
	env := append(writeCert(t), "FELIX_QUIC_BIND="+addr)
	b := startBroker(t, "", env...)
	b.createStream("r", true)
	b.createCache("kv")
	c := b.dial(WithReconnectBackoff(10*time.Millisecond, 200*time.Millisecond))
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, "r", Earliest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	p, err := c.NewPublisher("r", PublisherOptions{Offsets: true, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	for i := range 5 {
		if _, err := p.PublishSync(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		r, err := sub.Next(ctx)
		if err != nil || r.Offset != uint64(i) {
			t.Fatalf("before restart %d: %+v %v", i, r, err)
		}
	}
	b.stop()
	b2 := startBroker(t, b.dataDir, env...)
	if b2.info.Fingerprint != b.info.Fingerprint {
		t.Fatal("certificate changed across the restart")
	}
	// Requests ride new connections (the first attempts may meet the dead connection).
	for i := 5; i < 10; i++ {
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			if _, err = p.PublishSync(ctx, []byte{byte(i)}); err == nil {
				break
			}
			if !errors.Is(err, ErrIndeterminate) && !errors.Is(err, ErrShardUnavailable) {
				t.Fatalf("publish after restart: %v", err)
			}
		}
		if err != nil {
			t.Fatalf("publish after restart never succeeded: %v", err)
		}
	}
	for i := 5; i < 10; i++ {
		r, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after restart %d: %v", i, err)
		}
		if r.Offset != uint64(i) || r.Payload[0] != byte(i) || r.Gap != 0 {
			t.Fatalf("after restart want offset %d, got %+v", i, r)
		}
	}
	if _, _, err := c.Get(ctx, "kv", "k"); err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
}

// A two-shard stream: publishes spread over the shards (the broker routes them), and one
// Subscription over both shards delivers every record once, each with its shard and its
// per-shard offset. Fire-and-forget publishes (AckNone) travel as binary 0x0001.
func TestMultiShardAndAckNone(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t)
	if _, err := b.admin().CreateStream(ctx, StreamInfo{Name: "wide", Shards: 2, Durable: true}); err != nil {
		t.Fatal(err)
	}
	c := b.dial()
	p, err := c.NewPublisher("wide", PublisherOptions{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if _, err := p.PublishSync(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close(ctx)
	fire, err := c.NewPublisher("wide", PublisherOptions{Ack: AckNone, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := n; i < n+4; i++ {
		res, err := fire.PublishSync(ctx, []byte{byte(i)})
		if err != nil || res.HasOffsets {
			t.Fatalf("ack none: %+v %v", res, err)
		}
	}
	fire.Close(ctx)

	sub, err := c.Subscribe(ctx, "wide", Earliest, SubscribeOptions{Shards: []uint32{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	seen := map[byte]bool{}
	next := map[uint32]uint64{}
	for len(seen) < n+4 {
		r, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d records: %v", len(seen), err)
		}
		if seen[r.Payload[0]] {
			t.Fatalf("record %d delivered twice", r.Payload[0])
		}
		seen[r.Payload[0]] = true
		if r.Shard > 1 || !r.HasOffset || r.Offset != next[r.Shard] || r.Gap != 0 {
			t.Fatalf("record %+v, want shard offset %d", r, next[r.Shard])
		}
		next[r.Shard]++
	}
	if next[0] == 0 || next[1] == 0 {
		t.Fatalf("records did not spread over both shards: %v", next)
	}
}

// Concurrent Publish calls on one Publisher: every record lands once, and each
// goroutine's records keep their order in the log.
func TestPublisherConcurrentOrder(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("conc", true)
	c := b.dial()
	ctx := testCtx(t)
	p, err := c.NewPublisher("conc", PublisherOptions{MaxRecords: 7, MaxInflightBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 150
	errc := make(chan error, writers)
	for w := range writers {
		go func() {
			var last Pending
			for i := range each {
				pd, err := p.Publish(ctx, []byte{byte(w), byte(i)})
				if err != nil {
					errc <- err
					return
				}
				last = pd
			}
			_, err := last.Wait(ctx)
			errc <- err
		}()
	}
	for range writers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, "conc", Earliest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next := make([]int, writers)
	for n := 0; n < writers*each; n++ {
		r, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d records: %v", n, err)
		}
		w, i := int(r.Payload[0]), int(r.Payload[1])
		if i != next[w] {
			t.Fatalf("writer %d: record %d arrived, want %d", w, i, next[w])
		}
		next[w]++
	}
}

// The three trust modes: a CA pool (here the broker's own certificate), insecure, and the
// fingerprint pin (covered by every other test).
func TestDialTLSModes(t *testing.T) {
	env := writeCert(t)
	b := startBroker(t, "", env...)
	certPEM, err := os.ReadFile(strings.TrimPrefix(env[0], "FELIX_TLS_CERT="))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(certPEM) {
		t.Fatal("cert pool")
	}
	ctx := testCtx(t)
	c, err := Dial(ctx, b.info.QUICAddr, WithToken(b.token), WithTLSConfig(&tls.Config{RootCAs: pool, ServerName: "localhost"}))
	if err != nil {
		t.Fatalf("CA-verified dial: %v", err)
	}
	c.Close()
	c, err = Dial(ctx, b.info.QUICAddr, WithToken(b.token), WithInsecureSkipVerify())
	if err != nil {
		t.Fatalf("insecure dial: %v", err)
	}
	c.Close()
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := Dial(short, b.info.QUICAddr, WithToken(b.token), WithTLSConfig(&tls.Config{ServerName: "localhost"})); err == nil {
		t.Fatal("system roots accepted a self-signed broker")
	}
}
