package proto

import (
	"encoding/binary"
	"unicode/utf8"
)

// cursor reads big-endian fields from a body, failing with a *DecodeError naming the field
// and its offset. It never allocates on success.
type cursor struct {
	b   []byte
	off int
}

func (c *cursor) remaining() int { return len(c.b) - c.off }

func (c *cursor) need(field string, n int) error {
	if n < 0 || c.remaining() < n {
		return decodeErr(field, c.off, ErrIncomplete)
	}
	return nil
}

func (c *cursor) u8(field string) (uint8, error) {
	if err := c.need(field, 1); err != nil {
		return 0, err
	}
	v := c.b[c.off]
	c.off++
	return v, nil
}

func (c *cursor) u16(field string) (uint16, error) {
	if err := c.need(field, 2); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint16(c.b[c.off:])
	c.off += 2
	return v, nil
}

func (c *cursor) u32(field string) (uint32, error) {
	if err := c.need(field, 4); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint32(c.b[c.off:])
	c.off += 4
	return v, nil
}

func (c *cursor) u64(field string) (uint64, error) {
	if err := c.need(field, 8); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint64(c.b[c.off:])
	c.off += 8
	return v, nil
}

// bytes returns the next n bytes as a sub-slice (capacity clipped so appends cannot
// overwrite the following field).
func (c *cursor) bytes(field string, n int) ([]byte, error) {
	if err := c.need(field, n); err != nil {
		return nil, err
	}
	v := c.b[c.off : c.off+n : c.off+n]
	c.off += n
	return v, nil
}

// str16 reads a u16 length then that many bytes of valid UTF-8.
func (c *cursor) str16(field string) ([]byte, error) {
	start := c.off
	n, err := c.u16(field)
	if err != nil {
		return nil, err
	}
	return c.utf8Bytes(field, start, int(n))
}

// str8 reads a u8 length then that many bytes of valid UTF-8.
func (c *cursor) str8(field string) ([]byte, error) {
	start := c.off
	n, err := c.u8(field)
	if err != nil {
		return nil, err
	}
	return c.utf8Bytes(field, start, int(n))
}

// utf8Bytes reads n bytes that must be valid UTF-8; an invalid string is
// reported at start, where its length prefix began.
func (c *cursor) utf8Bytes(field string, start, n int) ([]byte, error) {
	v, err := c.bytes(field, n)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(v) {
		return nil, decodeErr(field, start, ErrInvalidUTF8)
	}
	return v, nil
}

// bytes32 reads a u32 length then that many bytes.
func (c *cursor) bytes32(field string) ([]byte, error) {
	n, err := c.u32(field)
	if err != nil {
		return nil, err
	}
	return c.bytes(field, int(n))
}

// count reads a u32 element count and checks count <= remaining/minSize before anything is
// allocated (spec/client-protocol.md §5).
func (c *cursor) count(field string, minSize int) (int, error) {
	start := c.off
	n, err := c.u32(field)
	if err != nil {
		return 0, err
	}
	if uint64(n) > uint64(c.remaining()/minSize) {
		return 0, decodeErr(field, start, ErrMalformed)
	}
	return int(n), nil
}

// payloads reads a u32 count then count × (u32 len, bytes) into dst[:0], reusing its capacity.
func (c *cursor) payloads(field string, dst [][]byte) ([][]byte, error) {
	n, err := c.count("count", 4)
	if err != nil {
		return dst[:0], err
	}
	dst = dst[:0]
	if cap(dst) < n {
		dst = make([][]byte, 0, n)
	}
	for i := 0; i < n; i++ {
		p, err := c.bytes32(field)
		if err != nil {
			return dst, err
		}
		dst = append(dst, p)
	}
	return dst, nil
}

// end fails with ErrTrailingBytes when bytes remain.
func (c *cursor) end(field string) error {
	if c.remaining() != 0 {
		return decodeErr(field, c.off, ErrTrailingBytes)
	}
	return nil
}

func appendU16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }
func appendU32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }
func appendU64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// appendStr16 appends a u16-length-prefixed string; the caller has checked len <= 65535.
func appendStr16[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = appendU16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendPayloads(dst []byte, payloads [][]byte) []byte {
	dst = appendU32(dst, uint32(len(payloads)))
	for _, p := range payloads {
		dst = appendU32(dst, uint32(len(p)))
		dst = append(dst, p...)
	}
	return dst
}
