package client

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// allocMeter reports the bytes the process allocated per byte delivered (issue 22: at most
// 0.1 on the publish and subscribe paths) as the metric "alloc-B/B", from the heap's
// TotalAlloc between start and stop.
type allocMeter struct{ start uint64 }

func (m *allocMeter) begin() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.start = ms.TotalAlloc
}

func (m *allocMeter) report(b *testing.B, delivered int64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if delivered > 0 {
		b.ReportMetric(float64(ms.TotalAlloc-m.start)/float64(delivered), "alloc-B/B")
	}
}

// warmPublisher publishes twice the in-flight budget and waits for it, so the measured
// loop sees the steady state (a Publisher's first MaxInflightBytes allocate its buffers).
func warmPublisher(b *testing.B, p *Publisher, payload []byte) {
	ctx := context.Background()
	for range 2 * (4 << 20) / max(len(payload), 1) {
		if _, err := p.Publish(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// Benchmarks against the real broker (fsync none, so the client and the wire dominate).
// allocs/op counts the whole process side of the client per record: batching, encoding,
// the stream writer and the ack reader.

func benchBroker(b *testing.B) (*testBroker, *Client) {
	br := startBroker(b, "", "FELIX_DURABLE_FSYNC_MODE=none")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := br.admin().CreateStream(ctx, StreamInfo{Name: "bench", Durable: true}); err != nil {
		b.Fatal(err)
	}
	if _, err := br.admin().CreateCache(ctx, CacheInfo{Name: "kv"}); err != nil {
		b.Fatal(err)
	}
	c, err := Dial(ctx, br.info.QUICAddr, WithFingerprint(br.info.Fingerprint), WithToken(br.token))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return br, c
}

func benchPublish(b *testing.B, opts PublisherOptions) {
	_, c := benchBroker(b)
	p, err := c.NewPublisher("bench", opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	payload := make([]byte, 100)
	warmPublisher(b, p, payload)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	var m allocMeter
	b.ResetTimer()
	m.begin()
	for range b.N {
		if _, err := p.Publish(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	m.report(b, int64(b.N)*int64(len(payload)))
	p.Close(ctx)
}

// 100-byte records, binary acked batches (0x0009) of up to 1024 records.
func BenchmarkPublishBinary(b *testing.B) { benchPublish(b, PublisherOptions{}) }

// Same with JSON publish_batch and offsets in the acks.
func BenchmarkPublishJSONOffsets(b *testing.B) { benchPublish(b, PublisherOptions{Offsets: true}) }

// 100-byte records over 16 routing keys taken in turn: one open batch per key, binary
// 0x4009 frames (docs/client-protocol.md D15). Compare with BenchmarkPublishBinary.
func BenchmarkPublishKeyedBinary(b *testing.B) {
	_, c := benchBroker(b)
	p, err := c.NewPublisher("bench", PublisherOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	payload := make([]byte, 100)
	var keys [16][]byte
	for i := range keys {
		keys[i] = []byte{'k', byte('a' + i)}
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := p.PublishKeyed(ctx, keys[i%len(keys)], payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	p.Close(ctx)
}

// One record per request, waiting for each ack (latency-bound).
func BenchmarkPublishSync(b *testing.B) {
	_, c := benchBroker(b)
	p, err := c.NewPublisher("bench", PublisherOptions{Linger: -1})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	payload := make([]byte, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := p.PublishSync(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	p.Close(ctx)
}

// Subscribe delivery: records published in batches by another goroutine, read with Next.
// alloc-B/B counts both sides (publisher and subscriber share the process) per byte
// delivered; each frame is read into a buffer of its own (records valid indefinitely).
func BenchmarkSubscribeNext(b *testing.B) { benchSubscribe(b, SubscribeOptions{}) }

// Same with SubscribeOptions.ReuseBuffers: frames read into recycled buffers.
func BenchmarkSubscribeNextReuse(b *testing.B) {
	benchSubscribe(b, SubscribeOptions{ReuseBuffers: true})
}

func benchSubscribe(b *testing.B, opts SubscribeOptions) {
	_, c := benchBroker(b)
	ctx := context.Background()
	sub, err := c.Subscribe(ctx, "bench", Latest, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	p, err := c.NewPublisher("bench", PublisherOptions{})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 100)
	warmPublisher(b, p, payload)
	for n := 0; n < 2*(4<<20)/len(payload); n++ { // the warm-up's records (a drop is a gap)
		r, err := sub.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n += int(r.Gap)
	}
	go func() {
		for range b.N {
			if _, err := p.Publish(ctx, payload); err != nil {
				return
			}
		}
		_ = p.Flush(ctx)
	}()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	var m allocMeter
	b.ResetTimer()
	m.begin()
	// Records the broker dropped for this subscriber (drop_new) arrive as gaps; count them
	// so a drop cannot hang the loop, and report them.
	var got, gaps int
	for got+gaps < b.N {
		r, err := sub.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		got++
		gaps += int(r.Gap)
	}
	b.StopTimer()
	m.report(b, int64(got)*int64(len(payload)))
	b.ReportMetric(float64(gaps)/float64(b.N), "dropped/op")
	p.Close(ctx)
}

// Cache Get round trips from 16 goroutines over the pooled streams.
func BenchmarkCacheGetParallel(b *testing.B) {
	_, c := benchBroker(b)
	ctx := context.Background()
	if err := c.Put(ctx, "kv", "k", make([]byte, 256), 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := c.Get(ctx, "kv", "k"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// One Get at a time (round-trip latency).
func BenchmarkCacheGet(b *testing.B) {
	_, c := benchBroker(b)
	ctx := context.Background()
	if err := c.Put(ctx, "kv", "k", make([]byte, 256), 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, _, err := c.Get(ctx, "kv", "k"); err != nil {
			b.Fatal(err)
		}
	}
}

// Subscribe delivery alone: b.N records are published before the timer starts, then read
// from Earliest (the broker replays its log), so alloc-B/B counts the subscriber's side
// only (the SDK, proto and quic-go's receive path). "reuse" sets
// SubscribeOptions.ReuseBuffers; "default" reads each frame into a buffer of its own.
func BenchmarkSubscribeReplay(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts SubscribeOptions
	}{{"default", SubscribeOptions{}}, {"reuse", SubscribeOptions{ReuseBuffers: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			_, c := benchBroker(b)
			ctx := context.Background()
			p, err := c.NewPublisher("bench", PublisherOptions{})
			if err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 100)
			for range b.N {
				if _, err := p.Publish(ctx, payload); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			var m allocMeter
			b.ResetTimer()
			m.begin()
			sub, err := c.Subscribe(ctx, "bench", Earliest, bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			for got := 0; got < b.N; got++ {
				r, err := sub.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if r.Gap != 0 {
					b.Fatalf("replay gap of %d at offset %d", r.Gap, r.Offset)
				}
			}
			b.StopTimer()
			m.report(b, int64(b.N)*int64(len(payload)))
		})
	}
}
