// Package groups is the consumer-group state machine of one durable stream shard.
//
// It implements the group half of spec/client-protocol.md §8.3 and the cursor and
// dead-letter logs of spec/storage-format.md §6 and §7.1, with the dependency rule of
// seeds/upgrades-and-compatibility.txt ("group_cursor_dependencies") and the replication
// shape of seeds/internal-protocol.txt ("Replicating group state"). The record layouts and
// the semantics are written down in docs/groups.md.
//
// The package is pure: no goroutines, no clock, no I/O, no global randomness (tidy_test.go
// enforces it). Time comes in as nowMillis (Unix milliseconds, from the caller's clock).
// A Shard holds every group of one stream shard. The owning core drives it:
//
//  1. Mutating calls (Poll, Ack, Nack, Tick, Redrive, CreateGroup) update memory at once
//     and stage the log records they owe. Each returns the Token of the write batch that
//     holds those records.
//  2. The core calls TakeEffects, appends Effects.Cursor to the shard's cursor log and
//     Effects.DeadLetters to its dead-letter log, in order, and when both appends are
//     durable under the shard's fsync mode calls MarkDurable(Effects.Token).
//  3. Answers to the consumer are released only once Durable(token) holds. This is what
//     makes an ack at least once across a crash: an ack whose cursor record was lost was
//     never acknowledged, and its record is delivered again after the restart.
//
// Opening a shard replays the dead-letter log, then the cursor log, through a Replayer.
//
// The state machine never reads the records log itself: Poll is told which offsets of the
// records log are readable (Window) and answers with offsets to lease; the core reads the
// payloads. A lagging group therefore never holds up a publish.
package groups
