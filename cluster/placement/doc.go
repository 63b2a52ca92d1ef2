// Package placement holds failover's pure decisions (issue 20; docs/failover.md):
//
//   - Detector: broker liveness (live / suspect / down / draining) from heartbeat arrival
//     times on the control plane's own monotonic clock, given as input.
//   - Decide: the promotion decision for one shard from its assignment, the leader's last
//     replica report (stamped with the leader and the storage identities it names) and the
//     brokers' registrations: a caught-up follower at a generation above every one known,
//     never one whose two storage identities differ, never one halted or corrupt, the
//     run-state rule, the dead leader's last report, rebuilt followers, and the fence
//     refusal of a promoted broker that found a replica ahead of itself
//     (seeds/upgrades-and-compatibility.txt "Storage identities during a roll", "Clean
//     stops and crashes").
//   - FenceRound: a promoted leader's fence (Fence/FenceOk, kinds 25/26): with majority_ack
//     it opens only after a majority answered at the new generation, and refuses to open
//     when a fenced replica is ahead of it.
//   - Lease: the control plane's lease on both sides of the clock-drift bound; it gates
//     acks before majority_ack and Leader-stream reads always.
//   - ReadConfirmer: lease-free reads (lease_free_reads): a read answers once the quorum
//     mark passed the write that produced its value and a fence round started after it took
//     that value succeeded; a failed round answers leadership_lost.
//
// The follower's side of a fence (a replica that fenced at G refuses every lower
// generation with FencedEpoch) is cluster/replica's DecideFollower, reused as is.
//
// The package is pure (tidy_test.go's purePackages): no goroutines, clocks, I/O or global
// randomness. Times are int64 nanoseconds on the caller's monotonic clock, durations
// time.Duration. Bad input gets a typed error (*InputError), never a panic.
package placement
