package proto

import (
	"reflect"
	"testing"
	"unicode/utf8"
)

func groupFastSeeds() [][]byte {
	msgs := []Message{
		&GroupPoll{TenantID: "t", Namespace: "n", Stream: "s", Shard: 3, Group: "g", MaxRecords: 64, MaxWaitMs: 500, RequestID: 9},
		&GroupPoll{TenantID: "t", Namespace: "n", Stream: "s", Shard: 1<<32 - 1, Group: "é", MaxRecords: 1, MaxWaitMs: 1<<64 - 1,
			WithPublisher: true, BinaryRecords: true, RequestID: 1<<64 - 1},
		&GroupAck{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Offsets: []uint64{0, 1, 1<<64 - 1}, RequestID: 1},
		&GroupAck{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Offsets: []uint64{}, RequestID: 2},
		&GroupOK{RequestID: 3},
		&GroupOK{RequestID: 4, Count: new(uint64)},
	}
	var out [][]byte
	for _, m := range msgs {
		out = append(out, m.AppendJSON(nil))
	}
	return append(out,
		[]byte(`{"type":"group_poll","tenant_id":"t","namespace":"n","stream":"s","shard":4294967296,"group":"g","max_records":1,"max_wait_ms":0,"request_id":1}`),
		[]byte(`{"type":"group_ack","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","offsets":[1, 2 ,3],"request_id":1}`),
		[]byte(`{"type":"group_ack","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","offsets":null,"request_id":1}`),
		[]byte(`{"type":"group_poll","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","max_records":1,"max_wait_ms":0,"request_id":1,"extra":true}`),
		[]byte(`{"type":"group_poll","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","max_records":1,"max_wait_ms":0}`))
}

// The encoders' group_poll and group_ack take the fast path and decode to what
// encoding/json gives; the odd forms (out-of-range shard, null offsets, an unknown field,
// a missing request_id) fall back, and DecodeMessage answers them as before.
func TestGroupFastPath(t *testing.T) {
	for i, body := range groupFastSeeds() {
		fast, ok, tried := decodeGroupFast(body)
		slow, serr := decodeMessageJSON(body)
		if !tried {
			t.Fatalf("seed %d not tried", i)
		}
		if i < 6 && !ok {
			t.Fatalf("seed %d: an encoder's output missed the fast path: %s", i, body)
		}
		if ok && (serr != nil || !reflect.DeepEqual(fast, slow)) {
			t.Fatalf("seed %d: fast %#v, slow %#v (%v)", i, fast, slow, serr)
		}
		if i >= 6 && i != 7 && ok {
			t.Fatalf("seed %d taken by the fast path: %s", i, body)
		}
		got, err := DecodeMessage(body)
		if (err == nil) != (serr == nil) || (err == nil && !reflect.DeepEqual(got, slow)) {
			t.Fatalf("seed %d: DecodeMessage %#v %v, slow path %#v %v", i, got, err, slow, serr)
		}
	}
	if _, _, tried := decodeGroupFast([]byte(`{"type":"cache_get"}`)); tried {
		t.Fatal("a cache message tried as a group one")
	}
}

// Whatever the fast path accepts, encoding/json decodes to the same message (for valid
// UTF-8: DecodeMessage refuses anything else before either path).
func FuzzGroupFastMatchesJSON(f *testing.F) {
	for _, s := range groupFastSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return
		}
		fast, ok, _ := decodeGroupFast(body)
		if !ok {
			return
		}
		slow, err := decodeMessageJSON(body)
		if err != nil || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast %#v, slow %#v (%v) for %q", fast, slow, err, body)
		}
	})
}

// BenchmarkDecodeGroupPoll is one group_poll as the broker reads it (fast path).
func BenchmarkDecodeGroupPoll(b *testing.B) {
	body := groupFastSeeds()[0]
	b.ReportAllocs()
	for range b.N {
		if _, err := DecodeMessage(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeGroupPollJSON is the same through encoding/json (the path before).
func BenchmarkDecodeGroupPollJSON(b *testing.B) {
	body := groupFastSeeds()[0]
	b.ReportAllocs()
	for range b.N {
		if _, err := decodeMessageJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}
