package broker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"felix/core"
	"felix/seglog"
)

// runUntilReady starts srv.Run and waits until the broker is ready; it returns
// the channel Run's result arrives on.
func runUntilReady(t *testing.T, srv *Server, ctx context.Context) chan error {
	t.Helper()
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
	return done
}

// The issue-23 repro: a clean stop, one sector of the shard's segment zeroed
// mid-file, a restart. The broker must refuse to start (as for a checksum
// failure in the newest segment) naming DataAfterEnd, never cut the log.
func TestStartRefusesZeroGapAfterCleanStop(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(testConfig(t, dir), logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runUntilReady(t, srv, ctx)
	if _, err := srv.catalog.CreateStream(Stream{TenantID: "default", Namespace: "default", Stream: "c", Shards: 1, Durable: true}, srv.ApplyCreate); err != nil {
		t.Fatal(err)
	}
	acks := make(chan error, 1)
	for i := 0; i < 400; i++ {
		req := &core.PublishRequest{Stream: streamName("default", "default", "c"), Payloads: [][]byte{[]byte("record")}}
		if err := srv.engine.Publish(req, func(_ core.PublishResult, err error) { acks <- err }); err != nil {
			t.Fatal(err)
		}
		if err := <-acks; err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stop: %v", err)
	}
	seg := filepath.Join(seglog.ShardDir(dir, seglog.ShardKey{Kind: seglog.ShardStream, Tenant: "default",
		Namespace: "default", Name: "c"}), seglog.SegmentFileName(0))
	st, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, 512), st.Size()/2&^511)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	srv2, err := New(testConfig(t, dir), logger) // New opens the engine and the catalog's shards
	if err == nil {
		srv2.closeAll()
		t.Fatal("the broker started over a zeroed sector after a clean stop")
	}
	// The reconciler's error keeps the text, not the type: the shard directory, segment and byte.
	want := "seglog: DataAfterEnd in " + filepath.Dir(seg) + " segment 00000000000000000000 at byte "
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "non-zero data at byte") {
		t.Fatalf("restart after a clean stop over a zeroed sector: %v, want %q", err, want)
	}
	if after, _ := os.Stat(seg); after.Size() != st.Size() {
		t.Fatalf("the refused start cut the segment: %d -> %d bytes", st.Size(), after.Size())
	}
}
