// Package replica holds replication's pure state machines (issue 18; docs/replication.md):
//
//   - DecideFollower, the follower decider: one log's state (tail, durable offset, epochs
//     history, ballot, a Reader over its stored records) and one message
//     (ReplicateRecords and its cache/group/dead-letter/counter/producer kinds,
//     ReplicateBootstrap and its kinds, ReplicateRebuild, Fence) in, a Decision out: the
//     answer and the action the caller performs before sending it
//     (seeds/internal-protocol.txt "Replication", "Bootstrapping a follower", "Rebuilding a
//     follower", "Replicating a cache", "Replicating group state", "Errors").
//   - Shipper, the leader's view of one (follower, log): next to send, acknowledged at this
//     generation, bytes in flight bounded by a window, and what each answer does.
//   - Tracker, the quorum mark of one log: the highest offset a majority of the replica set
//     holds, counting each follower only at offsets it acknowledged in answer to this
//     leader's own batches at this generation, and with generation_start only past the
//     leader's generation-start record (seeds/upgrades-and-compatibility.txt).
//
// The package is pure (tidy_test.go's purePackages): no goroutines, clocks, I/O or global
// randomness. Time comes in as nanoseconds on the caller's clock; the caller reads and
// writes the log, fsyncs, and sends. Bad input from a peer gets a typed answer, never a
// panic.
package replica
