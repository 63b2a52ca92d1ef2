package transport

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"felix/proto"

	"github.com/quic-go/quic-go"
)

// Side by side on loopback (docs/bench/transport.md): a request/response round trip through
// the Pool against the same frames on a bare quic-go stream, and the bytes/s of one peer
// connection against a bare quic-go stream.

func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

func benchPool(b *testing.B) (*Pool, Peer) {
	c, err := LoadCredentials("node-b", TLSFiles{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	l, err := Listen("127.0.0.1:0", c, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go l.Serve(ctx, okHandler)
	a, _ := LoadCredentials("node-a", TLSFiles{}, nil, nil)
	p, err := NewPool(a, PoolOptions{LocalAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(); cancel(); l.Close() })
	return p, Peer{NodeID: "node-b", Addr: l.Addr().String()}
}

// bareEcho is a quic-go listener answering every frame on a stream with answer (or nothing
// when answer is nil), with no transport code in between.
func bareEcho(b *testing.B, answer []byte) string {
	c, _ := LoadCredentials("node-b", TLSFiles{}, nil, nil)
	ql, err := quic.ListenAddr("127.0.0.1:0", c.ServerTLS(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ql.Close() })
	go func() {
		for {
			qc, err := ql.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				for {
					s, err := qc.AcceptStream(context.Background())
					if err != nil {
						return
					}
					go func() {
						buf := make([]byte, 0, 1<<20)
						for {
							_, body, err := proto.ReadInternalFrame(s, buf, DefaultMaxFrameBytes)
							if err != nil {
								s.Close() // the client sees the end once everything was read
								return
							}
							buf = body[:0]
							if answer != nil {
								s.Write(answer)
							}
						}
					}()
				}
			}()
		}
	}()
	return ql.Addr().String()
}

func bareStream(b *testing.B, addr string) *quic.Stream {
	c, _ := LoadCredentials("node-a", TLSFiles{}, nil, nil)
	qc, err := quic.DialAddr(context.Background(), addr, c.ClientTLS("node-b"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { qc.CloseWithError(0, "") })
	s, err := qc.OpenStreamSync(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkRoundTrip(b *testing.B) {
	req := publish(1)
	b.Run("pool", func(b *testing.B) {
		p, to := benchPool(b)
		ctx := context.Background()
		if _, err := p.Request(ctx, to, req); err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if _, err := p.Request(ctx, to, req); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		reportLatency(b, lat)
	})
	b.Run("bare-quic", func(b *testing.B) {
		frame, _ := proto.AppendInternalFrame(nil, req)
		answer, _ := proto.AppendInternalFrame(nil, &proto.ForwardPublishOk{CorrelationID: 1, FirstOffset: 1, LastOffset: 2})
		s := bareStream(b, bareEcho(b, answer))
		buf := make([]byte, 0, 4096)
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if _, err := s.Write(frame); err != nil {
				b.Fatal(err)
			}
			h, body, err := proto.ReadInternalFrame(s, buf, DefaultMaxFrameBytes)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := proto.DecodeInternal(h.Kind, body); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		reportLatency(b, lat)
	})
}

// BenchmarkThroughput moves 64 KiB payloads: through the pool 8 requests at a time on one
// peer connection (each answered), on a bare stream written back to back (no answers).
func BenchmarkThroughput(b *testing.B) {
	const size = 64 << 10
	req := publish(1)
	req.Payloads = [][]byte{make([]byte, size)}
	b.Run("pool", func(b *testing.B) {
		p, to := benchPool(b)
		ctx := context.Background()
		if _, err := p.Request(ctx, to, req); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		b.ResetTimer()
		var wg sync.WaitGroup
		work := make(chan struct{}, b.N)
		for i := 0; i < b.N; i++ {
			work <- struct{}{}
		}
		close(work)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range work {
					if _, err := p.Request(ctx, to, req); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
	b.Run("bare-quic", func(b *testing.B) {
		frame, _ := proto.AppendInternalFrame(nil, req)
		s := bareStream(b, bareEcho(b, nil))
		b.SetBytes(size)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.Write(frame); err != nil {
				b.Fatal(err)
			}
		}
		// Wait until the peer read everything: close our side, then see its end.
		s.Close()
		io.Copy(io.Discard, s)
	})
}

// BenchmarkPipeline pipelines small batches on one ordered stream (Pool.Pipeline), 32 pending
// at a time, the way replication ships a shard's log: batches/s and allocations per batch.
func BenchmarkPipeline(b *testing.B) {
	p, to := benchPool(b)
	ctx := context.Background()
	key := OrderKey{Shard: "t/n/s", Log: proto.LogStream}
	req := publish(1)
	if _, err := p.Request(ctx, to, req); err != nil {
		b.Fatal(err)
	}
	window := make([]*Pending, 0, 32)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(window) == cap(window) {
			if _, err := window[0].Wait(ctx); err != nil {
				b.Fatal(err)
			}
			window = append(window[:0], window[1:]...)
		}
		pd, err := p.Pipeline(ctx, to, key, req)
		if err != nil {
			b.Fatal(err)
		}
		window = append(window, pd)
	}
	for _, pd := range window {
		if _, err := pd.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
