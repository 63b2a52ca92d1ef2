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
	"sync"
	"testing"
	"time"

	"felix/seglog"
)

// syncBuffer is a goroutine-safe log sink (the startup check logs from its own goroutine).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// damageRecord is the payload of record i: 200 bytes.
func damageRecord(i int) []byte { return []byte(fmt.Sprintf("%03d", i) + strings.Repeat("p", 197)) }

// damagedShardDir writes 600 records of 200 bytes to each shard of a
// two-shard durable stream over 64 KiB segments, stops the engine and flips
// one payload byte of offset 4 in shard 0's sealed segment 0. It returns the
// data dir and the damaged record's byte position.
func damagedShardDir(t *testing.T) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true, SegmentBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 2, Durable: true}); err != nil {
		t.Fatal(err)
	}
	for shard := range 2 {
		for batch := range 12 {
			var ps [][]byte
			for i := range 50 {
				ps = append(ps, damageRecord(batch*50+i))
			}
			if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Shard: shard, Payloads: ps}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	pos := int64(seglog.SegmentHeaderLen + 4*(seglog.RecordHeaderLen(seglog.WriteVersion)+200))
	overwrite(t, shardSegment(dir, 0), pos+int64(seglog.RecordHeaderLen(seglog.WriteVersion))+100, 0xff)
	return dir, pos
}

// overwrite writes byte b at position pos of the file at path (pos < 0: counted from its end).
func overwrite(t *testing.T, path string, pos int64, b byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if pos < 0 {
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		pos += st.Size()
	}
	if _, err := f.WriteAt([]byte{b}, pos); err != nil {
		t.Fatal(err)
	}
}

// readFrom subscribes to shard from offset and reads until next reaches
// until or the subscription ends; it returns the offsets read and the error.
func readFrom(t *testing.T, e *Engine, shard int, from, until uint64) ([]uint64, error) {
	t.Helper()
	sub, err := e.Subscribe(SubscribeRequest{Stream: testStream, Shard: shard, Start: StartOffset, Offset: from, WithOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var got []uint64
	for next := from; next < until; {
		d, err := sub.Next(ctx)
		if err != nil {
			return got, err
		}
		for i, p := range records(t, d) {
			if want := string(damageRecord(int(d.BaseOffset) + i)); p != want {
				t.Fatalf("offset %d: %.8q, want %.8q", d.BaseOffset+uint64(i), p, want)
			}
			got = append(got, d.BaseOffset+uint64(i))
		}
		next = d.BaseOffset + uint64(d.Count)
	}
	return got, nil
}

// waitMetric waits (bounded) until the engine's metrics text holds want.
func waitMetric(t *testing.T, e *Engine, want string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		var m bytes.Buffer
		e.Metrics().WritePrometheus(&m)
		if strings.Contains(m.String(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never held %q:\n%s", want, m.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A flipped byte in a sealed segment of one shard (issue 23 item 1): the
// engine opens, the startup check marks the shard damaged (ERROR log line,
// felix_stream_damaged 1 for that shard only) before any read; a subscriber
// from earliest gets offsets 0..3 and then a *DamageError naming stream,
// shard, segment, byte and offset 4 (no server path in its text); a
// subscriber from 5 reads every later record; the other shard reads whole;
// both shards take publishes.
func TestDamagedSealedSegmentTypedErrorAndMarked(t *testing.T) {
	dir, pos := damagedShardDir(t)
	logs := &syncBuffer{}
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true, SegmentBytes: 64 << 10,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 2, Durable: true}); err != nil {
		t.Fatalf("open with a damaged sealed segment: %v", err)
	}
	label := func(shard int) string {
		return fmt.Sprintf(`felix_stream_damaged{tenant=%q,namespace=%q,stream=%q,shard="%d"}`,
			testStream.Tenant, testStream.Namespace, testStream.Stream, shard)
	}
	waitMetric(t, e, label(0)+" 1\n")
	waitMetric(t, e, label(1)+" 0\n")
	for _, want := range []string{"level=ERROR", "log damaged", "shard=0", "segment=" + seglog.SegmentFileName(0),
		fmt.Sprintf("at_byte=%d", pos), "offset=4", "found_by=\"startup check"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, logs.String())
		}
	}
	got, err := readFrom(t, e, 0, 0, 600)
	var de *DamageError
	if !errors.As(err, &de) || !errors.Is(err, ErrStorageFailed) || !errors.Is(err, seglog.ErrCorruption) ||
		de.Stream != testStream || de.Shard != 0 || de.Segment != seglog.SegmentFileName(0) || de.Position != pos || de.Offset != 4 {
		t.Fatalf("read from 0: %v then %#v", got, err)
	}
	if fmt.Sprint(got) != "[0 1 2 3]" || strings.Contains(err.Error(), dir) {
		t.Fatalf("read from 0 delivered %v before %q (must not name %s)", got, err, dir)
	}
	if got, err = readFrom(t, e, 0, 5, 600); err != nil || len(got) != 595 {
		t.Fatalf("read from 5 (above the damage): %d records, %v", len(got), err)
	}
	if got, err = readFrom(t, e, 1, 0, 600); err != nil || len(got) != 600 {
		t.Fatalf("other shard: %d records, %v", len(got), err)
	}
	for shard := range 2 {
		if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Shard: shard, Payloads: [][]byte{damageRecord(600)}}); err != nil {
			t.Fatalf("shard %d publish: %v", shard, err)
		}
	}
	if strings.Count(logs.String(), "log damaged") != 1 {
		t.Fatalf("the damage is logged once per shard:\n%s", logs.String())
	}
}

// badTailDir writes 20 records to each shard of a two-shard on_commit
// stream, stops the engine cleanly and flips one payload byte of shard 0's
// last record (a checksum mismatch at the tail of the newest segment, not a
// torn write). It returns the data dir.
func badTailDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 2, Durable: true}); err != nil {
		t.Fatal(err)
	}
	for shard := range 2 {
		for i := range 20 {
			if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Shard: shard, Payloads: [][]byte{damageRecord(i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	overwrite(t, shardSegment(dir, 0), -50, 0xff)
	return dir
}

// A bad record at the tail of one shard's newest segment (issue 23 item 2):
// the stream opens, the other shard serves publishes and reads, the damaged
// shard answers publishes and subscriptions with a *DamageError naming it,
// shows in Engine.Damaged and felix_stream_damaged, and is logged at ERROR.
func TestBadTailTakesDownOnlyItsShard(t *testing.T) {
	dir := badTailDir(t)
	logs := &syncBuffer{}
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true, PreviousRunClean: true,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 2, Durable: true}); err != nil {
		t.Fatalf("open with one damaged shard: %v", err)
	}
	if got, err := readFrom(t, e, 1, 0, 20); err != nil || len(got) != 20 {
		t.Fatalf("other shard: %v, %v", got, err)
	}
	if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Shard: 1, Payloads: [][]byte{damageRecord(20)}}); err != nil {
		t.Fatalf("other shard publish: %v", err)
	}
	var de *DamageError
	_, err = publishSync(t, e, &PublishRequest{Stream: testStream, Shard: 0, Payloads: [][]byte{damageRecord(20)}})
	if !errors.As(err, &de) || de.Shard != 0 || de.Damage != seglog.CorruptRecordChecksum || de.Offset != 19 || strings.Contains(err.Error(), dir) {
		t.Fatalf("publish to the damaged shard: %v", err)
	}
	_, err = e.Subscribe(SubscribeRequest{Stream: testStream, Shard: 0, Start: StartEarliest})
	if !errors.As(err, &de) || !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("subscribe to the damaged shard: %v", err)
	}
	if d := e.Damaged(); len(d) != 1 || d[0].Shard != 0 || d[0].Stream != testStream {
		t.Fatalf("Damaged() = %v", d)
	}
	waitMetric(t, e, fmt.Sprintf(`felix_stream_damaged{tenant=%q,namespace=%q,stream=%q,shard="0"} 1`,
		testStream.Tenant, testStream.Namespace, testStream.Stream))
	if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "found_by=open") {
		t.Fatalf("no ERROR line for the damaged shard:\n%s", out)
	}
}

// A bad record at the tail of a durable cache shard's log (issue 23 item 2): the cache
// opens, the damaged shard answers with a *DamageError naming the cache, Engine.Damaged
// lists it, and a stream of the same engine serves.
func TestBadCacheTailTakesDownOnlyItsShard(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateCache(CacheSpec{Name: testCache, Shards: 1, Durable: true}); err != nil {
		t.Fatal(err)
	}
	if err := syncPut(e, "k", strings.Repeat("v", 100)); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(seglog.ShardDir(dir, seglog.ShardKey{Kind: seglog.ShardCache, Tenant: testCache.Tenant,
		Namespace: testCache.Namespace, Name: testCache.Cache}), seglog.SegmentFileName(0))
	overwrite(t, seg, -10, 0)
	cfg.PreviousRunClean = true
	if e, err = NewEngine(cfg); err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.CreateCache(CacheSpec{Name: testCache, Shards: 1, Durable: true}); err != nil {
		t.Fatalf("open with a damaged cache log: %v", err)
	}
	_, _, err = syncGet(e, "k")
	var de *DamageError
	if !errors.As(err, &de) || de.Kind != ShardCache || !strings.Contains(err.Error(), "cache "+testCache.asStream().String()+" shard 0") {
		t.Fatalf("get from the damaged cache shard: %v", err)
	}
	if d := e.Damaged(); len(d) != 1 || d[0].Kind != ShardCache {
		t.Fatalf("Damaged() = %v", d)
	}
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: [][]byte{[]byte("x")}}); err != nil {
		t.Fatalf("a stream beside the damaged cache: %v", err)
	}
}

// The seed's torn-tail rule for a damaged tail (issue 23 item 2): after an unclean stop
// under fsync periodic (the start took a new storage id: Config.RepairDamagedTail), a bad
// last record is cut like a torn write (WARN, counted) and the shard serves its 19 other
// records; the same log of a SyncOnCommit stream, which acknowledged only fsynced
// records, is never cut: the shard opens unservable.
func TestBadTailRepairedUnderPeriodicAfterCrash(t *testing.T) {
	for _, syncOnCommit := range []bool{false, true} {
		dir := badTailDir(t)
		logs := &syncBuffer{}
		e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncPeriodic, NoPinning: true, RepairDamagedTail: true,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 2, Durable: true, SyncOnCommit: syncOnCommit}); err != nil {
			t.Fatal(err)
		}
		if syncOnCommit {
			_, err := e.Subscribe(SubscribeRequest{Stream: testStream, Shard: 0, Start: StartEarliest})
			if !errors.Is(err, ErrStorageFailed) || len(e.Damaged()) != 1 {
				t.Fatalf("SyncOnCommit: %v, damaged %v", err, e.Damaged())
			}
		} else if got, err := readFrom(t, e, 0, 0, 19); err != nil || len(got) != 19 ||
			!strings.Contains(logs.String(), "torn tail truncated") || len(e.Damaged()) != 0 {
			t.Fatalf("periodic: %d records, %v, damaged %v\n%s", len(got), err, e.Damaged(), logs.String())
		}
		e.Close(context.Background())
	}
}
