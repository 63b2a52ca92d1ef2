package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/proto"
	"felix/seglog"
)

// A client that never reads its answers holds its stream's writer; the drain gives up at
// FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS, Run reports an unclean stop and the run-state stays
// "running" (seeds/upgrades-and-compatibility.txt, "Clean stops and crashes").
func TestDrainOverrunIsAnUncleanStop(t *testing.T) {
	dir := t.TempDir()
	cfg, _, err := LoadConfig(nil, envOf(map[string]string{"FELIX_QUIC_BIND": "127.0.0.1:0", "FELIX_BROKER_METRICS_BIND": "127.0.0.1:0",
		"FELIX_DURABLE_STORAGE_DIR": dir, "FELIX_AUTH": "off", "FELIX_CORE_SHARDS": "1", "FELIX_DURABLE_SEGMENT_BYTES": "1048576", "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS": "300",
		"FELIX_STREAM_WRITER_MAX_BYTES": "1073741824"}))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a failed wait below still stops the broker
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	waitUntil(t, 20*time.Second, "the broker to be ready", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run returned before the broker was ready: %v", err)
		default:
		}
		return srv.ready.Load()
	})
	if _, err := srv.catalog.CreateStream(Stream{TenantID: "default", Namespace: "default", Stream: "s"}, srv.ApplyCreate); err != nil {
		t.Fatal(err)
	}
	st := clientStream(t, srv, &quic.Config{InitialStreamReceiveWindow: 16 << 10, MaxStreamReceiveWindow: 16 << 10})
	flags := uint16(0x003F)
	st.Write(proto.AppendMessage(nil, &proto.Auth{TenantID: "default", ClientFlags: &flags}))
	// Requests whose answers (errors for an unknown stream, ~100 B each) overflow the 16 KiB
	// window many times over; the client never reads them.
	frame := proto.AppendMessage(nil, &proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "missing"})
	for i := 0; i < 2000; i++ {
		if _, err := st.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the broker has answered far more than the window holds: its writer is then
	// blocked on flow control.
	waitUntil(t, 20*time.Second, "1500 error answers sent", func() bool { return srv.m.errorsSent.Get() >= 1500 })
	cancel()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the drain budget")
	}
	if err == nil {
		t.Fatal("a drain blocked by a client was reported clean")
	}
	st2, rerr := seglog.ReadRunState(seglog.OSFS{}, dir)
	if rerr != nil || !st2.Found || st2.CleanStop {
		t.Fatalf("run-state after an overrun: %+v %v", st2, rerr)
	}
	if errors.Is(err, context.Canceled) {
		t.Fatalf("unexpected error kind: %v", err)
	}
}

// waitUntil polls cond (every millisecond) until it holds; after d it fails t,
// naming what it waited for.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}
