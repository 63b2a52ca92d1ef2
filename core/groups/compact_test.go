package groups

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"felix/internal/testseed"
)

// dump prints a shard's state for comparisons, one group per line.
func dump(s *Shard) string {
	var b strings.Builder
	for _, name := range s.Groups() {
		g := s.byName[name]
		fmt.Fprintf(&b, "%s cfg=%+v frontier=%d resume=%d", name, g.cfg, g.frontier, g.resume())
		for _, off := range sortedKeys(g.entries) {
			e := g.entries[off]
			fmt.Fprintf(&b, " %d:%d/%d@%d", off, e.deliveries, e.state, e.at)
		}
		for _, off := range sortedKeys(g.dead) {
			fmt.Fprintf(&b, " dead%d:%+v", off, g.dead[off])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func replayLogs(t *testing.T, cursor, dead [][]byte, deadEnd uint64, now int64) *Shard {
	t.Helper()
	r, err := NewReplayer(Options{}, deadEnd)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dead {
		if err := r.DeadLetter(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range cursor {
		if err := r.Cursor(p); err != nil {
			t.Fatal(err)
		}
	}
	s, _, err := r.Finish(now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSnapshotReplaysToTheSameState compacts after random workloads, dropping random
// head prefixes of both logs as seglog's Compact may, and checks that replaying what is
// left plus the snapshot gives the state a replay of the full logs gives.
func TestSnapshotReplaysToTheSameState(t *testing.T) {
	testseed.Run(t, 1, 60, func(t *testing.T, seed uint64) {
		rnd := rand.New(rand.NewSource(int64(seed)))
		r := newRig(t, GroupConfig{MaxDeliveries: 2, VisibilityTimeoutMillis: 20, RedeliveryDelayMillis: 5})
		randomWorkload(t, r, rnd, 150)
		r.sync()
		snapCursor, snapDead := r.s.Snapshot()
		deadEnd := uint64(len(r.dead) + len(snapDead))
		r.s.SetDeadLetterLogEnd(deadEnd)
		want := dump(replayLogs(t, r.cursor, r.dead, uint64(len(r.dead)), r.now))
		keepCursor := r.cursor[rnd.Intn(len(r.cursor)+1):]
		keepDead := r.dead[rnd.Intn(len(r.dead)+1):]
		got := dump(replayLogs(t, append(append([][]byte{}, keepCursor...), snapCursor...),
			append(append([][]byte{}, keepDead...), snapDead...), deadEnd, r.now))
		if got != want {
			t.Fatalf("seed %d: after compaction\n%s\nwant\n%s", seed, got, want)
		}
	})
}

// randomWorkload runs n random operations on two groups, syncing as it goes.
func randomWorkload(t *testing.T, r *rig, rnd *rand.Rand, n int) {
	var end uint64
	names := []string{"a", "b"}
	for i := 0; i < n; i++ {
		g, c := names[rnd.Intn(2)], ConsumerID(1+rnd.Intn(2))
		switch op := rnd.Intn(10); {
		case op < 2:
			end += uint64(1 + rnd.Intn(4))
		case op < 5:
			r.poll(g, c, 1+rnd.Intn(4), end)
		case op < 7 && end > 0:
			r.ack(g, c, uint64(rnd.Int63n(int64(end))), uint64(rnd.Int63n(int64(end))))
		case op < 8 && end > 0:
			r.nack(g, c, -1, uint64(rnd.Int63n(int64(end))))
		case op < 9 && end > 0:
			if r.s.byName[g] != nil {
				r.s.Redrive(g, []uint64{uint64(rnd.Int63n(int64(end)))}, r.now)
			}
		default:
			r.s.Tick(r.now)
		}
		r.now += rnd.Int63n(8)
		if rnd.Intn(3) == 0 {
			r.sync()
		}
	}
}
