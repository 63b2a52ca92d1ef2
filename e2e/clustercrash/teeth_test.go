package clustercrash

import (
	"crypto/sha256"
	"strings"
	"testing"

	"felix/testbed/corpus"
)

// The checks find what they are for: a lost, a duplicated and a misplaced acked file, a
// stored record nobody acked, an indeterminate one stored twice, a subscriber that read a
// record the final log does not hold at that offset, and a group that missed one.
func TestChecksFindPlantedAnomalies(t *testing.T) {
	c := &corpus.Corpus{}
	for _, p := range []string{"a", "b", "c", "d", "e", "f"} {
		c.Files = append(c.Files, corpus.File{Path: p, Sum: sha256.Sum256([]byte(p))})
	}
	rec := func(off uint64, p string) seen { return seen{offset: off, path: p, sum: sha256.Sum256([]byte(p))} }
	results := []pubResult{
		{outcome: outAcked, shard: 0, lastOffset: 0, hasShard: true}, // a: stored at 0/0, fine
		{outcome: outAcked, shard: 0, lastOffset: 1, hasShard: true}, // b: lost
		{outcome: outAcked, shard: 1, lastOffset: 0, hasShard: true}, // c: stored twice
		{outcome: outAcked, shard: 1, lastOffset: 5, hasShard: true}, // d: stored elsewhere
		{outcome: outRefused},                                // e: refused but stored
		{outcome: outIndeterminate, shard: 0, lastOffset: 0}, // f: stored twice
	}
	logs := map[uint32][]seen{
		0: {rec(0, "a"), rec(1, "e"), rec(2, "f"), rec(3, "f")},
		1: {rec(0, "c"), rec(1, "c"), rec(2, "d")},
	}
	st := account(c, results, logs)
	if st.lost != 1 || st.duplicated != 2 || st.misplaced != 1 || st.unknown != 1 {
		t.Fatalf("lost %d duplicated %d misplaced %d unknown %d, want 1 2 1 1: %v", st.lost, st.duplicated, st.misplaced, st.unknown, st.failures)
	}
	clean := account(&corpus.Corpus{Files: c.Files[:1]}, results[:1], map[uint32][]seen{0: {rec(0, "a")}})
	if len(clean.failures) != 0 {
		t.Fatalf("a clean run reports %v", clean.failures)
	}
	sub := &subscriber{shard: 0, got: []seen{rec(0, "a"), rec(2, "e"), rec(1, "e")}}
	st.failures = nil
	st.checkSubscribers([]*subscriber{sub}, logs)
	if st.subscriberMismatch != 2 {
		t.Fatalf("subscriber mismatches %d, want 2 (a wrong record, an offset going back): %v", st.subscriberMismatch, st.failures)
	}
	g := &group{delivered: map[[2]uint64]seen{{0, 0}: rec(0, "a")}}
	st.checkGroup(g, results[:2], logs)
	if st.groupMissing != 1 || !strings.Contains(strings.Join(st.failures, "\n"), "not delivered 1") {
		t.Fatalf("group missing %d: %v", st.groupMissing, st.failures)
	}
}
