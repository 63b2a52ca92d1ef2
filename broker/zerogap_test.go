package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"felix/core"
	"felix/proto"
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

// zeroGapDataDir runs a broker on a fresh data dir with streams "c" (400
// records) and "other", stops it cleanly and zeroes one sector mid-way through
// c's segment (the issue-23 repro's dd). It returns the dir, the segment and
// its size.
func zeroGapDataDir(t *testing.T, logger *slog.Logger) (string, string, int64) {
	t.Helper()
	dir := t.TempDir()
	srv, err := New(testConfig(t, dir), logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runUntilReady(t, srv, ctx)
	for _, name := range []string{"c", "other"} {
		if _, err := srv.catalog.CreateStream(Stream{TenantID: "default", Namespace: "default", Stream: name, Shards: 1, Durable: true}, srv.ApplyCreate); err != nil {
			t.Fatal(err)
		}
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
	return dir, seg, st.Size()
}

// The issue-23 repro: a clean stop, one sector of the shard's segment zeroed
// mid-file, a restart. The broker starts and serves (issue 23 item 2: one
// damaged log takes down only its shard); the shard answers storage_failed
// naming DataAfterEnd, /ready lists it, and the log is never cut.
func TestStartWithZeroGapAfterCleanStopIsolatesTheShard(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, seg, size := zeroGapDataDir(t, logger)
	acks := make(chan error, 1)
	srv2, err := New(testConfig(t, dir), logger) // New opens the engine and the catalog's shards
	if err != nil {
		t.Fatalf("the broker refused to start over one damaged shard: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done2 := runUntilReady(t, srv2, ctx2)
	defer func() { cancel2(); <-done2 }()
	publish := func(stream string) error {
		req := &core.PublishRequest{Stream: streamName("default", "default", stream), Payloads: [][]byte{[]byte("after")}}
		if err := srv2.engine.Publish(req, func(_ core.PublishResult, err error) { acks <- err }); err != nil {
			return err
		}
		return <-acks
	}
	if err := publish("other"); err != nil {
		t.Fatalf("publish to the other stream: %v", err)
	}
	err = publish("c")
	if code, text := srv2.errorCode(err); code != proto.CodeStorageFailed || !strings.Contains(text, "DataAfterEnd in segment 00000000000000000000.log at byte ") ||
		strings.Contains(text, dir) {
		t.Fatalf("publish to the damaged shard: %s %q", code, text)
	}
	resp, err := http.Get("http://" + srv2.HTTPAddr().String() + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "damaged: stream default/default/c shard 0: DataAfterEnd in segment 00000000000000000000.log at byte ") {
		t.Fatalf("/ready: %d %q, want 200 listing the damaged shard", resp.StatusCode, body)
	}
	wantUnservable(t, srv2, "c")
	if after, _ := os.Stat(seg); after.Size() != size {
		t.Fatalf("the start cut the damaged segment: %d -> %d bytes", size, after.Size())
	}
}

// wantUnservable checks that the admin API's GET of stream lists shard 0 as damaged and
// down (readable false; `felix stream describe`).
func wantUnservable(t *testing.T, srv *Server, stream string) {
	t.Helper()
	resp, err := http.Get("http://" + srv.HTTPAddr().String() + "/v1/tenants/default/namespaces/default/streams/" + stream)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got describedStream
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got.Damaged) != 1 ||
		got.Damaged[0].Shard != 0 || got.Damaged[0].Kind != "DataAfterEnd" || got.Damaged[0].Readable {
		t.Fatalf("GET stream %s: %d %+v %v", stream, resp.StatusCode, got.Damaged, err)
	}
}

// A storage_failed answer never carries the server's path (issue 23): seglog's storage
// and corruption errors are reduced to the operation and errno, or kind, segment and byte.
func TestStorageFailedTextNamesNoPath(t *testing.T) {
	path := "/srv/felix/data/streams/x/00000000000000000000.log"
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: append: %w", core.ErrStorageFailed, &seglog.StorageError{Op: "write", Path: path, Err: syscall.ENOSPC}),
			"storage failed: write: no space left on device"},
		{fmt.Errorf("%w: open: %w", core.ErrStorageFailed, &seglog.CorruptionError{Kind: seglog.CorruptRecordChecksum, Dir: path, Segment: 3, Position: 96}),
			"storage failed: log damaged: RecordChecksum in segment 00000000000000000003.log at byte 96"},
	} {
		if got := storageFailedText(c.err); got != c.want || strings.Contains(got, path) {
			t.Errorf("storageFailedText(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
