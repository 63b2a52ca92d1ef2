package proto

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleGroupRecords() *GroupRecords {
	return &GroupRecords{RequestID: 1<<63 + 5, Group: "workers", Shard: 7, Records: []GroupRecord{
		{Offset: 0, Delivery: 1, Payload: []byte("first")},
		{Offset: 1<<64 - 1, Delivery: 1<<32 - 1, Publisher: "svc-a", Payload: []byte{}},
		{Offset: 42, Delivery: 3, Payload: bytes.Repeat([]byte{0, 0xFF}, 300)},
	}}
}

// A binary group_records frame decodes to what was encoded; its header passes
// DecodeHeader with flags 0x8000; the payloads do not alias the frame.
func TestGroupRecordsFrameRoundTrip(t *testing.T) {
	in := sampleGroupRecords()
	frame := AppendGroupRecordsFrame([]byte("prefix"), in)[len("prefix"):]
	hdr, err := DecodeHeader(frame, DefaultMaxFrameBytes)
	if err != nil || hdr.Flags != FlagBinaryGroupRecords || int(hdr.Length) != len(frame)-HeaderSize {
		t.Fatalf("header %+v, %v", hdr, err)
	}
	var out GroupRecords
	if err := DecodeGroupRecords(frame[HeaderSize:], &out); err != nil {
		t.Fatal(err)
	}
	in.Records[1].Payload = nil
	out.Records[1].Payload = nil
	if !reflect.DeepEqual(&out, in) {
		t.Fatalf("got %+v\nwant %+v", out, *in)
	}
	frame[len(frame)-1] ^= 0xFF
	if out.Records[2].Payload[len(out.Records[2].Payload)-1] != 0xFF {
		t.Fatal("a payload aliases the frame")
	}
	empty := AppendGroupRecordsFrame(nil, &GroupRecords{RequestID: 9, Group: "g"})
	if err := DecodeGroupRecords(empty[HeaderSize:], &out); err != nil || len(out.Records) != 0 || out.RequestID != 9 {
		t.Fatalf("empty answer: %+v, %v", out, err)
	}
	long := AppendGroupRecordsFrame(nil, &GroupRecords{Group: strings.Repeat("é", 200)})
	if err := DecodeGroupRecords(long[HeaderSize:], &out); err != nil || len(out.Group) != 254 {
		t.Fatalf("a group over 255 bytes is cut on a rune boundary: %d bytes, %v", len(out.Group), err)
	}
}

// Every truncation and a count the body cannot hold are typed errors, never a panic;
// trailing bytes and invalid UTF-8 are refused.
func TestGroupRecordsFrameRefusesBadBodies(t *testing.T) {
	body := AppendGroupRecordsFrame(nil, sampleGroupRecords())[HeaderSize:]
	var out GroupRecords
	for n := range len(body) {
		err := DecodeGroupRecords(body[:n], &out)
		if !errors.Is(err, ErrIncomplete) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("cut at %d: %v", n, err)
		}
		if _, ok := errors.AsType[*DecodeError](err); !ok {
			t.Fatalf("cut at %d: not a *DecodeError: %v", n, err)
		}
	}
	if err := DecodeGroupRecords(append(bytes.Clone(body), 0), &out); !errors.Is(err, ErrTrailingBytes) {
		t.Fatalf("trailing byte: %v", err)
	}
	huge := bytes.Clone(body)
	copy(huge[8+4+1+len("workers"):], []byte{0xFF, 0xFF, 0xFF, 0xFF})
	if err := DecodeGroupRecords(huge, &out); !errors.Is(err, ErrMalformed) {
		t.Fatalf("count 2^32-1: %v", err)
	}
	bad := bytes.Clone(body)
	bad[8+4+1] = 0xFF // the group name's first byte
	if err := DecodeGroupRecords(bad, &out); !errors.Is(err, ErrInvalidUTF8) {
		t.Fatalf("invalid UTF-8 group: %v", err)
	}
}

// group_poll's binary_records is written only when true and read back; a poll without
// it (an older client) decodes with BinaryRecords false.
func TestGroupPollBinaryRecordsField(t *testing.T) {
	m := &GroupPoll{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", MaxRecords: 1, RequestID: 3}
	if body := string(m.AppendJSON(nil)); strings.Contains(body, "binary_records") {
		t.Fatalf("false written out: %s", body)
	}
	m.BinaryRecords = true
	got, err := DecodeMessage(m.AppendJSON(nil))
	if err != nil || !got.(*GroupPoll).BinaryRecords {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	m.BinaryRecords = false
	if got, err := DecodeMessage(m.AppendJSON(nil)); err != nil || got.(*GroupPoll).BinaryRecords {
		t.Fatalf("decoded %+v, %v", got, err)
	}
}

func FuzzDecodeGroupRecords(f *testing.F) {
	f.Add(AppendGroupRecordsFrame(nil, sampleGroupRecords())[HeaderSize:])
	f.Fuzz(func(t *testing.T, body []byte) {
		var out GroupRecords
		if err := DecodeGroupRecords(body, &out); err != nil {
			return
		}
		again := AppendGroupRecordsFrame(nil, &out)[HeaderSize:]
		if !bytes.Equal(again, body) {
			t.Fatalf("re-encoding differs")
		}
	})
}
