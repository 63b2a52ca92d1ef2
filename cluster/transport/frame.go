package transport

// Frame reading and writing on one QUIC stream, through proto's FLXI codec.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"felix/proto"
)

// frames recycles request encode buffers up to 1 MiB: a quic-go Stream.Write does not retain
// its argument (io.Writer), so a frame is free again once written.
var frames = sync.Pool{New: func() any { return new([]byte) }}

func getFrame() *[]byte { return frames.Get().(*[]byte) }

func putFrame(b *[]byte, frame []byte) {
	if cap(frame) <= 1<<20 {
		*b = frame[:0]
		frames.Put(b)
	}
}

// DefaultMaxFrameBytes bounds an internal frame body when Options leave it 0 (16 MiB).
const DefaultMaxFrameBytes = 16 << 20

// MinMaxFrameBytes is the smallest accepted frame bound (a Hello with a 253-byte node id fits many times).
const MinMaxFrameBytes = 1024

// readMessage reads one frame and decodes it. buf is reused for the body when it fits (pass
// nil when the message outlives the next read). A clean end of stream is io.EOF; a header
// problem is a *FrameError with Fatal; a body that does not decode is a *FrameError without
// Fatal, with corr/ok telling whether a correlation id could be read to answer it.
func readMessage(r io.Reader, buf []byte, maxFrame uint32, peer string) (m proto.InternalMessage, body []byte, corr uint64, ok bool, err error) {
	h, body, err := proto.ReadInternalFrame(r, buf, maxFrame)
	if err != nil {
		var fatal *proto.FatalError
		if errors.As(err, &fatal) {
			return nil, nil, 0, false, &FrameError{Peer: peer, Fatal: true, Err: err}
		}
		return nil, nil, 0, false, err // io.EOF, a truncated frame, or a stream error
	}
	m, err = proto.DecodeInternal(h.Kind, body)
	if err != nil {
		if len(body) >= 8 {
			corr, ok = binary.BigEndian.Uint64(body), true
		}
		return nil, body, corr, ok, &FrameError{Peer: peer, Kind: h.Kind, Err: err}
	}
	return m, body, m.Correlation(), true, nil
}

// encode appends the frame of m to dst[:0], refusing a body over maxFrame with an error
// wrapping proto.ErrFrameTooLarge (nothing is sent).
func encode(dst []byte, m proto.InternalMessage, maxFrame uint32) ([]byte, error) {
	out, err := proto.AppendInternalFrame(dst[:0], m)
	if err != nil {
		return nil, fmt.Errorf("transport: encode %v: %w", m.Kind(), err)
	}
	if n := len(out) - proto.InternalHeaderSize; n > int(maxFrame) {
		return nil, fmt.Errorf("transport: %v body of %d bytes over the %d-byte bound: %w", m.Kind(), n, maxFrame, proto.ErrFrameTooLarge)
	}
	return out, nil
}

// setCorrelation overwrites the correlation id of an encoded frame: the first 8 body bytes
// (every body begins with it, docs/internal-protocol.md §1).
func setCorrelation(frame []byte, corr uint64) {
	binary.BigEndian.PutUint64(frame[proto.InternalHeaderSize:], corr)
}
