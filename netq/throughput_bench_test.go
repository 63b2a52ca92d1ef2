package netq

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// BenchmarkStreamThroughput measures one client stream pushing 64 KiB writes into the
// client-role listener over loopback, one configuration per sub-benchmark, so the
// settings recorded in docs/bench/netq.md are compared side by side in one run.
func BenchmarkStreamThroughput(b *testing.B) {
	configs := []struct {
		name string
		opts Options
		mtu  uint16 // client InitialPacketSize
	}{
		{"quic-go-default-windows", Options{InitialStreamWindowBytes: 512 << 10, MaxStreamWindowBytes: 6 << 20,
			InitialConnWindowBytes: 512 << 10, MaxConnWindowBytes: 15 << 20, UDPRecvBufferBytes: -1, UDPSendBufferBytes: -1}, 0},
		{"felix-windows", Options{UDPRecvBufferBytes: -1, UDPSendBufferBytes: -1}, 0},
		{"felix-windows+8MiB-socket-buffers", Options{}, 0},
		{"felix-windows+buffers+initial-packet-1452", Options{InitialPacketSize: 1452}, 1452},
	}
	for _, c := range configs {
		b.Run(c.name, func(b *testing.B) { benchThroughput(b, c.opts, c.mtu) })
	}
}

func benchThroughput(b *testing.B, opts Options, clientMTU uint16) {
	cert, err := SelfSigned([]string{"localhost"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	if opts.UDPRecvBufferBytes < 0 {
		opts.UDPRecvBufferBytes, opts.UDPSendBufferBytes = 1, 1 // kernel minimum; quic-go still raises it
	}
	l, err := Listen("127.0.0.1:0", cert, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int64, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		defer c.Release()
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		n, _ := io.Copy(io.Discard, s)
		done <- n
	}()
	client := opts.QUICConfig()
	client.InitialPacketSize = clientMTU
	conn, err := quic.DialAddr(ctx, l.Addr().String(), PinnedClientTLS(Fingerprint(cert.Certificate[0])), client)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.CloseWithError(0, "")
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	if n := <-done; n != int64(b.N*len(chunk)) {
		b.Fatalf("received %d of %d bytes", n, b.N*len(chunk))
	}
}
