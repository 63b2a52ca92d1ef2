package placement

// The seeded simulation of issue 20 (docs/failover.md, "Simulation"): a leader, two
// followers (cluster/replica's decider, shipper and tracker) and the placement loop
// (Detector, Decide, leases) on cluster/sim, with clients writing and reading through the
// leader, checked for durability and linearizability (world.check). The scripted
// scenarios below are the teeth: each fails with its fix switched off.

import (
	"strings"
	"testing"
	"time"

	"felix/cluster/sim"
)

// tracer keeps the run's trace for a failure message.
type tracer struct{ lines []string }

func (t *tracer) add(l string) { t.lines = append(t.lines, l) }

func (t *tracer) tail(n int) string {
	return strings.Join(t.lines[max(0, len(t.lines)-n):], "\n")
}

// run builds a world with o, gives it a trace, and reports on failure.
func run(t *testing.T, o simOptions, body func(w *world)) (*world, []string) {
	t.Helper()
	tr := &tracer{}
	o.trace = tr.add
	w := newWorld(o)
	body(w)
	var bad []string
	if err := w.settle(); err != nil {
		w.fail(err)
	}
	if w.err != nil {
		t.Fatalf("%s: %v\n%s\ntrace tail:\n%s", w.s.Describe(), w.err, w.summary(), tr.tail(60))
	}
	bad = w.check()
	t.Logf("%s: %s", w.s.Describe(), w.summary())
	return w, bad
}

// workload writes every 20 ms and reads every 30 ms through the named leader for d.
func workload(w *world, d time.Duration, to func() sim.NodeID) {
	for el := time.Duration(0); el < d; el += 10 * time.Millisecond {
		if el%(20*time.Millisecond) == 0 {
			w.put(to())
		}
		if el%(30*time.Millisecond) == 0 {
			w.get(to())
		}
		w.s.RunFor(10 * time.Millisecond)
	}
}

func TestSimSteadyState(t *testing.T) {
	w, bad := run(t, simOptions{seed: 1, link: sim.LinkFaults{Delay: time.Millisecond}}, func(w *world) {
		w.s.RunFor(200 * time.Millisecond)
		workload(w, 2*time.Second, w.leader)
	})
	if len(bad) > 0 {
		t.Fatalf("anomalies in a fault-free run:\n%s", strings.Join(bad, "\n"))
	}
	acked, read := 0, 0
	for _, op := range w.writes {
		if op.acked {
			acked++
		}
	}
	for _, r := range w.reads {
		if r.done && r.err == "" && r.val > 0 {
			read++
		}
	}
	if acked < 90 || read < 60 || w.promotions != 0 {
		t.Fatalf("a fault-free run should ack and read nearly everything with no failover: %s", w.summary())
	}
}
