package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"felix/seglog"
)

// gappedStreamDir writes 400 acknowledged records to a one-shard durable
// stream, stops the engine cleanly and zeroes one 512-byte sector in the
// middle of the record log's segment (the issue-23 repro's dd). It returns
// the data dir and the segment's size.
func gappedStreamDir(t *testing.T) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 400; i++ {
		if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: payloads("r", 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(seglog.ShardDir(dir, seglog.ShardKey{Kind: seglog.ShardStream, Tenant: testStream.Tenant,
		Namespace: testStream.Namespace, Name: testStream.Stream}), seglog.SegmentFileName(0))
	st, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 512), st.Size()/2&^511); err != nil {
		t.Fatal(err)
	}
	return dir, st.Size()
}

// After a clean stop the engine refuses to open a record log whose segment
// has a zero gap followed by records (seglog.CorruptDataAfterEnd; nothing
// truncated; the shard opens unservable and answers with it); after a crash it truncates from the gap and logs a WARN naming
// the bytes dropped.
func TestZeroGapRefusedAfterCleanStopWarnedAfterCrash(t *testing.T) {
	dir, size := gappedStreamDir(t)
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true, PreviousRunClean: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true}); err != nil {
		t.Fatalf("reopen after a clean stop: %v (the damaged shard opens unservable)", err)
	}
	_, err = publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: payloads("x", 1)})
	var ce *seglog.CorruptionError
	if !errors.As(err, &ce) || ce.Kind != seglog.CorruptDataAfterEnd || !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("publish after a clean stop: %v, want DataAfterEnd", err)
	}
	e.Close(context.Background())
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)
	e, err = NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true}); err != nil {
		t.Fatalf("reopen after a crash: %v", err)
	}
	info, _ := e.StreamInfo(testStream)
	if n := info.NextOffsets[0]; n == 0 || n >= 400 {
		t.Fatalf("next offset %d after the repair, want between 0 and 400", n)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "torn tail truncated") ||
		!strings.Contains(out, "bytes_dropped=") || !strings.Contains(out, "data_after_gap_at=") {
		t.Fatalf("no WARN for the truncated tail (segment %d bytes):\n%s", size, out)
	}
}

// shardSegment is the path of the first segment of testStream's shard's record log under dir.
func shardSegment(dir string, shard int) string {
	return filepath.Join(seglog.ShardDir(dir, seglog.ShardKey{Kind: seglog.ShardStream, Tenant: testStream.Tenant,
		Namespace: testStream.Namespace, Name: testStream.Stream, Shard: uint32(shard)}), seglog.SegmentFileName(0))
}

// tearTail appends to the segment at path the first half of one more record
// (offset next): a write a crash cut short.
func tearTail(t *testing.T, path string, next uint64) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := seglog.DecodeSegmentHeader(b[:seglog.SegmentHeaderLen])
	if err != nil {
		t.Fatal(err)
	}
	rec := seglog.AppendRecord(nil, h.Version, &seglog.Record{Offset: next, Payload: bytes.Repeat([]byte("x"), 200)})
	torn := rec[:len(rec)/2]
	if err := os.WriteFile(path, append(b, torn...), 0o644); err != nil {
		t.Fatal(err)
	}
	return int64(len(torn))
}

// A torn write at the tail of one shard's newest segment is truncated at
// start (issue 23 item 3): a WARN names the log, segment, bytes and records
// dropped, felix_storage_recovery_truncated_bytes / _records count them,
// every acknowledged record of both shards is still there and both serve.
func TestTornTailTruncationIsLoggedAndCounted(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spec := StreamSpec{Name: testStream, Shards: 2, Durable: true}
	if err := e.CreateStream(spec); err != nil {
		t.Fatal(err)
	}
	for shard := range 2 {
		for i := range 5 {
			req := &PublishRequest{Stream: testStream, Shard: shard, Payloads: payloads(fmt.Sprint(i), 1)}
			if _, err := publishSync(t, e, req); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	dropped := tearTail(t, shardSegment(dir, 1), 5)
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if e, err = NewEngine(cfg); err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.CreateStream(spec); err != nil {
		t.Fatalf("reopen after the torn write: %v", err)
	}
	for shard := range 2 {
		if got := readShard(t, e, testStream, shard, false); fmt.Sprint(got) != "[0-0 1-0 2-0 3-0 4-0]" {
			t.Fatalf("shard %d after the repair: %v", shard, got)
		}
		if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Shard: shard, Payloads: payloads("new", 1)}); err != nil {
			t.Fatalf("shard %d publish after the repair: %v", shard, err)
		}
	}
	out := logs.String()
	for _, want := range []string{"level=WARN", "torn tail truncated", "segment=" + seglog.SegmentFileName(0),
		fmt.Sprintf("bytes_dropped=%d", dropped), "records_dropped=1", "log=" + filepath.Dir(shardSegment(dir, 1))} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
	var m bytes.Buffer
	e.Metrics().WritePrometheus(&m)
	for _, want := range []string{fmt.Sprintf("felix_storage_recovery_truncated_bytes %d\n", dropped),
		"felix_storage_recovery_truncated_records 1\n"} {
		if !strings.Contains(m.String(), want) {
			t.Fatalf("metrics lack %q:\n%s", want, m.String())
		}
	}
}
