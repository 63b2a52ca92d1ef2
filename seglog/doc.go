// Package seglog is Felix's segment log: durable, append-only logs of records
// with logical u64 offsets, stored as FLSG segment files with FLSI sparse
// indexes (shared/spec/storage-format.md; decisions in docs/storage-format.md).
//
// Shape of use (docs/architecture.md, "seglog"): one Disk per core goroutine,
// built on that core's ring.Ring. The core opens logs with Disk.Open (which
// runs recovery), stages batches with Log.Append, calls Disk.Flush to submit
// one write per log (and, under on_commit, one fdatasync covering every
// append written before it: group commit) and Disk.Poll to reap completions,
// which runs the append callbacks on the core. Other goroutines read through
// Log.Reader, bounded by the committed offset.
//
// Files:
//   - format.go: segment header, v2 and v3..v6 records, index, constants.
//   - scan.go: the forward scanner shared by recovery, reads and the tool.
//   - log.go, segment.go: Log state, recovery at open, segment creation.
//   - append.go, disk.go: staging, writes, fdatasync, completions, seal.
//   - read.go: Log.Read and Reader.
//   - maintenance.go: TruncateSuffix, Reset, EnforceRetention, Compact.
//   - epochs.go, runstate.go: the epochs file, run-state and storage identity.
//   - layout.go: shard directory names (ShardDir), file names.
//   - fs.go: the FS/File seam (OSFS in production, fault-injecting in tests).
//   - tool.go: Inspect, Verify, Dump for `felix log`.
package seglog
