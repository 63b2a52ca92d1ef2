package proto

// InternalMessage is one FLXI message. Every body begins with its u64 correlation id and
// nothing precedes it (seeds/internal-protocol.txt, every_body_begins_with_its_correlation_id).
// Decoded []byte fields are sub-slices of the body (zero-copy; valid while the body buffer is
// untouched).
type InternalMessage interface {
	// Kind returns the frame kind the message encodes as.
	Kind() Kind
	// Correlation returns the correlation id (unique per connection, echoed by the answer).
	Correlation() uint64
	// AppendBody appends the body (no header). It fails with ErrTooLong for a string over
	// 65535 bytes, ErrInvalidUTF8 for an invalid string, ErrMalformed for an invalid enum.
	AppendBody(dst []byte) ([]byte, error)
}

// ShardRef names a shard in internal bodies: u16 tenant, u16 namespace, u16 name (UTF-8)
// and u32 shard. Whether name is a stream or a cache is said by the kind, never by the ref.
// Frozen: widening it would need a version bump.
type ShardRef struct {
	Tenant    []byte
	Namespace []byte
	Name      []byte
	Shard     uint32
}

func (s *ShardRef) append(dst []byte) ([]byte, error) {
	if err := checkNames(s.Tenant, s.Namespace, s.Name); err != nil {
		return dst, err
	}
	dst = appendStr16(dst, s.Tenant)
	dst = appendStr16(dst, s.Namespace)
	dst = appendStr16(dst, s.Name)
	return appendU32(dst, s.Shard), nil
}

func (s *ShardRef) decode(c *cursor) error {
	var err error
	if s.Tenant, err = c.str16("shard.tenant"); err != nil {
		return err
	}
	if s.Namespace, err = c.str16("shard.namespace"); err != nil {
		return err
	}
	if s.Name, err = c.str16("shard.name"); err != nil {
		return err
	}
	s.Shard, err = c.u32("shard.shard")
	return err
}

func appendChecked16(dst []byte, field []byte) ([]byte, error) {
	if err := checkNames(field); err != nil {
		return dst, err
	}
	return appendStr16(dst, field), nil
}

// Hello (0) opens a connection: the caller's node id. Answered by HelloOk.
type Hello struct {
	CorrelationID uint64
	NodeID        []byte
}

// HelloOk (1) answers Hello with the peer's node id; the caller checks it equals the node it dialled.
type HelloOk struct {
	CorrelationID uint64
	NodeID        []byte
}

// ForwardPublish (2, legacy, frozen): shard ref, u64 generation, payload list. An upgraded
// owner decodes it but refuses it like a missing credential.
type ForwardPublish struct {
	CorrelationID uint64
	Shard         ShardRef
	Generation    uint64
	Payloads      [][]byte
}

// AuthorizedForwardPublish (22): the ForwardPublish body followed by the client's bearer
// token (u16 length, non-empty UTF-8).
type AuthorizedForwardPublish struct {
	ForwardPublish
	Credential []byte
}

// IdempotentForwardPublish (28): the AuthorizedForwardPublish body followed by u8
// producer_id_len + producer_id and u64 request_id, so the owner can dedupe on
// (principal, producer_id, stream, shard, request_id) (client-protocol §8.10).
type IdempotentForwardPublish struct {
	AuthorizedForwardPublish
	ProducerID []byte
	RequestID  uint64
}

// ForwardPublishOk (3): offsets of the first and last appended record.
type ForwardPublishOk struct {
	CorrelationID uint64
	FirstOffset   uint64
	LastOffset    uint64
}

// ForwardPublishDuplicate (29): like ForwardPublishOk, but the batch was a duplicate of an
// earlier idempotent publish and the offsets are the original ones.
type ForwardPublishDuplicate struct {
	CorrelationID uint64
	FirstOffset   uint64
	LastOffset    uint64
}

// ForwardPublishError (4): u16 code.
type ForwardPublishError struct {
	CorrelationID uint64
	Code          InternalCode
}

// InternalNotLeader (5, NotLeader): the owner's node id, advertised address and generation.
// A routing answer shared by publish and cache forwards (and misrouted subscribes).
type InternalNotLeader struct {
	CorrelationID uint64
	OwnerNodeID   []byte
	OwnerAddress  []byte
	Generation    uint64
}

// ForwardCacheOp (6, legacy, frozen): shard ref, u64 generation, u8 op, u16 key (UTF-8),
// u32 value length + value, u8 ttl_present (0/1), u64 ttl_ms (0 when absent).
type ForwardCacheOp struct {
	CorrelationID uint64
	Shard         ShardRef
	Generation    uint64
	Op            CacheOp
	Key           []byte
	Value         []byte // counter ops: 8 BE bytes (AppendCounterValue); Get/Delete/CounterGet: empty
	HasTTL        bool
	TTLMs         uint64
}

// AuthorizedForwardCacheOp (23): the ForwardCacheOp body followed by the credential.
type AuthorizedForwardCacheOp struct {
	ForwardCacheOp
	Credential []byte
}

// ForwardCacheOk (7): u8 present (0/1), then when present u32 length + value: the value a Get
// found or a Delete removed, the sum of a counter op; absent for a Put or a miss. Present
// with an empty value is a stored empty value, distinct from a miss.
type ForwardCacheOk struct {
	CorrelationID uint64
	Present       bool
	Value         []byte
}

// ForwardCacheError (8): u16 code.
type ForwardCacheError struct {
	CorrelationID uint64
	Code          InternalCode
}

// ReplicateRecords (9, 13, 16, 18, 20 by Log): shard ref, u64 epoch, u64 first_offset,
// u32 batch_checksum, payload list. AppendBody always writes BatchChecksum(Payloads);
// Checksum holds the decoded value, checked by ChecksumOK.
type ReplicateRecords struct {
	Log           ReplicaLog
	CorrelationID uint64
	Shard         ShardRef
	Epoch         uint64
	FirstOffset   uint64
	Checksum      uint32
	Payloads      [][]byte
}

// ChecksumOK reports whether the decoded checksum matches the payloads (a mismatch is
// answered Malformed and the leader resends the same records).
func (m *ReplicateRecords) ChecksumOK() bool { return m.Checksum == BatchChecksum(m.Payloads) }

// ReplicateBootstrap (10, 14, 17, 19, 21 by Log): shard ref, u64 epoch, u64 base_offset =
// the oldest record the leader still holds.
type ReplicateBootstrap struct {
	Log           ReplicaLog
	CorrelationID uint64
	Shard         ShardRef
	Epoch         uint64
	BaseOffset    uint64
}

// ReplicateOk (11): u64 durable_offset, one past the last record on the follower's disk.
type ReplicateOk struct {
	CorrelationID uint64
	DurableOffset uint64
}

// ReplicateError (12): u16 code, u64 expected_offset (meaningful for LogGap, else 0).
type ReplicateError struct {
	CorrelationID  uint64
	Code           InternalCode
	ExpectedOffset uint64
}

// UnsupportedKind (15): the answer to a kind the responder does not know: u16 refused kind.
type UnsupportedKind struct {
	CorrelationID uint64
	RefusedKind   Kind
}

// ReplicateRebuild (24): shard ref, u8 replica log, u64 generation, u64 base_offset.
type ReplicateRebuild struct {
	CorrelationID uint64
	Shard         ShardRef
	Log           ReplicaLog
	Generation    uint64
	BaseOffset    uint64
}

// Fence (25): promotion fence for one of a shard's logs at a generation: shard ref, u8 log,
// u64 generation. At a generation the replica already accepted it writes nothing (used as
// the read-confirmation round).
type Fence struct {
	CorrelationID uint64
	Shard         ShardRef
	Log           ReplicaLog
	Generation    uint64
}

// FenceOk (26): u8 log, u64 accepted generation, u64 durable_offset of that log.
type FenceOk struct {
	CorrelationID uint64
	Log           ReplicaLog
	Generation    uint64
	DurableOffset uint64
}

// InternalError (27, Error): u16 code, for kinds without an error shape of their own (Hello).
type InternalError struct {
	CorrelationID uint64
	Code          InternalCode
}

// Unknown is what DecodeInternal returns for a kind this build does not know: the caller
// answers UnsupportedKind for CorrelationID and reads on. Body is the whole body.
type Unknown struct {
	RawKind       Kind
	CorrelationID uint64
	Body          []byte
}
