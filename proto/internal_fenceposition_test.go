package proto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// FencePosition/FencePositionOk (34/35), vectors-style: the exact bytes of each body, the
// round trip, and the relabellings refused (a FenceOk body read as 35 lacks
// last_generation, a 35 body read as FenceOk has trailing bytes); a 34 body is a Fence
// body byte for byte. The numbers are assigned once (docs/internal-protocol.md).
func TestFencePositionKinds(t *testing.T) {
	if KindFencePosition != 34 || KindFencePositionOk != 35 || KindFencePosition.String() != "FencePosition" ||
		KindFencePositionOk.String() != "FencePositionOk" {
		t.Fatal("fence position kinds are assigned once: 34 and 35")
	}
	sh := ShardRef{Tenant: []byte("t"), Namespace: []byte("n"), Name: []byte("s"), Shard: 2}
	for _, tc := range []struct {
		m    InternalMessage
		want string
	}{
		{&FencePosition{Fence: Fence{CorrelationID: 7, Shard: sh, Log: LogStream, Generation: 12}},
			"0000000000000007" + "000174" + "00016e" + "000173" + "00000002" + "00" + "000000000000000c"},
		{&FencePositionOk{FenceOk: FenceOk{CorrelationID: 7, Log: LogProducers, Generation: 12, DurableOffset: 2126},
			LastGeneration: 11},
			"0000000000000007" + "05" + "000000000000000c" + "000000000000084e" + "000000000000000b"},
	} {
		body, err := tc.m.AppendBody(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(body); got != tc.want {
			t.Fatalf("%v body\n got %s\nwant %s", tc.m.Kind(), got, tc.want)
		}
		got, err := DecodeInternal(tc.m.Kind(), body)
		if err != nil {
			t.Fatalf("%v: %v", tc.m.Kind(), err)
		}
		again, _ := got.AppendBody(nil)
		if got.Kind() != tc.m.Kind() || got.Correlation() != 7 || !bytes.Equal(again, body) {
			t.Fatalf("%v round trip: %+v", tc.m.Kind(), got)
		}
		if _, err := DecodeInternal(tc.m.Kind(), body[:len(body)-1]); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("%v one byte short: %v, want ErrIncomplete", tc.m.Kind(), err)
		}
	}
	fenceBody, _ := (&Fence{CorrelationID: 7, Shard: sh, Log: LogStream, Generation: 12}).AppendBody(nil)
	if m, err := DecodeInternal(KindFencePosition, fenceBody); err != nil || m.(*FencePosition).Generation != 12 {
		t.Fatalf("a Fence body is a FencePosition body: %v %v", m, err)
	}
	okBody, _ := (&FenceOk{CorrelationID: 7, Log: LogStream, Generation: 12, DurableOffset: 5}).AppendBody(nil)
	if _, err := DecodeInternal(KindFencePositionOk, okBody); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("FenceOk read as FencePositionOk: %v, want ErrIncomplete", err)
	}
	posBody, _ := (&FencePositionOk{FenceOk: FenceOk{CorrelationID: 7, Log: LogStream}, LastGeneration: 1}).AppendBody(nil)
	if _, err := DecodeInternal(KindFenceOk, posBody); !errors.Is(err, ErrTrailingBytes) {
		t.Fatalf("FencePositionOk read as FenceOk: %v, want ErrTrailingBytes", err)
	}
	if _, err := (&FencePositionOk{FenceOk: FenceOk{Log: 99}}).AppendBody(nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an invalid log was encoded: %v", err)
	}
}
