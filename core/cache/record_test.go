package cache

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"testing"
)

// sampleRecords covers every op, with empty and non-empty fields.
func sampleRecords() []Record {
	return []Record{
		{Op: OpPut, Key: []byte("k"), Value: []byte("value"), HasExpiry: true, ExpiresAt: 1767225600000},
		{Op: OpPut, Key: []byte("k"), Value: []byte{}},
		{Op: OpSnapshotPut, Key: []byte("key"), Value: []byte{0, 1}, HasExpiry: true, ExpiresAt: -5},
		{Op: OpDelete, Key: []byte("gone")},
		{Op: OpEvict, Key: []byte("big")},
		{Op: OpExpire, Key: []byte("t"), ExpiresAt: 42},
		{Op: OpCompactBegin, Count: 3},
		{Op: OpCompactCommit, BeginOffset: 77, Count: 3},
		{Op: OpCounterAdd, Key: []byte("hits"), Delta: -1, Sum: math.MinInt64},
		{Op: OpCounterSnapshot, Key: []byte("hits"), Sum: 42},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		b, err := AppendRecord(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("%s: %v", r.Op, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", r.Op, got, r)
		}
	}
}

// The layouts of docs/cache.md, byte for byte.
func TestRecordLayoutBytes(t *testing.T) {
	cases := []struct {
		r   Record
		hex string
	}{
		{Record{Op: OpPut, Key: []byte("k"), Value: []byte("v"), HasExpiry: true, ExpiresAt: 0x0102},
			"01" + "01" + "0000000000000102" + "0001" + "6b" + "00000001" + "76"},
		{Record{Op: OpPut, Key: []byte("k"), Value: []byte{}}, "01" + "00" + "0000000000000000" + "0001" + "6b" + "00000000"},
		{Record{Op: OpDelete, Key: []byte("k")}, "02" + "0001" + "6b"},
		{Record{Op: OpExpire, Key: []byte("k"), ExpiresAt: 9}, "03" + "0000000000000009" + "0001" + "6b"},
		{Record{Op: OpEvict, Key: []byte("k")}, "04" + "0001" + "6b"},
		{Record{Op: OpCompactBegin, Count: 2}, "05" + "0000000000000002"},
		{Record{Op: OpCompactCommit, BeginOffset: 5, Count: 2}, "07" + "0000000000000005" + "0000000000000002"},
		{Record{Op: OpCounterAdd, Key: []byte("k"), Delta: -1, Sum: 3},
			"10" + "ffffffffffffffff" + "0000000000000003" + "0001" + "6b"},
		{Record{Op: OpCounterSnapshot, Key: []byte("k"), Sum: 3}, "11" + "0000000000000003" + "0001" + "6b"},
	}
	for _, c := range cases {
		b, err := AppendRecord(nil, &c.r)
		if err != nil || hex.EncodeToString(b) != c.hex {
			t.Errorf("%s: got %x (%v), want %s", c.r.Op, b, err, c.hex)
		}
	}
}

func TestDecodeRecordRejectsBadInput(t *testing.T) {
	put, _ := AppendRecord(nil, &Record{Op: OpPut, Key: []byte("key"), Value: []byte("value")})
	cases := map[string][]byte{
		"empty":          nil,
		"unknown op":     {0x09},
		"unknown flags":  append([]byte{1, 0x02}, put[2:]...),
		"stray expiry":   append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 1}, put[10:]...),
		"trailing bytes": append(bytes.Clone(put), 0),
		"key too long":   {2, 0xff, 0xff, 'k'},
		"huge value":     append(bytes.Clone(put[:len(put)-9]), 0xff, 0xff, 0xff, 0xff),
		"short marker":   {5, 0, 0},
		"short commit":   {7, 0, 0, 0, 0, 0, 0, 0, 0, 1},
		"short counter":  {16, 0, 0},
	}
	for i := 1; i < len(put); i++ {
		cases["put cut at "+string(rune('0'+i))] = put[:i]
	}
	for name, b := range cases {
		if _, err := DecodeRecord(b); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s (%x): %v, want ErrCorruptRecord", name, b, err)
		}
	}
}

func TestAppendRecordRejectsBadRecords(t *testing.T) {
	if _, err := AppendRecord(nil, &Record{Op: 99}); !errors.Is(err, ErrUnknownOp) {
		t.Errorf("unknown op: %v", err)
	}
	big := make([]byte, maxKeyLimit+1)
	if _, err := AppendRecord(nil, &Record{Op: OpDelete, Key: big}); !errors.Is(err, ErrKeyTooLarge) {
		t.Errorf("key too large: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		b, err := AppendRecord(nil, &r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := AppendRecord(nil, &r)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		// Every accepted encoding is canonical: it re-encodes byte for byte.
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x -> %x", b, again)
		}
		r2, err := DecodeRecord(again)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed the record: %+v -> %+v (%v)", r, r2, err)
		}
	})
}

// FuzzReplay feeds arbitrary payloads to replay: errors are typed, and no
// input panics or breaks the table's invariants.
func FuzzReplay(f *testing.F) {
	for _, r := range sampleRecords() {
		b, _ := AppendRecord(nil, &r)
		f.Add(b, b)
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		s := New(Config{})
		for i, p := range [][]byte{a, b, a} {
			errCache := s.ReplayCache(uint64(i), p)
			errCounter := s.ReplayCounter(uint64(i), p)
			for _, err := range []error{errCache, errCounter} {
				if err != nil && !errors.Is(err, ErrCorruptRecord) {
					t.Fatalf("untyped error %v", err)
				}
			}
		}
		if err := s.FinishReplay(3, 3); err != nil {
			t.Fatal(err)
		}
		checkTable(t, s.values)
		s.Sweep(math.MaxInt64, math.MaxInt32)
		checkTable(t, s.values)
	})
}
