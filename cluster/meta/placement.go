package meta

import (
	"slices"
	"time"
)

// DefaultLivenessTimeout is how long after its last registration or
// heartbeat (at_ms) a broker still counts as live.
const DefaultLivenessTimeout = 10 * time.Second

// BrokerState gives "live", "draining" or "down" for b at nowMs (Unix
// milliseconds) with the liveness timeout: down once nowMs is past
// LastSeenMs + timeout.
func BrokerState(b Broker, nowMs int64, timeout time.Duration) string {
	switch {
	case nowMs-b.LastSeenMs > timeout.Milliseconds():
		return "down"
	case b.Draining:
		return "draining"
	default:
		return "live"
	}
}

// Load is a broker's share of the existing placement: how many shards it
// leads and how many replica sets it is in.
type Load struct {
	Leaders  int
	Replicas int
}

// Slot is one shard's placed replica set.
type Slot struct {
	Leader    string
	Followers []string
}

// Place assigns each of shards shards a leader and r-1 followers among live
// (node ids; draining and down brokers excluded by the caller), so that
// leaders spread evenly and no broker is twice in one set (issue 17 item 4).
// A leader is the broker leading fewest of these shards, then fewest in load
// (the existing placement), then in fewest sets; followers are the brokers in
// fewest sets; ties go to the lower node id, so Place is deterministic.
// Errors: *PlacementError (503) when len(live) < r, a *Refusal (400) when
// r < 1.
func Place(live []string, shards uint32, r int, load map[string]Load) ([]Slot, error) {
	if r < 1 {
		return nil, invalid("replication_factor %d (at least 1)", r)
	}
	if len(live) < r {
		return nil, &PlacementError{Need: r, Live: len(live)}
	}
	ids := slices.Sorted(slices.Values(live))
	cur := make(map[string]Load, len(ids))
	for _, id := range ids {
		cur[id] = load[id]
	}
	local := map[string]int{} // leaders within this stream or cache
	byLeaders := func(a, b string) int {
		la, lb := cur[a], cur[b]
		if local[a] != local[b] {
			return local[a] - local[b]
		}
		if la.Leaders != lb.Leaders {
			return la.Leaders - lb.Leaders
		}
		if la.Replicas != lb.Replicas {
			return la.Replicas - lb.Replicas
		}
		return compareStrings(a, b)
	}
	byReplicas := func(a, b string) int {
		la, lb := cur[a], cur[b]
		if la.Replicas != lb.Replicas {
			return la.Replicas - lb.Replicas
		}
		return compareStrings(a, b)
	}
	out := make([]Slot, shards)
	for i := range out {
		order := slices.Clone(ids)
		slices.SortFunc(order, byLeaders)
		leader := order[0]
		rest := slices.Clone(order[1:])
		slices.SortFunc(rest, byReplicas)
		followers := slices.Clone(rest[:r-1])
		slices.Sort(followers)
		out[i] = Slot{Leader: leader, Followers: followers}
		local[leader]++
		l := cur[leader]
		l.Leaders++
		l.Replicas++
		cur[leader] = l
		for _, f := range followers {
			lf := cur[f]
			lf.Replicas++
			cur[f] = lf
		}
	}
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// placementLoad counts the existing assignments per broker.
func (s *State) placementLoad() map[string]Load {
	load := map[string]Load{}
	s.assignments.each(func(a Assignment) bool {
		l := load[a.Leader]
		l.Leaders++
		l.Replicas++
		load[a.Leader] = l
		for _, f := range a.Followers {
			lf := load[f]
			lf.Replicas++
			load[f] = lf
		}
		return true
	}, "id")
	return load
}

// liveBrokers gives the ids of the brokers live (not draining, not down) at
// nowMs.
func (tx *txn) liveBrokers(nowMs int64) []string {
	var out []string
	for _, b := range tx.s.brokers.values() {
		if BrokerState(b, nowMs, tx.cfg.LivenessTimeout) == "live" {
			out = append(out, b.NodeID)
		}
	}
	return out
}

// InitialGeneration gives a new shard's generation: 0 when nothing is known
// of it, else one above the highest generation a broker reported or an
// assignment held, so a generation never goes back (issue 17 item 4).
func InitialGeneration(highest uint64, known bool) uint64 {
	if !known {
		return 0
	}
	return highest + 1
}

// place writes the initial assignments of a new stream or cache.
func (tx *txn) place(kind, tenant, ns, name string, shards uint32, r int, inc uint64, nowMs int64) error {
	slots, err := Place(tx.liveBrokers(nowMs), shards, r, tx.s.placementLoad())
	if err != nil {
		return err
	}
	for i, sl := range slots {
		ref := ShardRef{Kind: kind, TenantID: tenant, Namespace: ns, Name: name, Shard: uint32(i)}
		hi, known := tx.s.generation(ref.Key())
		a := Assignment{ShardRef: ref, Incarnation: inc, Leader: sl.Leader, Followers: sl.Followers,
			Generation: InitialGeneration(hi, known), Index: tx.index}
		tx.putAssignment(a)
	}
	return nil
}

func (tx *txn) putAssignment(a Assignment) {
	tx.s.assignments.put(a)
	tx.noteGeneration(a.ShardRef, a.Generation)
	tx.record("assignment", OpUpsert, a.Key(), a)
}

// noteGeneration raises the highest generation known for ref.
func (tx *txn) noteGeneration(ref ShardRef, g uint64) {
	if hi, ok := tx.s.generation(ref.Key()); !ok || g > hi {
		tx.s.generations.put(generationRecord{Key: ref.Key(), Generation: g})
	}
}
