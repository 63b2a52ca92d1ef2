package replica

// The scripted cases of the simulation (testdata/scripts/*.txt), in the style of
// cluster/sim's scripts: Raft's Figure 8 and the back-to-back failover of KIP-279 on five
// replicas, each with generation_start off (an acknowledged record is lost) and on (none
// is), and the planted anomaly the invariant checker must catch. `check want=loss|none`
// asserts the outcome even under -rewrite.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"felix/cluster/sim"
)

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		var w *world
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			a := args{t: t, d: d}
			if d.Cmd == "new" {
				w = newWorld(sim.Options{Seed: a.u64("seed", 1), Link: sim.LinkFaults{Delay: time.Millisecond}},
					int(a.u64("replicas", 3)), a.str("generation-start", "on") == "on", a.str("bug", "") == "stale-tail", nil)
				return w.s.Describe() + "\n"
			}
			out, err := scriptCommand(w, a)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

// nodeArgs parses the bare numbers of a command ("crash 1", "partition 1 2 | 3 4 5").
func nodeArgs(d *datadriven.TestData) [][]sim.NodeID {
	groups := [][]sim.NodeID{nil}
	for _, c := range d.CmdArgs {
		if c.Key == "|" {
			groups = append(groups, nil)
		} else if n, err := strconv.Atoi(c.Key); err == nil {
			groups[len(groups)-1] = append(groups[len(groups)-1], sim.NodeID(n))
		}
	}
	return groups
}

func scriptCommand(w *world, a args) (string, error) {
	ids := nodeArgs(a.d)
	one := func() sim.NodeID { return ids[0][0] }
	switch a.d.Cmd {
	case "promote":
		if err := w.promote(one()); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s leads generation %d (votes %v)\n", nodeName(one()), w.gen, w.voters(one())), nil
	case "put":
		w.put()
		return fmt.Sprintf("put %d to %s\n", w.nextVal, nodeName(w.leaderID)), nil
	case "run":
		w.s.RunFor(a.dur("for"))
	case "deliver":
		w.s.Deliver(0)
	case "partition":
		w.s.Faults().Partition(ids...)
	case "heal":
		w.s.Faults().Heal()
	case "crash":
		return "", w.s.Crash(one(), sim.CutKeep)
	case "restart":
		return "", w.s.Restart(one())
	case "status":
		return w.s.Status(), nil
	case "acked":
		return fmtAcked(w), nil
	case "check":
		return scriptCheck(w, a)
	default:
		return "", fmt.Errorf("unknown command %q", a.d.Cmd)
	}
	if err := w.s.Err(); err != nil {
		return "", err
	}
	return "ok\n", nil
}

func fmtAcked(w *world) string {
	var recs []string
	for _, r := range w.ackedInOrder() {
		recs = append(recs, fmt.Sprintf("%s@%d", r.rec, r.offset))
	}
	return "acked: " + strings.Join(recs, " ") + "\n"
}

// scriptCheck heals, lets placement settle, and reports the lost acknowledged records; it
// fails the test when the outcome is not the one asked (want=loss or want=none).
func scriptCheck(w *world, a args) (string, error) {
	_ = w.heal()
	l := w.serving()
	if l == nil {
		return "", fmt.Errorf("no leader serves after healing")
	}
	lost := w.lost(l)
	out := fmtAcked(w) + fmt.Sprintf("leader %s at generation %d, mark %d\n", nodeName(l.env.ID), w.gen, l.lead.tracker.Mark())
	if len(lost) > 0 {
		out += "LOST: " + strings.Join(lost, ", ") + "\n"
	} else {
		out += "no acknowledged record lost\n"
	}
	if want := a.str("want", ""); want != "" && (want == "loss") != (len(lost) > 0) {
		a.t.Errorf("%s: want %s, got:\n%s", a.d.Pos, want, out)
	}
	return out, nil
}
