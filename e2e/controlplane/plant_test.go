package controlplane

import (
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"felix/testbed/checker"
	"felix/testbed/history"
)

// plantProcess is the history process of a planted operation.
const plantProcess = 2000

// errNoCandidate: the history has no acked create that a planted read can contradict.
var errNoCandidate = errors.New("no ok create without a delete that could undo it before a read placed right after it")

// plantMissedCreate returns a copy of h with one more operation: a catalog-get answering
// "absent" invoked 1 ns after an ok create (one that created its entry) completed, and
// completed 1 ns later, on an entry no delete could have removed in between (every
// non-failed delete of the entry completed before the create was invoked, or was invoked
// after the planted read). No linearization can place that read, so the catalog model
// must reject the copy. A workload stream's last such create is preferred over a probe's
// (every acked probe create qualifies). It also returns the planted operation's index.
// Errors: errNoCandidate.
func plantMissedCreate(h *history.History) (*history.History, int, error) {
	byEntry := map[string][]*history.Op{}
	for i := range h.Ops {
		if op := &h.Ops[i]; op.Kind == history.KindCatalogDelete && op.Outcome != history.Fail {
			byEntry[op.In.Entry] = append(byEntry[op.In.Entry], op)
		}
	}
	var pick *history.Op
	for i := range h.Ops {
		c := &h.Ops[i]
		if c.Kind != history.KindCatalogCreate || c.Outcome != history.OK || c.Out.Found ||
			!undisturbed(c, byEntry[c.In.Entry]) {
			continue
		}
		if pick == nil || !isProbe(c.In.Entry) {
			pick = c
		}
	}
	if pick == nil {
		return nil, 0, errNoCandidate
	}
	ops := slices.Clone(h.Ops)
	index := len(ops) // Recorder indices are 0..N-1, sorted
	read := history.Op{Index: index, Process: plantProcess, Client: "planted", Kind: history.KindCatalogGet,
		InvokeNS: pick.CompleteNS + 1, CompleteNS: pick.CompleteNS + 2, Outcome: history.OK,
		In: history.Input{Entry: pick.In.Entry}, Out: history.Output{Found: false}}
	read.InvokeWall, read.CompleteWall = pick.CompleteWall, pick.CompleteWall
	return &history.History{Ops: append(ops, read)}, index, nil
}

// undisturbed: no delete of c's entry could take effect between c and a read placed
// right after it.
func undisturbed(c *history.Op, deletes []*history.Op) bool {
	for _, d := range deletes {
		before := d.Outcome == history.OK && d.CompleteNS < c.InvokeNS
		after := d.InvokeNS > c.CompleteNS+2
		if !before && !after {
			return false
		}
	}
	return true
}

func isProbe(entryName string) bool { return strings.HasPrefix(entryName, entry("probe-")) }

// plantAndCheck plants a missed create into h and requires CheckLinearizable to report
// the planted read's entry as non-linearizable, naming the planted operation.
func plantAndCheck(t *testing.T, h *history.History) {
	t.Helper()
	planted, index, err := plantMissedCreate(h)
	if err != nil {
		t.Fatal(err)
	}
	res, err := checker.CheckLinearizable(planted, checker.LinearOptions{Timeout: checkTimeout})
	if err != nil {
		t.Fatal(err)
	}
	target := fmt.Sprintf("catalog %q", planted.Ops[index].In.Entry)
	for _, f := range res.Findings {
		if f.Anomaly == checker.NonLinearCatalog && f.Object == target && slices.Contains(f.Ops, index) {
			t.Logf("planted read #%d of %s (absent right after an acked create): rejected: %s", index, target, f)
			return
		}
	}
	t.Fatalf("planted read #%d of %s not rejected; findings %v, undecided %v", index, target, res.Findings, res.Unknown)
}

// recordedHistory is the history of one run of TestLeaderKillLoop (FELIX_CP_KILLS=3,
// FELIX_CP_SEED=9898570037080203776, FELIX_CP_KEEP=dir; gzip -9 of
// controlplane-history.jsonl): 1394 operations, 3 leader kills.
const recordedHistory = "testdata/leader-kill-history.jsonl.gz"

// TestPlantedAnomalyRejected is the checker's teeth on a real history: the recorded
// history of a kill loop is linearizable, and the same history with a read that misses an
// acked create is not.
func TestPlantedAnomalyRejected(t *testing.T) {
	f, err := os.Open(recordedHistory)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(zr)
	if err != nil {
		t.Fatal(err)
	}
	res, err := checker.CheckLinearizable(h, checker.LinearOptions{Timeout: checkTimeout})
	if err != nil || len(res.Findings) > 0 || len(res.Unknown) > 0 {
		t.Fatalf("recorded history: %v, findings %v, undecided %v", err, res.Findings, res.Unknown)
	}
	t.Logf("recorded history: %d operations, %d catalog entries linearizable", len(h.Ops), res.Objects)
	plantAndCheck(t, h)
}
