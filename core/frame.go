package core

import (
	"encoding/binary"
	"fmt"

	"felix/proto"
)

// FLX1 frame constants used by the event frames the core builds, taken from
// proto (spec/client-protocol.md §2, §3, §5.5).
const (
	frameMagic         = proto.Magic
	frameVersion       = proto.Version
	frameHeaderLen     = proto.HeaderSize
	flagEventShared    = proto.FlagBinaryEventBatchShared
	flagEventOffsets   = proto.FlagEventBatchOffsets
	eventEntryOverhead = 4 // u32 payload_len
)

// eventFrameLen returns the encoded size of a shared event batch frame.
func eventFrameLen(withOffsets bool, payloads [][]byte) int {
	n := frameHeaderLen + 4
	if withOffsets {
		n += 8
	}
	for _, p := range payloads {
		n += eventEntryOverhead + len(p)
	}
	return n
}

// appendEventFrame appends one complete shared event batch frame
// (spec/client-protocol.md §5.5: flags 0x0004, | 0x0020 with base_offset)
// to dst: the one place the core encodes live events.
func appendEventFrame(dst []byte, withOffsets bool, base uint64, payloads [][]byte) []byte {
	return proto.AppendSharedEventBatch(dst, base, withOffsets, payloads)
}

// encodeEventFrame returns a new frame holding payloads: one allocation of
// exactly the frame's size.
func encodeEventFrame(withOffsets bool, base uint64, payloads [][]byte) []byte {
	return appendEventFrame(make([]byte, 0, eventFrameLen(withOffsets, payloads)), withOffsets, base, payloads)
}

// frameBuilder builds one shared event frame record by record (history
// pages, frames cut by reframe) over proto.EventBatchBuilder.
type frameBuilder struct {
	proto.EventBatchBuilder
	count int
}

func (b *frameBuilder) reset(withOffsets bool, base uint64, capacity int) {
	b.BeginShared(make([]byte, 0, capacity), withOffsets, base)
	b.count = 0
}

func (b *frameBuilder) add(payload []byte) {
	b.Add(payload)
	b.count++
}

func (b *frameBuilder) finish() []byte { return b.Finish() }

// errBadFrame reports a frame the core did not build (a bug, or a test
// handing in garbage); decodeEventFrame never panics on it.
var errBadFrame = fmt.Errorf("%w: malformed event frame", ErrInvalid)

// decodeEventFrame parses a shared event frame built by appendEventFrame and
// calls fn for each payload (a sub-slice of frame). It checks every declared
// length against the remaining bytes before use. Used to cut a frame's
// prefix and to derive the variant without offsets.
func decodeEventFrame(frame []byte, fn func(payload []byte)) (withOffsets bool, base uint64, count int, err error) {
	if len(frame) < frameHeaderLen+4 || binary.BigEndian.Uint32(frame) != frameMagic ||
		binary.BigEndian.Uint16(frame[4:]) != frameVersion {
		return false, 0, 0, errBadFrame
	}
	flags := binary.BigEndian.Uint16(frame[6:])
	if flags&^uint16(flagEventShared|flagEventOffsets) != 0 || flags&flagEventShared == 0 {
		return false, 0, 0, errBadFrame
	}
	if int(binary.BigEndian.Uint32(frame[8:])) != len(frame)-frameHeaderLen {
		return false, 0, 0, errBadFrame
	}
	rest := frame[frameHeaderLen:]
	withOffsets = flags&flagEventOffsets != 0
	if withOffsets {
		if len(rest) < 12 {
			return false, 0, 0, errBadFrame
		}
		base = binary.BigEndian.Uint64(rest)
		rest = rest[8:]
	}
	declared := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(declared) > uint64(len(rest)/eventEntryOverhead) {
		return false, 0, 0, errBadFrame
	}
	for i := 0; i < int(declared); i++ {
		if len(rest) < 4 {
			return false, 0, 0, errBadFrame
		}
		n := binary.BigEndian.Uint32(rest)
		if uint64(n) > uint64(len(rest)-4) {
			return false, 0, 0, errBadFrame
		}
		if fn != nil {
			fn(rest[4 : 4+n])
		}
		rest = rest[4+n:]
	}
	if len(rest) != 0 {
		return false, 0, 0, errBadFrame
	}
	return withOffsets, base, int(declared), nil
}

// reframe returns a new frame holding the records of frame from index skip
// on, with or without offsets (newBase = the first kept record's offset).
func reframe(frame []byte, skip int, withOffsets bool, newBase uint64) ([]byte, error) {
	var b frameBuilder
	b.reset(withOffsets, newBase, len(frame)+8)
	i := 0
	_, _, _, err := decodeEventFrame(frame, func(p []byte) {
		if i >= skip {
			b.add(p)
		}
		i++
	})
	if err != nil {
		return nil, err
	}
	return b.finish(), nil
}
