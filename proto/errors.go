package proto

import (
	"errors"
	"strconv"
)

// Sentinel causes carried by *DecodeError. Test with errors.Is.
var (
	// ErrIncomplete: fewer bytes than the layout needs (spec/client-protocol.md §2, §5).
	ErrIncomplete = errors.New("incomplete")
	// ErrInvalidMagic: the first 4 bytes are not the expected magic (FLX1 or FLXI).
	ErrInvalidMagic = errors.New("invalid magic")
	// ErrUnsupportedVersion: the header version is not 1.
	ErrUnsupportedVersion = errors.New("unsupported version")
	// ErrUnknownFlags: an FLX1 flag bit this build does not know; never masked (§3).
	ErrUnknownFlags = errors.New("unknown flag bits")
	// ErrFlagCombination: known bits in a combination no layout defines (e.g. 0x0020 alone).
	ErrFlagCombination = errors.New("invalid flag combination")
	// ErrFrameTooLarge: the declared length exceeds the maximum frame size (§1).
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrMalformed: bytes that are present but do not form a valid value.
	ErrMalformed = errors.New("malformed")
	// ErrInvalidUTF8: a string field is not valid UTF-8.
	ErrInvalidUTF8 = errors.New("invalid utf-8")
	// ErrTrailingBytes: a body carries bytes after its last field (e.g. an authorized
	// forward relabelled as a legacy one; seeds/internal-protocol.txt).
	ErrTrailingBytes = errors.New("trailing bytes")
	// ErrTooLong: an encoder was given a value longer than its length prefix can express.
	ErrTooLong = errors.New("value too long for its length prefix")
)

// DecodeError names the field that failed and the byte offset where it starts, relative to
// the start of the slice the decoder was given (the frame for header decoders, the body for
// body decoders). Err is one of the sentinels above.
type DecodeError struct {
	Field  string
	Offset int
	Err    error
}

// Error formats as "proto: <field> at byte <offset>: <cause>".
func (e *DecodeError) Error() string {
	return "proto: " + e.Field + " at byte " + strconv.Itoa(e.Offset) + ": " + e.Err.Error()
}

// Unwrap returns the sentinel cause.
func (e *DecodeError) Unwrap() error { return e.Err }

func decodeErr(field string, off int, err error) error {
	return &DecodeError{Field: field, Offset: off, Err: err}
}
