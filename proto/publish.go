package proto

import (
	"strings"
	"unicode/utf8"
)

// AckMode is the u8 ack_mode of an acked binary publish (spec/client-protocol.md §5.2).
type AckMode uint8

// Ack modes on the wire. There is no encoding for "none": unacked batches use flags 0x0001.
const (
	AckPerMessage AckMode = 1
	AckPerBatch   AckMode = 2
)

// PublishBatch is a decoded binary publish batch (flags 0x0001, 0x0009, 0x2009, each
// optionally with 0x4000; spec/client-protocol.md §5.1, §5.2, §8.10, docs/client-protocol.md
// D15). Every []byte is a sub-slice of the decoded body (zero-copy, valid while that buffer
// is untouched). Reuse one PublishBatch across frames: decoding reuses Payloads' capacity
// and then allocates nothing.
type PublishBatch struct {
	Acked      bool    // frame carried the 0x0008 prefix
	RequestID  uint64  // only when Acked
	AckMode    AckMode // only when Acked
	ProducerID []byte  // only with FlagPublishIdempotent (u8-length-prefixed UTF-8, non-empty)
	// Key is the routing key (FlagPublishKeyed: u16 key_len, 1..MaxKeyLen opaque bytes);
	// nil or empty = no key (the broker picks the shard). Encoders set 0x4000 when non-empty.
	Key       []byte
	TenantID  []byte
	Namespace []byte
	Stream    []byte
	Payloads  [][]byte
}

// MaxKeyLen is the longest routing key in bytes (FlagPublishKeyed, JSON "key";
// docs/client-protocol.md D15).
const MaxKeyLen = 1024

// Flags returns the frame flags this batch encodes with: 0x0001, 0x0009 or 0x2009, plus
// 0x4000 when Key is non-empty.
func (b *PublishBatch) Flags() uint16 {
	var f uint16
	switch {
	case !b.Acked:
		f = FlagBinaryPublishBatch
	case b.ProducerID != nil:
		f = FlagBinaryPublishBatch | FlagBinaryPublishAcked | FlagPublishIdempotent
	default:
		f = FlagBinaryPublishBatch | FlagBinaryPublishAcked
	}
	if len(b.Key) > 0 {
		f |= FlagPublishKeyed
	}
	return f
}

// DecodePublishBatch decodes a §5.1 body (flags 0x0001) into dst, reusing dst.Payloads.
// For a keyed frame (0x4001) use DecodePublish.
// Errors are *DecodeError (ErrIncomplete, ErrMalformed for a count larger than remaining/4,
// ErrInvalidUTF8, ErrTrailingBytes).
func DecodePublishBatch(body []byte, dst *PublishBatch) error {
	return decodeUnacked(body, false, dst)
}

// decodeUnacked decodes 0x0001 (keyed false) or 0x4001 (keyed true: u16 key_len, key first).
func decodeUnacked(body []byte, keyed bool, dst *PublishBatch) error {
	dst.Acked, dst.RequestID, dst.AckMode, dst.ProducerID, dst.Key = false, 0, 0, nil, nil
	c := cursor{b: body}
	if keyed {
		if err := decodeKey(&c, dst); err != nil {
			return err
		}
	}
	return decodePublishRest(&c, dst)
}

// decodeKey reads u16 key_len and the key (1..MaxKeyLen bytes, opaque) into dst.Key. A
// length of 0 or above MaxKeyLen is ErrMalformed; one beyond the body is ErrIncomplete.
func decodeKey(c *cursor, dst *PublishBatch) error {
	start := c.off
	n, err := c.u16("key")
	if err != nil {
		return err
	}
	if n == 0 || n > MaxKeyLen {
		return decodeErr("key", start, ErrMalformed)
	}
	if dst.Key, err = c.bytes("key", int(n)); err != nil {
		return err
	}
	return nil
}

// AckedPrefix is the 9-byte prefix of an acked publish batch (§5.2).
type AckedPrefix struct {
	RequestID uint64
	AckMode   AckMode
}

// AckedPrefixSize is the size of the acked publish prefix in bytes.
const AckedPrefixSize = 9

// DecodeAckedPrefix reads only the 9-byte request_id + ack_mode prefix, so a broker can
// answer an error ack for request_id even when the rest of the body is malformed. An
// ack_mode other than 1 or 2 is ErrMalformed (request_id is still returned).
func DecodeAckedPrefix(body []byte) (AckedPrefix, error) {
	c := cursor{b: body}
	id, err := c.u64("request_id")
	if err != nil {
		return AckedPrefix{}, err
	}
	mode, err := c.u8("ack_mode")
	if err != nil {
		return AckedPrefix{RequestID: id}, err
	}
	if AckMode(mode) != AckPerMessage && AckMode(mode) != AckPerBatch {
		return AckedPrefix{RequestID: id}, decodeErr("ack_mode", 8, ErrMalformed)
	}
	return AckedPrefix{RequestID: id, AckMode: AckMode(mode)}, nil
}

// DecodeAckedPublishBatch decodes a §5.2 body (flags 0x0009, or 0x2009 when idempotent is
// true: u8 producer_id_len + producer_id follow the prefix, §8.10) into dst. When the prefix
// decoded, dst.Acked is true and dst.RequestID is set even if a later field fails, so the
// caller can answer an error ack. Allocates nothing once dst.Payloads has capacity. For a
// keyed frame (0x4000) use DecodePublish.
func DecodeAckedPublishBatch(body []byte, idempotent bool, dst *PublishBatch) error {
	return decodeAcked(body, idempotent, false, dst)
}

// decodeAcked decodes every acked layout: prefix, [producer id], [key], §5.1 body.
func decodeAcked(body []byte, idempotent, keyed bool, dst *PublishBatch) error {
	dst.Acked, dst.RequestID, dst.AckMode, dst.ProducerID, dst.Key = false, 0, 0, nil, nil
	p, err := DecodeAckedPrefix(body)
	if err != nil {
		return err
	}
	dst.Acked, dst.RequestID, dst.AckMode = true, p.RequestID, p.AckMode
	c := cursor{b: body, off: AckedPrefixSize}
	if idempotent {
		start := c.off
		id, err := c.str8("producer_id")
		if err != nil {
			return err
		}
		if len(id) == 0 {
			return decodeErr("producer_id", start, ErrMalformed)
		}
		dst.ProducerID = id
	}
	if keyed {
		if err := decodeKey(&c, dst); err != nil {
			return err
		}
	}
	return decodePublishRest(&c, dst)
}

func decodePublishRest(c *cursor, dst *PublishBatch) error {
	var err error
	if dst.TenantID, err = c.str16("tenant_id"); err != nil {
		return err
	}
	if dst.Namespace, err = c.str16("namespace"); err != nil {
		return err
	}
	if dst.Stream, err = c.str16("stream"); err != nil {
		return err
	}
	if dst.Payloads, err = c.payloads("payloads", dst.Payloads); err != nil {
		return err
	}
	return c.end("payloads")
}

// AppendPublishBatch appends a whole frame (header + body) for b: flags b.Flags(), layout
// §5.1/§5.2/§8.10 and D15 (u16 key_len, key after the prefix and producer id when Key is
// non-empty). Names must be ≤ 65535 bytes of UTF-8, ProducerID ≤ 255 bytes, Key ≤
// MaxKeyLen bytes, and b.AckMode 1 or 2 when b.Acked; otherwise it returns dst unchanged
// and ErrTooLong or ErrMalformed. Allocates nothing beyond the growth of dst.
func AppendPublishBatch(dst []byte, b *PublishBatch) ([]byte, error) {
	if err := checkNames(b.TenantID, b.Namespace, b.Stream); err != nil {
		return dst, err
	}
	if b.Acked && b.AckMode != AckPerMessage && b.AckMode != AckPerBatch {
		return dst, ErrMalformed
	}
	if b.Acked && b.ProducerID != nil && (len(b.ProducerID) == 0 || len(b.ProducerID) > 255) {
		return dst, ErrTooLong
	}
	if len(b.Key) > MaxKeyLen {
		return dst, ErrTooLong
	}
	out, start := beginFrame(dst, b.Flags())
	if b.Acked {
		out = appendU64(out, b.RequestID)
		out = append(out, byte(b.AckMode))
		if b.ProducerID != nil {
			out = append(out, byte(len(b.ProducerID)))
			out = append(out, b.ProducerID...)
		}
	}
	if len(b.Key) > 0 {
		out = appendU16(out, uint16(len(b.Key)))
		out = append(out, b.Key...)
	}
	out = appendStr16(out, b.TenantID)
	out = appendStr16(out, b.Namespace)
	out = appendStr16(out, b.Stream)
	out = appendPayloads(out, b.Payloads)
	return endFrame(out, start), nil
}

func checkNames(names ...[]byte) error {
	for _, n := range names {
		if len(n) > 0xFFFF {
			return ErrTooLong
		}
		if !utf8.Valid(n) {
			return ErrInvalidUTF8
		}
	}
	return nil
}

// AckStatus is the u8 status of a binary publish ack (§5.3).
type AckStatus uint8

// Ack statuses on the wire; other values are invalid.
const (
	AckStatusOK    AckStatus = 0
	AckStatusError AckStatus = 1
)

// PublishAck is a decoded binary publish ack (flags 0x0010, §5.3). Message is a sub-slice
// of the body (empty when OK). With error codes negotiated the text is "<code>: <detail>"
// (§8.7); SplitErrorText separates it.
type PublishAck struct {
	Status    AckStatus
	RequestID uint64
	Message   []byte
}

// PublishAckMinSize is the smallest valid publish ack body.
const PublishAckMinSize = 11

// DecodePublishAck decodes a §5.3 body into dst. A status other than 0/1, or a non-empty
// message on an OK ack, is ErrMalformed; the message must be valid UTF-8.
func DecodePublishAck(body []byte, dst *PublishAck) error {
	c := cursor{b: body}
	st, err := c.u8("status")
	if err != nil {
		return err
	}
	if AckStatus(st) != AckStatusOK && AckStatus(st) != AckStatusError {
		return decodeErr("status", 0, ErrMalformed)
	}
	if dst.RequestID, err = c.u64("request_id"); err != nil {
		return err
	}
	if dst.Message, err = c.str16("message"); err != nil {
		return err
	}
	if AckStatus(st) == AckStatusOK && len(dst.Message) != 0 {
		return decodeErr("message", 9, ErrMalformed)
	}
	dst.Status = AckStatus(st)
	return c.end("message")
}

// AppendPublishAckOK appends a whole ok-ack frame (flags 0x0010) for requestID.
func AppendPublishAckOK(dst []byte, requestID uint64) []byte {
	out, start := beginFrame(dst, FlagBinaryPublishAck)
	out = append(out, byte(AckStatusOK))
	out = appendU64(out, requestID)
	out = appendU16(out, 0)
	return endFrame(out, start)
}

// AppendPublishAckError appends a whole error-ack frame (flags 0x0010) carrying message.
// Invalid UTF-8 in message becomes U+FFFD; a message longer than 65535 bytes is cut at the
// last UTF-8 boundary that fits.
func AppendPublishAckError(dst []byte, requestID uint64, message string) []byte {
	if !utf8.ValidString(message) {
		message = strings.ToValidUTF8(message, "\uFFFD")
	}
	message = truncateUTF8(message, 0xFFFF)
	out, start := beginFrame(dst, FlagBinaryPublishAck)
	out = append(out, byte(AckStatusError))
	out = appendU64(out, requestID)
	out = appendStr16(out, message)
	return endFrame(out, start)
}

func truncateUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// DecodePublish decodes any binary publish body by its header flags: 0x0001, 0x0009 or
// 0x2009, each optionally with the routing-key modifier 0x4000 (spec/client-protocol.md
// §5.1, §5.2, §8.10; docs/client-protocol.md D15). Other flags are ErrFlagCombination (or
// ErrUnknownFlags). Same reuse and zero-copy rules as DecodePublishBatch; dst.Key is a
// sub-slice of body too. For acked layouts dst.RequestID is set once the prefix decoded.
func DecodePublish(flags uint16, body []byte, dst *PublishBatch) error {
	layout, err := ClassifyFlags(flags)
	if err != nil {
		return err
	}
	switch layout {
	case LayoutPublishBatch:
		return decodeUnacked(body, flags&FlagPublishKeyed != 0, dst)
	case LayoutAckedPublishBatch:
		return decodeAcked(body, flags&FlagPublishIdempotent != 0, flags&FlagPublishKeyed != 0, dst)
	}
	return decodeErr("flags", 6, ErrFlagCombination)
}
