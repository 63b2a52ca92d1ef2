package cache

import (
	"fmt"
	"testing"
)

func TestShardOfIsStableAndSpreads(t *testing.T) {
	if ShardOf([]byte("x"), 0) != 0 || ShardOf([]byte("x"), 1) != 0 {
		t.Fatal("one shard (or none) must map to 0")
	}
	const shards, keys = 8, 8000
	counts := make([]int, shards)
	moved := 0
	for i := range keys {
		k := []byte(fmt.Sprintf("key-%d", i))
		s := ShardOf(k, shards)
		if s >= shards || s != ShardOf(k, shards) {
			t.Fatalf("key %s: shard %d", k, s)
		}
		counts[s]++
		if ShardOf(k, shards+1) != s {
			moved++
		}
	}
	for s, n := range counts {
		if n < keys/shards/2 || n > keys/shards*2 {
			t.Errorf("shard %d got %d of %d keys", s, n, keys)
		}
	}
	// Jump hashing moves about 1/(n+1) of the keys when a shard is added.
	if moved > keys/(shards+1)*2 {
		t.Errorf("adding a shard moved %d of %d keys", moved, keys)
	}
}

func TestRetrySemantics(t *testing.T) {
	safe := map[OpKind]bool{KindGet: true, KindDelete: true, KindCounterGet: true, KindPut: false, KindCounterAdd: false, 0: false}
	for k, want := range safe {
		if SafeToResend(k) != want {
			t.Errorf("SafeToResend(%s) = %v", k, !want)
		}
	}
	if NeedsWrite(KindGet) || NeedsWrite(KindCounterGet) || !NeedsWrite(KindDelete) || !NeedsWrite(KindCounterAdd) {
		t.Error("permission mapping differs from spec/internal-protocol-kinds.md")
	}
	if KindCounterAdd != 4 || KindCounterGet != 5 {
		t.Error("seed op numbers changed")
	}
}
