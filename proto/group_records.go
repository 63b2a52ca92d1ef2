package proto

import "unicode/utf8"

// FlagBinaryGroupRecords (0x8000, B→C) is the binary group_records answer
// (docs/client-protocol.md, D19; issue 23 item 12): sent only in answer to a
// group_poll that carried "binary_records": true, so a client that never asks
// keeps getting the JSON group_records. Body, big-endian:
//
//	u64 request_id, u32 shard, u8 group_len, group (UTF-8),
//	u32 count, count × (u64 offset, u32 delivery, u8 publisher_len, publisher (UTF-8),
//	u32 payload_len, payload)
//
// publisher_len 0 = none. Payloads travel as they are (no base64), so a record up to the
// frame limit less GroupRecordsOverhead reaches a group consumer.
const FlagBinaryGroupRecords uint16 = 0x8000

const (
	// GroupRecordsEnvelope is the body bytes of a binary group_records besides its records,
	// for a group name of the largest length (255 bytes); GroupRecordBytes is each record's
	// besides its publisher and payload.
	GroupRecordsEnvelope = 8 + 4 + 1 + 255 + 4
	GroupRecordBytes     = 8 + 4 + 1 + 4
)

// AppendGroupRecordsFrame appends m as a whole binary group_records frame (header and
// body, FlagBinaryGroupRecords). Group and publishers longer than 255 bytes are cut to
// 255 (the broker's group names are at most 255 bytes; a publisher is a token subject).
func AppendGroupRecordsFrame(dst []byte, m *GroupRecords) []byte {
	out, start := beginFrame(dst, FlagBinaryGroupRecords)
	out = appendU64(out, m.RequestID)
	out = appendU32(out, m.Shard)
	out = appendStr8(out, m.Group)
	out = appendU32(out, uint32(len(m.Records)))
	for i := range m.Records {
		r := &m.Records[i]
		out = appendU64(out, r.Offset)
		out = appendU32(out, r.Delivery)
		out = appendStr8(out, r.Publisher)
		out = appendU32(out, uint32(len(r.Payload)))
		out = append(out, r.Payload...)
	}
	return endFrame(out, start)
}

func appendStr8(dst []byte, s string) []byte {
	if len(s) > 255 {
		n := 255
		for n > 0 && !utf8.RuneStart(s[n]) { // cut on a rune boundary: still UTF-8
			n--
		}
		s = s[:n]
	}
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

// DecodeGroupRecords decodes the body of a FlagBinaryGroupRecords frame into dst. The
// payloads are copied into one new buffer (nothing aliases body, which a reader reuses).
// Errors are *DecodeError wrapping ErrIncomplete (truncated), ErrMalformed (a count the
// body cannot hold), ErrInvalidUTF8 or ErrTrailingBytes.
func DecodeGroupRecords(body []byte, dst *GroupRecords) error {
	c := cursor{b: body}
	var err error
	if dst.RequestID, err = c.u64("request_id"); err != nil {
		return err
	}
	if dst.Shard, err = c.u32("shard"); err != nil {
		return err
	}
	group, err := c.str8("group")
	if err != nil {
		return err
	}
	dst.Group = string(group)
	n, err := c.count("count", GroupRecordBytes)
	if err != nil {
		return err
	}
	dst.Records = make([]GroupRecord, n)
	arena := make([]byte, 0, c.remaining()-n*GroupRecordBytes)
	for i := range dst.Records {
		r := &dst.Records[i]
		if r.Offset, err = c.u64("offset"); err != nil {
			return err
		}
		if r.Delivery, err = c.u32("delivery"); err != nil {
			return err
		}
		pub, err := c.str8("publisher")
		if err != nil {
			return err
		}
		r.Publisher = string(pub)
		p, err := c.bytes32("payload")
		if err != nil {
			return err
		}
		start := len(arena)
		arena = append(arena, p...)
		r.Payload = arena[start:len(arena):len(arena)]
	}
	return c.end("records")
}
