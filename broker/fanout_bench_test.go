package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/quic-go/quic-go"

	"felix/netq"
	"felix/proto"
)

// BenchmarkFanout publishes unacked binary batches of 16 × 100 B records to an in-memory
// stream with `subscribers` live subscribers (one connection each) and counts a batch done
// when every subscriber has received its records. allocs/op is per batch for the whole
// process; the broker's share of the delivery path is one shared frame per batch (core),
// written as-is to every event stream.
func BenchmarkFanout(b *testing.B) {
	for _, subs := range []int{1, 4} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) { benchFanout(b, subs) })
	}
}

func benchFanout(b *testing.B, subscribers int) {
	srv, stop := startInProcess(b, map[string]string{"FELIX_SUBSCRIBER_QUEUE_CAPACITY": "65536"})
	defer stop()
	if _, err := srv.catalog.CreateStream(Stream{TenantID: "default", Namespace: "default", Stream: "fan"}, srv.ApplyCreate); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	tlsConf := netq.PinnedClientTLS(netq.Fingerprint(srv.cert.Certificate[0]))
	dial := func() (*quic.Conn, *quic.Stream, *netq.FrameReader) {
		c, err := quic.DialAddr(ctx, srv.QUICAddr().String(), tlsConf, nil)
		if err != nil {
			b.Fatal(err)
		}
		st, _ := c.OpenStreamSync(ctx)
		flags := uint16(0x003F)
		st.Write(proto.AppendMessage(nil, &proto.Auth{TenantID: "default", ClientFlags: &flags}))
		fr := netq.NewFrameReader(st, 1<<20)
		h, _ := fr.ReadHeader()
		fr.ReadBody(h, nil)
		return c, st, fr
	}
	const perBatch = 16
	done := make(chan int, subscribers)
	for i := 0; i < subscribers; i++ {
		c, st, fr := dial()
		defer c.CloseWithError(0, "")
		st.Write(proto.AppendMessage(nil, &proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "fan"}))
		ev, err := c.AcceptUniStream(ctx)
		if err != nil {
			b.Fatal(err)
		}
		h, _ := fr.ReadHeader() // subscribed
		fr.ReadBody(h, nil)
		go func() {
			er := netq.NewFrameReader(ev, 1<<20)
			var buf []byte
			var batch proto.EventBatch
			h, _ := er.ReadHeader() // event_stream_hello
			buf, _ = er.ReadBody(h, buf)
			records := 0
			for {
				h, err := er.ReadHeader()
				if err != nil {
					done <- records
					return
				}
				if buf, err = er.ReadBody(h, buf); err != nil || proto.DecodeEventBatch(h.Flags, buf, &batch) != nil {
					done <- records
					return
				}
				records += len(batch.Payloads)
				if records == b.N*perBatch {
					done <- records
					return
				}
			}
		}()
	}
	pc, pst, _ := dial()
	defer pc.CloseWithError(0, "")
	batch := &proto.PublishBatch{TenantID: []byte("default"), Namespace: []byte("default"), Stream: []byte("fan")}
	for i := 0; i < perBatch; i++ {
		batch.Payloads = append(batch.Payloads, make([]byte, 100))
	}
	frame, _ := proto.AppendPublishBatch(nil, batch)
	b.SetBytes(int64(perBatch * 100 * subscribers))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := pst.Write(frame); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < subscribers; i++ {
		if got := <-done; got != b.N*perBatch {
			b.Fatalf("subscriber received %d of %d records", got, b.N*perBatch)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*perBatch*subscribers)/b.Elapsed().Seconds(), "deliveries/s")
}
