package transport

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"felix/proto"
)

// FuzzReadMessage feeds peer-provided bytes to the frame reader the listener and the dialler
// use, frame after frame as on a stream: it never panics, every error is io.EOF, a truncated
// frame or a typed *FrameError, and no body is allocated past the frame bound.
func FuzzReadMessage(f *testing.F) {
	for _, m := range []proto.InternalMessage{
		&proto.Hello{CorrelationID: 1, NodeID: []byte("node-a")},
		&proto.HelloOk{CorrelationID: 1, NodeID: []byte("node-b")},
		publish(3),
		&proto.ForwardPublishOk{CorrelationID: 4, FirstOffset: 1, LastOffset: 2},
		&proto.UnsupportedKind{CorrelationID: 5, RefusedKind: 999},
		&proto.InternalError{CorrelationID: 6, Code: proto.InternalMalformed},
	} {
		frame, err := proto.AppendInternalFrame(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame)
		f.Add(append(frame, frame...))
		f.Add(frame[:len(frame)-1])
	}
	f.Add([]byte{'F', 'L', 'X', 'I', 0, 2, 0, 3, 0, 0, 0, 8})
	f.Add([]byte{'F', 'L', 'X', 'I', 0, 1, 0, 3, 0xff, 0xff, 0xff, 0xff})
	f.Add(append(proto.AppendInternalHeader(nil, proto.KindAuthorizedForwardPublish, 11), 0, 0, 0, 0, 0, 0, 0, 42, 0, 9, 'x'))
	const bound = 4096
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf []byte
		for i := 0; ; i++ {
			m, body, corr, ok, err := readMessage(r, buf, bound, "fuzz")
			if cap(body) > bound {
				t.Fatalf("body of capacity %d past the %d-byte bound", cap(body), bound)
			}
			if err == nil {
				if m == nil || m.Correlation() != corr || !ok {
					t.Fatalf("decoded %#v with corr %d ok %v", m, corr, ok)
				}
				buf = body[:0]
				continue
			}
			var fe *FrameError
			switch {
			case errors.As(err, &fe):
				if fe.Fatal && !errors.Is(err, proto.ErrUnsupportedVersion) && CloseCode(err) != CodeMalformed {
					t.Fatalf("fatal frame error with close code %v: %v", CloseCode(err), err)
				}
				if !fe.Fatal && ok && len(body) < 8 {
					t.Fatalf("correlation id read from a %d-byte body", len(body))
				}
				return // fatal: the connection closes; else the stream is refused and closed
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, proto.ErrIncomplete):
				// end of stream, or a frame cut short (the stream is reset)
				return
			default:
				t.Fatalf("frame %d: untyped error %T %v", i, err, err)
			}
		}
	})
}
