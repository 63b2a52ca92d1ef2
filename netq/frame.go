package netq

import (
	"errors"
	"fmt"
	"io"

	"felix/proto"
)

// FrameReader reads FLX1 frames from one QUIC stream in two steps, so the caller can
// charge a frame's declared length to a ByteBudget before any body byte is allocated or
// read (spec/client-protocol.md §1: the length is enforced before reading the payload).
// Not safe for concurrent use; one reader goroutine per stream.
type FrameReader struct {
	r        io.Reader
	maxFrame uint32
	hdr      [proto.HeaderSize]byte
}

// NewFrameReader reads from r with the FELIX_MAX_FRAME_BYTES bound maxFrame.
func NewFrameReader(r io.Reader, maxFrame uint32) *FrameReader {
	return &FrameReader{r: r, maxFrame: maxFrame}
}

// ReadHeader reads and checks the next 12-byte header (proto.DecodeHeader: magic, version,
// unknown flag bits, length > maxFrame). A clean end of stream before the first byte is
// io.EOF; one inside the header is a *proto.DecodeError wrapping proto.ErrIncomplete;
// transport errors are returned as they are.
func (fr *FrameReader) ReadHeader() (proto.Header, error) {
	n, err := io.ReadFull(fr.r, fr.hdr[:])
	if err != nil {
		if errors.Is(err, io.EOF) && n == 0 {
			return proto.Header{}, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return proto.Header{}, &proto.DecodeError{Field: "header", Offset: n, Err: proto.ErrIncomplete}
		}
		return proto.Header{}, err
	}
	return proto.DecodeHeader(fr.hdr[:], fr.maxFrame)
}

// ReadBody reads the h.Length body bytes into buf (grown only when its capacity is short)
// and returns the filled slice. A stream ending early gives a *proto.DecodeError wrapping
// proto.ErrIncomplete.
func (fr *FrameReader) ReadBody(h proto.Header, buf []byte) ([]byte, error) {
	if uint32(cap(buf)) < h.Length {
		buf = make([]byte, h.Length)
	}
	body := buf[:h.Length]
	if n, err := io.ReadFull(fr.r, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, &proto.DecodeError{Field: "body", Offset: proto.HeaderSize + n, Err: proto.ErrIncomplete}
		}
		return nil, fmt.Errorf("netq: read frame body: %w", err)
	}
	return body, nil
}
