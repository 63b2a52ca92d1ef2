package client

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"felix/core"
	"felix/proto"
)

// Keyed records travel as JSON publish_batch with "key" (Offsets) and as binary 0x4009
// frames (default): records of one key always land on the shard core.RouteKey names, and
// the shard comes back in publish_ok (docs/client-protocol.md D15).
func TestPublishKeyedRoutesByKey(t *testing.T) {
	b := startBroker(t, "")
	const shards = 4
	for _, st := range []StreamInfo{
		{Name: "keyed-modulo", Shards: shards, Durable: true},
		{Name: "keyed-jump", Shards: shards, Durable: true, Routing: "jump_hash"},
	} {
		if _, err := b.admin().CreateStream(testCtx(t), st); err != nil {
			t.Fatalf("create %s: %v", st.Name, err)
		}
	}
	c := b.dial()
	ctx := testCtx(t)
	if !c.Capabilities().Has(proto.FeatureRoutingKeys) || c.Capabilities().Flags&proto.FlagPublishKeyed == 0 {
		t.Fatalf("routing keys not negotiated: %+v", c.Capabilities())
	}
	keys := make([][]byte, 16)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "customer-%02d", i)
	}

	// JSON: every result names its shard.
	for _, tc := range []struct {
		stream  string
		routing core.Routing
	}{{"keyed-modulo", core.RoutingModulo}, {"keyed-jump", core.RoutingJumpHash}} {
		p, err := c.NewPublisher(tc.stream, PublisherOptions{Offsets: true})
		if err != nil {
			t.Fatal(err)
		}
		used := map[uint32]bool{}
		for round := range 3 {
			for _, k := range keys {
				res, err := p.PublishKeyedSync(ctx, k, fmt.Appendf(nil, "%s/%d", k, round))
				if err != nil {
					t.Fatalf("%s %s: %v", tc.stream, k, err)
				}
				want := uint32(core.RouteKey(tc.routing, k, shards))
				if !res.HasShard || res.Shard != want {
					t.Fatalf("%s %s round %d: shard %v/%d, want %d", tc.stream, k, round, res.HasShard, res.Shard, want)
				}
				used[res.Shard] = true
			}
		}
		if len(used) < 2 {
			t.Fatalf("%s: 16 keys all landed on shards %v", tc.stream, used)
		}
		// Unkeyed records still publish (the broker picks the shard).
		if res, err := p.PublishSync(ctx, []byte("no-key")); err != nil || !res.HasShard || res.Shard >= shards {
			t.Fatalf("unkeyed: %+v %v", res, err)
		}
		p.Close(ctx)
	}

	// Binary (no offsets, so acks carry no shard): read each shard back.
	ctx = testCtx(t)
	p, err := c.NewPublisher("keyed-modulo", PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const perKey = 10
	for i := range perKey {
		for _, k := range keys {
			if _, err := p.PublishKeyed(ctx, k, fmt.Appendf(nil, "%s#%d", k, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	sub, err := c.Subscribe(ctx, "keyed-modulo", Earliest, SubscribeOptions{Shards: []uint32{0, 1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	total := 3*len(keys) + 1 + perKey*len(keys) // the JSON phase's records, then these
	seen := map[string][]int{}                  // key -> per-key sequence numbers in delivery order
	for range total {
		r, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		key, seq, ok := bytes.Cut(r.Payload, []byte("#"))
		if !ok {
			continue // a JSON-phase record
		}
		if want := uint32(core.RouteKey(core.RoutingModulo, key, shards)); r.Shard != want {
			t.Fatalf("record %s on shard %d, want %d", r.Payload, r.Shard, want)
		}
		var n int
		fmt.Sscan(string(seq), &n)
		seen[string(key)] = append(seen[string(key)], n)
	}
	for _, k := range keys {
		got := seen[string(k)]
		if len(got) != perKey || !slices.IsSorted(got) {
			t.Fatalf("key %s: records %v (want %d in order)", k, got, perKey)
		}
	}
}

// One wire batch per key; an idempotent re-send keeps its key.
func TestPublishKeyedBatchesAndResend(t *testing.T) {
	fb := startFake(t, dropFirst(func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		x.raw(proto.AppendPublishAckOK(nil, *b.RequestID))
	}))
	c := fb.dial()
	ctx := testCtx(t)
	p, _ := c.NewPublisher("s", PublisherOptions{Idempotent: true})
	defer p.Close(ctx)
	var pend []Pending
	for _, rec := range []struct{ key, payload string }{{"a", "1"}, {"b", "2"}, {"a", "3"}, {"", "4"}, {"b", "5"}} {
		pd, err := p.PublishKeyed(ctx, []byte(rec.key), []byte(rec.payload))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, pd)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pd := range pend {
		if _, err := pd.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	byKey := map[string][]string{}
	ids := map[string]uint64{}
	sent := fb.messages(proto.TypePublishBatch)
	if len(sent) != 4 { // three batches, the first one sent twice (its answer was dropped)
		t.Fatalf("sent %d frames, want 4", len(sent))
	}
	for i, m := range sent {
		b := m.(*proto.JSONPublishBatch)
		if b.Ack != "binary" || !b.Idempotent {
			t.Fatalf("frame %+v is not a 0x6009/0x2009 request", b)
		}
		var ps []string
		for _, pl := range b.Payloads {
			ps = append(ps, string(pl))
		}
		k := string(b.Key)
		if id, ok := ids[k]; ok && i > 0 {
			if id != *b.RequestID || !slices.Equal(byKey[k], ps) {
				t.Fatalf("re-send of key %q changed: id %d→%d, %v→%v", k, id, *b.RequestID, byKey[k], ps)
			}
			continue
		}
		ids[k], byKey[k] = *b.RequestID, ps
	}
	want := map[string][]string{"a": {"1", "3"}, "b": {"2", "5"}, "": {"4"}}
	for k, w := range want {
		if !slices.Equal(byKey[k], w) {
			t.Fatalf("key %q batched %v, want %v (all: %v)", k, byKey[k], w, byKey)
		}
	}
	if _, err := p.PublishKeyed(ctx, bytes.Repeat([]byte("k"), proto.MaxKeyLen+1), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("long key: %v", err)
	}
}

// A broker without routing keys: a keyed record fails with ErrUnsupported rather than
// being published to an arbitrary shard; unkeyed records still go through.
func TestPublishKeyedNeedsBroker(t *testing.T) {
	for _, offsets := range []bool{false, true} {
		fb := startFake(t, func(x *exchange, m proto.Message) {
			b := m.(*proto.JSONPublishBatch)
			if b.Ack == "binary" {
				x.raw(proto.AppendPublishAckOK(nil, *b.RequestID))
				return
			}
			x.reply(&proto.PublishOK{RequestID: *b.RequestID})
		}, func(fb *fakeBroker) {
			fb.flags = proto.KnownFlags &^ proto.FlagPublishKeyed
			fb.features = []string{proto.FeatureErrorCodes}
		})
		c := fb.dial()
		ctx := testCtx(t)
		p, _ := c.NewPublisher("s", PublisherOptions{Offsets: offsets})
		_, err := p.PublishKeyedSync(ctx, []byte("k"), []byte("x"))
		mustErrIs(t, err, ErrUnsupported)
		if _, err := p.PublishSync(ctx, []byte("y")); err != nil {
			t.Fatalf("offsets=%v unkeyed: %v", offsets, err)
		}
		p.Close(ctx)
	}
}
