package broker

import (
	"os"
	"path/filepath"
	"testing"

	"felix/cluster/meta"
	"felix/seglog"
)

// TestBallotGenerationsReadsShardsOnDisk: the registration's generations include the
// ballot files of the held catalog's shards that are not open (issue 17: "per shard the
// highest generation it has seen"; issue 20: generations never go backwards, even after a
// control-plane restore): the highest of a shard's main and companion ballots; a shard
// without a ballot, or with a damaged one, is left out.
func TestBallotGenerationsReadsShardsOnDisk(t *testing.T) {
	dir := t.TempDir()
	cat, err := OpenCatalog(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateTenant(Tenant{TenantID: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(Namespace{TenantID: "t", Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateStream(Stream{TenantID: "t", Namespace: "ns", Stream: "s", Shards: 3}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateCache(Cache{TenantID: "t", Namespace: "ns", Cache: "c", Shards: 1}, nil); err != nil {
		t.Fatal(err)
	}
	write := func(d string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, seglog.BallotFileName), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ballot := func(g uint64) []byte {
		b, err := seglog.EncodeBallot(seglog.Ballot{Generation: g, Leader: "b2"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	shardDir := func(kind seglog.ShardKind, name string, shard uint32) string {
		return seglog.ShardDir(dir, seglog.ShardKey{Kind: kind, Tenant: "t", Namespace: "ns", Name: name, Shard: shard})
	}
	write(shardDir(seglog.ShardStream, "s", 0), ballot(4))
	write(seglog.CompanionDir(shardDir(seglog.ShardStream, "s", 0), seglog.CompanionGroups), ballot(7))
	write(shardDir(seglog.ShardStream, "s", 1), []byte("damaged"))
	write(seglog.CompanionDir(shardDir(seglog.ShardCache, "c", 0), seglog.CompanionCounters), ballot(2))

	got := ballotGenerations(dir, cat)
	key := func(kind, name string, shard uint32) string {
		return meta.ShardRef{Kind: kind, TenantID: "t", Namespace: "ns", Name: name, Shard: shard}.Key()
	}
	want := map[string]uint64{key("stream", "s", 0): 7, key("cache", "c", 0): 2}
	if len(got) != len(want) {
		t.Fatalf("generations %v, want %v", got, want)
	}
	for k, g := range want {
		if got[k] != g {
			t.Fatalf("generations %v, want %v", got, want)
		}
	}
}
