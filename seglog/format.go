package seglog

import (
	"encoding/binary"
	"fmt"

	"github.com/klauspost/crc32"
)

// Magics and fixed lengths of the on-disk format (spec/storage-format.md §1, §2.4).
const (
	SegmentMagic uint32 = 0x464C5347 // "FLSG", segment data files (*.log)
	IndexMagic   uint32 = 0x464C5349 // "FLSI", sparse index files (*.index)

	SegmentHeaderLen  = 32 // bytes, §2.1
	RecordHeaderLenV2 = 28 // bytes, §2.2 (format version 2)
	RecordHeaderLenV3 = 32 // bytes, §4.1 (format versions 3..6)
	IndexHeaderLen    = 24 // bytes, §2.3
	IndexEntryLen     = 16 // bytes, §2.3

	// MaxPayloadBytes bounds a record body (publisher part + payload): 64 MiB
	// (spec/storage-format.md §2.2, §2.4). Checked before any allocation.
	MaxPayloadBytes = 64 << 20
)

// Format versions (spec/storage-format.md §4; seeds/upgrades-and-compatibility.txt,
// "Storage format"). This build reads MinReadVersion..MaxReadVersion and writes
// WriteVersion unless a record needs a newer one.
const (
	MinReadVersion uint16 = 2
	WriteVersion   uint16 = 3
	MaxReadVersion uint16 = 6
)

// RecordKind is the v3+ per-record kind byte (spec/storage-format.md §4.1).
type RecordKind uint8

// Record kinds. Only KindData is delivered to readers.
const (
	KindData            RecordKind = 0 // a published payload (every version)
	KindGenerationStart RecordKind = 1 // generation-start record (v4+)
	KindCommitMarker    RecordKind = 2 // atomic-commit marker (v5+)
)

// flagPublisher marks a v6 record whose body starts with u8 len ‖ publisher.
const flagPublisher = 0x01

var crcTable = crc32.IEEETable

func crcIEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

func crcUpdate(c uint32, b []byte) uint32 { return crc32.Update(c, crcTable, b) }

// SegmentHeader is the 32-byte header at the start of every segment file
// (spec/storage-format.md §2.1).
type SegmentHeader struct {
	Version         uint16 // format version of every record in the segment
	BaseOffset      uint64 // logical offset of the segment's first record
	CreatedAtMicros int64  // wall clock at creation, informational
}

// AppendSegmentHeader appends the 32-byte encoding of h to dst (flags 0,
// header_crc over bytes 0..24, reserved 0). Golden: vectors/storage/golden.md §1.
func AppendSegmentHeader(dst []byte, h SegmentHeader) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, SegmentMagic)
	dst = binary.BigEndian.AppendUint16(dst, h.Version)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, h.BaseOffset)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.CreatedAtMicros))
	dst = binary.BigEndian.AppendUint32(dst, crcIEEE(dst[start:start+24]))
	return binary.BigEndian.AppendUint32(dst, 0)
}

// DecodeSegmentHeader parses the segment header at the start of b.
// Errors (*CorruptionError, Position 0): CorruptTruncated when len(b) < 32,
// CorruptSegmentMagic, CorruptSegmentVersion (outside 2..6; version 1 included),
// CorruptSegmentFlags, CorruptSegmentHeaderChecksum (spec §8).
func DecodeSegmentHeader(b []byte) (SegmentHeader, error) {
	if len(b) < SegmentHeaderLen {
		return SegmentHeader{}, &CorruptionError{Kind: CorruptTruncated, Needed: SegmentHeaderLen, Available: int64(len(b))}
	}
	if binary.BigEndian.Uint32(b) != SegmentMagic {
		return SegmentHeader{}, &CorruptionError{Kind: CorruptSegmentMagic}
	}
	if crcIEEE(b[:24]) != binary.BigEndian.Uint32(b[24:]) {
		return SegmentHeader{}, &CorruptionError{Kind: CorruptSegmentHeaderChecksum}
	}
	h := SegmentHeader{
		Version:         binary.BigEndian.Uint16(b[4:]),
		BaseOffset:      binary.BigEndian.Uint64(b[8:]),
		CreatedAtMicros: int64(binary.BigEndian.Uint64(b[16:])),
	}
	if h.Version < MinReadVersion || h.Version > MaxReadVersion {
		return SegmentHeader{}, &CorruptionError{Kind: CorruptSegmentVersion, Detail: fmt.Sprintf("version %d, this build reads %d..%d", h.Version, MinReadVersion, MaxReadVersion)}
	}
	if binary.BigEndian.Uint16(b[6:]) != 0 {
		return SegmentHeader{}, &CorruptionError{Kind: CorruptSegmentFlags}
	}
	return h, nil
}

// RecordHeaderLen returns the record header length of format version v:
// 28 for v2, 32 for v3..v6.
func RecordHeaderLen(v uint16) int {
	if v == 2 {
		return RecordHeaderLenV2
	}
	return RecordHeaderLenV3
}

// Record is one decoded record. Body slices alias the decoded buffer.
type Record struct {
	Offset          uint64
	TimestampMicros int64
	Kind            RecordKind // always KindData in v2 and v3 segments
	Publisher       []byte     // v6 only; nil when absent (≤ 255 bytes)
	Payload         []byte
}

// EncodedLen returns the encoded length of r in format version v.
func (r *Record) EncodedLen(v uint16) int {
	n := RecordHeaderLen(v) + len(r.Payload)
	if r.Publisher != nil {
		n += 1 + len(r.Publisher)
	}
	return n
}

// MinVersion returns the lowest write version (≥ WriteVersion) that can hold r:
// 4 for a generation-start record, 5 for a commit marker, 6 with a publisher.
func (r *Record) MinVersion() uint16 {
	v := WriteVersion
	if r.Kind == KindGenerationStart {
		v = 4
	}
	if r.Kind == KindCommitMarker {
		v = 5
	}
	if r.Publisher != nil {
		v = 6
	}
	return v
}

// AppendRecord appends the encoding of r in format version v (2..6) to dst.
// v2 (spec §2.2, golden.md §2): 28-byte header, header_crc over 0..20,
// checksum over 0..24 ‖ payload. v3+ (spec §4.1, docs/storage-format.md):
// 32-byte header with kind/flags/reserved, header_crc over 0..24, checksum
// over 0..28 ‖ body. The caller guarantees v ≥ r.MinVersion() (or v = 2 with
// a plain data record) and len(body) ≤ MaxPayloadBytes; the encoder checks
// neither (Log.Append does, returning ErrRecordTooLarge).
func AppendRecord(dst []byte, v uint16, r *Record) []byte {
	start := len(dst)
	bodyLen := len(r.Payload)
	if r.Publisher != nil {
		bodyLen += 1 + len(r.Publisher)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(bodyLen))
	dst = binary.BigEndian.AppendUint64(dst, r.Offset)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.TimestampMicros))
	if v == 2 {
		dst = binary.BigEndian.AppendUint32(dst, crcIEEE(dst[start:start+20]))
		c := crcIEEE(dst[start : start+24])
		dst = binary.BigEndian.AppendUint32(dst, crcUpdate(c, r.Payload))
		return append(dst, r.Payload...)
	}
	var flags byte
	if r.Publisher != nil {
		flags = flagPublisher
	}
	dst = append(dst, byte(r.Kind), flags, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, crcIEEE(dst[start:start+24]))
	dst = append(dst, 0, 0, 0, 0) // checksum, filled below
	if r.Publisher != nil {
		dst = append(dst, byte(len(r.Publisher)))
		dst = append(dst, r.Publisher...)
	}
	dst = append(dst, r.Payload...)
	c := crcUpdate(crcIEEE(dst[start:start+28]), dst[start+32:])
	binary.BigEndian.PutUint32(dst[start+28:], c)
	return dst
}

// putRecordV3 writes a v3 data record (header then payload) into dst, which
// must hold RecordHeaderLenV3+len(payload) bytes. It is the allocation-free
// encoder of the append path; its bytes equal AppendRecord(nil, 3, r).
func putRecordV3(dst []byte, off uint64, ts int64, payload []byte) {
	binary.BigEndian.PutUint32(dst, uint32(len(payload)))
	binary.BigEndian.PutUint64(dst[4:], off)
	binary.BigEndian.PutUint64(dst[12:], uint64(ts))
	dst[20], dst[21], dst[22], dst[23] = byte(KindData), 0, 0, 0
	binary.BigEndian.PutUint32(dst[24:], crcIEEE(dst[:24]))
	c := crcIEEE(dst[:28])
	copy(dst[32:], payload)
	binary.BigEndian.PutUint32(dst[28:], crcUpdate(c, payload))
}

// recordHeader is a record header whose header_crc has been verified.
type recordHeader struct {
	bodyLen  uint32
	offset   uint64
	ts       int64
	kind     RecordKind
	flags    byte
	checksum uint32
}

// headerStatus classifies the bytes at a record position.
type headerStatus uint8

const (
	headerOK     headerStatus = iota
	headerShort               // fewer bytes than a header remain
	headerZero                // an all-zero header (v3+): end of written data
	headerBadCRC              // header_crc mismatch
	headerBad                 // valid CRC but an invalid field (kind, flags, reserved, length)
)

// parseRecordHeader verifies and parses the record header at the start of b
// for segment version v. The header CRC is checked before any field is used.
func parseRecordHeader(b []byte, v uint16) (recordHeader, headerStatus, string) {
	hl := RecordHeaderLen(v)
	if len(b) < hl {
		return recordHeader{}, headerShort, ""
	}
	if v == 2 {
		if crcIEEE(b[:20]) != binary.BigEndian.Uint32(b[20:]) {
			return recordHeader{}, headerBadCRC, ""
		}
		h := recordHeader{bodyLen: binary.BigEndian.Uint32(b), offset: binary.BigEndian.Uint64(b[4:]),
			ts: int64(binary.BigEndian.Uint64(b[12:])), checksum: binary.BigEndian.Uint32(b[24:])}
		if h.bodyLen > MaxPayloadBytes {
			return h, headerBad, fmt.Sprintf("payload_len %d > %d", h.bodyLen, MaxPayloadBytes)
		}
		return h, headerOK, ""
	}
	if crcIEEE(b[:24]) != binary.BigEndian.Uint32(b[24:]) {
		if allZero(b[:hl]) {
			return recordHeader{}, headerZero, ""
		}
		return recordHeader{}, headerBadCRC, ""
	}
	h := recordHeader{bodyLen: binary.BigEndian.Uint32(b), offset: binary.BigEndian.Uint64(b[4:]),
		ts: int64(binary.BigEndian.Uint64(b[12:])), kind: RecordKind(b[20]), flags: b[21],
		checksum: binary.BigEndian.Uint32(b[28:])}
	switch {
	case h.bodyLen > MaxPayloadBytes:
		return h, headerBad, fmt.Sprintf("payload_len %d > %d", h.bodyLen, MaxPayloadBytes)
	case b[22] != 0 || b[23] != 0:
		return h, headerBad, "reserved bytes not zero"
	case h.kind > KindCommitMarker || (h.kind == KindGenerationStart && v < 4) || (h.kind == KindCommitMarker && v < 5):
		return h, headerBad, fmt.Sprintf("record kind %d not allowed in a v%d segment", h.kind, v)
	case h.flags&^flagPublisher != 0 || (h.flags&flagPublisher != 0 && v < 6):
		return h, headerBad, fmt.Sprintf("record flags %#x not allowed in a v%d segment", h.flags, v)
	}
	return h, headerOK, ""
}

// checkBody verifies the record checksum of a record whose header (hl bytes)
// and body are both in rec.
func checkBody(rec []byte, hl int, h *recordHeader) bool {
	cover := 24
	if hl == RecordHeaderLenV3 {
		cover = 28
	}
	return crcUpdate(crcIEEE(rec[:cover]), rec[hl:]) == h.checksum
}

// splitBody returns the publisher (nil when absent) and payload of a verified
// body; ok is false when the v6 publisher length overruns the body.
func splitBody(body []byte, h *recordHeader) (pub, payload []byte, ok bool) {
	if h.flags&flagPublisher == 0 {
		return nil, body, true
	}
	if len(body) < 1 || int(body[0]) > len(body)-1 {
		return nil, nil, false
	}
	n := int(body[0])
	return body[1 : 1+n], body[1+n:], true
}

// DecodeRecord parses and verifies the record at the start of b in format
// version v (2..6). Returns the record (slices alias b) and its encoded length.
// Errors (*CorruptionError, Position 0): CorruptTruncated when b ends inside
// the record, CorruptRecordHeaderChecksum (also for an all-zero v3 header),
// CorruptRecordTooLarge (checked before the body is touched),
// CorruptRecordInvalid (kind/flags/reserved), CorruptRecordChecksum.
func DecodeRecord(b []byte, v uint16) (Record, int, error) {
	if v < MinReadVersion || v > MaxReadVersion {
		return Record{}, 0, &CorruptionError{Kind: CorruptSegmentVersion, Detail: fmt.Sprintf("version %d", v)}
	}
	hl := RecordHeaderLen(v)
	h, st, why := parseRecordHeader(b, v)
	switch st {
	case headerShort:
		return Record{}, 0, &CorruptionError{Kind: CorruptTruncated, Needed: int64(hl), Available: int64(len(b))}
	case headerZero, headerBadCRC:
		return Record{}, 0, &CorruptionError{Kind: CorruptRecordHeaderChecksum}
	case headerBad:
		k := CorruptRecordInvalid
		if h.bodyLen > MaxPayloadBytes {
			k = CorruptRecordTooLarge
		}
		return Record{}, 0, &CorruptionError{Kind: k, Detail: why}
	}
	n := hl + int(h.bodyLen)
	if len(b) < n {
		return Record{}, 0, &CorruptionError{Kind: CorruptTruncated, Needed: int64(n), Available: int64(len(b))}
	}
	if !checkBody(b[:n], hl, &h) {
		return Record{}, 0, &CorruptionError{Kind: CorruptRecordChecksum}
	}
	pub, payload, ok := splitBody(b[hl:n], &h)
	if !ok {
		return Record{}, 0, &CorruptionError{Kind: CorruptRecordInvalid, Detail: "publisher length overruns the body"}
	}
	return Record{Offset: h.offset, TimestampMicros: h.ts, Kind: h.kind, Publisher: pub, Payload: payload}, n, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// IndexEntry maps a record offset to its byte position in the segment (§2.3).
type IndexEntry struct {
	Offset   uint64
	Position uint64
}

// AppendIndexHeader appends the 24-byte index header (§2.3, golden.md §3c).
func AppendIndexHeader(dst []byte, version uint16, base uint64) []byte {
	dst = binary.BigEndian.AppendUint32(dst, IndexMagic)
	dst = binary.BigEndian.AppendUint16(dst, version)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, base)
	return binary.BigEndian.AppendUint64(dst, 0)
}

// AppendIndexEntry appends one 16-byte index entry.
func AppendIndexEntry(dst []byte, e IndexEntry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, e.Offset)
	return binary.BigEndian.AppendUint64(dst, e.Position)
}

// DecodeIndex parses an index file for a segment of the given version and
// base offset. A torn final entry is ignored. Errors (*CorruptionError):
// CorruptTruncated, CorruptIndexMagic, CorruptIndexVersion, CorruptIndexInvalid
// (flags, reserved, base mismatch, entries not strictly ascending). Indexes are
// derived: callers rebuild on any error (spec §2.3).
func DecodeIndex(b []byte, version uint16, base uint64) ([]IndexEntry, error) {
	if len(b) < IndexHeaderLen {
		return nil, &CorruptionError{Kind: CorruptTruncated, Needed: IndexHeaderLen, Available: int64(len(b))}
	}
	if binary.BigEndian.Uint32(b) != IndexMagic {
		return nil, &CorruptionError{Kind: CorruptIndexMagic}
	}
	if binary.BigEndian.Uint16(b[4:]) != version {
		return nil, &CorruptionError{Kind: CorruptIndexVersion}
	}
	if binary.BigEndian.Uint16(b[6:]) != 0 || binary.BigEndian.Uint64(b[8:]) != base || binary.BigEndian.Uint64(b[16:]) != 0 {
		return nil, &CorruptionError{Kind: CorruptIndexInvalid, Detail: "flags, base_offset or reserved mismatch"}
	}
	body := b[IndexHeaderLen:]
	n := len(body) / IndexEntryLen
	entries := make([]IndexEntry, 0, n)
	for i := 0; i < n; i++ {
		e := IndexEntry{Offset: binary.BigEndian.Uint64(body[i*16:]), Position: binary.BigEndian.Uint64(body[i*16+8:])}
		if i > 0 && (e.Offset <= entries[i-1].Offset || e.Position <= entries[i-1].Position) {
			return nil, &CorruptionError{Kind: CorruptIndexInvalid, Detail: "entries not strictly ascending"}
		}
		entries = append(entries, e)
	}
	return entries, nil
}
