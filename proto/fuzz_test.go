package proto

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vectorFrames returns the frames of the felix-wire vectors when present (fuzz seeds only;
// the conformance test enforces their presence under CI).
func vectorFrames(f *testing.F) [][]byte {
	wd, _ := os.Getwd()
	v, err := findVectors(wd)
	if err != nil {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(v, "felix-wire", "*.hex"))
	var out [][]byte
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if b, err := hex.DecodeString(strings.TrimSpace(string(raw))); err == nil {
			out = append(out, b)
		}
	}
	return out
}

func FuzzDecodeHeader(f *testing.F) {
	for _, fr := range vectorFrames(f) {
		f.Add(fr)
	}
	f.Add(AppendHeader(nil, 0x0824, 20))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b, DefaultMaxFrameBytes)
		if err != nil {
			return
		}
		if h.Flags&^KnownFlags != 0 || h.Length > DefaultMaxFrameBytes {
			t.Fatalf("accepted %+v", h)
		}
		if again := AppendHeader(nil, h.Flags, h.Length); !bytes.Equal(again, b[:HeaderSize]) {
			t.Fatalf("header round trip %x vs %x", again, b[:HeaderSize])
		}
		_, _, _ = ReadFrame(bytes.NewReader(b), nil, DefaultMaxFrameBytes)
	})
}

func FuzzDecodeMessage(f *testing.F) {
	for _, fr := range vectorFrames(f) {
		if binary.BigEndian.Uint16(fr[6:]) == 0 {
			f.Add(fr[HeaderSize:])
		}
	}
	for _, m := range sampleMessages() {
		f.Add(m.AppendJSON(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		enc := m.AppendJSON(nil)
		m2, err := DecodeMessage(enc)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v\n%s", err, enc)
		}
		if enc2 := m2.AppendJSON(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable\n%s\n%s", enc, enc2)
		}
	})
}

func FuzzDecodePublishBatch(f *testing.F) {
	for _, fr := range vectorFrames(f) {
		if binary.BigEndian.Uint16(fr[6:])&FlagBinaryPublishBatch != 0 {
			f.Add(uint16(binary.BigEndian.Uint16(fr[6:])), fr[HeaderSize:])
		}
	}
	seed := PublishBatch{TenantID: []byte("t"), Namespace: []byte("n"), Stream: []byte("s"), Payloads: [][]byte{[]byte("ab"), {}}}
	fr, _ := AppendPublishBatch(nil, &seed)
	f.Add(FlagBinaryPublishBatch, fr[HeaderSize:])
	seed.Acked, seed.RequestID, seed.AckMode, seed.ProducerID = true, 3, AckPerBatch, []byte("p")
	fr, _ = AppendPublishBatch(nil, &seed)
	f.Add(uint16(0x2009), fr[HeaderSize:])
	seed.Key = []byte("order-42")
	fr, _ = AppendPublishBatch(nil, &seed)
	f.Add(uint16(0x6009), fr[HeaderSize:])
	seed.ProducerID = nil
	fr, _ = AppendPublishBatch(nil, &seed)
	f.Add(uint16(0x4009), fr[HeaderSize:])
	seed.Acked = false
	fr, _ = AppendPublishBatch(nil, &seed)
	f.Add(uint16(0x4001), fr[HeaderSize:])
	var dst PublishBatch
	f.Fuzz(func(t *testing.T, flags uint16, b []byte) {
		var err error
		switch flags {
		case 0x0001:
			err = DecodePublishBatch(b, &dst)
		case 0x0009, 0x2009:
			err = DecodeAckedPublishBatch(b, flags == 0x2009, &dst)
		case 0x4001, 0x4009, 0x6009:
			err = DecodePublish(flags, b, &dst)
		default:
			_, _ = DecodeAckedPrefix(b)
			if DecodePublish(flags, b, &dst) == nil {
				t.Fatalf("DecodePublish accepted flags %#x", flags)
			}
			return
		}
		if err != nil {
			return
		}
		enc, err := AppendPublishBatch(nil, &dst)
		if err != nil || !bytes.Equal(enc[HeaderSize:], b) || binary.BigEndian.Uint16(enc[6:]) != flags {
			t.Fatalf("round trip: %v\n%x\n%x", err, enc, b)
		}
	})
}

func FuzzDecodePublishAck(f *testing.F) {
	f.Add(AppendPublishAckOK(nil, 1)[HeaderSize:])
	f.Add(AppendPublishAckError(nil, 2, "overloaded: busy")[HeaderSize:])
	var a PublishAck
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := DecodePublishAck(b, &a); err != nil {
			return
		}
		var enc []byte
		if a.Status == AckStatusOK {
			enc = AppendPublishAckOK(nil, a.RequestID)
		} else {
			enc = AppendPublishAckError(nil, a.RequestID, string(a.Message))
		}
		if !bytes.Equal(enc[HeaderSize:], b) {
			t.Fatalf("round trip %x vs %x", enc, b)
		}
	})
}

func FuzzDecodeEventBatch(f *testing.F) {
	p := [][]byte{[]byte("a"), []byte("bc")}
	for _, e := range []EventBatch{
		{Shared: true, Payloads: p},
		{Shared: true, WithOffsets: true, BaseOffset: 5, SkippedBefore: 2, Payloads: p},
		{SubscriptionID: 7, WithOffsets: true, BaseOffset: 5, Payloads: p},
		{SubscriptionID: 7, WithPublishers: true, Publishers: [][]byte{[]byte("x"), {}}, Payloads: p},
	} {
		fr, _ := AppendEventBatch(nil, &e)
		f.Add(e.Flags(), fr[HeaderSize:])
	}
	var dst EventBatch
	f.Fuzz(func(t *testing.T, flags uint16, b []byte) {
		if err := DecodeEventBatch(flags, b, &dst); err != nil {
			return
		}
		enc, err := AppendEventBatch(nil, &dst)
		if err != nil || !bytes.Equal(enc[HeaderSize:], b) || binary.BigEndian.Uint16(enc[6:]) != flags {
			t.Fatalf("round trip: %v\n%x\n%x", err, enc, b)
		}
	})
}

func FuzzDecodeInternalHeader(f *testing.F) {
	f.Add(AppendInternalHeader(nil, KindReplicateRecords, 40))
	f.Add(AppendHeader(nil, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeInternalHeader(b, DefaultMaxFrameBytes)
		if err != nil {
			return
		}
		if again := AppendInternalHeader(nil, h.Kind, h.Length); !bytes.Equal(again, b[:InternalHeaderSize]) {
			t.Fatalf("header round trip %x vs %x", again, b[:InternalHeaderSize])
		}
		_, _, _ = ReadInternalFrame(bytes.NewReader(b), nil, DefaultMaxFrameBytes)
	})
}

func FuzzDecodeInternal(f *testing.F) {
	for k, m := range sampleInternal() {
		body, _ := m.AppendBody(nil)
		f.Add(uint16(k), body)
	}
	f.Fuzz(func(t *testing.T, kind uint16, b []byte) {
		if v, err := DecodeCounterValue(b); err == nil && !bytes.Equal(AppendCounterValue(nil, v), b) {
			t.Fatalf("counter value round trip %x", b)
		}
		m, err := DecodeInternal(Kind(kind), b)
		if err != nil {
			return
		}
		if m.Kind() != Kind(kind) || binary.BigEndian.Uint64(b) != m.Correlation() {
			t.Fatalf("kind %d / correlation mismatch: %+v", kind, m)
		}
		enc, err := m.AppendBody(nil)
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		if r, ok := m.(*ReplicateRecords); ok && !r.ChecksumOK() {
			return // the encoder always writes the true checksum
		}
		if !bytes.Equal(enc, b) {
			t.Fatalf("round trip kind %d\n%x\n%x", kind, enc, b)
		}
	})
}

func FuzzDecodeReplicateRecords(f *testing.F) {
	m := &ReplicateRecords{Log: LogCounters, CorrelationID: 1, Shard: sampleShard(), Epoch: 2, FirstOffset: 3, Payloads: [][]byte{[]byte("x")}}
	body, _ := m.AppendBody(nil)
	f.Add(uint16(KindReplicateCounterRecords), body)
	var dst ReplicateRecords
	f.Fuzz(func(t *testing.T, kind uint16, b []byte) {
		if err := DecodeReplicateRecords(Kind(kind), b, &dst); err != nil {
			return
		}
		if dst.Kind() != Kind(kind) {
			t.Fatalf("kind %d decoded as %v", kind, dst.Kind())
		}
	})
}
