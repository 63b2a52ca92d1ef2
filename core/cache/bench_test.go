package cache

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Benchmarks of one shard in process (docs/bench/cache.md): 1 M keys with
// 256-byte values, the core's batch drained every batchOps operations.
const (
	benchKeys      = 1 << 20
	benchValueSize = 256
	batchOps       = 64
)

var (
	benchOnce   sync.Once
	benchKeyBs  [][]byte
	benchShard  *Shard
	benchLoaded sync.Once
)

func benchKeyList() [][]byte {
	benchOnce.Do(func() {
		benchKeyBs = make([][]byte, benchKeys)
		for i := range benchKeyBs {
			benchKeyBs[i] = []byte(fmt.Sprintf("user:%08d", i))
		}
	})
	return benchKeyBs
}

// loadedShard returns the shard holding every bench key, built once and
// shared by the benchmarks (they overwrite values but keep the key set).
func loadedShard(b *testing.B) *Shard {
	benchLoaded.Do(func() { benchShard = buildShard(b) })
	benchShard.Unwatch(1) // left by BenchmarkPutWithWatch
	return benchShard
}

func buildShard(b *testing.B) *Shard {
	keys := benchKeyList()
	s := New(Config{MaxEntries: 2 * benchKeys, MaxBytes: 1 << 32})
	value := make([]byte, benchValueSize)
	for i, k := range keys {
		if _, err := s.Put(k, value, NoTTL, 0); err != nil {
			b.Fatal(err)
		}
		if i%batchOps == 0 {
			s.Effects()
			s.Advance()
		}
	}
	s.Advance()
	return s
}

// keyIndex spreads i over the key space (a multiplicative hash), so accesses
// are not sequential in memory.
func keyIndex(i int) int { return int(uint32(i) * 2654435761 % benchKeys) }

// cpuTime returns the process's user+system CPU time. On a machine shared
// with other builds the wall clock measures the queue for the CPU as much as
// the code; CPU time per operation does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startOps resets the timer and returns the function that reports wall
// ops/s and CPU ns/op (the process's CPU, GC included) at the end.
func startOps(b *testing.B) func() {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	return func() {
		cpu := cpuTime() - cpu0
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func BenchmarkGet(b *testing.B) {
	s, keys := loadedShard(b), benchKeyList()
	done := startOps(b)
	for i := range b.N {
		if _, ok := s.Get(keys[keyIndex(i)], 1); !ok {
			b.Fatal("miss")
		}
	}
	done()
}

func BenchmarkPut(b *testing.B) {
	s, keys := loadedShard(b), benchKeyList()
	value := make([]byte, benchValueSize)
	done := startOps(b)
	for i := range b.N {
		if _, err := s.Put(keys[keyIndex(i)], value, TTLMillis(60_000), 1); err != nil {
			b.Fatal(err)
		}
		if i%batchOps == batchOps-1 {
			s.Effects()
			s.Advance()
		}
	}
	done()
}

func BenchmarkCounterAdd(b *testing.B) {
	s, keys := New(Config{MaxCounters: benchKeys}), benchKeyList()
	for i := range benchKeys {
		s.CounterAdd(keys[i], 1)
		if i%batchOps == 0 {
			s.Advance()
		}
	}
	s.Advance()
	done := startOps(b)
	for i := range b.N {
		if _, _, err := s.CounterAdd(keys[keyIndex(i)], 1); err != nil {
			b.Fatal(err)
		}
		if i%batchOps == batchOps-1 {
			s.Effects()
			s.Advance()
		}
	}
	done()
}

func benchMix(b *testing.B, getPercent int) {
	s, keys := loadedShard(b), benchKeyList()
	value := make([]byte, benchValueSize)
	done := startOps(b)
	for i := range b.N {
		k := keys[keyIndex(i)]
		if i%100 < getPercent {
			s.Get(k, 1)
		} else if _, err := s.Put(k, value, NoTTL, 1); err != nil {
			b.Fatal(err)
		}
		if i%batchOps == batchOps-1 {
			s.Effects()
			s.Advance()
		}
	}
	done()
}

func BenchmarkMix90Get10Put(b *testing.B) { benchMix(b, 90) }
func BenchmarkMix50Get50Put(b *testing.B) { benchMix(b, 50) }

// BenchmarkPutWithWatch measures the cost a prefix watch adds to a put.
func BenchmarkPutWithWatch(b *testing.B) {
	s, keys := loadedShard(b), benchKeyList()
	if err := s.Watch(1, []byte("user:0000"), true); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, benchValueSize)
	done := startOps(b)
	for i := range b.N {
		s.Put(keys[keyIndex(i)], value, NoTTL, 1)
		if i%batchOps == batchOps-1 {
			s.Effects()
			s.Advance()
		}
	}
	done()
}

// BenchmarkBaselineMapGet is the yardstick for BenchmarkGet: a bare Go map
// of the same keys and values, so the ratio between the two is meaningful on
// a machine whose absolute speed varies with load.
func BenchmarkBaselineMapGet(b *testing.B) {
	keys := benchKeyList()
	m := make(map[string][]byte, len(keys))
	for _, k := range keys {
		m[string(k)] = make([]byte, benchValueSize)
	}
	done := startOps(b)
	for i := range b.N {
		if _, ok := m[string(keys[keyIndex(i)])]; !ok {
			b.Fatal("miss")
		}
	}
	done()
}

// BenchmarkGetHot reads 4096 keys that stay in the CPU caches: the code's own
// cost per Get, without the memory misses of a 1 M-key working set.
func BenchmarkGetHot(b *testing.B) {
	s, keys := loadedShard(b), benchKeyList()[:4096]
	done := startOps(b)
	for i := range b.N {
		if _, ok := s.Get(keys[i&4095], 1); !ok {
			b.Fatal("miss")
		}
	}
	done()
}
