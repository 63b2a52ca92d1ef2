package placement

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"felix/cluster/sim"
	"felix/internal/testseed"
)

// randomShard draws a shard of 1-5 members with random liveness, identities, reports,
// halts, rebuilds and generations (some inconsistent on purpose: a missing Replica, a
// repeated one).
func randomShard(r *sim.Rand) Shard {
	n := 1 + r.IntN(5)
	ids := []string{"A", "B", "C", "D", "E"}[:n]
	sh := Shard{Generation: uint64(r.IntN(5)), Leader: ids[0], Followers: slices.Clone(ids[1:]),
		HighestGeneration: uint64(r.IntN(8)), LeaseUntil: int64(r.IntN(3)) * int64(time.Second),
		HasReport: r.Chance(80)}
	sh.Report = Report{Leader: ids[0], Generation: sh.Generation, AtNanos: int64(r.IntN(3)) * int64(time.Second),
		Stamped: r.Chance(50), ServesByRound: r.Chance(50)}
	for _, id := range ids {
		if r.Chance(3) {
			continue // a member without its Replica
		}
		sh.Replicas = append(sh.Replicas, Replica{NodeID: id, StorageID: pick(r, "", "s"+id, "t"+id),
			Incarnation: uint64(1 + r.IntN(2)), Liveness: Liveness(1 + r.IntN(4)), HighestGeneration: uint64(r.IntN(9)),
			RebuildIncarnation: uint64(r.IntN(2)), Restarted: r.Chance(15), Kept: uint64(r.IntN(20))})
		if r.Chance(70) {
			sh.Report.Entries = append(sh.Report.Entries, ReportEntry{NodeID: id, StorageID: pick(r, "", "s"+id),
				Durable: uint64(r.IntN(20)), Incarnation: uint64(1 + r.IntN(2)), RebuildIncarnation: uint64(r.IntN(2)),
				Halted: pick(r, "", "", "", "diverged"), Corrupt: r.Chance(10)})
		}
	}
	if r.Chance(2) {
		sh.Replicas = append(sh.Replicas, sh.Replicas...)
	}
	if r.Chance(20) {
		sh.Refusal = &FenceRefusal{Generation: sh.Generation, By: sh.Leader, Ahead: ids[r.IntN(n)]}
	}
	return sh
}

func pick(r *sim.Rand, vals ...string) string { return vals[r.IntN(len(vals))] }

// TestDecideInvariants: on any shard Decide never panics, and a promotion names a live
// member at a generation above every one known, never one whose identities differ, halted
// or corrupt, nor one rebuilt since the report.
func TestDecideInvariants(t *testing.T) {
	r := sim.NewRand(testseed.Seed(t, 20))
	promoted := 0
	for i := range 20000 {
		sh := randomShard(r)
		now := int64(r.IntN(4)) * int64(500*time.Millisecond)
		d, err := Decide(&sh, now, Config{})
		if err != nil {
			continue
		}
		if d.Action == Promote {
			promoted++
			if msg := checkPromotion(&sh, d); msg != "" {
				t.Fatalf("case %d: %s\nshard %+v\ndecision %+v", i, msg, sh, d)
			}
		}
	}
	if promoted < 500 {
		t.Fatalf("only %d promotions: the generator is too narrow", promoted)
	}
}

func checkPromotion(sh *Shard, d Decision) string {
	var leader *Replica
	for i := range sh.Replicas {
		if sh.Replicas[i].NodeID == d.Leader {
			leader = &sh.Replicas[i]
		}
	}
	known := max(sh.Generation, sh.HighestGeneration, sh.Report.Generation)
	for _, r := range sh.Replicas {
		known = max(known, r.HighestGeneration)
	}
	switch {
	case leader == nil:
		return "promoted a non-member"
	case d.Generation <= known:
		return fmt.Sprintf("generation %d not above %d", d.Generation, known)
	case d.Leader == sh.Leader && (!leader.Restarted || leader.Liveness != Live):
		return "named the same leader again without the run-state rule, or not live"
	case d.Leader == sh.Leader:
		return "" // the run-state rule: it is named on what it kept, not on the report
	case d.Leader != sh.Leader && (leader.Liveness != Live || leader.Restarted):
		return "promoted a replica that is not live, or restarted under a new identity"
	case len(d.Followers) != len(sh.Followers) || slices.Contains(d.Followers, d.Leader):
		return "the replica set changed"
	}
	if sh.Refusal != nil && d.Leader == sh.Refusal.Ahead {
		return ""
	}
	e, found := entryOf(sh, d.Leader)
	switch {
	case !found:
		return "promoted a replica the report does not name"
	case e.StorageID != "" && leader.StorageID != "" && e.StorageID != leader.StorageID:
		return "promoted a replica whose storage identities differ"
	case d.Leader != sh.Leader && (e.Halted != "" || e.Corrupt):
		return "promoted a halted or corrupt replica"
	case d.Leader != sh.Leader && e.RebuildIncarnation < leader.RebuildIncarnation:
		return "promoted a replica rebuilt since the report"
	}
	return ""
}
