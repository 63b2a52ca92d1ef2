package core

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// StreamName names a stream: tenant / namespace / stream
// (spec/auth.md resource model). Every part is non-empty UTF-8.
type StreamName struct {
	Tenant    string
	Namespace string
	Stream    string
}

// String returns "tenant/namespace/stream".
func (n StreamName) String() string { return n.Tenant + "/" + n.Namespace + "/" + n.Stream }

func (n StreamName) validate() error {
	for _, part := range [...]string{n.Tenant, n.Namespace, n.Stream} {
		if part == "" || !utf8.ValidString(part) {
			return fmt.Errorf("%w: stream name %q: every part must be non-empty UTF-8", ErrInvalid, n.String())
		}
	}
	return nil
}

// Routing is how a publish's routing key picks a shard.
type Routing uint8

const (
	// RoutingModulo maps a key to hash(key) mod shards: the mapping every
	// stream created before jump_hash_routing was finalized keeps
	// (seeds/upgrades-and-compatibility.txt, "jump_hash_routing").
	RoutingModulo Routing = iota
	// RoutingJumpHash maps a key to JumpHash(hash(key), shards), which keeps
	// most keys in place if a stream's shard count ever grows. Chosen at
	// creation, never changed afterwards.
	RoutingJumpHash
)

// String returns "modulo" or "jump_hash".
func (r Routing) String() string {
	switch r {
	case RoutingModulo:
		return "modulo"
	case RoutingJumpHash:
		return "jump_hash"
	}
	return fmt.Sprintf("routing(%d)", uint8(r))
}

// Consistency says what releases a durable shard's committed records: makes
// them acknowledged (AckOnCommit), delivered to subscribers and readable from
// history and by consumer groups (release.go; docs/architecture.md, core,
// "Commit and release").
type Consistency uint8

const (
	// ConsistencyLeader releases at the local commit (the append completed
	// under the stream's fsync mode). The default.
	ConsistencyLeader Consistency = iota
	// ConsistencyQuorum releases at the replica set's quorum mark, which the
	// cluster hands to Engine.Release. A shard with no replica set (every
	// shard of a single node, and every shard until a cluster exists) is its
	// own majority and releases at the local commit, as a Leader shard does.
	// Needs a durable stream.
	ConsistencyQuorum
)

// String returns "leader" or "quorum".
func (c Consistency) String() string {
	switch c {
	case ConsistencyLeader:
		return "leader"
	case ConsistencyQuorum:
		return "quorum"
	}
	return fmt.Sprintf("consistency(%d)", uint8(c))
}

// StreamSpec describes a stream for CreateStream.
type StreamSpec struct {
	Name StreamName
	// Shards is the number of shards, 1..MaxShards. Offsets are per shard.
	Shards int
	// Durable streams keep their records in a segment log per shard under
	// Config.DataDir; others keep a bounded in-memory replay ring and put
	// no offsets on the wire.
	Durable bool
	// Routing chooses modulo (default) or jump consistent hashing.
	Routing Routing
	// MemoryReplayRecords bounds an in-memory shard's replay ring in records
	// (0 = Config.MemoryReplayRecords). Ignored for durable streams.
	MemoryReplayRecords int
	// RetentionBytes and RetentionAge bound this durable stream's record log,
	// per shard, as Config.RetentionBytes / RetentionAge do for every stream:
	// whole sealed segments are dropped from the head, the active segment
	// never, checked every Config.RetentionInterval (spec/storage-format.md
	// §5). Each bound on its own: a value > 0 is this stream's and wins over
	// the engine's, 0 takes the engine's (Config; itself 0 = off). Bytes are
	// the log's segment bytes; age is measured from a segment's newest record
	// timestamp. Negative values, or either set on an in-memory stream:
	// ErrInvalid. Fixed while the stream is open (its logs take them when
	// they open).
	RetentionBytes int64
	RetentionAge   time.Duration
	// SyncOnCommit makes this durable stream's record and producer-key logs
	// fsync on_commit whatever Config.Fsync says: an append completes, and so
	// an AckOnCommit (the durable default) publish is acknowledged, only after
	// the fdatasync covering it. The broker sets it for consistency Quorum: a
	// single node is its own majority, and a replica never counts data that
	// is not on its disk (seeds/internal-protocol.txt, durable_offset). Set on
	// an in-memory stream: ErrInvalid. Fixed while the stream is open.
	SyncOnCommit bool
	// Consistency chooses what drives the release mark of the stream's
	// shards: ConsistencyLeader (default) the local commit,
	// ConsistencyQuorum the quorum mark (Engine.Release) once the shard has
	// a replica set. It does not imply SyncOnCommit: the broker sets both for
	// consistency Quorum. Unknown, or Quorum on an in-memory stream:
	// ErrInvalid. Fixed while the stream is open.
	Consistency Consistency
}

// logOptions returns the per-stream settings of the stream's shard logs.
func (s *StreamSpec) logOptions() logOptions {
	return logOptions{retentionBytes: s.RetentionBytes, retentionAge: s.RetentionAge, syncOnCommit: s.SyncOnCommit}
}

// hasRetention reports whether the stream sets a retention bound of its own.
func (s *StreamSpec) hasRetention() bool { return s.RetentionBytes > 0 || s.RetentionAge > 0 }

// MaxShards bounds StreamSpec.Shards.
const MaxShards = 4096

func (s *StreamSpec) validate() error {
	if err := s.Name.validate(); err != nil {
		return err
	}
	if s.Shards < 1 || s.Shards > MaxShards {
		return fmt.Errorf("%w: stream %s: shards %d not in 1..%d", ErrInvalid, s.Name, s.Shards, MaxShards)
	}
	if s.Routing > RoutingJumpHash {
		return fmt.Errorf("%w: stream %s: unknown routing %d", ErrInvalid, s.Name, s.Routing)
	}
	if s.MemoryReplayRecords < 0 {
		return fmt.Errorf("%w: stream %s: negative replay ring", ErrInvalid, s.Name)
	}
	if s.RetentionBytes < 0 || s.RetentionAge < 0 {
		return fmt.Errorf("%w: stream %s: negative retention (%d bytes, %v)", ErrInvalid, s.Name, s.RetentionBytes, s.RetentionAge)
	}
	if s.Consistency > ConsistencyQuorum {
		return fmt.Errorf("%w: stream %s: unknown consistency %d", ErrInvalid, s.Name, s.Consistency)
	}
	if !s.Durable && s.Consistency == ConsistencyQuorum {
		return fmt.Errorf("%w: stream %s: consistency quorum needs a durable stream", ErrInvalid, s.Name)
	}
	if !s.Durable && (s.hasRetention() || s.SyncOnCommit) {
		return fmt.Errorf("%w: stream %s: retention and SyncOnCommit need a durable stream", ErrInvalid, s.Name)
	}
	return nil
}

// StreamInfo describes an open stream (Engine.StreamInfo, ListStreams).
type StreamInfo struct {
	Spec StreamSpec
	// NextOffsets[i] is shard i's next offset (one past its last record,
	// appended or in flight), read on its core when StreamInfo ran;
	// EarliestOffsets[i] is its oldest retained offset.
	NextOffsets     []uint64
	EarliestOffsets []uint64
	// CommittedOffsets[i] is one past shard i's last locally committed
	// record and ReleasedOffsets[i] its release mark (Engine.Release):
	// records below it are acknowledged, delivered and readable. Released <=
	// Committed <= Next; equal for in-memory shards.
	CommittedOffsets []uint64
	ReleasedOffsets  []uint64
}

// AckMode says when a publish's done callback runs
// (spec/client-protocol.md §6 "Publish acknowledgement timing").
type AckMode uint8

const (
	// AckDefault is AckOnCommit for durable streams and AckOnEnqueue for
	// in-memory ones.
	AckDefault AckMode = iota
	// AckNone: done runs as soon as the core has taken the publish (the
	// offsets are already assigned); the broker sends nothing to the client.
	AckNone
	// AckOnEnqueue: done runs once the records are staged in the log (or the
	// replay ring) with their offsets, before any fsync.
	AckOnEnqueue
	// AckOnCommit: done runs once the batch is released: after the append
	// completed under the stream's fsync mode (with fsync on_commit, after the
	// covering fdatasync) and, for a Quorum shard with a replica set, once
	// Engine.Release moved the release mark past its last record.
	AckOnCommit
)

// String returns the mode's name.
func (m AckMode) String() string {
	switch m {
	case AckDefault:
		return "default"
	case AckNone:
		return "none"
	case AckOnEnqueue:
		return "on_enqueue"
	case AckOnCommit:
		return "on_commit"
	}
	return fmt.Sprintf("ack(%d)", uint8(m))
}

// PublishRequest is one batch of records for one stream.
//
// Ownership: the engine reads Payloads (and ProducerID) until it calls
// done. The caller must keep those bytes unchanged and alive until then;
// after done returns they are the caller's again. (The engine copies the
// payloads once, into the shared event frame and the log's staging buffer;
// it keeps no reference past done.) The request struct itself must not be
// reused before done either.
type PublishRequest struct {
	Stream StreamName
	// Shard is the shard the batch is appended to, 0..shards-1: always
	// explicit. Resolve it with Engine.Route (routing key, idempotent key or
	// round-robin); a caller forwarding or replaying a batch to a known shard
	// sets it directly. Out of range: ErrNotFound from Publish.
	Shard int
	// Payloads are the records, in order; at least one.
	Payloads [][]byte
	Ack      AckMode
	// ProducerID and Sequence make the publish idempotent when ProducerID
	// is non-empty (spec/client-protocol.md §8.10): a publish whose
	// (ProducerID, Sequence) already landed on the shard is answered with the
	// original offsets and Duplicate=true, and is not appended again.
	ProducerID string
	Sequence   uint64
	// TimestampMicros stamps the records; 0 = the engine clock's wall time.
	TimestampMicros int64
}

// PublishResult is what an acknowledged publish returns.
type PublishResult struct {
	Shard int
	// FirstOffset and LastOffset are the offsets of the first and the last
	// record of the batch (inclusive), per shard. In-memory streams assign
	// offsets too (used for replay and drop accounting) but never show them
	// on the wire.
	FirstOffset uint64
	LastOffset  uint64
	// Committed is true when done ran after the batch was released
	// (AckOnCommit; in-memory streams always).
	Committed bool
	// Duplicate is true when the idempotent key had landed before.
	Duplicate bool
}
