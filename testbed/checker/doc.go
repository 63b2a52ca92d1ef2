// Package checker finds anomalies in a recorded history (felix/testbed/history)
// of a cluster test run: issue 15, item 4. docs/cluster-testing.md
// ("Checkers") has the same list.
//
// # Checkers
//
// CheckAll runs all four; each can also run alone. Findings name the
// anomaly, the stream shard (or the cache key, counter, catalog entry or
// group), the offsets and the operations involved by their history index.
//
// CheckStreams, the direct stream-log checker (the anomalies of Jepsen's
// Kafka workload), per stream shard. Reads are records of subscribe-read and
// group-poll operations and found stream-reads (ok or info); an ok publish's
// acked offsets are claims about the log too.
//
//   - lost-write: an ok publish, at or below the highest offset any read of
//     its shard reached, whose payload no read ever returned.
//   - duplicate: one payload (of one stream) at two shard/offset places.
//   - inconsistent-offset: two different payloads at one offset.
//   - non-monotonic-read: within one subscription an offset at or below the
//     previous one (or below the subscription's From).
//   - skipped-read: within one subscription a gap (from From, or between
//     consecutive records) over offsets no read flagged as skipped.
//   - dirty-read: a read of a payload every publish of which failed.
//   - unseen: an ok publish never read, above every read offset, in a shard
//     that had ok final reads (In.Final).
//
// CheckReplicas: replicas-diverged, when the replica-log dumps of a shard
// differ at any offset below the smallest committed offset among them (a
// different payload, or a record missing at or above a replica's log start).
//
// CheckGroups, per consumer group and shard (at-least-once):
//
//   - group-skip: an ack of an offset never delivered, or an owed offset
//     (acked publish or read record) never delivered below the group's
//     highest ack;
//   - group-undelivered: an owed offset never delivered when final polls ran;
//   - group-early-dead-letter: a dead letter before max_deliveries deliveries.
//
// CheckLinearizable, with porcupine (github.com/anishathalye/porcupine),
// one object (partition) at a time: cache keys, counters, catalog entries
// and point-read stream offsets, all in one model (linStep) whose state is
// a register or a counter. Fail operations are dropped; info writes are
// open-ended (they may happen at any time after invocation, or never); info
// reads are dropped. On a failure the HTML visualization of the failing
// objects is written to LinearOptions.VisualizationPath.
//
// # Selftest
//
// SelfTestCases and RunSelfTest plant each anomaly in a small history and
// keep a clean twin; the selftest passes when each planted anomaly is found
// and the clean twins have no finding at all (`felix-chaos selftest`).
package checker
