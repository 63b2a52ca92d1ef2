package sim

// Random cases: a seed loop over the toy machine. Each seed draws its own
// fault rates (swarm testing: each fault is on or off per seed), a workload
// of client writes, crashes, restarts and partitions (safety phase, the
// invariant checked after every event), then heals everything and checks
// that every node catches up (liveness phase).
//
// The checker has teeth: TestRandomFindsPlantedBugs runs the same loop with
// each planted bug of the toy and requires the search to catch it.

import (
	"fmt"
	"testing"
	"time"

	"felix/internal/testseed"
)

// randomSeeds is the loop's budget; each seed is a run of about a second of
// virtual time, a few milliseconds of real time.
const randomSeeds = 300

// swarmOptions draws the fault rates of one run from its seed.
func swarmOptions(seed uint64) Options {
	r := NewRand(DeriveSeed(seed, 0x5a4a))
	pick := func(max float64) float64 {
		if r.Chance(50) {
			return 0
		}
		return float64(r.IntN(int(max) + 1))
	}
	lf := LinkFaults{
		Delay:          time.Duration(1+r.IntN(3)) * time.Millisecond,
		Jitter:         time.Duration(r.IntN(3)) * time.Millisecond,
		DropPercent:    pick(30),
		DupPercent:     pick(20),
		ReorderPercent: pick(50),
		CorruptPercent: pick(10),
	}
	if lf.ReorderPercent > 0 {
		lf.ReorderDelay = 30 * time.Millisecond
	}
	return Options{Seed: seed, Link: lf}
}

// runRandomToy runs one seed and returns the first failure, with the run's
// options in it.
func runRandomToy(seed uint64, bugs toyBugs) error {
	s, w := newToySim(swarmOptions(seed), bugs, nil)
	ids := s.AddNodes(3)
	r := s.Rand()
	for range 60 {
		randomAction(s, r, ids)
		s.RunFor(r.Duration(25 * time.Millisecond))
		if err := s.Err(); err != nil {
			return err
		}
	}
	return liveness(s, w, ids)
}

// randomAction does one random thing to the run: mostly client writes,
// sometimes a crash (any node, random cut), a restart, a partition or a heal.
func randomAction(s *Sim[[]byte], r *Rand, ids []NodeID) {
	id := ids[r.IntN(len(ids))]
	switch k := r.IntN(12); {
	case k < 6:
		_ = s.Send(External, 1, toyMsg{kind: kindPut, val: r.Uint64N(1000)}.encode())
	case k < 8:
		if s.Up(id) {
			_ = s.Crash(id, CutRandom)
		}
	case k < 10:
		if !s.Up(id) {
			_ = s.Restart(id)
		}
	case k < 11:
		other := ids[r.IntN(len(ids))]
		if r.Chance(50) {
			s.Faults().Partition([]NodeID{id}, []NodeID{other})
		} else {
			s.Faults().BlockOneWay([]NodeID{id}, []NodeID{other})
		}
	default:
		s.Faults().Heal()
	}
}

// liveness heals the network, restarts every node and requires every log
// to reach the primary's and the client to hear ok for every write.
func liveness(s *Sim[[]byte], w *toyWorld, ids []NodeID) error {
	s.Faults().Heal()
	if err := s.Faults().SetLink(Any, Any, LinkFaults{Delay: time.Millisecond}); err != nil {
		return err
	}
	for _, id := range ids {
		if !s.Up(id) {
			_ = s.Restart(id)
		}
	}
	s.RunTicks(100)
	if err := s.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if n := len(s.Machine(id).(*toy).log); n != len(w.truth) {
			return fmt.Errorf("liveness: node %v holds %d of %d records after healing [%s]", id, n, len(w.truth), s.Describe())
		}
	}
	if w.okSeq != uint32(len(w.truth)) {
		return fmt.Errorf("liveness: client heard ok up to %d of %d [%s]", w.okSeq, len(w.truth), s.Describe())
	}
	return nil
}

func TestRandomToy(t *testing.T) {
	for _, seed := range testseed.Seeds(t, 1, randomSeeds) {
		if err := runRandomToy(seed, toyBugs{}); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, testseed.Replay(t, seed))
		}
	}
}

// TestRandomFindsPlantedBugs: within the same budget, the search catches
// each planted bug; it stops at the first seed that does and logs it.
func TestRandomFindsPlantedBugs(t *testing.T) {
	for _, bug := range []struct {
		name string
		bugs toyBugs
	}{
		{"ack-before-sync", toyBugs{ackBeforeSync: true}},
		{"skip-checksum", toyBugs{skipChecksum: true}},
	} {
		t.Run(bug.name, func(t *testing.T) {
			seeds := testseed.Seeds(t, 1, randomSeeds)
			for i, seed := range seeds {
				if err := runRandomToy(seed, bug.bugs); err != nil {
					t.Logf("planted bug %s caught after %d seeds, by seed %d: %v", bug.name, i+1, seed, err)
					return
				}
			}
			t.Fatalf("the search missed planted bug %s in %d seeds", bug.name, len(seeds))
		})
	}
}

// TestReplayIsExact: the same seed and options give the same trace, line
// for line; another seed gives another.
func TestReplayIsExact(t *testing.T) {
	seed := testseed.Seed(t, 12345)
	t.Logf("sim %v", swarmOptions(seed))
	trace := func(seed uint64) []string {
		var lines []string
		s, _ := newToySim(swarmOptions(seed), toyBugs{}, func(l string) { lines = append(lines, l) })
		ids := s.AddNodes(3)
		for range 40 {
			randomAction(s, s.Rand(), ids)
			s.RunFor(s.Rand().Duration(25 * time.Millisecond))
		}
		return lines
	}
	a, b, c := trace(seed), trace(seed), trace(seed+1)
	if len(a) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("seed %d: two runs differ (%d and %d lines)\n%s", seed, len(a), len(b), testseed.Replay(t, seed))
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatalf("seeds %d and %d gave the same trace", seed, seed+1)
	}
	t.Logf("%d trace lines replayed exactly", len(a))
}
