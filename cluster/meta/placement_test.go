package meta

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"felix/internal/testseed"
)

// TestPlaceProperties: for random broker counts, shard counts, factors and
// existing loads, every set has r distinct live brokers, and within one
// stream the leader counts differ by at most one.
func TestPlaceProperties(t *testing.T) {
	testseed.Run(t, 1, 20, func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed))
		for range 200 {
			n := 1 + rng.IntN(9)
			live := make([]string, n)
			load := map[string]Load{}
			for i := range live {
				live[i] = fmt.Sprintf("b%d", i)
				load[live[i]] = Load{Leaders: rng.IntN(5), Replicas: rng.IntN(10)}
			}
			r := 1 + rng.IntN(n)
			shards := uint32(1 + rng.IntN(40))
			slots, err := Place(live, shards, r, load)
			if err != nil {
				t.Fatal(err)
			}
			checkSlots(t, slots, live, r)
			if _, err := Place(live, shards, n+1, load); err == nil {
				t.Fatalf("r=%d over %d live brokers placed", n+1, n)
			}
		}
	})
}

func checkSlots(t *testing.T, slots []Slot, live []string, r int) {
	t.Helper()
	leaders := map[string]int{}
	for _, s := range slots {
		set := append([]string{s.Leader}, s.Followers...)
		if len(set) != r {
			t.Fatalf("set %v, want %d brokers", set, r)
		}
		for i, id := range set {
			if !slices.Contains(live, id) || slices.Contains(set[:i], id) {
				t.Fatalf("set %v: %s not live or twice", set, id)
			}
		}
		leaders[s.Leader]++
	}
	lo, hi := len(slots), 0
	for _, id := range live {
		lo, hi = min(lo, leaders[id]), max(hi, leaders[id])
	}
	if hi-lo > 1 {
		t.Fatalf("leaders %v spread unevenly over %v", leaders, live)
	}
}

// TestChangesPagesEveryRowOnce: paging through the feed with any page size
// returns every row once, in order, never splitting an entry's rows.
func TestChangesPagesEveryRowOnce(t *testing.T) {
	f := goldenFSM(t)
	all, err := f.Changes(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for size := 1; size <= len(all.Changes)+1; size++ {
		var got []Change
		for after := uint64(0); ; {
			p, err := f.Changes(after, size)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.Changes...)
			if len(p.Changes) == 0 || p.Last == after {
				break
			}
			if last := p.Changes[len(p.Changes)-1].Seq; p.Last != last && p.Last != f.State().Index() {
				t.Fatalf("page ends at %d but Last is %d", last, p.Last)
			}
			after = p.Last
		}
		if len(got) != len(all.Changes) {
			t.Fatalf("page size %d: %d rows, want %d", size, len(got), len(all.Changes))
		}
		for i := range got {
			if got[i].Seq != all.Changes[i].Seq || got[i].Key != all.Changes[i].Key {
				t.Fatalf("page size %d: row %d differs", size, i)
			}
		}
	}
}
