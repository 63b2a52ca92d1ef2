package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"felix/netq"
	"felix/proto"
)

// startInProcess runs a broker in this process on 127.0.0.1 random ports, auth off.
func startInProcess(tb testing.TB, env map[string]string) (*Server, func()) {
	tb.Helper()
	cfg := testConfig(tb, tb.TempDir(), env)
	srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	for !srv.ready.Load() {
		time.Sleep(time.Millisecond)
	}
	return srv, func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
	}
}

// testConfig loads the test defaults (loopback client and metrics binds on kernel-chosen
// ports, auth off, one core shard, 1 MiB segments, durable storage in dataDir) with each of
// envs over them in order; a setting LoadConfig refuses fails the test.
func testConfig(tb testing.TB, dataDir string, envs ...map[string]string) *Config {
	tb.Helper()
	base := map[string]string{"FELIX_QUIC_BIND": "127.0.0.1:0", "FELIX_BROKER_METRICS_BIND": "127.0.0.1:0",
		"FELIX_DURABLE_STORAGE_DIR": dataDir, "FELIX_AUTH": "off", "FELIX_CORE_SHARDS": "1", "FELIX_DURABLE_SEGMENT_BYTES": "1048576"}
	for _, env := range envs {
		for k, v := range env {
			base[k] = v
		}
	}
	cfg, _, err := LoadConfig(nil, envOf(base))
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// BenchmarkBinaryPublish pushes acked binary batches (0x0009) through a real QUIC stream
// into an in-memory stream and waits for every ack, with a window of 32 batches in flight.
// allocs/op is per batch for the whole process (client and broker).
func BenchmarkBinaryPublish(b *testing.B) {
	// Same bytes per batch, 1 vs 64 records: equal allocs/op means none per record
	// (quic-go allocates per packet, so allocs/op grows with bytes, not with records).
	for _, c := range []struct{ records, size int }{{1, 100}, {1, 6400}, {64, 100}} {
		b.Run(fmt.Sprintf("records=%d/bytes=%d", c.records, c.size), func(b *testing.B) { benchPublish(b, c.records, c.size) })
	}
}

func benchPublish(b *testing.B, records, size int) {
	srv, stop := startInProcess(b, nil)
	defer stop()
	if _, err := srv.catalog.CreateStream(Stream{TenantID: "default", Namespace: "default", Stream: "bench", Durable: false}, srv.ApplyCreate); err != nil {
		b.Fatal(err)
	}
	st := clientStream(b, srv, nil)
	flags := uint16(0x003F)
	st.Write(proto.AppendMessage(nil, &proto.Auth{TenantID: "default", ClientFlags: &flags}))
	fr := netq.NewFrameReader(st, 1<<20)
	buf := make([]byte, 0, 256)
	readOne := func() {
		h, err := fr.ReadHeader()
		if err != nil {
			b.Fatal(err)
		}
		if buf, err = fr.ReadBody(h, buf); err != nil {
			b.Fatal(err)
		}
		if h.Flags == proto.FlagBinaryPublishAck && buf[0] != 0 {
			b.Fatalf("error ack: %s", buf[11:])
		}
	}
	readOne() // auth_ok
	payload := make([]byte, size)
	batch := &proto.PublishBatch{Acked: true, AckMode: proto.AckPerBatch, TenantID: []byte("default"),
		Namespace: []byte("default"), Stream: []byte("bench")}
	for i := 0; i < records; i++ {
		batch.Payloads = append(batch.Payloads, payload)
	}
	frame, _ := proto.AppendPublishBatch(nil, batch)
	const window = 32
	b.SetBytes(int64(records * len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	inflight := 0
	for i := 0; i < b.N; i++ {
		if _, err := st.Write(frame); err != nil {
			b.Fatal(err)
		}
		inflight++
		if inflight == window {
			readOne()
			inflight--
		}
	}
	for ; inflight > 0; inflight-- {
		readOne()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
}
