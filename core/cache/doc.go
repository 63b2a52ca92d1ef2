// Package cache is the state machine of one cache shard: values with an
// optional time to live, signed 64-bit counters, and key/prefix watches.
//
// It is pure and deterministic (docs/architecture.md, "Pure?"): no
// goroutines, no clocks, no I/O and no randomness. Time arrives as an
// argument (nowMillis, Unix milliseconds) and the work owed to the disk and to
// watchers leaves as Effects, which the owning core performs:
//
//	put/get/delete/counter ops ─▶ Shard ─▶ Effects{CacheRecords, CounterRecords, Changes}
//	                                          │ core appends the records to the cache log and
//	                                          │ the counter log (seglog), in order, then after
//	                                          ▼ the commit answers callers and feeds watchers
//	                                     Shard.Advance()
//
// The shard applies each operation to memory at once and predicts the offsets
// its records will get (it is the only writer of both logs, so the offsets are
// known): operations later in the same batch see earlier ones, and every
// Change carries the offset of its record. If an append fails, memory is ahead
// of the disk: the owner must stop serving the shard and rebuild it with
// Replay from the log (client code storage_failed meanwhile).
//
// On start the owner creates an empty shard, feeds every record of the cache
// log to ReplayCache and of the counter log to ReplayCounter, in offset order,
// then calls FinishReplay with both logs' next offsets. Replicas use the same
// two calls for the records a leader ships (seeds/internal-protocol.txt,
// "Replicating a cache").
//
// Record layouts, TTL rules, the eviction policy and the compaction protocol
// are documented in docs/cache.md; the client shapes are
// spec/client-protocol.md §6 (cache_put/cache_get), §8.1 (delete), §8.2
// (counters) and §8.4 (watches).
//
// A Shard is not safe for concurrent use: only the owning core calls it.
package cache
