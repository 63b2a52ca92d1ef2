package core

import (
	"bytes"
	"context"
	"errors"
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
// truncated); after a crash it truncates from the gap and logs a WARN naming
// the bytes dropped.
func TestZeroGapRefusedAfterCleanStopWarnedAfterCrash(t *testing.T) {
	dir, size := gappedStreamDir(t)
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true, PreviousRunClean: true})
	if err != nil {
		t.Fatal(err)
	}
	err = e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	var ce *seglog.CorruptionError
	if !errors.As(err, &ce) || ce.Kind != seglog.CorruptDataAfterEnd || !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("reopen after a clean stop: %v, want DataAfterEnd", err)
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
