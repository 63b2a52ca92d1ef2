package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"felix/core/cache"
	"felix/internal/vfs/vfstest"
)

// waitPublish publishes one record to shard until it is acknowledged (bounded by
// testTimeout; each refused attempt is answered at once): the shard's retry brought
// it back.
func waitPublish(t *testing.T, e *Engine, shard int, payload string) PublishResult {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		res, err := publishSync(t, e, &PublishRequest{Stream: testStream, Shard: shard, Payloads: [][]byte{[]byte(payload)}})
		if err == nil {
			return res
		}
		if !errors.Is(err, ErrStorageFailed) || time.Now().After(deadline) {
			t.Fatalf("publish to shard %d after the disk healed: %v", shard, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A full disk (issue 23 item 4, over vfstest.FaultFS): a publish whose write fails with
// ENOSPC is answered a *WriteError naming the stream and shard and the errno, never the
// server path; the failure is logged once with the path; once the disk takes writes
// again the shard probes, reopens its log and acknowledges publishes with no restart
// (felix_storage_write_retries_total counts the retries); every record acknowledged
// before, during and after is read back once, in order, and the other shard serves.
func TestFullDiskPublishRetriesAndResumes(t *testing.T) {
	dir := t.TempDir()
	fs := &vfstest.FaultFS{}
	logs := &syncBuffer{}
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true, fs: fs,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 2, Durable: true}); err != nil {
		t.Fatal(err)
	}
	var acked [2][]string
	for shard := range 2 {
		for i := range 3 {
			p := fmt.Sprintf("before-%d", i)
			if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Shard: shard, Payloads: [][]byte{[]byte(p)}}); err != nil {
				t.Fatal(err)
			}
			acked[shard] = append(acked[shard], p)
		}
	}
	live, err := e.Subscribe(SubscribeRequest{Stream: testStream, Shard: 0, Start: StartLatest, WithOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	fs.Fail(vfstest.OpWrite, syscall.ENOSPC)
	for range 3 {
		_, err = publishSync(t, e, &PublishRequest{Stream: testStream, Shard: 0, Payloads: [][]byte{[]byte("lost")}})
		var we *WriteError
		if !errors.As(err, &we) || !errors.Is(err, syscall.ENOSPC) || we.Ref.Shard != 0 ||
			!strings.Contains(err.Error(), "no space left on device") || strings.Contains(err.Error(), dir) {
			t.Fatalf("publish on a full disk: %v", err)
		}
	}
	fs.Heal()
	res := waitPublish(t, e, 0, "after-0")
	acked[0] = append(acked[0], "after-0")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if d, err := live.Next(ctx); err != nil || d.BaseOffset != res.FirstOffset || fmt.Sprint(records(t, d)) != "[after-0]" {
		t.Fatalf("a live subscriber across the episode: %+v %v, want after-0 at %d", d, err, res.FirstOffset)
	}
	if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Shard: 1, Payloads: [][]byte{[]byte("after-0")}}); err != nil {
		t.Fatalf("other shard: %v", err)
	}
	acked[1] = append(acked[1], "after-0")
	for shard := range 2 {
		if got := readShard(t, e, testStream, shard, false); fmt.Sprint(got) != fmt.Sprint(acked[shard]) {
			t.Fatalf("shard %d: %v, acknowledged %v", shard, got, acked[shard])
		}
	}
	out := logs.String()
	if strings.Count(out, "log write failed") != 1 || !strings.Contains(out, dir) || !strings.Contains(out, "writes again") {
		t.Fatalf("want one ERROR line naming the path per episode, and the recovery:\n%s", out)
	}
	waitMetric(t, e, "felix_storage_write_retries_total ")
}

// syncPut, syncGet and syncCounter run one cache operation on e and wait for its answer.
func syncPut(e *Engine, key, value string) error {
	errs := make(chan error, 1)
	k := []byte(key)
	if err := e.CachePut(testCache, keyShard(e, testCache, k), k, []byte(value), cache.NoTTL, func(err error) { errs <- err }); err != nil {
		return err
	}
	return <-errs
}

func syncGet(e *Engine, key string) (string, bool, error) {
	type got struct {
		v     []byte
		found bool
		err   error
	}
	res := make(chan got, 1)
	k := []byte(key)
	if err := e.CacheGet(testCache, keyShard(e, testCache, k), k, func(v []byte, found bool, err error) { res <- got{v, found, err} }); err != nil {
		return "", false, err
	}
	r := <-res
	return string(r.v), r.found, r.err
}

func syncCounter(e *Engine, key string, delta int64, add bool) (int64, error) {
	type got struct {
		sum int64
		err error
	}
	res := make(chan got, 1)
	k, s := []byte(key), keyShard(e, testCache, []byte(key))
	done := func(sum int64, err error) { res <- got{sum, err} }
	var err error
	if add {
		err = e.CounterAdd(testCache, s, k, delta, done)
	} else {
		err = e.CounterGet(testCache, s, k, func(sum int64, _ bool, err error) { done(sum, err) })
	}
	if err != nil {
		return 0, err
	}
	r := <-res
	return r.sum, r.err
}

// A full disk under a durable cache (issue 23 item 4): a put and a counter add whose
// writes fail answer a *WriteError naming the cache (no path); gets and counter reads of
// the keys written before keep answering from memory; once the disk takes writes the
// shard retries, and puts and adds are acknowledged again with no restart; after a
// restart the acknowledged values are there and the failed ones are not.
func TestFullDiskCacheReadsFromMemoryAndResumes(t *testing.T) {
	dir := t.TempDir()
	fs := &vfstest.FaultFS{}
	open := func() *Engine {
		e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true, fs: fs})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateCache(CacheSpec{Name: testCache, Shards: 1, Durable: true}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	if err := syncPut(e, "old", "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := syncCounter(e, "n", 5, true); err != nil {
		t.Fatal(err)
	}
	fs.Fail(vfstest.OpWrite, syscall.ENOSPC)
	err := syncPut(e, "new", "lost")
	var we *WriteError
	if !errors.As(err, &we) || we.Ref.Kind != ShardCache || !strings.Contains(err.Error(), "cache "+testCache.asStream().String()) || strings.Contains(err.Error(), dir) {
		t.Fatalf("put on a full disk: %v", err)
	}
	if v, found, err := syncGet(e, "old"); err != nil || !found || v != "v1" {
		t.Fatalf("get of an old key while writes fail: %q %v %v", v, found, err)
	}
	if sum, err := syncCounter(e, "n", 0, false); err != nil || sum != 5 {
		t.Fatalf("counter read while writes fail: %d %v", sum, err)
	}
	fs.Heal()
	deadline := time.Now().Add(testTimeout)
	for err = syncPut(e, "after", "v2"); err != nil; err = syncPut(e, "after", "v2") {
		if !errors.Is(err, ErrStorageFailed) || time.Now().After(deadline) {
			t.Fatalf("put after the disk healed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if sum, err := syncCounter(e, "n", 1, true); err != nil || sum != 6 {
		t.Fatalf("counter add after the disk healed: %d %v", sum, err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e = open()
	defer e.Close(context.Background())
	for key, want := range map[string]string{"old": "v1", "after": "v2"} {
		if v, found, err := syncGet(e, key); err != nil || !found || v != want {
			t.Fatalf("after restart %s: %q %v %v", key, v, found, err)
		}
	}
	if _, found, _ := syncGet(e, "new"); found {
		t.Fatal("the put answered storage_failed came back after the restart")
	}
	if sum, err := syncCounter(e, "n", 0, false); err != nil || sum != 6 {
		t.Fatalf("counter after restart: %d %v", sum, err)
	}
}
