package proto

import "encoding/binary"

// EventBatchBuilder builds one event batch frame record by record, for callers that page
// records from a log and do not hold a [][]byte (history readers). The bytes equal those of
// AppendSharedEventBatch / AppendLegacyEventBatch for the same records
// (spec/client-protocol.md §5.4, §5.5). The zero value is ready for Begin*; it allocates
// nothing beyond the growth of the buffer given to Begin*.
type EventBatchBuilder struct {
	buf       []byte
	bodyStart int // offset of the body in buf
	countAt   int // offset of the u32 count in buf
	count     uint32
}

// BeginShared starts a shared batch frame (flags 0x0004, or 0x0024 with withOffsets whose
// first record is at baseOffset) appended to dst.
func (b *EventBatchBuilder) BeginShared(dst []byte, withOffsets bool, baseOffset uint64) {
	flags := FlagBinaryEventBatchShared
	if withOffsets {
		flags |= FlagEventBatchOffsets
	}
	b.buf, b.bodyStart = beginFrame(dst, flags)
	if withOffsets {
		b.buf = appendU64(b.buf, baseOffset)
	}
	b.startCount()
}

// BeginLegacy starts a legacy batch frame for one subscriber (flags 0x0002, or 0x0022 with
// withOffsets), the replay/history encoding.
func (b *EventBatchBuilder) BeginLegacy(dst []byte, subscriptionID uint64, withOffsets bool, baseOffset uint64) {
	flags := FlagBinaryEventBatch
	if withOffsets {
		flags |= FlagEventBatchOffsets
	}
	b.buf, b.bodyStart = beginFrame(dst, flags)
	b.buf = appendU64(b.buf, subscriptionID)
	if withOffsets {
		b.buf = appendU64(b.buf, baseOffset)
	}
	b.startCount()
}

func (b *EventBatchBuilder) startCount() {
	b.countAt = len(b.buf)
	b.count = 0
	b.buf = appendU32(b.buf, 0)
}

// Add appends one payload (the next offset). The payload bytes are copied.
func (b *EventBatchBuilder) Add(payload []byte) {
	b.buf = appendU32(b.buf, uint32(len(payload)))
	b.buf = append(b.buf, payload...)
	b.count++
}

// Count returns the number of payloads added since Begin*.
func (b *EventBatchBuilder) Count() int { return int(b.count) }

// FrameLen returns the size in bytes the frame has so far (header included), to bound a page.
func (b *EventBatchBuilder) FrameLen() int { return len(b.buf) - (b.bodyStart - HeaderSize) }

// Finish patches the count and length and returns the buffer given to Begin* with the whole
// frame appended. The builder must be begun again before reuse.
func (b *EventBatchBuilder) Finish() []byte {
	binary.BigEndian.PutUint32(b.buf[b.countAt:], b.count)
	out := endFrame(b.buf, b.bodyStart)
	b.buf = nil
	return out
}
