package core

// Tests of one cache shard's durability (cache_shard.go): replay after a restart,
// loss of uncommitted writes in a crash, compaction on the core, and the seglog
// stack on a real directory.

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"felix/core/cache"
)

// Values, absolute TTLs and counter sums come back after a restart.
func TestCacheRestartRecovery(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 2, store, nil)
	createCache(t, h, 3, true)
	cachePut(t, h, "plain", "p", cache.NoTTL)
	cachePut(t, h, "short", "s", cache.TTLMillis(1000))
	cachePut(t, h, "empty", "", cache.NoTTL)
	add := &cacheReply{}
	for range 5 {
		h.e.CounterAdd(testCache, keyShard(h.e, testCache, []byte("hits")), []byte("hits"), 3, add.counter)
	}
	h.e.CounterAdd(testCache, keyShard(h.e, testCache, []byte("hits")), []byte("hits"), -1, add.counter)
	h.step(3)
	if add.sum != 14 || add.err != nil {
		t.Fatalf("sum %d, %v", add.sum, add.err)
	}
	h.close()

	h2 := newHarness(t, 3, store, nil) // another core count: shards move, data does not
	h2.clock.Advance(999 * time.Millisecond)
	createCache(t, h2, 3, true)
	if r := cacheGet(t, h2, "plain"); string(r.value) != "p" {
		t.Fatalf("plain = %q %v", r.value, r.found)
	}
	if r := cacheGet(t, h2, "empty"); !r.found || len(r.value) != 0 {
		t.Fatalf("empty = %v %v", r.value, r.found)
	}
	if r := cacheGet(t, h2, "short"); !r.found {
		t.Fatal("short expired early after restart")
	}
	h2.clock.Advance(time.Millisecond)
	if r := cacheGet(t, h2, "short"); r.found {
		t.Fatal("restart restarted the ttl clock")
	}
	got := &cacheReply{}
	h2.e.CounterGet(testCache, keyShard(h2.e, testCache, []byte("hits")), []byte("hits"), got.counterGot)
	h2.step(3)
	if got.sum != 14 {
		t.Fatalf("counter after restart %d", got.sum)
	}
}

// A write whose record was not committed before a crash is gone, and was
// never acknowledged.
func TestCacheCrashBeforeCommit(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	createCache(t, h, 1, true)
	cachePut(t, h, "kept", "1", cache.NoTTL)
	h.step(3)
	h.hold(true)
	lost := cachePut(t, h, "lost", "2", cache.NoTTL)
	h.step(3)
	store.crash()
	if lost.calls != 0 {
		t.Fatal("an uncommitted put was acknowledged")
	}
	h2 := newHarness(t, 1, store, nil)
	createCache(t, h2, 1, true)
	if r := cacheGet(t, h2, "kept"); !r.found {
		t.Fatal("committed value lost")
	}
	if r := cacheGet(t, h2, "lost"); r.found {
		t.Fatal("uncommitted value survived the crash")
	}
}

// compactingFakeLog gives the fake log seglog's Compact: append the live set
// at the tail, then drop everything below it once the append completes.
type compactingFakeLog struct{ *fakeLog }

func (l compactingFakeLog) Compact(live [][]byte, ts int64, done func(first, last uint64, err error)) error {
	return l.Append(live, ts, func(first, last uint64, err error) {
		if err == nil {
			l.trim(first)
		}
		done(first, last, err)
	})
}

// compactingDisk hands out compacting fake logs.
type compactingDisk struct{ *fakeDisk }

func (d compactingDisk) OpenLog(addr LogAddr, opts logOptions) (shardLog, error) {
	l, err := d.fakeDisk.OpenLog(addr, opts)
	if err != nil {
		return nil, err
	}
	return compactingFakeLog{l.(*fakeLog)}, nil
}

// A shard that rewrites a few keys many times compacts its logs (the head is
// dropped, offsets keep growing), and a restart replays the compacted logs
// to the same values and sums.
func TestCacheCompactionOnTheCore(t *testing.T) {
	old := cacheCompactMin
	cacheCompactMin = 64
	t.Cleanup(func() { cacheCompactMin = old })
	store := newFakeStore()
	compacting := func(cfg *Config) {
		cfg.newDisk = func(int) (coreDisk, error) { return compactingDisk{newFakeDisk(store)}, nil }
	}
	h := newHarness(t, 1, store, compacting)
	createCache(t, h, 1, true)
	add := &cacheReply{}
	for i := range 300 {
		cachePut(t, h, []string{"a", "b", "c"}[i%3], string(rune('0'+i%10)), cache.NoTTL)
		h.e.CounterAdd(testCache, keyShard(h.e, testCache, []byte("n")), []byte("n"), 1, add.counter)
		h.step(2)
	}
	if add.sum != 300 || add.err != nil {
		t.Fatalf("sum %d %v", add.sum, add.err)
	}
	l := store.logs[fakeLogKey(logCacheRecords, testCache.asStream(), 0)]
	if l.base == 0 || l.next <= 300 || len(l.records) >= 100 {
		t.Fatalf("cache log not compacted: base %d next %d, %d records kept", l.base, l.next, len(l.records))
	}
	h.close()
	h2 := newHarness(t, 1, store, compacting)
	createCache(t, h2, 1, true)
	for key, want := range map[string]string{"a": "7", "b": "8", "c": "9"} {
		if r := cacheGet(t, h2, key); string(r.value) != want {
			t.Fatalf("%s = %q after compaction and restart, want %q", key, r.value, want)
		}
	}
	got := &cacheReply{}
	h2.e.CounterGet(testCache, keyShard(h2.e, testCache, []byte("n")), []byte("n"), got.counterGot)
	h2.step(3)
	if got.sum != 300 {
		t.Fatalf("counter %d after compaction and restart", got.sum)
	}
}

// The production stack: seglog logs on a real directory, ring backend as
// the environment allows, core goroutines running.
func TestCacheOnSeglogSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *Engine {
		e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateCache(CacheSpec{Name: testCache, Shards: 2, Durable: true}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	errs := make(chan error, 2)
	e.CachePut(testCache, keyShard(e, testCache, []byte("k")), []byte("k"), []byte("durable"), cache.NoTTL, func(err error) { errs <- err })
	e.CounterAdd(testCache, keyShard(e, testCache, []byte("n")), []byte("n"), 41, func(_ int64, err error) { errs <- err })
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	counterDirs, _ := filepath.Glob(filepath.Join(dir, "caches", "*", "counters"))
	if streams, _ := filepath.Glob(filepath.Join(dir, "streams", "*")); len(counterDirs) != 2 || len(streams) != 0 {
		t.Fatalf("cache logs not under caches/ with a counters companion: %v, streams %v", counterDirs, streams)
	}
	e = open()
	defer e.Close(context.Background())
	type got struct {
		v     []byte
		found bool
		err   error
	}
	res := make(chan got, 1)
	e.CacheGet(testCache, keyShard(e, testCache, []byte("k")), []byte("k"), func(v []byte, found bool, err error) { res <- got{v, found, err} })
	if r := <-res; r.err != nil || !r.found || string(r.v) != "durable" {
		t.Fatalf("after restart: %q %v %v", r.v, r.found, r.err)
	}
	sums := make(chan int64, 1)
	e.CounterGet(testCache, keyShard(e, testCache, []byte("n")), []byte("n"), func(sum int64, _ bool, _ error) { sums <- sum })
	if s := <-sums; s != 41 {
		t.Fatalf("counter after restart %d", s)
	}
}
