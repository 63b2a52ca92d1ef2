package proto

import (
	"encoding/binary"
	"strconv"

	"github.com/klauspost/crc32"
)

// Kind is the FLXI message discriminant (an enum, not flags). Numbers 10 and 16–24 are the
// seed's (seeds/internal-protocol.txt); the rest were assigned once by this project
// (spec/internal-protocol-kinds.md §2 PROPOSED column, plus 28 and 29 for §8.10, and 30 and 31
// for the idempotent-producer window's log, 32 and 33 for the storage identity in the
// handshake, 34 and 35 for the fence answer carrying the replica's position) and are
// recorded in docs/internal-protocol.md. Existing kinds' body layouts are frozen.
type Kind uint16

// FLXI kinds.
const (
	KindHello                        Kind = 0
	KindHelloOk                      Kind = 1
	KindForwardPublish               Kind = 2 // legacy, frozen; refused by an upgraded owner
	KindForwardPublishOk             Kind = 3
	KindForwardPublishError          Kind = 4
	KindNotLeader                    Kind = 5
	KindForwardCacheOp               Kind = 6 // legacy, frozen; refused by an upgraded owner
	KindForwardCacheOk               Kind = 7
	KindForwardCacheError            Kind = 8
	KindReplicateRecords             Kind = 9
	KindReplicateBootstrap           Kind = 10 // seed
	KindReplicateOk                  Kind = 11
	KindReplicateError               Kind = 12
	KindReplicateCacheRecords        Kind = 13
	KindReplicateCacheBootstrap      Kind = 14
	KindUnsupportedKind              Kind = 15
	KindReplicateGroupRecords        Kind = 16 // seed
	KindReplicateGroupBootstrap      Kind = 17 // seed
	KindReplicateDeadLetterRecords   Kind = 18 // seed
	KindReplicateDeadLetterBootstrap Kind = 19 // seed
	KindReplicateCounterRecords      Kind = 20 // seed
	KindReplicateCounterBootstrap    Kind = 21 // seed
	KindAuthorizedForwardPublish     Kind = 22 // seed
	KindAuthorizedForwardCacheOp     Kind = 23 // seed
	KindReplicateRebuild             Kind = 24 // seed
	KindFence                        Kind = 25
	KindFenceOk                      Kind = 26
	KindError                        Kind = 27
	KindIdempotentForwardPublish     Kind = 28 // AuthorizedForwardPublish + producer_id + request_id (client §8.10)
	KindForwardPublishDuplicate      Kind = 29 // ForwardPublishOk body; the batch was a duplicate
	KindReplicateProducerRecords     Kind = 30 // ReplicateRecords body, Log = LogProducers
	KindReplicateProducerBootstrap   Kind = 31 // ReplicateBootstrap body, Log = LogProducers
	KindStorageHello                 Kind = 32 // Hello body + u8[16] storage_id (issue 20, gap 4: #1281)
	KindStorageHelloOk               Kind = 33 // HelloOk body + u8[16] storage_id
	KindFencePosition                Kind = 34 // Fence body; answered by 35 (issue 20, gap 1)
	KindFencePositionOk              Kind = 35 // FenceOk body + u64 last_generation
)

var kindNames = [...]string{
	"Hello", "HelloOk", "ForwardPublish", "ForwardPublishOk", "ForwardPublishError", "NotLeader",
	"ForwardCacheOp", "ForwardCacheOk", "ForwardCacheError", "ReplicateRecords", "ReplicateBootstrap",
	"ReplicateOk", "ReplicateError", "ReplicateCacheRecords", "ReplicateCacheBootstrap", "UnsupportedKind",
	"ReplicateGroupRecords", "ReplicateGroupBootstrap", "ReplicateDeadLetterRecords",
	"ReplicateDeadLetterBootstrap", "ReplicateCounterRecords", "ReplicateCounterBootstrap",
	"AuthorizedForwardPublish", "AuthorizedForwardCacheOp", "ReplicateRebuild", "Fence", "FenceOk", "Error",
	"IdempotentForwardPublish", "ForwardPublishDuplicate", "ReplicateProducerRecords",
	"ReplicateProducerBootstrap", "StorageHello", "StorageHelloOk", "FencePosition", "FencePositionOk",
}

// String returns the kind's name, or "Kind(n)" for an unknown kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Known reports whether this build can decode the kind.
func (k Kind) Known() bool { return int(k) < len(kindNames) }

// InternalCode is the u16 error code of refusals (spec/internal-protocol-kinds.md §5).
// Decoders accept any value so a newer peer's codes pass through; unknown codes are
// treated as not retryable.
type InternalCode uint16

// Internal error codes. NotLeader is a kind, not a code.
const (
	InternalStaleRoute      InternalCode = 1
	InternalUnavailable     InternalCode = 2
	InternalUnauthorized    InternalCode = 3
	InternalOverload        InternalCode = 4
	InternalProtocolVersion InternalCode = 5
	InternalMalformed       InternalCode = 6
	InternalStorageFailed   InternalCode = 7
	InternalLogGap          InternalCode = 8
	InternalLogConflict     InternalCode = 9
	InternalFencedEpoch     InternalCode = 10
	InternalUnsupportedKind InternalCode = 11
)

// Retryable reports whether a refused forward may be re-sent (seeds/internal-protocol.txt,
// Retrying a forwarded publish): StaleRoute, Unavailable and Overload were refused before
// writing. (UnsupportedKind allows one re-send with the legacy kind; the caller handles it.)
func (c InternalCode) Retryable() bool {
	return c == InternalStaleRoute || c == InternalUnavailable || c == InternalOverload
}

// ReplicaLog names one of a shard's replicated logs (seeds/internal-protocol.txt,
// Rebuilding a follower).
type ReplicaLog uint8

// Replica logs; each has its own records/bootstrap kind pair.
const (
	LogStream       ReplicaLog = 0
	LogCache        ReplicaLog = 1
	LogGroupCursors ReplicaLog = 2
	LogDeadLetters  ReplicaLog = 3
	LogCounters     ReplicaLog = 4
	// LogProducers is a stream shard's idempotent-producer window (kinds 30/31),
	// replicated so a promoted leader deduplicates before it serves.
	LogProducers ReplicaLog = 5
	// LogLast is the highest ReplicaLog this build knows.
	LogLast = LogProducers
)

var replicaLogNames = [...]string{"stream", "cache", "group-cursors", "dead-letters", "counters", "producers"}

// String returns the log's name ("stream", "cache", "group-cursors",
// "dead-letters", "counters", "producers") or "ReplicaLog(n)".
func (l ReplicaLog) String() string {
	if l.Valid() {
		return replicaLogNames[l]
	}
	return "ReplicaLog(" + strconv.Itoa(int(l)) + ")"
}

// RecordsKind returns the records kind shipping this log (9, 13, 16, 18, 20, 30);
// an invalid log has none (KindUnknownLog, which no decoder accepts).
func (l ReplicaLog) RecordsKind() Kind {
	if !l.Valid() {
		return KindUnknownLog
	}
	return [...]Kind{KindReplicateRecords, KindReplicateCacheRecords, KindReplicateGroupRecords,
		KindReplicateDeadLetterRecords, KindReplicateCounterRecords, KindReplicateProducerRecords}[l]
}

// BootstrapKind returns the bootstrap kind for this log (10, 14, 17, 19, 21, 31);
// an invalid log has none (KindUnknownLog).
func (l ReplicaLog) BootstrapKind() Kind {
	if !l.Valid() {
		return KindUnknownLog
	}
	return [...]Kind{KindReplicateBootstrap, KindReplicateCacheBootstrap, KindReplicateGroupBootstrap,
		KindReplicateDeadLetterBootstrap, KindReplicateCounterBootstrap, KindReplicateProducerBootstrap}[l]
}

// KindUnknownLog is what RecordsKind and BootstrapKind return for an invalid
// ReplicaLog: a kind no build assigns, so encoding such a message fails to
// decode on every peer instead of being remapped onto a real log.
const KindUnknownLog Kind = 0xFFFF

// Valid reports whether l is a log this build knows (0..LogLast); an invalid
// value is an error wherever it appears, never remapped.
func (l ReplicaLog) Valid() bool { return l <= LogLast }

func (l ReplicaLog) valid() bool { return l.Valid() }

func recordsLog(k Kind) (ReplicaLog, bool) {
	for l := LogStream; l <= LogLast; l++ {
		if l.RecordsKind() == k {
			return l, true
		}
	}
	return 0, false
}

func bootstrapLog(k Kind) (ReplicaLog, bool) {
	for l := LogStream; l <= LogLast; l++ {
		if l.BootstrapKind() == k {
			return l, true
		}
	}
	return 0, false
}

// ShardKind says whose shard a log belongs to: a stream's or a cache's (1 stream, 2 cache;
// 0 invalid). A stream and a cache may share a name, so the kind is part of every shard's
// identity; on the wire it is carried by the message kind, never by ShardRef
// (seeds/internal-protocol.txt, "Replicating a cache"). core.ShardKind and
// cluster/replica.ShardKind are this type.
type ShardKind uint8

// Shard kinds; the zero value is invalid.
const (
	// ShardStream is a stream shard: its stream, producers, group-cursor and dead-letter logs.
	ShardStream ShardKind = 1
	// ShardCache is a cache shard: its cache and counter logs.
	ShardCache ShardKind = 2
)

// String returns "stream", "cache" or "ShardKind(n)".
func (k ShardKind) String() string {
	switch k {
	case ShardStream:
		return "stream"
	case ShardCache:
		return "cache"
	}
	return "ShardKind(" + strconv.Itoa(int(k)) + ")"
}

// HasLog reports whether a shard of kind k has log l: a stream shard the stream, producers,
// group-cursor and dead-letter logs; a cache shard the cache and counter logs. An invalid
// kind or log has none.
func (k ShardKind) HasLog(l ReplicaLog) bool {
	switch k {
	case ShardStream:
		return l == LogStream || l == LogProducers || l == LogGroupCursors || l == LogDeadLetters
	case ShardCache:
		return l == LogCache || l == LogCounters
	}
	return false
}

// CacheOp is the u8 op inside ForwardCacheOp / AuthorizedForwardCacheOp.
type CacheOp uint8

// Cache ops: CounterAdd = 4 and CounterGet = 5 are the seed's; Put/Get/Delete were assigned.
const (
	CacheOpPut        CacheOp = 1
	CacheOpGet        CacheOp = 2
	CacheOpDelete     CacheOp = 3
	CacheOpCounterAdd CacheOp = 4
	CacheOpCounterGet CacheOp = 5
)

// ReadOnly reports whether the op needs only cache.read (Get, CounterGet); all others need
// cache.write.
func (o CacheOp) ReadOnly() bool { return o == CacheOpGet || o == CacheOpCounterGet }

// AppendCounterValue appends v as 8 big-endian bytes (two's complement): the value bytes of
// CounterAdd (delta) and of its ForwardCacheOk (sum).
func AppendCounterValue(dst []byte, v int64) []byte { return appendU64(dst, uint64(v)) }

// DecodeCounterValue reads a counter delta or sum; anything but exactly 8 bytes is ErrMalformed.
func DecodeCounterValue(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, decodeErr("value", 0, ErrMalformed)
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// BatchChecksum is the single definition of batch_checksum: CRC-32 (IEEE) over, for each
// payload in order, its u32 big-endian length followed by its bytes. Including the length
// makes a resplit batch (same concatenated bytes, different boundaries) hash differently.
// Allocates nothing.
func BatchChecksum(payloads [][]byte) uint32 {
	var crc uint32
	for _, p := range payloads {
		crc = crcUpdateU32(crc, uint32(len(p)))
		crc = crc32.Update(crc, crc32.IEEETable, p)
	}
	return crc
}

// crcUpdateU32 feeds the 4 big-endian bytes of v through the IEEE table byte by byte, so no
// length buffer escapes to the heap (the assembly Update would take its address).
func crcUpdateU32(crc uint32, v uint32) uint32 {
	crc = ^crc
	for shift := 24; shift >= 0; shift -= 8 {
		crc = crc32.IEEETable[byte(crc)^byte(v>>uint(shift))] ^ (crc >> 8)
	}
	return ^crc
}
