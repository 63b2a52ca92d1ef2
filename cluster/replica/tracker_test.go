package replica

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestTracker runs testdata/tracker/*.txt: a quorum tracker driven by the leader's own
// fsynced offset (leader) and followers' acknowledgements (ack); each prints the mark.
func TestTracker(t *testing.T) {
	datadriven.Walk(t, "testdata/tracker", func(t *testing.T, path string) {
		var tr *Tracker
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			a := args{t: t, d: d}
			switch d.Cmd {
			case "new":
				tr = NewTracker(TrackerConfig{Generation: a.u64("gen", 1), Leader: a.str("leader", "A"),
					ReplicaSet: a.list("set"), GenerationStart: a.has("generation-start"),
					StartOffset: a.u64("start", 0), Floor: a.u64("floor", 0), MajorityAck: a.has("majority-ack")})
			case "leader":
				tr.LeaderDurable(a.u64("durable", 0))
			case "ack":
				tr.Acked(a.str("from", ""), a.u64("gen", 1), a.u64("offset", 0))
			case "attribute":
				reset := tr.Attribute(a.str("member", ""), a.str("id", ""))
				held, _ := tr.Held(a.str("member", ""))
				return fmt.Sprintf("mark=%d reset=%v held=%d\n", tr.Mark(), reset, held)
			case "identity":
				id, ok := tr.Identity(a.str("member", ""))
				return fmt.Sprintf("identity=%q attributed=%v\n", id, ok)
			case "mark-without":
				return fmt.Sprintf("mark=%d without-%s=%d\n", tr.Mark(), a.str("member", ""), tr.MarkWithout(a.str("member", "")))
			case "ack-mark":
				return fmt.Sprintf("ack-mark=%d\n", tr.AckMark(int64(a.dur("now")), int64(a.dur("lease"))))
			default:
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			}
			return fmt.Sprintf("mark=%d\n", tr.Mark())
		})
	})
}
