package placement

import (
	"slices"
	"testing"

	"felix/proto"
)

// A stream shard's fence round gates on its records and producers logs (issue 20, the
// idempotent-producer window), the producers log subordinate to the records log; a cache
// shard's on its cache and counter logs, each on its own.
func TestGatingLogsOfEachShardKind(t *testing.T) {
	if got := GatingLogs(proto.ShardStream); !slices.Equal(got, []proto.ReplicaLog{proto.LogStream, proto.LogProducers}) {
		t.Fatalf("stream gating logs %v", got)
	}
	if got := GatingLogs(proto.ShardCache); !slices.Equal(got, []proto.ReplicaLog{proto.LogCache, proto.LogCounters}) {
		t.Fatalf("cache gating logs %v", got)
	}
	if p, ok := Subordinate(proto.LogProducers); !ok || p != proto.LogStream {
		t.Fatal("the producers log is compared only between replicas level on the records log")
	}
	for _, l := range []proto.ReplicaLog{proto.LogStream, proto.LogCache, proto.LogCounters} {
		if _, ok := Subordinate(l); ok {
			t.Fatalf("%v is compared on its own", l)
		}
	}
}
