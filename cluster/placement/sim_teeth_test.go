package placement

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"felix/cluster/sim"
)

func block(f *sim.Faults, a, b sim.NodeID) {
	f.BlockOneWay([]sim.NodeID{a}, []sim.NodeID{b})
	f.BlockOneWay([]sim.NodeID{b}, []sim.NodeID{a})
}

func to(id sim.NodeID) func() sim.NodeID { return func() sim.NodeID { return id } }

// staleReport: the leader's last report shows n2 caught up and n3 far behind; then n3
// catches up and n1 acknowledges more writes with n3 alone, its reports no longer reaching
// placement. Placement detects n1 down and promotes n2 on that report (the dead leader's
// last report, believed: identities match). n2's fence finds n3 ahead: it refuses to open,
// and placement promotes n3, which holds every acknowledged write.
func staleReport(w *world) {
	f := w.s.Faults()
	w.s.RunFor(200 * time.Millisecond)
	block(f, 1, 3)
	workload(w, 500*time.Millisecond, to(1))
	f.Heal()
	block(f, 1, 2)
	block(f, 1, placementNode)
	workload(w, 250*time.Millisecond, to(1))
	workload(w, time.Second, w.leader)
}

func lostWrites(bad []string) int {
	n := 0
	for _, b := range bad {
		if strings.HasPrefix(b, "lost:") {
			n++
		}
	}
	return n
}

// TestSimFenceRefusalKeepsAckedWrites: with every fix, nothing acknowledged is lost, and
// it took the refusal (two promotions) to get there.
func TestSimFenceRefusalKeepsAckedWrites(t *testing.T) {
	w, bad := run(t, simOptions{seed: 2, link: sim.LinkFaults{Delay: time.Millisecond}}, staleReport)
	if len(bad) > 0 {
		t.Fatalf("anomalies:\n%s", strings.Join(bad, "\n"))
	}
	if w.promotions < 2 || w.leader() != 3 {
		t.Fatalf("want n2 promoted, refusing, then n3: %s", w.summary())
	}
}

// expectLost runs the stale-report scenario with a fix switched off: the checker must find
// an acknowledged write lost.
func expectLost(t *testing.T, without gaps, what string) {
	t.Helper()
	w, bad := run(t, simOptions{seed: 2, link: sim.LinkFaults{Delay: time.Millisecond}, without: without}, staleReport)
	if lostWrites(bad) == 0 {
		t.Fatalf("without %s the checker should find a lost acknowledged write: %s", what, w.summary())
	}
	t.Logf("found, as it should:\n%s", strings.Join(bad[:min(3, len(bad))], "\n"))
}

// TestSimTeethFenceBeforeOpen: turning the fence-before-open off loses an acknowledged
// write in the same scenario (n2 serves before any replica took its fence, and truncates
// n3's suffix).
func TestSimTeethFenceBeforeOpen(t *testing.T) {
	expectLost(t, gaps{fenceBeforeOpen: true}, "the fence before open")
}

// TestSimTeethPromoteBehind: without the gap's fix (the promoted broker opens although a
// fenced replica is ahead of it) the less up-to-date n2 leads and an acknowledged write is
// lost.
func TestSimTeethPromoteBehind(t *testing.T) {
	expectLost(t, gaps{aheadRefusal: true}, "the refusal")
}

// isolatedLeader: n1 leads, then is cut off from the replicas and placement while clients
// still reach it. Placement promotes another replica (in lease mode only once n1's lease
// is certainly over on its own clock), a write through it is acknowledged, and then clients
// read from n1.
func isolatedLeader(w *world) {
	f := w.s.Faults()
	w.s.RunFor(200 * time.Millisecond)
	workload(w, 300*time.Millisecond, w.leader)
	block(f, 1, 2)
	block(f, 1, 3)
	block(f, 1, placementNode)
	var v uint64
	var at sim.Time
	for range 300 {
		if v != 0 && w.writes[v].acked {
			break
		}
		if l := w.leader(); l != 1 && (v == 0 || w.s.Now().Sub(at) > 200*time.Millisecond) {
			v, at = w.put(l), w.s.Now()
		}
		w.s.RunFor(10 * time.Millisecond)
	}
	for range 10 {
		w.get(1)
		w.s.RunFor(10 * time.Millisecond)
	}
	workload(w, 300*time.Millisecond, w.leader)
}

func readsFrom(w *world, id sim.NodeID, errPart string) (ok, refused int) {
	for _, r := range w.reads {
		switch {
		case r.to != id || !r.done:
		case r.err == "":
			ok++
		case strings.Contains(r.err, errPart):
			refused++
		}
	}
	return ok, refused
}

// TestSimTeethLeaseReadsSlowClock: in lease mode (FELIX_QUORUM_READS=lease), the old
// leader's clock running at a quarter of the rate keeps its lease valid long after the
// control plane counted it over: its reads return a value older than an acknowledged write,
// and the checker finds it.
func TestSimTeethLeaseReadsSlowClock(t *testing.T) {
	w, bad := run(t, simOptions{seed: 3, link: sim.LinkFaults{Delay: time.Millisecond}, leaseReads: true,
		slow: map[sim.NodeID]int64{1: 4}}, isolatedLeader)
	stale := 0
	for _, b := range bad {
		if strings.HasPrefix(b, "stale:") {
			stale++
		}
	}
	if stale == 0 {
		t.Fatalf("the checker should find a stale lease read from the slowed old leader: %s", w.summary())
	}
	t.Logf("found, as it should: %s", bad[0])
}

// TestSimLeaseReadsNormalClock: the same run with the old leader's clock within the drift
// bound: its lease is over before placement promotes, so its reads are refused.
func TestSimLeaseReadsNormalClock(t *testing.T) {
	w, bad := run(t, simOptions{seed: 3, link: sim.LinkFaults{Delay: time.Millisecond}, leaseReads: true},
		isolatedLeader)
	if len(bad) > 0 {
		t.Fatalf("anomalies:\n%s", strings.Join(bad, "\n"))
	}
	if ok, refused := readsFrom(w, 1, "lease expired"); refused < 10 {
		t.Fatalf("the isolated leader's reads should be refused on its expired lease (%d answered, %d refused): %s",
			ok, refused, w.summary())
	}
}

// TestSimLeaseFreeReadsSlowClock: the default lease-free mode with the same slowed clock:
// the old leader's reads fail their fence round and answer leadership_lost; the checker
// finds nothing.
func TestSimLeaseFreeReadsSlowClock(t *testing.T) {
	w, bad := run(t, simOptions{seed: 3, link: sim.LinkFaults{Delay: time.Millisecond},
		slow: map[sim.NodeID]int64{1: 4}}, isolatedLeader)
	if len(bad) > 0 {
		t.Fatalf("anomalies:\n%s", strings.Join(bad, "\n"))
	}
	if ok, lost := readsFrom(w, 1, "leadership_lost"); lost < 10 {
		t.Fatalf("the isolated leader's reads should answer leadership_lost (%d answered, %d lost): %s",
			ok, lost, w.summary())
	}
}

// lateRoundAfter: n1 leads; n2's answers to n1 are slow (80 ms), and n1 is cut off from n3
// and placement, shift after the start (the phase of n1's rounds against the promotion
// decides whether a round spans the new leader's first ack). Placement promotes n2, which
// acknowledges writes with n3, while clients keep reading from n1: a round n1 started
// before n2 fenced at the newer generation is answered (FenceOk at the old generation)
// after those acknowledgements.
func lateRoundAfter(w *world, shift time.Duration) {
	f := w.s.Faults()
	w.s.RunFor(200*time.Millisecond + shift)
	workload(w, 300*time.Millisecond, w.leader)
	w.fail(f.SetLink(2, 1, sim.LinkFaults{Delay: 80 * time.Millisecond}))
	block(f, 1, 3)
	block(f, 1, placementNode)
	for i := range 100 {
		if l := w.leader(); l != 1 && i%2 == 0 {
			w.put(l)
		}
		w.get(1)
		w.s.RunFor(10 * time.Millisecond)
	}
}

// TestSimTeethLateRound: without the round rule (a read taken after a round started shares
// it) the old leader answers a value older than an acknowledged write, and the checker finds
// it; with the rule, never. Whether one of n1's rounds spans n2's first acknowledgement
// depends on its phase against the promotion, so the cut is shifted over one heartbeat
// period (50 ms): the fix must hold at every shift, and the checker must find the bug at
// some.
func TestSimTeethLateRound(t *testing.T) {
	found := ""
	for shift := time.Duration(0); shift < simHeartbeat; shift += 5 * time.Millisecond {
		o := simOptions{seed: 4, link: sim.LinkFaults{Delay: time.Millisecond}}
		body := func(w *world) { lateRoundAfter(w, shift) }
		w, bad := run(t, o, body)
		if len(bad) > 0 {
			t.Fatalf("shift %v: anomalies with the round rule:\n%s", shift, strings.Join(bad, "\n"))
		}
		if ok, _ := readsFrom(w, 1, ""); ok == 0 {
			t.Fatalf("shift %v: the old leader should have answered reads: %s", shift, w.summary())
		}
		o.without = gaps{lateRound: true}
		if _, bad = run(t, o, body); len(bad) > 0 && strings.HasPrefix(bad[0], "stale:") && found == "" {
			found = fmt.Sprintf("shift %v: %s", shift, bad[0])
		}
	}
	if found == "" {
		t.Fatalf("without the round rule the checker should find a stale read at some shift")
	}
	t.Logf("found, as it should: %s", found)
}
