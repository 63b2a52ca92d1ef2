package proto

import (
	"encoding/binary"
	"errors"
	"io"
)

// FLX1 header constants (spec/client-protocol.md §2).
const (
	// Magic is "FLX1" as a big-endian u32.
	Magic uint32 = 0x464C5831
	// Version is the only FLX1 header version; it has never been bumped.
	Version uint16 = 1
	// HeaderSize is the size of the FLX1 frame header in bytes.
	HeaderSize = 12
	// DefaultMaxFrameBytes is the default bound on a frame's length field (16 MiB), the
	// default of FELIX_MAX_FRAME_BYTES (spec/client-protocol.md §1).
	DefaultMaxFrameBytes uint32 = 16 << 20
)

// FLX1 flag bits (spec/client-protocol.md §3, §8). A frame with flags 0 is a JSON message.
const (
	// FlagBinaryPublishBatch (0x0001, C→B): binary publish batch, §5.1.
	FlagBinaryPublishBatch uint16 = 0x0001
	// FlagBinaryEventBatch (0x0002, B→C): legacy per-subscriber event batch, §5.4.
	FlagBinaryEventBatch uint16 = 0x0002
	// FlagBinaryEventBatchShared (0x0004, B→C): shared event batch, §5.5.
	FlagBinaryEventBatchShared uint16 = 0x0004
	// FlagBinaryPublishAcked (0x0008, C→B): modifier on 0x0001; 9-byte request_id+ack_mode prefix, §5.2.
	FlagBinaryPublishAcked uint16 = 0x0008
	// FlagBinaryPublishAck (0x0010, B→C): binary publish ack, §5.3.
	FlagBinaryPublishAck uint16 = 0x0010
	// FlagEventBatchOffsets (0x0020, B→C): modifier on 0x0002/0x0004; u64 base_offset present.
	FlagEventBatchOffsets uint16 = 0x0020
	// FlagEventBatchSkipped (0x0800, B→C): modifier, valid only with 0x0020; u64 skipped_before
	// follows base_offset (§8.5, layout decided in docs/client-protocol.md).
	FlagEventBatchSkipped uint16 = 0x0800
	// FlagEventBatchPublishers (0x1000, B→C): modifier on 0x0002/0x0004; each entry is
	// u8 publisher_len, publisher, u32 payload_len, payload (§8.6).
	FlagEventBatchPublishers uint16 = 0x1000
	// FlagPublishIdempotent (0x2000, C→B): modifier on 0x0009; u8 producer_id_len, producer_id
	// follow the 9-byte prefix (§8.10).
	FlagPublishIdempotent uint16 = 0x2000
	// FlagPublishKeyed (0x4000, C→B): modifier on 0x0001 and 0x0009 (also with 0x2000); u16
	// key_len (1..MaxKeyLen), key follow the acked prefix and producer id when present, right
	// before the §5.1 body. The broker routes the batch to the key's shard (decided in
	// docs/client-protocol.md, D15; feature "routing_keys").
	FlagPublishKeyed uint16 = 0x4000

	// OriginalV1Flags (0x0007) is what a peer that answered plain "ok" is assumed to speak.
	// Frozen forever (§4, seeds/upgrades-and-compatibility.txt).
	OriginalV1Flags uint16 = 0x0007
	// KnownFlagsV1 (0x003F) is the v1 broker's KNOWN_FLAGS.
	KnownFlagsV1 uint16 = 0x003F
	// KnownFlags is every bit this build understands: v1 bits plus 0x0800, 0x1000, 0x2000,
	// 0x4000, 0x8000 (group_records.go). A header carrying any other bit is refused with
	// ErrUnknownFlags.
	KnownFlags uint16 = KnownFlagsV1 | FlagEventBatchSkipped | FlagEventBatchPublishers | FlagPublishIdempotent | FlagPublishKeyed | FlagBinaryGroupRecords
)

// Header is a decoded FLX1 frame header. Magic and version are implied (checked on decode).
type Header struct {
	Flags  uint16 // layout bits, §3; 0 = JSON
	Length uint32 // body bytes that follow the header
}

// DecodeHeader decodes the 12-byte FLX1 header at the start of b, in the order the spec
// requires (§2): fewer than 12 bytes → ErrIncomplete; magic → ErrInvalidMagic; version →
// ErrUnsupportedVersion; unknown flag bit → ErrUnknownFlags; length > maxFrame →
// ErrFrameTooLarge. Every error is a *DecodeError with the field name and byte offset.
func DecodeHeader(b []byte, maxFrame uint32) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, decodeErr("header", len(b), ErrIncomplete)
	}
	if binary.BigEndian.Uint32(b) != Magic {
		return Header{}, decodeErr("magic", 0, ErrInvalidMagic)
	}
	if binary.BigEndian.Uint16(b[4:]) != Version {
		return Header{}, decodeErr("version", 4, ErrUnsupportedVersion)
	}
	h := Header{Flags: binary.BigEndian.Uint16(b[6:]), Length: binary.BigEndian.Uint32(b[8:])}
	if h.Flags&^KnownFlags != 0 {
		return Header{}, decodeErr("flags", 6, ErrUnknownFlags)
	}
	if h.Length > maxFrame {
		return Header{}, decodeErr("length", 8, ErrFrameTooLarge)
	}
	return h, nil
}

// AppendHeader appends a 12-byte FLX1 header with the given flags and body length.
func AppendHeader(dst []byte, flags uint16, length uint32) []byte {
	dst = appendU32(dst, Magic)
	dst = appendU16(dst, Version)
	dst = appendU16(dst, flags)
	return appendU32(dst, length)
}

// beginFrame appends a header with a zero length and returns the offset of the body; endFrame
// patches the length once the body has been appended.
func beginFrame(dst []byte, flags uint16) ([]byte, int) {
	dst = AppendHeader(dst, flags, 0)
	return dst, len(dst)
}

func endFrame(dst []byte, bodyStart int) []byte {
	binary.BigEndian.PutUint32(dst[bodyStart-4:], uint32(len(dst)-bodyStart))
	return dst
}

// Layout is the body layout a flag combination selects (spec/client-protocol.md §3, §8).
type Layout uint8

// Layouts selected by ClassifyFlags.
const (
	LayoutJSON              Layout = iota + 1 // flags 0
	LayoutPublishBatch                        // 0x0001, or 0x4001 with a routing key
	LayoutAckedPublishBatch                   // 0x0009 [|0x2000 idempotent] [|0x4000 keyed]
	LayoutPublishAck                          // 0x0010
	LayoutEventBatch                          // 0x0002 [|0x0020 [|0x0800]] [|0x1000]
	LayoutSharedEventBatch                    // 0x0004 [|0x0020 [|0x0800]] [|0x1000]
	LayoutGroupRecords                        // 0x8000 alone (group_records.go)
)

// ClassifyFlags maps header flags to the layout they select. Unknown bits give
// ErrUnknownFlags; known bits in a combination no layout defines give ErrFlagCombination
// (e.g. 0x0020 without an event batch bit, 0x0800 without 0x0020, 0x2000 without 0x0009,
// 0x4000 without 0x0001).
func ClassifyFlags(flags uint16) (Layout, error) {
	if flags&^KnownFlags != 0 {
		return 0, decodeErr("flags", 6, ErrUnknownFlags)
	}
	switch flags {
	case 0:
		return LayoutJSON, nil
	case FlagBinaryPublishBatch, FlagBinaryPublishBatch | FlagPublishKeyed:
		return LayoutPublishBatch, nil
	case FlagBinaryPublishBatch | FlagBinaryPublishAcked,
		FlagBinaryPublishBatch | FlagBinaryPublishAcked | FlagPublishIdempotent,
		FlagBinaryPublishBatch | FlagBinaryPublishAcked | FlagPublishKeyed,
		FlagBinaryPublishBatch | FlagBinaryPublishAcked | FlagPublishIdempotent | FlagPublishKeyed:
		return LayoutAckedPublishBatch, nil
	case FlagBinaryPublishAck:
		return LayoutPublishAck, nil
	case FlagBinaryGroupRecords:
		return LayoutGroupRecords, nil
	}
	base := flags &^ (FlagEventBatchOffsets | FlagEventBatchSkipped | FlagEventBatchPublishers)
	if flags&FlagEventBatchSkipped != 0 && flags&FlagEventBatchOffsets == 0 {
		return 0, decodeErr("flags", 6, ErrFlagCombination)
	}
	switch base {
	case FlagBinaryEventBatch:
		return LayoutEventBatch, nil
	case FlagBinaryEventBatchShared:
		return LayoutSharedEventBatch, nil
	}
	return 0, decodeErr("flags", 6, ErrFlagCombination)
}

// ReadFrame reads one FLX1 frame from r. The body is read into buf when cap(buf) suffices,
// otherwise into a new slice; keep body[:0] as the next call's buf to reuse it. The length
// is checked against maxFrame before any body byte is read or allocated. A clean end of
// stream before the first header byte returns io.EOF; a stream ending inside a frame returns
// a *DecodeError wrapping ErrIncomplete; other reader errors are returned as they are.
// The body is valid until buf is reused.
func ReadFrame(r io.Reader, buf []byte, maxFrame uint32) (Header, []byte, error) {
	var hb [HeaderSize]byte
	if err := readFrameHeader(r, hb[:]); err != nil {
		return Header{}, nil, err
	}
	h, err := DecodeHeader(hb[:], maxFrame)
	if err != nil {
		return Header{}, nil, err
	}
	body, err := readFrameBody(r, buf, h.Length, HeaderSize)
	if err != nil {
		return Header{}, nil, err
	}
	return h, body, nil
}

// readFrameHeader fills hb from r (shared by ReadFrame and ReadInternalFrame):
// io.EOF for a clean end before the first byte, ErrIncomplete inside the header.
func readFrameHeader(r io.Reader, hb []byte) error {
	n, err := io.ReadFull(r, hb)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) && n == 0:
		return io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return decodeErr("header", n, ErrIncomplete)
	}
	return err
}

// readFrameBody reads length body bytes into buf when it is large enough (else
// a new slice); a stream ending early is ErrIncomplete at its frame offset.
func readFrameBody(r io.Reader, buf []byte, length uint32, headerSize int) ([]byte, error) {
	body := buf[:0]
	if uint32(cap(body)) < length {
		body = make([]byte, length)
	}
	body = body[:length]
	if n, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, decodeErr("body", headerSize+n, ErrIncomplete)
		}
		return nil, err
	}
	return body, nil
}
