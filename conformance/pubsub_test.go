package conformance

// Publish/subscribe scenarios (catalogue ids pubsub.*).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"felix/client"
)

func init() {
	register("pubsub.byte-exact", pubsubByteExact)
	register("pubsub.shard-order", pubsubShardOrder)
	register("pubsub.offsets-contiguous", pubsubOffsetsContiguous)
	register("pubsub.resume-at-offset", pubsubResumeAtOffset)
	register("pubsub.earliest-trimmed", pubsubEarliestTrimmed)
}

// oddPayloads are the payloads a byte-exact scenario sends: every byte value, empty, 64 KiB,
// invalid UTF-8, a NUL-led one.
func oddPayloads() [][]byte {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := bytes.Repeat([]byte{0xff, 0x00, '\n', '"', '\\'}, 64<<10/5)
	return [][]byte{all, {}, big, {0xc3, 0x28}, {0, 0, 0}, []byte(`{"json":"not parsed"}`)}
}

// publishAll publishes payloads in order on one publisher (offsets asked) and returns the
// results; t fails on any error.
func publishAll(t *testing.T, c *client.Client, stream string, payloads [][]byte) []client.PublishResult {
	t.Helper()
	ctx := stepCtx(t)
	p, err := c.NewPublisher(stream, client.PublisherOptions{Offsets: true, MaxRecords: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	pend := make([]client.Pending, len(payloads))
	for i, pl := range payloads {
		if pend[i], err = p.Publish(ctx, pl); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	out := make([]client.PublishResult, len(payloads))
	for i := range pend {
		if out[i], err = pend[i].Wait(ctx); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	return out
}

// collect reads n records from sub (bounded by 30 s).
func collect(t *testing.T, sub *client.Subscription, n int) []client.Record {
	t.Helper()
	ctx := stepCtx(t)
	out := make([]client.Record, 0, n)
	for len(out) < n {
		r, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("record %d of %d: %v", len(out), n, err)
		}
		out = append(out, r)
	}
	return out
}

func subscribe(t *testing.T, c *client.Client, stream string, start client.Start) *client.Subscription {
	t.Helper()
	sub, err := c.Subscribe(stepCtx(t), stream, start, client.SubscribeOptions{})
	if err != nil {
		t.Fatalf("subscribe %s: %v", stream, err)
	}
	t.Cleanup(func() { sub.Close() })
	return sub
}

func pubsubByteExact(t *testing.T, e *env) {
	b := e.shared(t)
	for _, durable := range []bool{false, true} {
		name := fmt.Sprintf("bytes-%v", durable)
		b.createStream(client.StreamInfo{Name: name, Durable: durable})
		c := b.dial()
		sub := subscribe(t, c, name, client.Latest)
		want := oddPayloads()
		publishAll(t, c, name, want)
		for i, r := range collect(t, sub, len(want)) {
			if !bytes.Equal(r.Payload, want[i]) || r.Payload == nil {
				t.Fatalf("durable=%v record %d: %d bytes %q, want %d bytes", durable, i, len(r.Payload), trunc(r.Payload), len(want[i]))
			}
		}
	}
}

func trunc(b []byte) []byte { return b[:min(len(b), 32)] }

func pubsubShardOrder(t *testing.T, e *env) {
	b := e.shared(t)
	b.createStream(client.StreamInfo{Name: "order", Shards: 1})
	c := b.dial()
	sub := subscribe(t, c, "order", client.Latest)
	want := make([][]byte, 500)
	for i := range want {
		want[i] = []byte(fmt.Sprintf("r%04d", i))
	}
	publishAll(t, c, "order", want)
	for i, r := range collect(t, sub, len(want)) {
		if !bytes.Equal(r.Payload, want[i]) {
			t.Fatalf("record %d is %q, want %q (publish order)", i, r.Payload, want[i])
		}
	}
}

func pubsubOffsetsContiguous(t *testing.T, e *env) {
	b := e.shared(t)
	b.createStream(client.StreamInfo{Name: "offsets", Durable: true})
	c := b.dial()
	sub := subscribe(t, c, "offsets", client.Earliest)
	payloads := make([][]byte, 100)
	for i := range payloads {
		payloads[i] = []byte{byte(i)}
	}
	acks := publishAll(t, c, "offsets", payloads)
	for i, r := range collect(t, sub, len(payloads)) {
		switch {
		case !r.HasOffset || r.Offset != uint64(i):
			t.Fatalf("record %d: offset %d (has %v), want %d", i, r.Offset, r.HasOffset, i)
		case r.Gap != 0:
			t.Fatalf("record %d: gap %d on an undisturbed subscription", i, r.Gap)
		case !acks[i].HasOffsets || acks[i].FirstOffset != r.Offset:
			t.Fatalf("record %d: publisher was told offset %d (has %v), delivered at %d", i, acks[i].FirstOffset, acks[i].HasOffsets, r.Offset)
		}
	}
}

func pubsubResumeAtOffset(t *testing.T, e *env) {
	b := e.shared(t)
	b.createStream(client.StreamInfo{Name: "resume", Durable: true})
	c := b.dial()
	payloads := make([][]byte, 50)
	for i := range payloads {
		payloads[i] = []byte(fmt.Sprintf("p%d", i))
	}
	publishAll(t, c, "resume", payloads)
	for _, from := range []uint64{0, 17, 49} {
		sub := subscribe(t, c, "resume", client.Offset(from))
		got := collect(t, sub, 50-int(from))
		for i, r := range got {
			if want := from + uint64(i); r.Offset != want || !bytes.Equal(r.Payload, payloads[want]) || r.Gap != 0 {
				t.Fatalf("from %d: record %d at offset %d %q (gap %d), want offset %d", from, i, r.Offset, r.Payload, r.Gap, want)
			}
		}
		sub.Close()
	}
}

// trimmedBroker starts a broker whose retention drops sealed segments of a durable shard
// above 4 KiB once a second, and returns it with a stream whose head retention dropped
// (the first retained offset > 0) and that first retained offset.
func trimmedBroker(t *testing.T) (*broker, *client.Client, uint64) {
	t.Helper()
	b := startBroker(t, "FELIX_DURABLE_SEGMENT_BYTES=4096", "FELIX_DURABLE_RETENTION_BYTES=4096",
		"FELIX_DURABLE_RETENTION_INTERVAL_SECONDS=1")
	b.createStream(client.StreamInfo{Name: "trimmed", Durable: true})
	c := b.dial()
	payloads := make([][]byte, 200)
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{byte(i)}, 200)
	}
	publishAll(t, c, "trimmed", payloads)
	var oldest uint64
	waitFor(t, 30*time.Second, "retention dropped the head of the stream", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sub, err := c.Subscribe(ctx, "trimmed", client.Offset(0), client.SubscribeOptions{})
		if err == nil {
			sub.Close()
			return false
		}
		var ce *client.CursorError
		if !errors.As(err, &ce) {
			t.Fatalf("subscribe at 0: %v", err)
		}
		oldest = ce.Available
		return ce.Reason == client.CursorTooOld
	})
	return b, c, oldest
}

func pubsubEarliestTrimmed(t *testing.T, _ *env) {
	_, c, oldest := trimmedBroker(t)
	if oldest == 0 {
		t.Fatalf("too_old with oldest available offset 0")
	}
	_, err := c.Subscribe(stepCtx(t), "trimmed", client.Offset(0), client.SubscribeOptions{})
	var ce *client.CursorError
	if !errors.As(err, &ce) || ce.Reason != client.CursorTooOld || ce.Requested != 0 || !errors.Is(err, client.ErrCursor) {
		t.Fatalf("offset 0 of a trimmed stream: %v, want a too_old cursor error", err)
	}
	sub := subscribe(t, c, "trimmed", client.Earliest)
	r := collect(t, sub, 1)[0]
	if r.Offset != ce.Available || r.Payload[0] != byte(r.Offset) {
		t.Fatalf("earliest delivered offset %d (payload %d), want the oldest retained %d", r.Offset, r.Payload[0], ce.Available)
	}
}
