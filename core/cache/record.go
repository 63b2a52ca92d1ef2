package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// RecordOp is the first byte of every cache-log and counter-log payload
// (docs/cache.md, "Record layouts"). Payloads are the bodies of seglog records
// (spec/storage-format.md §2.2), which already carry the checksum.
type RecordOp uint8

// Record ops. Put, Delete, Expire, Evict and SnapshotPut live in the cache
// log, CounterAdd and CounterSnapshot in the counter log; CompactBegin and
// CompactCommit frame a compaction's live set in either log.
const (
	OpPut             RecordOp = 1  // a value written: key, value, optional absolute expiry
	OpDelete          RecordOp = 2  // a value removed by a client
	OpExpire          RecordOp = 3  // a value that reached its expiry instant
	OpEvict           RecordOp = 4  // a value removed to stay within capacity
	OpCompactBegin    RecordOp = 5  // a compaction's live set follows: Count records
	OpSnapshotPut     RecordOp = 6  // one live value inside a compaction
	OpCompactCommit   RecordOp = 7  // the compaction begun at BeginOffset is complete
	OpCounterAdd      RecordOp = 16 // a counter changed by Delta to Sum
	OpCounterSnapshot RecordOp = 17 // one live counter inside a compaction
)

// String names the op as docs/cache.md does.
func (op RecordOp) String() string {
	switch op {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpExpire:
		return "expire"
	case OpEvict:
		return "evict"
	case OpCompactBegin:
		return "compact_begin"
	case OpSnapshotPut:
		return "snapshot_put"
	case OpCompactCommit:
		return "compact_commit"
	case OpCounterAdd:
		return "counter_add"
	case OpCounterSnapshot:
		return "counter_snapshot"
	}
	return fmt.Sprintf("op(%d)", uint8(op))
}

// Record is one decoded cache-log or counter-log payload. Which fields are
// meaningful depends on Op (docs/cache.md). Key and Value alias the decoded
// buffer. Value is non-nil for Put/SnapshotPut even when empty: an empty
// stored value is not a miss.
type Record struct {
	Op          RecordOp
	Key         []byte
	Value       []byte
	HasExpiry   bool   // Put, SnapshotPut: the value expires
	ExpiresAt   int64  // Put, SnapshotPut (when HasExpiry), Expire: Unix ms
	Delta       int64  // CounterAdd
	Sum         int64  // CounterAdd (the new sum), CounterSnapshot
	Count       uint64 // CompactBegin, CompactCommit: live records in between
	BeginOffset uint64 // CompactCommit: offset of its CompactBegin
}

// Fixed sizes of the layouts (docs/cache.md).
const (
	putHeaderBytes     = 1 + 1 + 8 + 2 // op, flags, expires_at, key_len; then key, u32 value_len, value
	keyOnlyHeaderBytes = 1 + 2         // op, key_len; then key
	expireHeaderBytes  = 1 + 8 + 2     // op, expires_at, key_len; then key
	beginBytes         = 1 + 8         // op, count
	commitBytes        = 1 + 8 + 8     // op, begin_offset, count
	counterAddHeader   = 1 + 8 + 8 + 2 // op, delta, sum, key_len; then key
	counterSnapHeader  = 1 + 8 + 2     // op, sum, key_len; then key
	flagHasExpiry      = 0x01
)

// ErrUnknownOp is returned by AppendRecord for an Op it has no layout for.
var ErrUnknownOp = errors.New("cache: unknown record op")

// AppendRecord appends the encoding of r to dst and returns the extended
// slice (docs/cache.md layouts, all integers big-endian). Errors: a key over
// 65535 bytes (ErrKeyTooLarge), a value over 4 GiB - 1 (ErrValueTooLarge), an
// Op without a layout (ErrUnknownOp); dst is returned unchanged with them.
func AppendRecord(dst []byte, r *Record) ([]byte, error) {
	if len(r.Key) > maxKeyLimit {
		return dst, ErrKeyTooLarge
	}
	if uint64(len(r.Value)) > 1<<32-1 {
		return dst, ErrValueTooLarge
	}
	out := appendRecord(dst, r)
	if out == nil {
		return dst, fmt.Errorf("%w: %d", ErrUnknownOp, uint8(r.Op))
	}
	return out, nil
}

// appendRecord encodes a record whose key and value fit their length fields;
// it returns nil for an unknown op.
func appendRecord(dst []byte, r *Record) []byte {
	switch r.Op {
	case OpPut, OpSnapshotPut:
		return appendPut(dst, r.Op, r.Key, r.Value, r.HasExpiry, r.ExpiresAt)
	case OpDelete, OpEvict:
		return appendKeyOnly(dst, r.Op, r.Key)
	case OpExpire:
		dst = append(dst, byte(OpExpire))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.ExpiresAt))
		return appendKey(dst, r.Key)
	case OpCompactBegin:
		return binary.BigEndian.AppendUint64(append(dst, byte(OpCompactBegin)), r.Count)
	case OpCompactCommit:
		dst = binary.BigEndian.AppendUint64(append(dst, byte(OpCompactCommit)), r.BeginOffset)
		return binary.BigEndian.AppendUint64(dst, r.Count)
	case OpCounterAdd:
		dst = binary.BigEndian.AppendUint64(append(dst, byte(OpCounterAdd)), uint64(r.Delta))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Sum))
		return appendKey(dst, r.Key)
	case OpCounterSnapshot:
		dst = binary.BigEndian.AppendUint64(append(dst, byte(OpCounterSnapshot)), uint64(r.Sum))
		return appendKey(dst, r.Key)
	}
	return nil
}

// appendKey appends a u16 length and the key; callers have checked that the
// key fits (Config.MaxKeyBytes ≤ 65535, AppendRecord).
func appendKey(dst, key []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
	return append(dst, key...)
}

// appendKeyString is appendKey for a stored (string) key.
func appendKeyString(dst []byte, key string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
	return append(dst, key...)
}

func appendKeyOnly(dst []byte, op RecordOp, key []byte) []byte {
	return appendKey(append(dst, byte(op)), key)
}

func appendPut(dst []byte, op RecordOp, key, value []byte, has bool, expiresAt int64) []byte {
	var flags byte
	if has {
		flags = flagHasExpiry
	} else {
		expiresAt = 0
	}
	dst = append(dst, byte(op), flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(expiresAt))
	dst = appendKey(dst, key)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(value)))
	return append(dst, value...)
}

// DecodeRecord parses one cache-log or counter-log payload (docs/cache.md).
// Key and Value alias b. Every declared length is checked against the bytes
// that remain before it is used; nothing is allocated. Errors (all wrapping
// ErrCorruptRecord): empty input, unknown op, unknown flag bits, an expiry
// without the expiry flag, a length running past the end, trailing bytes.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) == 0 {
		return Record{}, corrupt("empty payload")
	}
	r := Record{Op: RecordOp(b[0])}
	var rest []byte
	var err error
	switch r.Op {
	case OpPut, OpSnapshotPut:
		rest, err = decodePut(b, &r)
	case OpDelete, OpEvict:
		r.Key, rest, err = takeKey(b[1:])
	case OpExpire:
		rest, err = decodeFixedThenKey(b, 8, &r.ExpiresAt, nil, &r)
	case OpCounterAdd:
		rest, err = decodeFixedThenKey(b, 16, &r.Delta, &r.Sum, &r)
	case OpCounterSnapshot:
		rest, err = decodeFixedThenKey(b, 8, &r.Sum, nil, &r)
	case OpCompactBegin:
		rest, err = decodeMarker(b, beginBytes, &r)
	case OpCompactCommit:
		rest, err = decodeMarker(b, commitBytes, &r)
	default:
		return Record{}, corrupt("unknown op %d", b[0])
	}
	if err != nil {
		return Record{}, err
	}
	if len(rest) != 0 {
		return Record{}, corrupt("%s record has %d trailing bytes", r.Op, len(rest))
	}
	return r, nil
}

// takeKey reads a u16 length and that many key bytes.
func takeKey(b []byte) (key, rest []byte, err error) {
	if len(b) < 2 {
		return nil, nil, corrupt("key length cut short")
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n > len(b) {
		return nil, nil, corrupt("key of %d bytes, %d remain", n, len(b))
	}
	return b[:n:n], b[n:], nil
}

func decodePut(b []byte, r *Record) ([]byte, error) {
	if len(b) < putHeaderBytes {
		return nil, corrupt("%s header cut short", r.Op)
	}
	flags := b[1]
	if flags&^flagHasExpiry != 0 {
		return nil, corrupt("unknown flags %#x", flags)
	}
	r.HasExpiry = flags&flagHasExpiry != 0
	r.ExpiresAt = int64(binary.BigEndian.Uint64(b[2:10]))
	if !r.HasExpiry && r.ExpiresAt != 0 {
		return nil, corrupt("expiry %d without the expiry flag", r.ExpiresAt)
	}
	key, rest, err := takeKey(b[10:])
	if err != nil {
		return nil, err
	}
	r.Key = key
	if len(rest) < 4 {
		return nil, corrupt("value length cut short")
	}
	n := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(n) > uint64(len(rest)) {
		return nil, corrupt("value of %d bytes, %d remain", n, len(rest))
	}
	r.Value = rest[:n:n]
	return rest[n:], nil
}

// decodeFixedThenKey reads fixed bytes of one or two i64 fields after the op,
// then a key.
func decodeFixedThenKey(b []byte, fixed int, first, second *int64, r *Record) ([]byte, error) {
	if len(b) < 1+fixed {
		return nil, corrupt("%s header cut short", r.Op)
	}
	*first = int64(binary.BigEndian.Uint64(b[1:9]))
	if second != nil {
		*second = int64(binary.BigEndian.Uint64(b[9:17]))
	}
	key, rest, err := takeKey(b[1+fixed:])
	r.Key = key
	return rest, err
}

func decodeMarker(b []byte, size int, r *Record) ([]byte, error) {
	if len(b) < size {
		return nil, corrupt("%s cut short", r.Op)
	}
	if r.Op == OpCompactBegin {
		r.Count = binary.BigEndian.Uint64(b[1:9])
	} else {
		r.BeginOffset = binary.BigEndian.Uint64(b[1:9])
		r.Count = binary.BigEndian.Uint64(b[9:17])
	}
	return b[size:], nil
}
