package groups

import (
	"encoding/binary"
	"fmt"
)

// Cursor log record layout (payload of one seglog record in the shard's groups/ log).
// docs/groups.md, "Cursor log record". Big-endian.
//
//	0  u8  version = CursorRecordVersion
//	1  u8  kind (CursorKind)
//	2  u64 group_id             FNV-1a 64 of the group name (GroupID)
//	10 u64 next_offset          the group's resume point after this record: lowest offset
//	                            neither acked nor dead-lettered
//	18 u64 dead_letter_log_end  dead-letter log end this record depends on
//	26 u32 count                number of entries
//	30 ...                      body, by kind
const (
	CursorRecordVersion = 3
	CursorHeaderLen     = 30
	DeadLetterVersion   = 1
	DeadLetterRecordLen = 30
	deliverEntryLen     = 12 // u64 offset, u32 delivery
	ackEntryLen         = 8  // u64 offset
	seqEntryLen         = 16 // u64 offset, u64 dead-letter log offset
	checkpointPrefixLen = 8  // u64 frontier
	createFixedLen      = 2 + 8 + 4 + 4 + 4 + 4
)

// CursorKind is the kind byte of a cursor log record.
type CursorKind uint8

// Cursor record kinds and their bodies (docs/groups.md).
const (
	// KindCreate: count = 1; body u16 name_len, name, u64 start_offset,
	// u32 visibility_ms, u32 max_deliveries, u32 redelivery_delay_ms, u32 max_poll_records.
	KindCreate CursorKind = 1
	// KindDeliver: count × (u64 offset, u32 delivery number). Written when leased.
	KindDeliver CursorKind = 2
	// KindAck: count × u64 offset.
	KindAck CursorKind = 3
	// KindDead: count × (u64 offset, u64 dead-letter log offset of its dead record).
	KindDead CursorKind = 4
	// KindRedrive: count × (u64 offset, u64 dead-letter log offset of its redriven record).
	KindRedrive CursorKind = 5
	// KindCheckpoint: body u64 frontier, then count × (u64 offset, u32 deliveries) of every
	// outstanding offset below the frontier. Replaces the group's state on replay.
	KindCheckpoint CursorKind = 6
)

// CursorRecord is a decoded cursor log record. Body aliases the decoded buffer.
type CursorRecord struct {
	Kind          CursorKind
	GroupID       uint64
	NextOffset    uint64
	DeadLetterEnd uint64
	Count         uint32
	Body          []byte // entries (and the kind's prefix); length checked against Count
}

// CursorEntry is one entry of a Deliver, Ack, Dead, Redrive or Checkpoint record.
// Value is the delivery number (Deliver, Checkpoint) or the dead-letter log offset
// (Dead, Redrive); 0 for Ack.
type CursorEntry struct {
	Offset uint64
	Value  uint64
}

// CreateBody is the body of a KindCreate record. Name aliases the decoded buffer.
type CreateBody struct {
	Name        []byte
	StartOffset uint64
	Config      GroupConfig
}

func corruptCursor(format string, args ...any) error {
	return &RecordError{Log: "cursor", Detail: fmt.Sprintf(format, args...)}
}

// entryLen returns the byte length of one entry of kind k and the body prefix length.
func entryLen(k CursorKind) (entry, prefix int, ok bool) {
	switch k {
	case KindDeliver:
		return deliverEntryLen, 0, true
	case KindAck:
		return ackEntryLen, 0, true
	case KindDead, KindRedrive:
		return seqEntryLen, 0, true
	case KindCheckpoint:
		return deliverEntryLen, checkpointPrefixLen, true
	}
	return 0, 0, false
}

// DecodeCursorRecord parses one cursor log record payload (layout above). It checks the
// version, kind and that count entries fit in the remaining bytes exactly, before
// anything else; it never allocates. Errors are *RecordError (errors.Is ErrCorrupt).
func DecodeCursorRecord(b []byte) (CursorRecord, error) {
	var r CursorRecord
	if len(b) < CursorHeaderLen {
		return r, corruptCursor("%d bytes, header needs %d", len(b), CursorHeaderLen)
	}
	if b[0] != CursorRecordVersion {
		return r, corruptCursor("version %d, want %d", b[0], CursorRecordVersion)
	}
	r.Kind = CursorKind(b[1])
	r.GroupID = binary.BigEndian.Uint64(b[2:])
	r.NextOffset = binary.BigEndian.Uint64(b[10:])
	r.DeadLetterEnd = binary.BigEndian.Uint64(b[18:])
	r.Count = binary.BigEndian.Uint32(b[26:])
	r.Body = b[CursorHeaderLen:]
	if r.Kind == KindCreate {
		if r.Count != 1 {
			return r, corruptCursor("create record with count %d", r.Count)
		}
		_, err := r.Create()
		return r, err
	}
	el, prefix, ok := entryLen(r.Kind)
	if !ok {
		return r, corruptCursor("unknown kind %d", r.Kind)
	}
	if uint64(len(r.Body)) != uint64(prefix)+uint64(r.Count)*uint64(el) {
		return r, corruptCursor("kind %d count %d needs %d body bytes, have %d",
			r.Kind, r.Count, uint64(prefix)+uint64(r.Count)*uint64(el), len(r.Body))
	}
	return r, nil
}

// Entry returns entry i (0 <= i < Count) of a non-create record decoded by
// DecodeCursorRecord.
func (r *CursorRecord) Entry(i int) CursorEntry {
	el, prefix, _ := entryLen(r.Kind)
	p := r.Body[prefix+i*el:]
	e := CursorEntry{Offset: binary.BigEndian.Uint64(p)}
	switch el {
	case deliverEntryLen:
		e.Value = uint64(binary.BigEndian.Uint32(p[8:]))
	case seqEntryLen:
		e.Value = binary.BigEndian.Uint64(p[8:])
	}
	return e
}

// Frontier returns the frontier of a KindCheckpoint record (the lowest offset the group
// never delivered).
func (r *CursorRecord) Frontier() uint64 {
	return binary.BigEndian.Uint64(r.Body)
}

// Create decodes the body of a KindCreate record; errors are *RecordError.
func (r *CursorRecord) Create() (CreateBody, error) {
	var c CreateBody
	b := r.Body
	if len(b) < 2 {
		return c, corruptCursor("create body of %d bytes", len(b))
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) != createFixedLen+n {
		return c, corruptCursor("create body of %d bytes, name of %d needs %d", len(b), n, createFixedLen+n)
	}
	c.Name = b[2 : 2+n]
	p := b[2+n:]
	c.StartOffset = binary.BigEndian.Uint64(p)
	c.Config.VisibilityTimeoutMillis = int64(binary.BigEndian.Uint32(p[8:]))
	c.Config.MaxDeliveries = binary.BigEndian.Uint32(p[12:])
	c.Config.RedeliveryDelayMillis = int64(binary.BigEndian.Uint32(p[16:]))
	c.Config.MaxPollRecords = binary.BigEndian.Uint32(p[20:])
	if n == 0 || n > MaxGroupNameBytes {
		return c, corruptCursor("group name of %d bytes", n)
	}
	if GroupID(string(c.Name)) != r.GroupID {
		return c, corruptCursor("group id %016x does not match name %q", r.GroupID, c.Name)
	}
	return c, nil
}

// appendCursorHeader appends a cursor record header with the given fields.
func appendCursorHeader(b []byte, k CursorKind, groupID, next, dlEnd uint64, count uint32) []byte {
	b = append(b, CursorRecordVersion, byte(k))
	b = binary.BigEndian.AppendUint64(b, groupID)
	b = binary.BigEndian.AppendUint64(b, next)
	b = binary.BigEndian.AppendUint64(b, dlEnd)
	return binary.BigEndian.AppendUint32(b, count)
}

// patchCursorHeader rewrites next_offset, dead_letter_log_end and count of the record
// header that starts at rec[0].
func patchCursorHeader(rec []byte, next, dlEnd uint64, count uint32) {
	binary.BigEndian.PutUint64(rec[10:], next)
	binary.BigEndian.PutUint64(rec[18:], dlEnd)
	binary.BigEndian.PutUint32(rec[26:], count)
}

// AppendCreateRecord appends an encoded KindCreate cursor record to b.
// cfg must already hold its defaults (every field fits a u32).
func AppendCreateRecord(b []byte, name string, start uint64, cfg GroupConfig, dlEnd uint64) []byte {
	b = appendCursorHeader(b, KindCreate, GroupID(name), start, dlEnd, 1)
	b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint64(b, start)
	b = binary.BigEndian.AppendUint32(b, uint32(cfg.VisibilityTimeoutMillis))
	b = binary.BigEndian.AppendUint32(b, cfg.MaxDeliveries)
	b = binary.BigEndian.AppendUint32(b, uint32(cfg.RedeliveryDelayMillis))
	return binary.BigEndian.AppendUint32(b, cfg.MaxPollRecords)
}

// appendEntry appends one entry of kind k.
func appendEntry(b []byte, k CursorKind, e CursorEntry) []byte {
	b = binary.BigEndian.AppendUint64(b, e.Offset)
	switch k {
	case KindDeliver, KindCheckpoint:
		b = binary.BigEndian.AppendUint32(b, uint32(e.Value))
	case KindDead, KindRedrive:
		b = binary.BigEndian.AppendUint64(b, e.Value)
	}
	return b
}

// AppendCursorRecord appends an encoded non-create cursor record to b. For
// KindCheckpoint, frontier is written as the body prefix; it is ignored otherwise.
func AppendCursorRecord(b []byte, k CursorKind, groupID, next, dlEnd, frontier uint64, entries []CursorEntry) []byte {
	b = appendCursorHeader(b, k, groupID, next, dlEnd, uint32(len(entries)))
	if k == KindCheckpoint {
		b = binary.BigEndian.AppendUint64(b, frontier)
	}
	for _, e := range entries {
		b = appendEntry(b, k, e)
	}
	return b
}

// DeadLetterKind is the kind byte of a dead-letter log record.
type DeadLetterKind uint8

// Dead-letter record kinds.
const (
	DeadLettered DeadLetterKind = 1 // the offset was given up on
	Redriven     DeadLetterKind = 2 // the offset was put back into delivery
)

// DeadLetterRecord is one dead-letter log record (payload of one seglog record in the
// shard's dead-letters/ log). Layout, big-endian, DeadLetterRecordLen = 30 bytes:
//
//	0  u8  version = DeadLetterVersion
//	1  u8  kind (DeadLetterKind)
//	2  u64 group_id
//	10 u64 offset        offset in the stream shard's records log
//	18 u32 deliveries    deliveries made before it was dead-lettered (0 for Redriven)
//	22 i64 at_millis     Unix ms when it was dead-lettered / redriven
//
// docs/groups.md, "Dead-letter log record".
type DeadLetterRecord struct {
	Kind       DeadLetterKind
	GroupID    uint64
	Offset     uint64
	Deliveries uint32
	AtMillis   int64
}

// AppendDeadLetterRecord appends r's 30-byte encoding to b.
func AppendDeadLetterRecord(b []byte, r DeadLetterRecord) []byte {
	b = append(b, DeadLetterVersion, byte(r.Kind))
	b = binary.BigEndian.AppendUint64(b, r.GroupID)
	b = binary.BigEndian.AppendUint64(b, r.Offset)
	b = binary.BigEndian.AppendUint32(b, r.Deliveries)
	return binary.BigEndian.AppendUint64(b, uint64(r.AtMillis))
}

// DecodeDeadLetterRecord parses a 30-byte dead-letter record. Errors are *RecordError
// (errors.Is ErrCorrupt): wrong length, version or kind.
func DecodeDeadLetterRecord(b []byte) (DeadLetterRecord, error) {
	var r DeadLetterRecord
	if len(b) != DeadLetterRecordLen {
		return r, &RecordError{Log: "dead-letter", Detail: fmt.Sprintf("%d bytes, want %d", len(b), DeadLetterRecordLen)}
	}
	if b[0] != DeadLetterVersion {
		return r, &RecordError{Log: "dead-letter", Detail: fmt.Sprintf("version %d, want %d", b[0], DeadLetterVersion)}
	}
	r.Kind = DeadLetterKind(b[1])
	if r.Kind != DeadLettered && r.Kind != Redriven {
		return r, &RecordError{Log: "dead-letter", Detail: fmt.Sprintf("unknown kind %d", b[1])}
	}
	r.GroupID = binary.BigEndian.Uint64(b[2:])
	r.Offset = binary.BigEndian.Uint64(b[10:])
	r.Deliveries = binary.BigEndian.Uint32(b[18:])
	r.AtMillis = int64(binary.BigEndian.Uint64(b[22:]))
	return r, nil
}
