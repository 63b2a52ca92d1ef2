package proto

import (
	"encoding/binary"
	"io"
)

// FLXI header constants (seeds/internal-protocol.txt, Framing).
const (
	// InternalMagic is "FLXI" as a big-endian u32.
	InternalMagic uint32 = 0x464C5849
	// InternalVersion is INTERNAL_VERSION; a peer with another version is refused (hard cutover).
	InternalVersion uint16 = 1
	// InternalHeaderSize is the size of the FLXI header in bytes.
	InternalHeaderSize = 12
)

// InternalHeader is a decoded FLXI header: magic u32, version u16, kind u16, length u32.
type InternalHeader struct {
	Kind   Kind
	Length uint32
}

// FatalError is a frame that is not ours: wrong magic, unknown version, or a length over the
// bound. Nothing can be stepped over, so the connection must close
// (seeds/internal-protocol.txt, Framing). Unwrap gives the *DecodeError (and through it
// ErrInvalidMagic, ErrUnsupportedVersion or ErrFrameTooLarge).
type FatalError struct {
	Err *DecodeError
}

// Error describes the fatal cause.
func (e *FatalError) Error() string { return "fatal internal frame: " + e.Err.Error() }

// Unwrap returns the underlying *DecodeError.
func (e *FatalError) Unwrap() error { return e.Err }

func fatalErr(field string, off int, err error) error {
	return &FatalError{Err: &DecodeError{Field: field, Offset: off, Err: err}}
}

// DecodeInternalHeader decodes the 12-byte FLXI header at the start of b. Fewer than 12
// bytes is a *DecodeError wrapping ErrIncomplete (read more); wrong magic, version ≠ 1, or
// length > maxFrame is a *FatalError. Any kind value is accepted here: an unknown kind is
// stepped over by the caller (DecodeInternal returns *Unknown for it).
func DecodeInternalHeader(b []byte, maxFrame uint32) (InternalHeader, error) {
	if len(b) < InternalHeaderSize {
		return InternalHeader{}, decodeErr("header", len(b), ErrIncomplete)
	}
	if binary.BigEndian.Uint32(b) != InternalMagic {
		return InternalHeader{}, fatalErr("magic", 0, ErrInvalidMagic)
	}
	if binary.BigEndian.Uint16(b[4:]) != InternalVersion {
		return InternalHeader{}, fatalErr("version", 4, ErrUnsupportedVersion)
	}
	h := InternalHeader{Kind: Kind(binary.BigEndian.Uint16(b[6:])), Length: binary.BigEndian.Uint32(b[8:])}
	if h.Length > maxFrame {
		return InternalHeader{}, fatalErr("length", 8, ErrFrameTooLarge)
	}
	return h, nil
}

// AppendInternalHeader appends a 12-byte FLXI header.
func AppendInternalHeader(dst []byte, kind Kind, length uint32) []byte {
	dst = appendU32(dst, InternalMagic)
	dst = appendU16(dst, InternalVersion)
	dst = appendU16(dst, uint16(kind))
	return appendU32(dst, length)
}

// AppendInternalFrame appends a whole FLXI frame (header + body) for m. On error (a string
// or credential longer than its prefix allows, an invalid enum) dst is returned unchanged.
func AppendInternalFrame(dst []byte, m InternalMessage) ([]byte, error) {
	out := AppendInternalHeader(dst, m.Kind(), 0)
	start := len(out)
	out, err := m.AppendBody(out)
	if err != nil {
		return dst, err
	}
	return endFrame(out, start), nil
}

// ReadInternalFrame reads one FLXI frame from r, like ReadFrame: the body goes into buf when
// it fits (keep body[:0] for the next call), the length is bounded by maxFrame before
// reading, a clean end of stream is io.EOF, a header problem is a *FatalError.
func ReadInternalFrame(r io.Reader, buf []byte, maxFrame uint32) (InternalHeader, []byte, error) {
	var hb [InternalHeaderSize]byte
	if err := readFrameHeader(r, hb[:]); err != nil {
		return InternalHeader{}, nil, err
	}
	h, err := DecodeInternalHeader(hb[:], maxFrame)
	if err != nil {
		return InternalHeader{}, nil, err
	}
	body, err := readFrameBody(r, buf, h.Length, InternalHeaderSize)
	if err != nil {
		return InternalHeader{}, nil, err
	}
	return h, body, nil
}
