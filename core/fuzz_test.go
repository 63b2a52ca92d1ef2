package core

import (
	"bytes"
	"testing"
)

// FuzzDecodeEventFrame: the core's frame parser (used to cut and re-encode
// frames) never panics, and whatever it accepts re-encodes byte for byte.
func FuzzDecodeEventFrame(f *testing.F) {
	f.Add(encodeEventFrame(false, 0, [][]byte{[]byte("a"), []byte("bc")}))
	f.Add(encodeEventFrame(true, 5, [][]byte{[]byte("a"), []byte("bc")}))
	f.Add(encodeEventFrame(true, 1<<40, [][]byte{{}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got [][]byte
		withOffsets, base, count, err := decodeEventFrame(b, func(p []byte) { got = append(got, p) })
		if err != nil {
			return
		}
		if count != len(got) {
			t.Fatalf("count %d, %d payloads", count, len(got))
		}
		if again := encodeEventFrame(withOffsets, base, got); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b)
		}
		if count > 0 {
			cut, err := reframe(b, 1, withOffsets, base+1)
			if err != nil {
				t.Fatal(err)
			}
			if want := encodeEventFrame(withOffsets, base+1, got[1:]); !bytes.Equal(cut, want) {
				t.Fatal("reframe differs from encoding the suffix")
			}
		}
	})
}

// FuzzDecodeProducerRecord: the producer key record parser never panics and
// round-trips what it accepts.
func FuzzDecodeProducerRecord(f *testing.F) {
	f.Add(appendProducerRecord(nil, producerKey{"p", 1}, 0, 0))
	f.Add(appendProducerRecord(nil, producerKey{"0123456789abcdef", 1 << 60}, 10, 99))
	f.Fuzz(func(t *testing.T, b []byte) {
		key, first, last, err := decodeProducerRecord(b)
		if err != nil {
			return
		}
		if re := appendProducerRecord(nil, key, first, last); !bytes.Equal(re, b) || last < first {
			t.Fatalf("round trip: %x vs %x", re, b)
		}
	})
}
