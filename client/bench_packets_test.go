package client

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlogwriter"
)

// packetCounter counts the QUIC packets the SDK's connections send (qlog event
// transport:packet_sent), for a packets-per-request figure (issue 22 finding 5).
type packetCounter struct{ sent atomic.Int64 }

func (p *packetCounter) AddProducer() qlogwriter.Recorder { return packetRecorder{p} }

type packetRecorder struct{ p *packetCounter }

func (r packetRecorder) RecordEvent(e qlogwriter.Event) {
	if e.Name() == "transport:packet_sent" {
		r.p.sent.Add(1)
	}
}

func (packetRecorder) Close() error { return nil }

// countPackets installs a packet counter on the connections dialled from now on (the
// benchmark's client), restored at the end of the benchmark.
func countPackets(b *testing.B) *packetCounter {
	pc := &packetCounter{}
	quicTracer = func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace { return pc }
	b.Cleanup(func() { quicTracer = nil })
	return pc
}

// Cache Gets pipelined 16 deep on one connection with one request stream (the shape of
// finding 5: 16 requests in flight): packets/op is the client's QUIC packets sent per Get
// (requests and ACKs), ns/op the time per Get at that depth.
func BenchmarkCacheGetPipelined16(b *testing.B) {
	br := startBroker(b, "", "FELIX_DURABLE_FSYNC_MODE=none")
	ctx := context.Background()
	if _, err := br.admin().CreateCache(ctx, CacheInfo{Name: "kv"}); err != nil {
		b.Fatal(err)
	}
	pc := countPackets(b)
	c, err := Dial(ctx, br.info.QUICAddr, WithFingerprint(br.info.Fingerprint), WithToken(br.token), WithConnPool(1), WithStreamsPerConn(1))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Put(ctx, "kv", "k", make([]byte, 256), 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := pc.sent.Load()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, _, err := c.Get(ctx, "kv", "k"); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(pc.sent.Load()-start)/float64(b.N), "packets/op")
}
