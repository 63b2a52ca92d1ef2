package core

import (
	"errors"
	"testing"

	"felix/proto"
)

// TestLogAddrValidate: every log a shard kind has is valid, every other pair
// (including an invalid proto.ReplicaLog) is ErrInvalid and never remapped.
func TestLogAddrValidate(t *testing.T) {
	name := StreamName{Tenant: "t", Namespace: "n", Stream: "s"}
	has := map[ShardKind][]proto.ReplicaLog{
		ShardStream: {proto.LogStream, proto.LogProducers, proto.LogGroupCursors, proto.LogDeadLetters},
		ShardCache:  {proto.LogCache, proto.LogCounters},
	}
	for _, kind := range []ShardKind{0, ShardStream, ShardCache, 3} {
		for l := proto.ReplicaLog(0); l <= proto.LogLast+1; l++ {
			a := LogAddr{Kind: kind, Name: name, Shard: 1, Log: l}
			want := false
			for _, h := range has[kind] {
				want = want || h == l
			}
			err := a.Validate()
			if want != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("%v: Validate = %v, want valid=%v", a, err, want)
			}
		}
	}
	if err := (LogAddr{Kind: ShardStream, Name: name, Shard: -1}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative shard: %v", err)
	}
	a := LogAddr{Kind: ShardCache, Name: name, Shard: 2, Incarnation: 3, Log: proto.LogCounters}
	if a.String() != "cache:t/n/s#2/counters@3" || a.Ref().String() != "cache:t/n/s#2" {
		t.Fatalf("String: %q %q", a, a.Ref())
	}
}
