package netq

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"felix/proto"
)

func TestFrameReaderTwoSteps(t *testing.T) {
	var stream []byte
	stream = proto.AppendMessage(stream, &proto.OK{})
	stream = proto.AppendHeader(stream, proto.FlagBinaryPublishBatch, 3)
	stream = append(stream, 1, 2, 3)
	fr := NewFrameReader(bytes.NewReader(stream), 1024)
	buf := make([]byte, 0, 64)
	h, err := fr.ReadHeader()
	if err != nil || h.Flags != 0 {
		t.Fatalf("first header %+v %v", h, err)
	}
	body, err := fr.ReadBody(h, buf)
	if err != nil || string(body) != `{"type":"ok"}` {
		t.Fatalf("first body %q %v", body, err)
	}
	h, _ = fr.ReadHeader()
	body, err = fr.ReadBody(h, buf)
	if err != nil || !bytes.Equal(body, []byte{1, 2, 3}) || &body[0] != &buf[:1][0] {
		t.Fatalf("second body %v %v (must reuse buf)", body, err)
	}
	if _, err := fr.ReadHeader(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestFrameReaderRejectsBeforeReading(t *testing.T) {
	cases := map[string]struct {
		frame []byte
		want  error
	}{
		"oversize":     {proto.AppendHeader(nil, 0, 1<<20), proto.ErrFrameTooLarge},
		"unknown flag": {proto.AppendHeader(nil, 0x0040, 0), proto.ErrUnknownFlags},
		"bad magic":    {[]byte("HTTP/1.1 200"), proto.ErrInvalidMagic},
		"short header": {[]byte{0x46, 0x4c}, proto.ErrIncomplete},
	}
	for name, c := range cases {
		_, err := NewFrameReader(bytes.NewReader(c.frame), 1024).ReadHeader()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	fr := NewFrameReader(bytes.NewReader(append(proto.AppendHeader(nil, 0, 10), 'x')), 1024)
	h, _ := fr.ReadHeader()
	if _, err := fr.ReadBody(h, nil); !errors.Is(err, proto.ErrIncomplete) {
		t.Errorf("truncated body: %v", err)
	}
}

func FuzzFrameReader(f *testing.F) {
	f.Add(proto.AppendMessage(nil, &proto.OK{}))
	f.Add(append(proto.AppendHeader(nil, proto.FlagBinaryPublishBatch, 2), 9, 9))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := NewFrameReader(bytes.NewReader(data), 4096)
		var buf []byte
		for i := 0; i < 64; i++ {
			h, err := fr.ReadHeader()
			if err != nil {
				return
			}
			if h.Length > 4096 {
				t.Fatalf("length %d passed the bound", h.Length)
			}
			body, err := fr.ReadBody(h, buf)
			if err != nil {
				return
			}
			buf = body[:0]
		}
	})
}
